// The operator's verbs as calls on Temporal: each starts (or joins) a workflow with a
// deterministic id and returns data; printing and exit codes belong to the CLI.
import type { Client } from '@temporalio/client';
import type { LedgerState } from '../domain/ledger';
import { formatDuration } from '../domain/lease';
import type { Manifest } from '../domain/types';
import { CLI_JOINED_UPDATE_ID, joinedUpdate, joinLeaseSignal, NODE_ANSWER_MS, progressQuery, taskQueueFor, workflowIds } from '../shared/messages';
import type { StepRecord } from '../shared/messages';
import { cancellationOf } from './cancellation';
import type { CancellationRecord } from './cancellation';
import { followDeadline } from './follow';
import type { FollowHandlers } from './follow';
import { followOperation, runOrigin, startOperation } from './start-operation';
import type { OperationStart, RunOrigin, Settled } from './start-operation';
import type { AcquireInput, AcquireResult, BringDownResult, BringUpResult } from '../shared/operations';
import { LedgerClient } from '../adapters/ledger/ledger-client';
import { Failure } from '../shared/failures';

export type OperationOutcome<R> = { serve: string; workflowId: string; runId: string } & Settled<R>;

/**
 * A cancelled operation carries no message of its own: what it undid is its last step, the
 * compensation it ran (a `serves down` of the same serve cancels a bring-up, as does the UI);
 * who asked is in its history, and so, where the steps cannot be read, what ran after the ask.
 */
function describeCancellation(steps: readonly StepRecord[], record: CancellationRecord | undefined): string {
  const last = steps.filter((s) => s.step === 'compensate').pop();
  const by = `cancelled by ${record?.by ?? 'a serves down of it, or from the UI'}`;
  if (last) return `${last.outcome} (${by})`;
  const ran = record?.ranAfter.length ? `; ran after the cancel: ${record.ranAfter.join(', ')}` : '';
  return `cancelled (${by})${ran}`;
}

/** How the CLI watches an operation: its steps and waits, and whether this process started it or joined it. */
export interface OperationWatch extends FollowHandlers {
  onStart?: (start: { operation: string; workflowId: string; runId: string; origin?: RunOrigin }) => void;
  /** The router's run this call joined was abandoned first: told before the call acquires afresh. */
  onAbandonedJoin?: (abandoned: { workflowId: string; runId: string; message: string }) => void;
}

interface ServeOperation {
  workflowType: 'bringUpWorkflow' | 'bringDownWorkflow' | 'acquireWorkflow';
  workflowId: string;
  serve: string;
  input: Record<string, unknown>;
  /** The command line as the operator typed it. */
  summary: string;
  /** Sent to the run started or joined (startOperation's joinSignal). */
  joinSignal?: OperationStart['joinSignal'];
  /** Told to a run this call joined rather than started (tellJoined): an acquisition the router may abandon. */
  tellJoined?: boolean;
}

/**
 * Tells an acquisition this call joined that the operator waits for it too, so the router's
 * abandon is refused: an Update under a fixed id, which the server deduplicates within the run, so
 * `serves up X` run again and again (an "ensure up" script) adds its events to the run once. A run
 * that cannot be told (closed meanwhile, a worker from before joinedUpdate, no answer in time) is
 * followed all the same: its outcome says how it ended.
 */
async function tellJoined(client: Client, workflowId: string, runId: string): Promise<void> {
  const run = client.workflow.getHandle(workflowId, runId);
  await client
    .withDeadline(Date.now() + NODE_ANSWER_MS, () => run.executeUpdate(joinedUpdate, { args: ['cli'], updateId: CLI_JOINED_UPDATE_ID }))
    .catch(() => undefined);
}

async function runOperation<R>(client: Client, node: string, op: ServeOperation, watch?: OperationWatch): Promise<OperationOutcome<R>> {
  const { workflowId, serve } = op;
  const start = {
    workflowType: op.workflowType,
    workflowId,
    node,
    input: op.input,
    summary: `${op.summary} on ${node}`,
    onConflict: 'join' as const,
    ...(op.joinSignal ? { joinSignal: op.joinSignal } : {}),
  };
  const handle = await startOperation(client, start);
  // The run this call started or joined: a workflow id names every run of the operation on that serve.
  const runId = handle.firstExecutionRunId;
  // Joined without a signal (no event in the run's history); told only when this call did not start it.
  if (op.tellJoined && !(await handle.startedHere())) await tellJoined(client, workflowId, runId);
  if (watch?.onStart) {
    const origin = await runOrigin(client, workflowId, runId).catch(() => undefined);
    watch.onStart({ operation: op.summary, workflowId, runId, origin });
  }
  const run = client.workflow.getHandle(workflowId, runId);
  const within = followDeadline(client);
  const following = {
    readSteps: () => within(() => run.query(progressQuery)),
    run,
    within,
    handleFor: (id: string, childRun: string) => client.workflow.getHandle(id, childRun),
    handlers: watch,
    cancelled: async (steps: readonly StepRecord[]) =>
      describeCancellation(steps, await within(() => cancellationOf(client, workflowId, runId)).catch(() => undefined)),
  };
  const settled = await followOperation(handle as { result(): Promise<R> }, following);
  return { serve, workflowId, runId, ...settled };
}

