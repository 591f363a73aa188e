// Reservations as fences: one operation per serve at a time. The ledger is the lock service and
// the holding workflow run is the token; every step that changes a serve's container (its start,
// a bring-down's stop) first shows the ledger it still holds the serve. Pure over LedgerState, so
// the ledger workflow's decisions replay exactly.
import type { LedgerState, Reservation, ReservationPhase } from './ledger';
import { findReservation, outOfEviction } from './ledger';

/** The fencing token of a workflow run. */
export function holderOf(workflowId: string, runId: string): string {
  return `${workflowId}/${runId}`;
}

/**
 * The run a token names, if it names one. Workflow ids hold slashes and run ids do not; a
 * reservation taken over from the running containers ("reconciled from container …") names none.
 */
export function parseHolder(holder: string): { workflowId: string; runId: string } | undefined {
  const i = holder.lastIndexOf('/');
  if (i <= 0 || i === holder.length - 1 || holder.startsWith('reconciled ')) return undefined;
  return { workflowId: holder.slice(0, i), runId: holder.slice(i + 1) };
}

/** An operation still changing the serve: what another operation must wait for, cancel, or be refused by. */
export interface OperationUnderWay {
  serve: string;
  phase: ReservationPhase;
  /** The run that holds the serve now: for a victim, its acquirer's run. */
  holder: string;
  /** For a victim being evicted: the acquirer it makes room for. */
  evictedFor?: string;
}

/** Phases in which an operation holds the serve; `running` and `evicted` are settled. */
const UNDER_WAY: readonly ReservationPhase[] = ['admitted', 'pending', 'stopping', 'evicting'];

export function operationUnderWay(state: LedgerState, r: Reservation): OperationUnderWay | undefined {
  if (!UNDER_WAY.includes(r.phase)) return undefined;
  if (r.phase === 'evicting') {
    // Victims planned before evictedBy existed: their acquirer's own reservation names its run.
    const acquirer = r.evictedFor !== undefined ? findReservation(state, r.evictedFor) : undefined;
    return { serve: r.serve, phase: r.phase, holder: r.evictedBy ?? acquirer?.holder ?? r.holder, ...(r.evictedFor !== undefined ? { evictedFor: r.evictedFor } : {}) };
  }
  return { serve: r.serve, phase: r.phase, holder: r.holder };
}

/** How a bring-down finds its serve in the ledger when it asks to take it. */
export type StopDecision =
  /** It now holds the serve (phase stopping): quiesce, drain, stop, release. */
  | { decision: 'taken'; serve: string; vramMib: number; from: ReservationPhase; previousHolder: string }
  /** The ledger has no entry: nothing is reserved; a stray container is still stopped. */
  | { decision: 'absent'; serve: string }
  /** It had been evicted for another serve: it stays down and leaves that serve's restore list. */
  | { decision: 'evicted'; serve: string; evictedFor?: string }
  /** Another operation holds it: cancel that operation, wait for it, or be refused. */
  | { decision: 'busy'; serve: string; operation: OperationUnderWay };

export interface StopRequest {
  serve: string;
  holder: string;
  /**
   * The operator's override: the run named here is known to have ended (the caller asked
   * Temporal) without giving the serve back, so its hold is void. Recorded in the update's args.
   */
  takeOverFrom?: string;
}

export function decideStop(state: LedgerState, req: StopRequest): StopDecision {
  const r = findReservation(state, req.serve);
  if (!r) return { decision: 'absent', serve: req.serve };
  if (r.phase === 'evicted') return { decision: 'evicted', serve: req.serve, ...(r.evictedFor !== undefined ? { evictedFor: r.evictedFor } : {}) };
  const op = operationUnderWay(state, r);
  // A retry of this bring-down, or a hold the caller showed to be void.
  const ours = op !== undefined && (op.holder === req.holder || (req.takeOverFrom !== undefined && op.holder === req.takeOverFrom));
  if (op && !ours) return { decision: 'busy', serve: req.serve, operation: op };
  return { decision: 'taken', serve: req.serve, vramMib: r.vramMib, from: r.phase, previousHolder: r.holder };
}

/**
 * Commits a 'taken' or 'evicted' decision. A taken-over victim or acquirer is the bring-down's
 * serve alone: it leaves the eviction it was part of.
 */
export function applyStop(state: LedgerState, req: StopRequest, d: StopDecision): LedgerState {
  if (d.decision === 'evicted') return { ...state, reservations: state.reservations.filter((r) => r.serve !== req.serve) };
  if (d.decision !== 'taken') return state;
  return {
    ...state,
    reservations: state.reservations.map((r) => (r.serve === req.serve ? outOfEviction(r, 'stopping', req.holder) : r)),
  };
}

/** Why a step of `holder` may not change the serve's container, or undefined when it may. */
export function fenceProblem(state: LedgerState, serve: string, holder: string, allowed: readonly ReservationPhase[]): string | undefined {
  const r = findReservation(state, serve);
  if (!r || r.phase === 'evicted') return `'${serve}' holds no reservation on '${state.gpuRole}'`;
  const op = operationUnderWay(state, r);
  const by = op?.holder ?? r.holder;
  if (by !== holder) return `the reservation of '${serve}' is held by ${by} (${r.phase}), not ${holder}`;
  if (!allowed.includes(r.phase)) return `the reservation of '${serve}' is ${r.phase}, not ${allowed.join(' or ')}`;
  return undefined;
}

/** The operator's way out of a busy serve, worded for the CLI, the API and the UI alike. */
export function cancelHint(holder: string): string {
  const run = parseHolder(holder);
  return run ? `temporal workflow cancel --workflow-id ${run.workflowId} --run-id ${run.runId}` : 'gpures serves down';
}
