// The per-GPU ledger as activities send it decisions (a workflow cannot send an update to another
// workflow): the Temporal client (ledger-client.ts) implements it. The arguments and answers are
// the ledger's update messages (src/shared/messages.ts); each updateId makes a retried send one decision.
import type { LedgerState } from '../../domain/ledger';
import type { GpuSpec } from '../../domain/types';
import type {
  LedgerAbortArgs,
  LedgerAcquireArgs,
  LedgerAcquireResult,
  LedgerAdmitArgs,
  LedgerAdmitResult,
  LedgerFenceAnswer,
  LedgerFenceArgs,
  LedgerPhaseArgs,
  LedgerReleaseArgs,
  LedgerReleaseResult,
  LedgerStartSlotAnswer,
  LedgerStartSlotArgs,
  LedgerStopAnswer,
  LedgerStopArgs,
  LedgerVictimArgs,
} from '../../shared/messages';

export interface LedgerPort {
  admit(node: string, args: LedgerAdmitArgs, updateId: string): Promise<LedgerAdmitResult>;
  setPhase(node: string, gpu: GpuSpec, args: LedgerPhaseArgs, updateId: string): Promise<LedgerState>;
  release(node: string, gpu: GpuSpec, args: LedgerReleaseArgs, updateId: string): Promise<LedgerReleaseResult>;
  acquire(node: string, args: LedgerAcquireArgs, updateId: string): Promise<LedgerAcquireResult>;
  victimReleased(node: string, gpu: GpuSpec, args: LedgerVictimArgs, updateId: string): Promise<LedgerState>;
  abortEviction(node: string, gpu: GpuSpec, args: LedgerAbortArgs, updateId: string): Promise<LedgerState>;
  /** A bring-down takes its serve: the decision says whether it may stop it, and who holds it if not. */
  beginStop(node: string, gpu: GpuSpec, args: LedgerStopArgs, updateId: string): Promise<LedgerStopAnswer>;
  /** Rejected (ReservationLost, non-retryable) unless the run still holds the serve as admitted. */
  fence(node: string, gpu: GpuSpec, args: LedgerFenceArgs, updateId: string): Promise<LedgerFenceAnswer>;
  /** Taken, or who holds the GPU's start slot; a give by a run that does not hold it changes nothing. */
  startSlot(node: string, gpu: GpuSpec, args: LedgerStartSlotArgs, updateId: string): Promise<LedgerStartSlotAnswer>;
  /** The ledger as it stands, once it has reconciled with the running containers (within reconcileTimeoutMs). */
  snapshot(node: string, gpu: GpuSpec, reconcileTimeoutMs?: number): Promise<LedgerState>;
  /**
   * The ledger as another worker of the node answers it within `withinMs`, asked by a step of this
   * worker while it stops (which polls no workflow task itself): reconciling or not. LedgerUnanswered
   * when no worker does, at once when Temporal lists no other worker polling the node's task queue.
   */
  answerWhileStopping(node: string, gpu: GpuSpec, withinMs: number): Promise<LedgerState>;
  /**
   * What the GPU's ledger held when its latest run other than `runId` closed (terminated, failed):
   * the run a fresh one replaces; none when no such run is listed; unread, and why, when Temporal
   * cannot say within `withinMs`.
   */
  lostRunState(node: string, gpuRole: string, runId: string, withinMs: number): Promise<LostRun>;
}

/** The run a fresh ledger replaces, as Temporal answered. */
export type LostRun = { read: 'state'; state: LedgerState } | { read: 'none' } | { read: 'unread'; why: string };
