// Reservations as fences: one operation per serve at a time. The ledger is the lock service and
// the holding workflow run is the token: a container is started only by the run that holds its
// serve as admitted (the start's fence), and stopped by a bring-down only while it holds the
// serve as stopping (it takes the serve first, even one with no reservation). Pure over
// LedgerState, so the ledger workflow's decisions replay exactly.
import type { LedgerState, Reservation, ReservationPhase } from './ledger';
import { committedMibOf, findReservation, outOfEviction, victimsOf } from './ledger';
import type { ServeClass } from './types';
import { LABEL } from './serve';
import type { FenceStep } from './ledger-requests';

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

/**
 * The container a run's compensation may stop, remove or take out of rotation: the one it started
 * or woke, by its id once the run knows it, else one labelled with the run's holder (its start
 * failed before answering the id; the start step labels what it creates). A container under the
 * serve's name that is neither is another run's: a ledger started afresh, or a `serves down` that
 * took the hold over, let that run start it while this one was refused or lost its reservation.
 */
export interface OwnContainer {
  holder: string;
  id?: string;
}

export function isOwnContainer(c: { id: string; labels: Record<string, string> }, own: OwnContainer): boolean {
  return own.id !== undefined ? c.id === own.id : c.labels[LABEL.holder] === own.holder;
}

/** Why an input is not a run's token (`<workflowId>/<runId>`), or undefined when it is one. */
export function holderProblem(v: unknown): string | undefined {
  return typeof v === 'string' && parseHolder(v) ? undefined : "a run's token, <workflow id>/<run id>";
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
    return {
      serve: r.serve,
      phase: r.phase,
      holder: r.evictedBy ?? acquirer?.holder ?? r.holder,
      ...(r.evictedFor !== undefined ? { evictedFor: r.evictedFor } : {}),
    };
  }
  return { serve: r.serve, phase: r.phase, holder: r.holder };
}

/** The run that has the serve now: the operation under way on it (a victim's acquirer), else its holder. */
export function holdingRun(state: LedgerState, r: Reservation): string {
  return operationUnderWay(state, r)?.holder ?? r.holder;
}

/** How a bring-down finds its serve in the ledger when it asks to take it. */
export type StopDecision =
  /**
   * It now holds the serve (phase stopping): quiesce, drain, stop, release. Taken over from an
   * acquisition that ended mid-eviction, its victims left the eviction: those still running went
   * back to running (their tiers are to be readmitted), those down stay evicted for it.
   */
  | { decision: 'taken'; serve: string; vramMib: number; from: ReservationPhase; previousHolder: string; victimsRunning?: string[] }
  /**
   * The ledger had no entry: nothing was reserved. The bring-down still holds the serve (a
   * stopping entry of 0 MiB), so no bring-up starts it while a stray container is stopped.
   */
  | { decision: 'absent'; serve: string }
  /**
   * It had been evicted (stopped) for another serve: it stays down and leaves that serve's restore
   * list (held, 0 MiB, until the release). A sleeping serve is `taken` instead: its process runs.
   */
  | { decision: 'evicted'; serve: string; evictedFor?: string }
  /** Another operation holds it: cancel that operation, wait for it, or be refused. */
  | { decision: 'busy'; serve: string; operation: OperationUnderWay }
  /**
   * Asked to take it only from a run (a lease's expiry, from the acquisition that granted it) that
   * no longer holds it running: left as it is, nothing taken.
   */
  | { decision: 'not-held'; serve: string; heldBy?: string; phase?: ReservationPhase };

export interface StopRequest {
  serve: string;
  holder: string;
  /** The serve's class, for the entry that holds a serve the ledger had no reservation of. */
  class?: ServeClass;
  /**
   * The operator's override: the run named here is known to have ended (the caller asked
   * Temporal) without giving the serve back, so its hold is void. Recorded in the update's args.
   */
  takeOverFrom?: string;
  /** With takeOverFrom of an acquisition: its victims whose containers are down (read from the box); they stay evicted. */
  victimsDown?: string[];
  /** …and those that sleep (read from the box; at a level not known); they stay sleeping. */
  victimsAsleep?: string[];
  /**
   * Take the serve only while this run holds it running. A lease checks that before it brings its
   * serve down, but the serve may be brought down and acquired again between that read and this
   * take: the newer acquisition is not the lease's to undo.
   */
  onlyIfHeldBy?: string;
  /**
   * Answer with the ledger as it was before this take and as it is after (since take-answers): the
   * bring-down's ledgerBefore, which a snapshot read before the take gave it, one round trip more.
   */
  answerLedger?: boolean;
  /**
   * Take the GPU's start slot for the stop as well, where the serve is taken (since take-answers;
   * asked where nothing comes between the take and the stop, no tier to drain; a serve with no
   * reservation rarely has a container to stop, and takes it after the take where it has): its
   * start timeout and how long the stop may hold it, as a startSlot take says them (StartSlotRequest).
   */
  stopSlot?: { startTimeoutS: number; holdS: number };
}

