// Talks to the per-GPU ledger entity workflows: starts one on first use (USE_EXISTING, so
// concurrent callers converge on the same run) and sends it updates. Used by activities (a
// workflow cannot send an update to another workflow) and by the CLI for snapshots.
import { WorkflowNotFoundError } from '@temporalio/client';
import type { Client, WorkflowHandle } from '@temporalio/client';
import type { GpuSpec } from '../domain/types';
import { emptyLedger } from '../domain/ledger';
import type { LedgerState } from '../domain/ledger';
import type { LedgerAbortArgs, LedgerAcquireArgs, LedgerAcquireResult, LedgerVictimArgs, LedgerAdmitArgs, LedgerAdmitResult, LedgerPhaseArgs, LedgerReleaseArgs, LedgerReleaseResult } from '../shared/messages';
import { abortEvictionUpdate, acquireUpdate, victimReleasedUpdate, admitUpdate, releaseUpdate, setPhaseUpdate, snapshotQuery, taskQueueFor, workflowIds } from '../shared/messages';
import type { ledgerWorkflow } from '../workflows/ledger';

export class LedgerClient {
  constructor(private readonly client: Client) {}

  async handle(node: string, gpu: GpuSpec): Promise<WorkflowHandle<typeof ledgerWorkflow>> {
    const workflowId = workflowIds.ledger(node, gpu.role);
    await this.client.workflow.start<typeof ledgerWorkflow>('ledgerWorkflow', {
      workflowId,
      taskQueue: taskQueueFor(node),
      args: [{ node, gpu }],
      workflowIdConflictPolicy: 'USE_EXISTING',
      staticSummary: `ledger of gpu_role '${gpu.role}' on ${node}`,
    });
    return this.client.workflow.getHandle<typeof ledgerWorkflow>(workflowId);
  }

  async admit(node: string, args: LedgerAdmitArgs, updateId: string): Promise<LedgerAdmitResult> {
    const h = await this.handle(node, args.gpu);
    return h.executeUpdate(admitUpdate, { args: [args], updateId });
  }

  async setPhase(node: string, gpu: GpuSpec, args: LedgerPhaseArgs, updateId: string): Promise<LedgerState> {
    const h = await this.handle(node, gpu);
    return h.executeUpdate(setPhaseUpdate, { args: [args], updateId });
  }

  async release(node: string, gpu: GpuSpec, args: LedgerReleaseArgs, updateId: string): Promise<LedgerReleaseResult> {
    const h = await this.handle(node, gpu);
    return h.executeUpdate(releaseUpdate, { args: [args], updateId });
  }

  async acquire(node: string, args: LedgerAcquireArgs, updateId: string): Promise<LedgerAcquireResult> {
    const h = await this.handle(node, args.gpu);
    return h.executeUpdate(acquireUpdate, { args: [args], updateId });
  }

  async victimReleased(node: string, gpu: GpuSpec, args: LedgerVictimArgs, updateId: string): Promise<LedgerState> {
    const h = await this.handle(node, gpu);
    return h.executeUpdate(victimReleasedUpdate, { args: [args], updateId });
  }

  async abortEviction(node: string, gpu: GpuSpec, args: LedgerAbortArgs, updateId: string): Promise<LedgerState> {
    const h = await this.handle(node, gpu);
    return h.executeUpdate(abortEvictionUpdate, { args: [args], updateId });
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