export function serveUp(client: Client, node: string, serve: string, watch?: OperationWatch): Promise<OperationOutcome<BringUpResult>> {
  const op = { workflowType: 'bringUpWorkflow', workflowId: workflowIds.bringUp(node, serve), serve, input: { serve }, summary: `serves up ${serve}` } as const;
  return runOperation(client, node, op, watch);
}

export function serveDown(
  client: Client,
  node: string,
  serve: string,
  opts: { restore?: boolean; watch?: OperationWatch } = {},
): Promise<OperationOutcome<BringDownResult>> {
  const summary = `serves down ${serve}${opts.restore ? ' --restore' : ''}`;
  const input = { serve, restore: Boolean(opts.restore) };
  return runOperation(client, node, { workflowType: 'bringDownWorkflow', workflowId: workflowIds.bringDown(node, serve), serve, input, summary }, opts.watch);
}

export async function serveAcquire(client: Client, node: string, input: AcquireInput, watch?: OperationWatch): Promise<OperationOutcome<AcquireResult>> {
  const lease = input.lease?.kind === 'fixed' ? ` --lease ${formatDuration(input.lease.seconds * 1000)}` : input.lease ? ' (idle lease)' : '';
  const summary = `serves up ${input.serve}${input.evict ? ' --evict' : ''}${input.force ? ' --force' : ''}${lease}`;
  // Joined, the run keeps the first caller's input: the lease asked goes to it as well.
  // Named as the CLI either way: a run the router started goes on for the operator who joined it.
  // Without a lease nothing is sent with the start: a run this call joined is told once (tellJoined).
  const joining = input.lease ? { joinSignal: { signal: joinLeaseSignal, args: [input.lease, 'cli'] } } : { tellJoined: true };
  const op = {
    workflowType: 'acquireWorkflow',
    workflowId: workflowIds.acquire(node, input.serve),
    serve: input.serve,
    input: { ...input },
    summary,
    ...joining,
  } as const;
  const first = await runOperation<AcquireResult>(client, node, op, watch);
  // Only the router's run is abandoned, and only a run this call joined is the router's (one it
  // started carries no trigger). Joined just before the router's abandon landed, it ended
  // Abandoned, though the operator asked for the serve: acquired afresh, once (a run started now
  // is the operator's own, and no abandon reaches it; a router's run joined again is told first).
  if (first.ok || first.failureType !== Failure.Abandoned) return first;
  watch?.onAbandonedJoin?.({ workflowId: first.workflowId, runId: first.runId, message: first.message });
  return runOperation<AcquireResult>(client, node, op, watch);
}

/** A closed run's wall time by the server's clock, start to close (a run still open: to now). */
export async function runWallMs(client: Client, workflowId: string, runId?: string): Promise<number> {
  const d = await client.workflow.getHandle(workflowId, runId).describe();
  return (d.closeTime?.getTime() ?? Date.now()) - d.startTime.getTime();
}

export async function ledgerSnapshots(client: Client, manifest: Manifest): Promise<LedgerState[]> {
  const ledger = new LedgerClient(client);
  return Promise.all(manifest.gpus.map((gpu) => ledger.snapshot(manifest.node, gpu)));
}

/** An operation under way on one of the node's serves. */
export interface RunningOperation {
  serve: string;
  workflowId: string;
  runId: string;
  workflowType: string;
  /** When it started (ISO). */
  since: string;
}

const SERVE_OPERATION_ID = /^(?:serves-up|serves-down|acquire)\/[^/]+\/(.+)$/;

/**
 * The serve operations (bring-ups, bring-downs, acquisitions) running on the node, from
 * visibility: advice, so a list Temporal refuses is none (the ledger is the answer).
 */
export async function serveOperationsRunning(client: Client, node: string): Promise<RunningOperation[]> {
  const out: RunningOperation[] = [];
  try {
    const query = `TaskQueue = '${taskQueueFor(node)}' AND ExecutionStatus = 'Running' AND WorkflowType != 'ledgerWorkflow'`;
    for await (const wf of client.workflow.list({ query })) {
      const serve = SERVE_OPERATION_ID.exec(wf.workflowId)?.[1];
      if (serve) out.push({ serve, workflowId: wf.workflowId, runId: wf.runId, workflowType: wf.type, since: wf.startTime.toISOString() });
    }
  } catch {
    // Visibility is advice here.
  }
  return out;
}