export function decideStop(state: LedgerState, req: StopRequest): StopDecision {
  const r = findReservation(state, req.serve);
  // A retry of this take after the ledger continued as new (the server's own answer to a retried
  // update lasts one run): answered as the take was, not as a take of its own stopping hold.
  if (r?.phase === 'stopping' && r.holder === req.holder && r.takenFrom) {
    const t = r.takenFrom;
    return {
      decision: 'taken',
      serve: req.serve,
      vramMib: t.vramMib,
      from: t.phase,
      previousHolder: t.holder,
      ...(t.victimsRunning ? { victimsRunning: t.victimsRunning } : {}),
    };
  }
  if (req.onlyIfHeldBy !== undefined && (r?.holder !== req.onlyIfHeldBy || r.phase !== 'running')) {
    return { decision: 'not-held', serve: req.serve, ...(r ? { heldBy: holdingRun(state, r), phase: r.phase } : {}) };
  }
  // Absent, or a retry of this bring-down of a serve it found with no reservation.
  if (!r || (r.phase === 'stopping' && r.holder === req.holder && r.vramMib === 0)) return { decision: 'absent', serve: req.serve };
  if (r.phase === 'evicted') return { decision: 'evicted', serve: req.serve, ...(r.evictedFor !== undefined ? { evictedFor: r.evictedFor } : {}) };
  const op = operationUnderWay(state, r);
  // A retry of this bring-down, or a hold the caller showed to be void.
  const ours = op !== undefined && (op.holder === req.holder || (req.takeOverFrom !== undefined && op.holder === req.takeOverFrom));
  if (op && !ours) return { decision: 'busy', serve: req.serve, operation: op };
  const down = req.victimsDown ?? [];
  const asleep = req.victimsAsleep ?? [];
  const victimsRunning =
    req.takeOverFrom !== undefined
      ? victimsOf(state, req.serve)
          .filter((v) => !down.includes(v.serve) && !asleep.includes(v.serve))
          .map((v) => v.serve)
      : [];
  return {
    decision: 'taken',
    serve: req.serve,
    // A sleeping serve holds only its residual: that is what the bring-down stops and releases.
    vramMib: r.phase === 'sleeping' ? committedMibOf(r) : r.vramMib,
    from: r.phase,
    previousHolder: r.holder,
    ...(victimsRunning.length ? { victimsRunning } : {}),
  };
}

/**
 * An acquirer waiting for its victims that was acquired asleep: the MiB its sleeping process
 * keeps (what the ledger held it at asleep, else its declared residual); undefined for any other.
 */
export function pendingSleeperMib(r: Reservation | undefined): number | undefined {
  if (r?.phase !== 'pending' || r.admittedFrom?.asleepAt === undefined) return undefined;
  return r.admittedFrom.asleepHeldMib ?? r.sleep?.residualMib ?? 0;
}

/**
 * Commits a decision: the bring-down holds the serve as stopping. An entry it had no reservation
 * of (absent, evicted) holds 0 MiB; so does an acquirer taken over while it waited for its
 * victims (it never started), unless it was acquired asleep (`pendingAsleepKeepsResidual`): its
 * process sleeps on with its residual until the stop. A taken-over acquisition's victims leave its
 * eviction; one asleep whose release was never confirmed (it was still evicting) holds all of its
 * MiB (`asleepVictimsHeldWhole`): vLLM's sleep leaks, and only nvidia-smi could have said otherwise.
 */
export function applyStop(
  state: LedgerState,
  req: StopRequest,
  d: StopDecision,
  opts: { pendingAsleepKeepsResidual?: boolean; asleepVictimsHeldWhole?: boolean } = {},
): LedgerState {
  const hold = (r: Reservation | undefined): Reservation => ({
    serve: req.serve,
    vramMib: 0,
    class: r?.class ?? req.class ?? 'resident',
    phase: 'stopping',
    holder: req.holder,
  });
  if (d.decision === 'absent' || d.decision === 'evicted') {
    const r = findReservation(state, req.serve);
    return { ...state, reservations: [...state.reservations.filter((x) => x.serve !== req.serve), hold(r)] };
  }
  if (d.decision !== 'taken') return state;
  const down = req.victimsDown ?? [];
  const asleep = req.victimsAsleep ?? [];
  const takenFrom = {
    takenFrom: { phase: d.from, holder: d.previousHolder, vramMib: d.vramMib, ...(d.victimsRunning ? { victimsRunning: d.victimsRunning } : {}) },
  };
  return {
    ...state,
    reservations: state.reservations.map((r) => {
      if (r.serve === req.serve) {
        if (r.phase === 'pending') {
          const asleepMib = opts.pendingAsleepKeepsResidual ? pendingSleeperMib(r) : undefined;
          return { ...hold(r), ...(asleepMib !== undefined ? { vramMib: asleepMib } : {}), ...takenFrom };
        }
        // Asleep, its process still holds the residual until the stop.
        if (r.phase === 'sleeping') return { ...hold(r), vramMib: committedMibOf(r), ...takenFrom };
        const stopping: Reservation = { ...outOfEviction(r, 'stopping', req.holder), ...takenFrom };
        // What its admission found is history now: a retry of that admission is no longer possible.
        delete stopping.admittedFrom;
        return stopping;
      }
      if (req.takeOverFrom === undefined || r.phase !== 'evicting' || r.evictedFor !== req.serve) return r;
      if (asleep.includes(r.serve)) {
        const whole = opts.asleepVictimsHeldWhole && r.sleep ? { sleep: { ...r.sleep, residualMib: r.vramMib } } : {};
        return { ...r, phase: 'sleeping' as const, ...whole };
      }
      return down.includes(r.serve) ? { ...r, phase: 'evicted' as const } : outOfEviction(r, 'running');
    }),
  };
}

