// Talks to the per-GPU ledger entity workflows: starts one on first use (USE_EXISTING, so
// concurrent callers converge on the same run) and sends it updates. Used by activities (a
// workflow cannot send an update to another workflow) and by the CLI for snapshots.
import { literalMarkdown } from '../../domain/markdown';
import { asyncLocalStorage } from '@temporalio/activity';
import { QueryRejectedError, ServiceError, WorkflowClient, WorkflowNotFoundError, WorkflowUpdateFailedError } from '@temporalio/client';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import type { UpdateDefinition } from '@temporalio/common';
import type { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import type { GpuSpec } from '../../domain/types';
import type { LedgerState } from '../../domain/ledger';
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
import {
  NODE_ANSWER_MS,
  abortEvictionUpdate,
  acquireUpdate,
  admitUpdate,
  beginStopUpdate,
  startSlotUpdate,
  fenceUpdate,
  releaseUpdate,
  setPhaseUpdate,
  snapshotQuery,
  taskQueueFor,
  victimReleasedUpdate,
  workflowIds,
} from '../../shared/messages';
import type { ledgerWorkflow } from '../../workflows/ledger';
import { Transient } from '../../shared/failures';
import { GrpcStatus } from '../grpc-status';
import type { LedgerPort, LostRun } from './port';
import { otherWorkers } from '../node-workers';

export interface LedgerClientOptions {
  /**
   * Updates in flight per ledger (default 8, 1 to 10). A Temporal server admits at most
   * `history.maxInFlightUpdates` (default 10) in-flight updates per workflow; past it the
   * refusals abort the updates in flight and they all retry together: measured with 50 callers,
   * 0.2 decisions/s and 82 failed updates. Below the server's default, the node's worker (which
   * sends all of its ledgers' updates) never meets that limit, whatever the server's setting; 8
   * leaves room for an operator's script or a second process. The ledger decides one update at a
   * time anyway, so more in flight would only queue at the server.
   */
  maxUpdatesInFlight?: number;
}

export const DEFAULT_LEDGER_UPDATES_IN_FLIGHT = 8;
/** The server's default history.maxInFlightUpdates: above it the bound would not protect anything. */
export const MAX_LEDGER_UPDATES_IN_FLIGHT = 10;

export class LedgerClient implements LedgerPort {
  private readonly maxInFlight: number;
  /** One FIFO queue per ledger workflow id, deleted when idle. */
  private readonly queues = new Map<string, FifoSemaphore>();
  /** The client's workflows, whose queries the server refuses for a run that is not open (see running). */
  private openRuns?: WorkflowClient;

  constructor(
    private readonly client: Client,
    options: LedgerClientOptions = {},
  ) {
    const n = options.maxUpdatesInFlight ?? DEFAULT_LEDGER_UPDATES_IN_FLIGHT;
    if (!Number.isInteger(n) || n < 1 || n > MAX_LEDGER_UPDATES_IN_FLIGHT) {
      throw new RangeError(
        `LedgerClient: maxUpdatesInFlight must be an integer from 1 to ${MAX_LEDGER_UPDATES_IN_FLIGHT} ` +
          `(the server's default history.maxInFlightUpdates), got ${n}`,
      );
    }
    this.maxInFlight = n;
  }

  /** Starts the GPU's ledger unless it runs (USE_EXISTING: concurrent callers converge on one run). */
  async start(node: string, gpu: GpuSpec): Promise<void> {
    await this.client.workflow.start<typeof ledgerWorkflow>('ledgerWorkflow', {
      workflowId: workflowIds.ledger(node, gpu.role),
      taskQueue: taskQueueFor(node),
      args: [{ node, gpu }],
      workflowIdConflictPolicy: 'USE_EXISTING',
      staticSummary: literalMarkdown(`ledger of gpu_role ${gpu.role} on ${node}`),
    });
  }

  /**
   * Sends an update, starting the ledger only when there is none running: the start is a second
   * round trip that every decision would otherwise pay. A validator's rejection is the ledger's
   * answer, not a transient fault: it is rethrown non-retryable with the ledger's own message.
   */
  private async update<R, A>(node: string, gpu: GpuSpec, def: UpdateDefinition<R, [A]>, arg: A, updateId: string): Promise<R> {
    const workflowId = workflowIds.ledger(node, gpu.role);
    const h = this.client.workflow.getHandle<typeof ledgerWorkflow>(workflowId);
    // The same updateId on every try: the server answers a repeat with the first one's outcome.
    const send = () => boundToActivity(this.client, () => withUpdateLimitRetry(() => h.executeUpdate(def, { args: [arg], updateId })), 'any cancel');
    try {
      return await this.inFlightSlot(workflowId, () => this.sendOnceReconciled(node, gpu, send));
    } catch (err) {
      if (err instanceof WorkflowUpdateFailedError) {
        const cause = err.cause instanceof ApplicationFailure ? err.cause : undefined;
        // Reached only past the bound's last send: the step's next attempt waits again.
        if (isReconcilingRefusal(err)) throw ApplicationFailure.create({ type: Transient.LedgerReconciling, message: err.cause?.message ?? err.message });
        throw ApplicationFailure.create({ type: cause?.type ?? 'LedgerRejected', message: cause?.message ?? err.message, nonRetryable: true });
      }
      throw err;
    }
  }

  /**
   * Sends, and again while the ledger is not there to decide: none runs (it is started first), or
   * it refused the update because it is still reconciling with the box (a refused update leaves
   * nothing in history, so the same updateId is simply sent again once the reconcile has ended).
   * A ledger just started always reconciles first: waiting for it before the first send spares a
   * refusal. The whole wait is bounded by RECONCILE_WAIT_MS (see untilReconciled).
   */
  private async sendOnceReconciled<R>(node: string, gpu: GpuSpec, send: () => Promise<R>): Promise<R> {
    const deadline = Date.now() + RECONCILE_WAIT_MS;
    for (;;) {
      try {
        return await send();
      } catch (err) {
        if (!(isNoRunningLedger(err) || isReconcilingRefusal(err)) || Date.now() >= deadline) throw err;
        if (isNoRunningLedger(err)) await this.start(node, gpu);
        await this.untilReconciled(node, gpu, deadline);
      }
    }
  }

  /**
   * Returns once the ledger says it has reconciled; past `deadline` throws LedgerReconciling,
   * retryable (the step's next attempt waits again), with what the reconcile last met: a Docker
   * error that does not pass (a socket the worker may not open) is then what the operation says,
   * not a wait with no reason. Inside an activity the activity's own heartbeat goes on meanwhile.
   */
  private async untilReconciled(node: string, gpu: GpuSpec, deadline: number): Promise<void> {
    for (let i = 0; ; i++) {
      // Only an open run: one that closed reconciling (its reconcile past its bound) would answer
      // so for ever, and the caller's next send, finding none running, starts another.
      const state = await this.running(node, gpu.role, NODE_ANSWER_MS);
      if (!state?.reconciling) return;
      if (Date.now() >= deadline) break;
      // A reconcile takes a round trip or two: look again soon, then less often.
      await new Promise((r) => setTimeout(r, Math.min(1000, 100 * 2 ** i, Math.max(0, deadline - Date.now()))));
    }
    const last = await this.reconcileLastFailure(node, gpu.role);
    throw ApplicationFailure.create({
      type: Transient.LedgerReconciling,
      message:
        `the ledger of gpu_role '${gpu.role}' on ${node} is still reconciling with the box after ${RECONCILE_WAIT_MS / 1000} s ` +
        `and decides nothing until it has; ${last}`,
      nonRetryable: false,
    });
  }

  /**
   * What keeps the GPU's ledger from deciding now, if it is still reconciling with the box: what
   * its reconcile last met. Undefined when it runs reconciled, none runs, or its worker does not
   * answer within `withinMs`.
   */
  async stillReconciling(node: string, gpuRole: string, withinMs = NODE_ANSWER_MS): Promise<string | undefined> {
    const state = await this.running(node, gpuRole, withinMs).catch(() => undefined);
    return state?.reconciling ? this.reconcileLastFailure(node, gpuRole) : undefined;
  }

  /** What the ledger's reconcile met on its last attempt, from the server's record of its pending activity. */
  private async reconcileLastFailure(node: string, gpuRole: string): Promise<string> {
    try {
      const d = await this.client.workflow.getHandle(workflowIds.ledger(node, gpuRole)).describe();
      const pending = d.raw.pendingActivities?.find((a) => a.activityType?.name === 'reconcileLedger');
      if (!pending) return `its reconcile has not been tried yet (ledger ${d.status.name})`;
      const why = pending.lastFailure?.message;
      return why ? `its reconcile's attempt ${pending.attempt ?? '?'} failed: ${why}` : `its reconcile is at attempt ${pending.attempt ?? '?'}`;
    } catch (err) {
      return `its reconcile could not be read: ${err instanceof Error ? err.message : String(err)}`;
    }
  }

  /** Runs `fn` once fewer than maxUpdatesInFlight of this ledger's updates are in flight, in arrival order. */
  private async inFlightSlot<T>(workflowId: string, fn: () => Promise<T>): Promise<T> {
    let queue = this.queues.get(workflowId);
    if (!queue) this.queues.set(workflowId, (queue = new FifoSemaphore(this.maxInFlight)));
    await queue.acquire();
    try {
      return await fn();
    } finally {
      queue.release();
      if (queue.idle()) this.queues.delete(workflowId);
    }
  }

  /**
   * The answer and the ledger right after it: carried in the answer (LedgerAnswer), or, from a
   * ledger whose code predates that, read by a query.
   */
  private async updateAndRead<R extends object, A>(
    node: string,
    gpu: GpuSpec,
    def: UpdateDefinition<R, [A]>,
    arg: A,
    updateId: string,
  ): Promise<R & { ledger: LedgerState }> {
    const answer = await this.update(node, gpu, def, arg, updateId);
    const carried = (answer as { ledger?: LedgerState }).ledger;
    return { ...answer, ledger: carried ?? (await this.read(node, gpu)) };
  }

  admit(node: string, args: LedgerAdmitArgs, updateId: string): Promise<LedgerAdmitResult> {
    return this.updateAndRead(node, args.gpu, admitUpdate, args, updateId);
  }

  async setPhase(node: string, gpu: GpuSpec, args: LedgerPhaseArgs, updateId: string): Promise<LedgerState> {
    return (await this.updateAndRead(node, gpu, setPhaseUpdate, args, updateId)).ledger;
  }

  release(node: string, gpu: GpuSpec, args: LedgerReleaseArgs, updateId: string): Promise<LedgerReleaseResult> {
    return this.updateAndRead(node, gpu, releaseUpdate, args, updateId);
  }

  acquire(node: string, args: LedgerAcquireArgs, updateId: string): Promise<LedgerAcquireResult> {
    return this.updateAndRead(node, args.gpu, acquireUpdate, args, updateId);
  }

  async victimReleased(node: string, gpu: GpuSpec, args: LedgerVictimArgs, updateId: string): Promise<LedgerState> {
    return (await this.updateAndRead(node, gpu, victimReleasedUpdate, args, updateId)).ledger;
  }

  async abortEviction(node: string, gpu: GpuSpec, args: LedgerAbortArgs, updateId: string): Promise<LedgerState> {
    return (await this.updateAndRead(node, gpu, abortEvictionUpdate, args, updateId)).ledger;
  }

  /** A bring-down takes its serve: the decision says whether it may stop it, and who holds it if not. */
  beginStop(node: string, gpu: GpuSpec, args: LedgerStopArgs, updateId: string): Promise<LedgerStopAnswer> {
    return this.update(node, gpu, beginStopUpdate, args, updateId);
  }

  /** Rejected (ReservationLost, non-retryable) unless the run still holds the serve as admitted. */
  fence(node: string, gpu: GpuSpec, args: LedgerFenceArgs, updateId: string): Promise<LedgerFenceAnswer> {
    return this.update(node, gpu, fenceUpdate, args, updateId);
  }

  /** Taken, or who holds the GPU's start slot; a give by a run that does not hold it changes nothing. */
  startSlot(node: string, gpu: GpuSpec, args: LedgerStartSlotArgs, updateId: string): Promise<LedgerStartSlotAnswer> {
    return this.update(node, gpu, startSlotUpdate, args, updateId);
  }

  /** The state of a ledger that just answered an update: running, so no start and no reconcile wait. */
  private read(node: string, gpu: GpuSpec): Promise<LedgerState> {
    return boundToActivity(
      this.client,
      () => this.client.workflow.getHandle<typeof ledgerWorkflow>(workflowIds.ledger(node, gpu.role)).query(snapshotQuery),
      'worker stop',
    );
  }

  /**
   * The ledger as it stands. The read makes sure the ledger runs (a no-op when it does): a GPU
   * whose ledger is gone (terminated, or a dev server that lost its state) would otherwise read as
   * empty, or as it was, while serves run on it; a fresh run reconciles with the running
   * containers first, and the read waits for that.
   */
  async snapshot(node: string, gpu: GpuSpec, reconcileTimeoutMs = 30_000): Promise<LedgerState> {
    await this.start(node, gpu);
    const deadline = Date.now() + reconcileTimeoutMs;
    for (;;) {
      const state = await this.answer(node, gpu.role);
      if (!state.reconciling) return state;
      if (Date.now() > deadline) {
        throw new LedgerUnanswered(
          `the ledger of gpu_role '${gpu.role}' on ${node} is still reconciling with the running containers after ${reconcileTimeoutMs / 1000} s ` +
            `(${await this.reconcileLastFailure(node, gpu.role)}): is a worker for ${node} running, and can it reach Docker?`,
        );
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  /**
   * The state of a ledger that runs, as its node's worker answers it within `withinMs`
   * (reconciling or not); LedgerUnanswered when no worker does. Starts nothing: for ledgers found
   * from Temporal, whose GPU spec only their node's manifest knows.
   */
  async answer(
    node: string,
    gpuRole: string,
    withinMs = NODE_ANSWER_MS,
    workflows: WorkflowClient = this.client.workflow,
    cutBy: 'worker stop' | 'its bound only' = 'worker stop',
  ): Promise<LedgerState> {
    const h = workflows.getHandle<typeof ledgerWorkflow>(workflowIds.ledger(node, gpuRole));
    const queryDeadline = Date.now() + withinMs;
    // A query is answered by a worker: without one it would wait for the RPC's own timeout.
    const send = () => this.client.withDeadline(queryDeadline, () => h.query(snapshotQuery));
    try {
      return await boundToActivity(this.client, send, cutBy);
    } catch (err) {
      if (!isNoWorker(err, queryDeadline)) throw err;
      throw new LedgerUnanswered(
        `no worker answered the ledger of gpu_role '${gpuRole}' on ${node} within ${withinMs / 1000} s: ` +
          `is \`gpures worker\` running for ${node} (task queue ${taskQueueFor(node)})?`,
      );
    }
  }

  async answerWhileStopping(node: string, gpu: GpuSpec, withinMs: number): Promise<LedgerState> {
    // One bound for both calls: the SDK retries an unavailable server's answer, inside it only.
    const deadline = Date.now() + withinMs;
    // None to answer (the node's only worker stopping): not asked, or the stop would wait out the
    // bound. A server that will not say: asked anyway, within what is left of the bound.
    const others = await this.client.withDeadline(deadline, () => otherWorkers(this.client, node)).catch(() => undefined);
    if (others?.length === 0)
      throw new LedgerUnanswered(`no other worker polls ${taskQueueFor(node)} to answer the ledger of gpu_role '${gpu.role}' while this one stops`);
    const left = deadline - Date.now();
    if (left <= 0) throw new LedgerUnanswered(`Temporal did not say within ${withinMs / 1000} s which workers poll ${taskQueueFor(node)}`);
    return this.answer(node, gpu.role, left, this.client.workflow, 'its bound only');
  }

  /**
   * What the GPU's ledger held when its latest run other than `runId` closed: a fresh run reads
   * what the run it replaces knew and the box cannot show (a sleeper's residual seen above the
   * declared one). The list of runs only says where to start: it is Temporal's visibility store,
   * eventually consistent, and right after a continue-as-new and a terminate it may not show the
   * continuation yet (or still show its predecessor running). So from the latest run listed, the
   * chain of continue-as-new is followed in the runs' own histories (their close events) to the
   * run that closed otherwise (terminated, failed): that is the run a fresh one replaces, never an
   * older one as long as any run of its chain is listed. A closed run answers a query by being
   * replayed on a worker (this node's). None when no other run is listed (the first ever, or a
   * server that lost its state, or every run's history deleted); unread, and why, when Temporal
   * cannot say (a history gone past retention, no answer within `withinMs`). Runs that closed before their own reconcile ended (up to MAX_UNRECONCILED_RUNS)
   * are looked past: the run before them is the one that knew.
   */
  async lostRunState(node: string, gpuRole: string, runId: string, withinMs: number): Promise<LostRun> {
    const workflowId = workflowIds.ledger(node, gpuRole);
    const deadline = Date.now() + withinMs;
    try {
      return await this.client.withDeadline(deadline, async (): Promise<LostRun> => {
        // node and gpuRole are checked names (NAME_PATTERN), runId a UUID: none can close the quote.
        const query = `WorkflowId = '${workflowId}' AND RunId != '${runId}'`;
        const runs: { runId: string; startTime: Date }[] = [];
        for await (const wf of this.client.workflow.list({ query })) {
          if (wf.workflowId === workflowId && wf.runId !== runId) runs.push(wf);
        }
        // Newest first. A run that closed before its reconcile ended (Docker out past the
        // reconcile's bound) learnt nothing: the run before it holds what the box cannot show.
        runs.sort((a, b) => b.startTime.getTime() - a.startTime.getTime());
        let skipped = 0;
        for (const latest of runs) {
          const ended = await this.endOfChain(workflowId, latest.runId, runId);
          if (!ended) return { read: 'unread', why: `the chain of continue-as-new from run ${latest.runId} could not be followed to the run that ended it` };
          const state = await boundToActivity(
            this.client,
            () => this.client.workflow.getHandle<typeof ledgerWorkflow>(workflowId, ended).query(snapshotQuery),
            'worker stop',
          );
          if (!state.reconciling) return { read: 'state', state };
          // A chain ends where it started when its reconcile never ended; at most a few such in a row.
          if (++skipped >= MAX_UNRECONCILED_RUNS) return { read: 'unread', why: `the last ${skipped} runs closed before their reconcile ended` };
        }
        // None listed, or only runs that never reconciled: none knew anything.
        return { read: 'none' };
      });
    } catch (err) {
      // The worker stopping: its reconcile ends cancelled, to run again on the next worker, rather
      // than reconcile as if the run before it could not be read.
      if (err instanceof CancelledFailure) throw err;
      const why = err instanceof Error ? err.message : String(err);
      return { read: 'unread', why: Date.now() >= deadline ? `no answer within ${withinMs / 1000} s: ${why}` : why };
    }
  }

  /**
   * The run that `from`'s chain of continue-as-new ended with, read from each run's close event
   * (the history service's, not visibility's); undefined if one is still open or the chain reaches
   * `self` (it cannot: a fresh run continues nothing) or runs on past MAX_CHAIN runs.
   */
  private async endOfChain(workflowId: string, from: string, self: string): Promise<string | undefined> {
    let runId = from;
    for (let i = 0; i < MAX_CHAIN; i++) {
      const res = await this.client.workflowService.getWorkflowExecutionHistory({
        namespace: this.client.options.namespace,
        execution: { workflowId, runId },
        historyEventFilterType: temporal.api.enums.v1.HistoryEventFilterType.HISTORY_EVENT_FILTER_TYPE_CLOSE_EVENT,
      });
      const close = res.history?.events?.[0];
      if (!close) return undefined;
      const next = close.workflowExecutionContinuedAsNewEventAttributes?.newExecutionRunId;
      if (!next) return runId;
      if (next === self) return undefined;
      runId = next;
    }
    return undefined;
  }

  /**
   * Whether the node's worker answers its running ledger now, within `withinMs`: the one live
   * proof there is (the server lists a worker killed a minute ago as a poller for minutes, and a
   * workflow started for it waits silently). Starts nothing: a GPU whose ledger does not run
   * (never ran, or terminated) has nothing to ask, 'no ledger'; starting one to ask it would leave
   * a dead node a ledger that no worker ever answers.
   */
  async probe(node: string, gpuRole: string, withinMs: number): Promise<'answered' | 'no ledger'> {
    return (await this.running(node, gpuRole, withinMs)) ? 'answered' : 'no ledger';
  }

  /**
   * The state of the GPU's ledger if one runs, as its worker answers within `withinMs`
   * (reconciling or not); undefined when none runs (never ran, or terminated: a closed run would
   * still answer a query, with what it held when it closed). Starts nothing: for read-only readers.
   * One call: the query, which the server refuses for a run that is not open (NOT_OPEN) without
   * asking a worker, rather than a describe before it (a round trip of 7-29 ms at load 13).
   */
  async running(node: string, gpuRole: string, withinMs: number): Promise<LedgerState | undefined> {
    this.openRuns ??= new WorkflowClient({ ...this.client.workflow.options, queryRejectCondition: 'NOT_OPEN' });
    try {
      return await this.answer(node, gpuRole, withinMs, this.openRuns);
    } catch (err) {
      if (err instanceof QueryRejectedError || isNoRunningLedger(err)) return undefined;
      throw err;
    }
  }
}

/**
 * How long an update waits for a ledger reconciling with the box before it gives the step its
 * refusal: within the 30 s of the step's attempt (its sends and the reads between included),
 * whose retry then waits again.
 */
export const RECONCILE_WAIT_MS = 20_000;

/** The ledger's refusal of an update while it reconciles (src/workflows/ledger.ts reconcilingRefusal). */
function isReconcilingRefusal(err: unknown): boolean {
  return err instanceof WorkflowUpdateFailedError && err.cause instanceof ApplicationFailure && err.cause.type === Transient.LedgerReconciling;
}

/** Runs closed before their reconcile ended that a fresh ledger looks past for the one before them. */
const MAX_UNRECONCILED_RUNS = 5;

/** Runs of one ledger's chain of continue-as-new followed at most (a run continues every 2000 events or so). */
const MAX_CHAIN = 100;

/** A counting semaphore whose waiters are served first come, first served. */
class FifoSemaphore {
  private inFlight = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(private readonly limit: number) {}

  acquire(): Promise<void> {
    if (this.inFlight < this.limit) {
      this.inFlight += 1;
      return Promise.resolve();
    }
    // The slot passes straight to the waiter (release does not decrement), so none is overtaken.
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.inFlight -= 1;
  }

  idle(): boolean {
    return this.inFlight === 0 && this.waiting.length === 0;
  }
}

/**
 * Inside an activity a call to the ledger ends with the activity's attempt: an update with any
 * cancel of it, a query with the worker's stop only (`cutBy`), and a query asked because the
 * worker stops with its own bound only. A worker that is stopping stops
 * polling workflow tasks, the ledger's too, and cancels its activities; an update or a query
 * left waiting for the ledger's answer would wait for ever (an update) or for its bound (12 s, past
 * the stop's WORKER_STOP_MS of 10 s), and hold the worker's shutdown with it (seen when a test tore
 * its box down under an acquisition's fence). The activity ends as cancelled (the SDK's
 * CancelledFailure); its retry on the next worker sends the same updateId, or asks again. A cancel
 * that came before the call, or between the SDK's own re-sends (which the abort reaches only while
 * one is in flight), ends it as well: hence the race.
 *
 * Any other cancel (the run's own, a timed-out attempt) leaves a query to its answer: a step
 * cancelled with its run may still need to know who holds the serve now (startServeContainer's
 * removal of a container that is no longer its run's). Not cut: such a query when the worker stops
 * after that other cancel (the call is bound by the first cancel only), which waits out its own
 * bound. A local step's read is answered while the stop lets local steps end before it stops
 * polling (src/worker/stop.ts: up to 3 s, then named as left).
 */
async function boundToActivity<T>(client: Client, send: () => Promise<T>, cutBy: 'any cancel' | 'worker stop' | 'its bound only'): Promise<T> {
  // The store Context.current() reads, read without its throw: outside an activity that throw was
  // an Error built for every update the CLI, the API or the bench sent (3.8 µs of CPU each).
  const ctx = asyncLocalStorage.getStore();
  // Not in an activity (the CLI, the API), or a question asked because its worker stops
  // (answerWhileStopping): the caller bounds its own wait.
  if (!ctx || cutBy === 'its bound only') return send();
  const cuts = () => cutBy === 'any cancel' || ctx.cancellationDetails?.workerShutdown === true;
  // Cancelled already: not sent.
  if (ctx.cancellationSignal.aborted && cuts()) await ctx.cancelled;
  const cut = new AbortController();
  const cancelled = ctx.cancelled.catch((err: unknown): Promise<never> => {
    if (!cuts()) return new Promise<never>(() => undefined);
    cut.abort();
    throw err;
  });
  const sent = client.withAbortSignal(cut.signal, send);
  // Lost to the cancel, it still ends (aborted): nobody waits for it then.
  sent.catch(() => undefined);
  return Promise.race([sent, cancelled]);
}

/**
 * How long an update the server refuses for its in-flight limit is tried again (other processes
 * may be sending to the same ledger): inside the 30 s of the activity that sends it, whose own
 * retry then takes over with the same updateId.
 */
const UPDATE_LIMIT_RETRY_MS = 25_000;

/**
 * Retries an update the server refused or aborted for its per-workflow limit on in-flight updates
 * (after the SDK's own gRPC retries), with full-jitter backoff from 50 ms to 2 s: callers
 * refused together must not come back together, or they are refused together again.
 */
async function withUpdateLimitRetry<T>(send: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + UPDATE_LIMIT_RETRY_MS;
  for (let attempt = 0; ; attempt++) {
    try {
      return await send();
    } catch (err) {
      if (!isUpdateLimit(err) || Date.now() >= deadline) throw err;
      const capMs = Math.min(2000, 50 * 2 ** attempt);
      await new Promise((r) => setTimeout(r, Math.min(Math.random() * capMs, Math.max(0, deadline - Date.now()))));
    }
  }
}

/**
 * The server's refusal past history.maxInFlightUpdates, or its abort of the updates then in
 * flight; any RESOURCE_EXHAUSTED (a rate limit too) passes with time, the same way.
 */
export function isUpdateLimit(err: unknown): boolean {
  if (!(err instanceof ServiceError)) return false;
  const cause = err.cause as { code?: unknown; details?: unknown; message?: unknown } | undefined;
  const text = `${typeof cause?.details === 'string' ? cause.details : ''} ${typeof cause?.message === 'string' ? cause.message : ''}`;
  return cause?.code === GrpcStatus.RESOURCE_EXHAUSTED || (cause?.code === GrpcStatus.UNAVAILABLE && /update was aborted/i.test(text));
}

/** No worker answered the ledger (or finished its reconcile) in time: Temporal-side, not a fault of the caller's. */
export class LedgerUnanswered extends Error {
  override name = 'LedgerUnanswered';
}

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
