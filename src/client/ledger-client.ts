// Talks to the per-GPU ledger entity workflows: starts one on first use (USE_EXISTING, so
// concurrent callers converge on the same run) and sends it updates. Used by activities (a
// workflow cannot send an update to another workflow) and by the CLI for snapshots.
import { ServiceError, WorkflowNotFoundError, WorkflowUpdateFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { UpdateDefinition } from '@temporalio/common';
import type { Client } from '@temporalio/client';
import type { GpuSpec } from '../domain/types';
import { emptyLedger } from '../domain/ledger';
import type { LedgerState } from '../domain/ledger';
import type { LedgerAbortArgs, LedgerAcquireArgs, LedgerAcquireResult, LedgerVictimArgs, LedgerAdmitArgs, LedgerAdmitResult, LedgerPhaseArgs, LedgerReleaseArgs, LedgerReleaseResult } from '../shared/messages';
import { abortEvictionUpdate, acquireUpdate, victimReleasedUpdate, admitUpdate, releaseUpdate, setPhaseUpdate, snapshotQuery, taskQueueFor, workflowIds } from '../shared/messages';
import type { ledgerWorkflow } from '../workflows/ledger';

export class LedgerClient {
  constructor(private readonly client: Client) {}

  /** Starts the GPU's ledger unless it runs (USE_EXISTING: concurrent callers converge on one run). */
  async start(node: string, gpu: GpuSpec): Promise<void> {
    await this.client.workflow.start<typeof ledgerWorkflow>('ledgerWorkflow', {
      workflowId: workflowIds.ledger(node, gpu.role),
      taskQueue: taskQueueFor(node),
      args: [{ node, gpu }],
      workflowIdConflictPolicy: 'USE_EXISTING',
      staticSummary: `ledger of gpu_role '${gpu.role}' on ${node}`,
    });
  }

  /**
   * Sends an update, starting the ledger only when there is none running: the start is a second
   * round trip that every decision would otherwise pay. A validator's rejection is the ledger's
   * answer, not a transient fault: it is rethrown non-retryable with the ledger's own message.
   */
  private async update<R, A>(node: string, gpu: GpuSpec, def: UpdateDefinition<R, [A]>, arg: A, updateId: string): Promise<R> {
    const h = this.client.workflow.getHandle<typeof ledgerWorkflow>(workflowIds.ledger(node, gpu.role));
    try {
      try {
        return await h.executeUpdate(def, { args: [arg], updateId });
      } catch (err) {
        if (!isNoRunningLedger(err)) throw err;
        await this.start(node, gpu);
        return await h.executeUpdate(def, { args: [arg], updateId });
      }
    } catch (err) {
      if (err instanceof WorkflowUpdateFailedError) {
        const cause = err.cause instanceof ApplicationFailure ? err.cause : undefined;
        throw ApplicationFailure.create({ type: cause?.type ?? 'LedgerRejected', message: cause?.message ?? err.message, nonRetryable: true });
      }
      throw err;
    }
  }

  admit(node: string, args: LedgerAdmitArgs, updateId: string): Promise<LedgerAdmitResult> {
    return this.update(node, args.gpu, admitUpdate, args, updateId);
  }

  setPhase(node: string, gpu: GpuSpec, args: LedgerPhaseArgs, updateId: string): Promise<LedgerState> {
    return this.update(node, gpu, setPhaseUpdate, args, updateId);
  }

  release(node: string, gpu: GpuSpec, args: LedgerReleaseArgs, updateId: string): Promise<LedgerReleaseResult> {
    return this.update(node, gpu, releaseUpdate, args, updateId);
  }

  acquire(node: string, args: LedgerAcquireArgs, updateId: string): Promise<LedgerAcquireResult> {
    return this.update(node, args.gpu, acquireUpdate, args, updateId);
  }

  victimReleased(node: string, gpu: GpuSpec, args: LedgerVictimArgs, updateId: string): Promise<LedgerState> {
    return this.update(node, gpu, victimReleasedUpdate, args, updateId);
  }

  abortEviction(node: string, gpu: GpuSpec, args: LedgerAbortArgs, updateId: string): Promise<LedgerState> {
    return this.update(node, gpu, abortEvictionUpdate, args, updateId);
  }

  /** A read: it never starts the ledger; a GPU whose ledger never ran is empty. */
  async snapshot(node: string, gpu: GpuSpec): Promise<LedgerState> {
    try {
      return await this.client.workflow.getHandle<typeof ledgerWorkflow>(workflowIds.ledger(node, gpu.role)).query(snapshotQuery);
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return emptyLedger(node, gpu);
      throw err;
    }
  }
}

/** Never started, or its last run closed (terminated): either way a new run must be started. */
function isNoRunningLedger(err: unknown): boolean {
  return err instanceof WorkflowNotFoundError || (err instanceof ServiceError && /already completed|not found/i.test(err.message));
}
