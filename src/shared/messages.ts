// Message definitions, ids and task-queue names shared by workflows, activities and clients.
// Only @temporalio/workflow's define* helpers are used here: they are plain descriptors, safe
// to import on the client side as well as inside the workflow sandbox.
import { defineQuery, defineUpdate } from '@temporalio/workflow';
import type { AdmitDecision, AdmitRequest, LedgerState, ReservationPhase } from '../domain/ledger';
import type { GpuSpec } from '../domain/types';

export interface LedgerAdmitArgs extends AdmitRequest {
  /** The GPU as the manifest declares it now: the ledger adopts the newest capacity and reserve. */
  gpu: GpuSpec;
}
export interface LedgerAdmitResult {
  decision: AdmitDecision;
  ledger: LedgerState;
}
export interface LedgerPhaseArgs {
  serve: string;
  phase: ReservationPhase;
}
export interface LedgerReleaseArgs {
  serve: string;
}
export interface LedgerReleaseResult {
  released: boolean;
  vramMib: number;
  ledger: LedgerState;
}

export const admitUpdate = defineUpdate<LedgerAdmitResult, [LedgerAdmitArgs]>('admit');
export const setPhaseUpdate = defineUpdate<LedgerState, [LedgerPhaseArgs]>('setPhase');
export const releaseUpdate = defineUpdate<LedgerReleaseResult, [LedgerReleaseArgs]>('release');
export const snapshotQuery = defineQuery<LedgerState>('snapshot');

export function taskQueueFor(node: string): string {
  return `gpures.${node}`;
}

export const workflowIds = {
  ledger: (node: string, gpuRole: string) => `ledger/${node}/${gpuRole}`,
  bringUp: (node: string, serve: string) => `serves-up/${node}/${serve}`,
  bringDown: (node: string, serve: string) => `serves-down/${node}/${serve}`,
};