/** Why a step of `holder` may not change the serve's container, or undefined when it may. */
export function fenceProblem(state: LedgerState, serve: string, holder: string, allowed: readonly ReservationPhase[]): string | undefined {
  const r = findReservation(state, serve);
  if (!r || r.phase === 'evicted') return `'${serve}' holds no reservation on '${state.gpuRole}'`;
  if (r.phase === 'sleeping') return `'${serve}' sleeps for ${r.evictedFor ?? 'another serve'}; only a restore (an admission) may wake it`;
  const by = holdingRun(state, r);
  if (by !== holder) return `the reservation of '${serve}' is held by ${by} (${r.phase}), not ${holder}`;
  if (!allowed.includes(r.phase)) return `the reservation of '${serve}' is ${r.phase}, not ${allowed.join(' or ')}`;
  return undefined;
}

/**
 * The phases a fence step may find the serve in, and what refusing it leaves undone. Before the
 * start (or a wake): admitted. Just after it: admitted, or running when a ledger restarted
 * meanwhile took the container over for its own holder (its label names the run). A victim's
 * sleep: evicting, by the acquisition that holds it. A stop: evicting (a victim, by the
 * acquisition that holds it) or stopping (a bring-down's own take): a ledger restarted since the
 * eviction's plan or the take holds a running serve for the run on its container's label, and a
 * stop then would leave it down while the ledger commits its MiB for it.
 */
export const FENCE_START = { allowed: ['admitted'] as ReservationPhase[], undone: 'nothing was created' };
export const FENCE_STEPS: Record<FenceStep, { allowed: ReservationPhase[]; undone: string }> = {
  start: FENCE_START,
  started: { allowed: ['admitted', 'running'], undone: 'the container it started is removed' },
  wake: { allowed: ['admitted'], undone: 'it was not woken' },
  sleep: { allowed: ['evicting'], undone: 'it was not put to sleep' },
  stop: { allowed: ['evicting', 'stopping'], undone: 'it was not stopped' },
};

/**
 * A start retried after a ledger restarted: the serve runs in the ledger for this same run, taken
 * over from the container an earlier attempt of this start created (its label names the run). The
 * container is the run's own, and the start may adopt it, as its `started` check would.
 */
export function ownRunningAtStart(state: LedgerState, serve: string, holder: string, step: string): boolean {
  const r = findReservation(state, serve);
  return step === 'start' && r?.phase === 'running' && holdingRun(state, r) === holder;
}

/**
 * Why a fence step of `holder` is refused, worded with what the refusal leaves undone; undefined
 * when it may go on. `ownRunningStarts`: a start finding the serve running for its own run
 * (ownRunningAtStart) goes on (a ledger from before this refused it).
 */
export function fenceStepProblem(
  state: LedgerState,
  { serve, holder, step }: { serve: string; holder: string; step: string },
  ownRunningStarts = false,
): string | undefined {
  // A step recorded before the validator named the steps: checked as a start, as it was then.
  const { allowed, undone } = FENCE_STEPS[step as FenceStep] ?? FENCE_START;
  const own = ownRunningStarts && ownRunningAtStart(state, serve, holder, step);
  const problem = fenceProblem(state, serve, holder, own ? [...allowed, 'running'] : allowed);
  return problem ? `${step} of ${serve} refused: ${problem}; ${undone}` : undefined;
}

/** The operator's way out of a busy serve, worded for the CLI, the API and the UI alike. */
export function cancelHint(holder: string): string {
  const run = parseHolder(holder);
  return run ? `temporal workflow cancel --workflow-id ${run.workflowId} --run-id ${run.runId}` : 'gpures serves down';
}
