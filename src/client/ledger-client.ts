// Talks to the per-GPU ledger entity workflows: starts one on first use (USE_EXISTING, so
// concurrent callers converge on the same run) and sends it updates. Used by activities (a
// workflow cannot send an update to another workflow) and by the CLI for snapshots.
import { ServiceError, WorkflowNotFoundError, WorkflowUpdateFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { UpdateDefinition } from '@temporalio/common';
import type { Client } from '@temporalio/client';
import type { GpuSpec } from '../domain/types';
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

  /**
   * The ledger as it stands. The read makes sure the ledger runs (a no-op when it does): a GPU
   * whose ledger is gone (terminated, or a dev server that lost its state) would otherwise read as
   * empty, or as it was, while serves run on it; a fresh run reconciles with the running
   * containers first, and the read waits for that.
   */
  async snapshot(node: string, gpu: GpuSpec, reconcileTimeoutMs = 30_000): Promise<LedgerState> {
    await this.start(node, gpu);
    const h = this.client.workflow.getHandle<typeof ledgerWorkflow>(workflowIds.ledger(node, gpu.role));
    const deadline = Date.now() + reconcileTimeoutMs;
    for (;;) {
      let state: LedgerState;
      const queryDeadline = Date.now() + QUERY_TIMEOUT_MS;
      try {
        // A query is answered by a worker: without one it would wait for the RPC's own timeout.
        state = await this.client.withDeadline(queryDeadline, () => h.query(snapshotQuery));
      } catch (err) {
        if (!isNoWorker(err, queryDeadline)) throw err;
        throw new LedgerUnanswered(`no worker answered the ledger of gpu_role '${gpu.role}' on ${node} within ${QUERY_TIMEOUT_MS / 1000} s: is \`gpures worker\` running for ${node} (task queue ${taskQueueFor(node)})?`);
      }
      if (!state.reconciling) return state;
      if (Date.now() > deadline) {
        throw new LedgerUnanswered(`the ledger of gpu_role '${gpu.role}' on ${node} is still reconciling with the running containers after ${reconcileTimeoutMs / 1000} s: is a worker for ${node} running?`);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

/** No worker answered the ledger (or finished its reconcile) in time: Temporal-side, not a fault of the caller's. */
export class LedgerUnanswered extends Error {
  override name = 'LedgerUnanswered';
}

const QUERY_TIMEOUT_MS = 10_000;
/** gRPC's status codes; @grpc/grpc-js is the SDK's dependency, not ours. */
const DEADLINE_EXCEEDED = 4;
const FAILED_PRECONDITION = 9;
const CANCELLED = 1;

/**
 * No worker answered: the query's deadline passed, or the server saw no poller on the task
 * queue. The client's own deadline surfaces as DEADLINE_EXCEEDED or, as often, as CANCELLED
 * ("Call cancelled"): past the deadline, that cancel is the deadline's.
 */
function isNoWorker(err: unknown, deadline: number): boolean {
  const chain = [err, (err as { cause?: unknown } | undefined)?.cause] as ({ code?: unknown; details?: unknown; message?: unknown } | undefined)[];
  const text = (v: unknown) => (typeof v === 'string' ? v : '');
  return chain.some(
    (e) =>
      e?.code === DEADLINE_EXCEEDED ||
      (e?.code === CANCELLED && Date.now() >= deadline) ||
      (e?.code === FAILED_PRECONDITION && /poller/i.test(`${text(e.details)} ${text(e.message)}`)),
  );
}

/** Never started, or its last run closed (terminated): either way a new run must be started. */
function isNoRunningLedger(err: unknown): boolean {
  return err instanceof WorkflowNotFoundError || (err instanceof ServiceError && /already completed|not found/i.test(err.message));
}
