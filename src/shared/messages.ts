// Message definitions, ids and task-queue names shared by workflows, activities and clients.
// Only @temporalio/workflow's define* helpers are used here: they are plain descriptors, safe
// to import on the client side as well as inside the workflow sandbox.
import { defineQuery, defineUpdate } from '@temporalio/workflow';
import type { AdmitDecision, AdmitRequest, LedgerState, ReservationPhase } from '../domain/ledger';
import type { GpuSpec } from '../domain/types';
import type { Victim } from '../domain/eviction';

export interface LedgerAdmitArgs extends AdmitRequest {
  /** The GPU as the manifest declares it now: the ledger adopts the newest capacity and reserve. */
  gpu: GpuSpec;
}
export interface LedgerAdmitResult {
  decision: AdmitDecision;
  ledger: LedgerState;
  /** The serve had been evicted: this admission is its restore. */
  wasEvicted?: boolean;
}
export interface LedgerPhaseArgs {
  serve: string;
  phase: ReservationPhase;
  /** nvidia-smi's device delta at bring-up, where measured: what an eviction should see come back. */
  measuredMib?: number;
  /** The run that holds the reservation; another run's reservation is not its to change. */
  holder?: string;
}
export interface LedgerReleaseArgs {
  serve: string;
  /**
   * A compensation names the reservation it took: if the serve's reservation is someone else's
   * by now (the operator brought it down and another run took it), it is left alone.
   * An operator's `serves down` names none and releases whatever is held.
   */
  holder?: string;
}
export interface LedgerReleaseResult {
  released: boolean;
  vramMib: number;
  ledger: LedgerState;
}

export interface LedgerAcquireArgs extends LedgerAdmitArgs {
  /** Without it an acquisition that does not fit is denied and nothing is touched. */
  evict: boolean;
}
export type AcquireDecision =
  | { decision: 'admitted'; serve: string; vramMib: number; freeAfterMib: number }
  | { decision: 'already-held'; serve: string; phase: ReservationPhase; holder: string }
  | { decision: 'denied'; serve: string; vramMib: number; freeMib: number; shortfallMib: number; evictableMib?: number }
  | { decision: 'evicting'; serve: string; vramMib: number; shortfallMib: number; victims: Victim[]; reason: string };
export interface LedgerAcquireResult {
  decision: AcquireDecision;
  ledger: LedgerState;
}
export interface LedgerVictimArgs {
  victim: string;
  acquirer: string;
}
export interface LedgerAbortArgs {
  acquirer: string;
  /** Victims whose containers were already stopped: they stay evicted. */
  stopped: string[];
}

export const admitUpdate = defineUpdate<LedgerAdmitResult, [LedgerAdmitArgs]>('admit');
export const setPhaseUpdate = defineUpdate<LedgerState, [LedgerPhaseArgs]>('setPhase');
export const releaseUpdate = defineUpdate<LedgerReleaseResult, [LedgerReleaseArgs]>('release');
export const acquireUpdate = defineUpdate<LedgerAcquireResult, [LedgerAcquireArgs]>('acquire');
export const victimReleasedUpdate = defineUpdate<LedgerState, [LedgerVictimArgs]>('victimReleased');
export const abortEvictionUpdate = defineUpdate<LedgerState, [LedgerAbortArgs]>('abortEviction');
/** One step of an operation as it completed: what the CLI prints and the audit report reads. */
export interface StepRecord {
  step: string;
  at: string;
  outcome: string;
}

/** The steps an operation (bring-up, bring-down, acquisition) has completed so far. */
export const progressQuery = defineQuery<StepRecord[]>('progress');

export const snapshotQuery = defineQuery<LedgerState>('snapshot');

export function taskQueueFor(node: string): string {
  return `gpures.${node}`;
}

export const workflowIds = {
  ledger: (node: string, gpuRole: string) => `ledger/${node}/${gpuRole}`,
  bringUp: (node: string, serve: string) => `serves-up/${node}/${serve}`,
  bringDown: (node: string, serve: string) => `serves-down/${node}/${serve}`,
  acquire: (node: string, serve: string) => `acquire/${node}/${serve}`,
};
