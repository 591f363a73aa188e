// Every operation reaches Temporal the same way: start (or join) its workflow under the
// deterministic id that names the operation, follow its steps while it runs, and return how it
// closed as data. The CLI's serves up/down, the acquisition API and `router promote` all start
// here, and the CLI and promotion follow here, so progress and outcome have one shape.
import type { Client, Workflow, WorkflowHandleWithFirstExecutionRunId, WorkflowStartOptions } from '@temporalio/client';
import type { SignalDefinition } from '@temporalio/common';
import { randomUUID } from 'node:crypto';
import { WorkflowFailedError } from '@temporalio/client';
import { ActivityFailure, ApplicationFailure, CancelledFailure, TimeoutFailure } from '@temporalio/common';
import { searchAttributeNotYetMapped, temporalBusy } from '../adapters/grpc-status';
import { literalMarkdown } from '../domain/markdown';
import { taskQueueFor } from '../shared/messages';
import { runTags } from '../shared/run-tags';
import type { StepRecord } from '../shared/messages';
import { followRun } from './follow';
import type { FollowHandlers, HandleFor, RunHandle, Within } from './follow';
import { operationSearchAttributes } from './search-attributes';

export interface OperationStart {
  workflowType: string;
  /** Names the operation, not the run: a second start finds the first by it. */
  workflowId: string;
  node: string;
  input: unknown;
  /** What the Temporal UI lists for the run, in the operator's words (escaped here: the UI reads it as markdown). */
  summary: string;
  /**
   * 'join': a repeated trigger joins the running operation instead of starting another (USE_EXISTING).
   * 'refuse': while one runs, a second start fails with WorkflowExecutionAlreadyStartedError, never
   * queued or joined; once it has closed the id starts a new run (FAIL, ALLOW_DUPLICATE).
   */
  onConflict: 'join' | 'refuse';
  /**
   * With 'join': what this caller asks beyond the input, sent to the run it starts or joins in the
   * same call (signalWithStart): a joined run keeps the first caller's input, and a signal sent
   * after the start could find the run closed meanwhile.
   */
  joinSignal?: { signal: SignalDefinition<unknown[]>; args: unknown[] };
}

/** A started or joined run, and whether this call started it. */
export type OperationHandle<W extends Workflow> = WorkflowHandleWithFirstExecutionRunId<W> & {
  /**
   * Whether this call started the run rather than joining one running: the SDK drops the server's
   * `started` flag, so the run's memo is read for this call's mark (one describe, when asked).
   */
  startedHere: () => Promise<boolean>;
};

/** The memo key of the mark a start leaves on the run it starts (a random id, one per call; nothing secret). */
const START_MARK_MEMO = 'gpuresStartMark';

/** Starts the operation's workflow on the node's task queue, or joins the one running under its id. */
export async function startOperation<W extends Workflow = Workflow>(client: Client, start: OperationStart): Promise<OperationHandle<W>> {
  const { node } = start;
  const taskQueue = taskQueueFor(node);
  // The tags the workflows' interceptor would give the run (src/workflows/run-tags.ts), set at start where the namespace has them.
  const typedSearchAttributes = await operationSearchAttributes(client, runTags(start.workflowType, taskQueue, start.input));
  const mark = randomUUID();
  const conflict: Pick<WorkflowStartOptions, 'workflowIdConflictPolicy' | 'workflowIdReusePolicy'> =
    start.onConflict === 'join' ? { workflowIdConflictPolicy: 'USE_EXISTING' } : { workflowIdConflictPolicy: 'FAIL', workflowIdReusePolicy: 'ALLOW_DUPLICATE' };
  const options = {
    ...(typedSearchAttributes ? { typedSearchAttributes } : {}),
    workflowId: start.workflowId,
    taskQueue,
    args: [start.input],
    ...conflict,
    staticSummary: literalMarkdown(start.summary),
    memo: { [START_MARK_MEMO]: mark },
  };
  // The input is the caller's to match to the workflow type; the SDK cannot check a type named by a string.
  const send = async (): Promise<WorkflowHandleWithFirstExecutionRunId<W>> => {
    const joinSignal = start.onConflict === 'join' ? start.joinSignal : undefined;
    if (!joinSignal) return client.workflow.start<W>(start.workflowType, options as unknown as WorkflowStartOptions<W>);
    // Signal-with-start joins a running run (the server's USE_EXISTING) or starts one; the run signalled is the one to follow.
    const withSignal = { ...options, signal: joinSignal.signal, signalArgs: joinSignal.args };
    const signalled = await client.workflow.signalWithStart<W, unknown[]>(
      start.workflowType,
      withSignal as unknown as Parameters<typeof client.workflow.signalWithStart<W, unknown[]>>[1],
    );
    const handle = client.workflow.getHandle<W>(start.workflowId, undefined, { firstExecutionRunId: signalled.signaledRunId });
    return Object.assign(handle, { firstExecutionRunId: signalled.signaledRunId });
  };
  // Attributes registered a moment ago (a fresh server, `gpures demo --temporal-address`) are
  // refused until the server maps them: asked again, briefly, rather than failing the operation.
  const deadline = Date.now() + SEARCH_ATTRIBUTE_MAPPING_WAIT_MS;
  for (;;) {
    try {
      const handle = await send();
      const startedHere = async () =>
        (await client.workflow.getHandle(start.workflowId, handle.firstExecutionRunId).describe()).memo?.[START_MARK_MEMO] === mark;
      return Object.assign(handle, { startedHere });
    } catch (err) {
      if (!typedSearchAttributes || !searchAttributeNotYetMapped(err) || Date.now() >= deadline) throw err;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

/** How long a start waits for freshly registered search attributes to be mapped (about 1 s on temporal-server). */
const SEARCH_ATTRIBUTE_MAPPING_WAIT_MS = 10_000;

/** How a run closed: its result, or its failure as the operator reads it. */
export type Settled<R> = { ok: true; result: R } | ({ ok: false } & Failed);

/** A run's failure as the operator reads it; a step's, uncaught, also names that step and whether it timed out. */
export interface Failed {
  failureType: string;
  message: string;
  details?: unknown;
  activity?: FailedStep;
}

/** The step (activity or local activity) whose failure the run failed with. */
export interface FailedStep {
  type: string;
  timedOut: boolean;
}

export interface Following {
  /** The run's steps so far, from its query: what a cancellation is described from. */
  readSteps: () => Promise<readonly StepRecord[]>;
  /** The run to poll for its steps, waits and children; without it (or handlers) the run is only awaited. */
  run?: RunHandle;
  /** The children's handles, to follow their steps too (a restore's bring-ups). */
  handleFor?: HandleFor;
  /** Each step once, as it completes, with its times; the step under way; each child first seen. */
  handlers?: FollowHandlers;
  pollMs?: number;
  /** Bounds each of the follower's queries and describes. */
  within?: Within;
  /**
   * A cancelled run in the operator's words, from its steps (a cancellation carries no message of
   * its own); without it, the cancellation's own name and message.
   */
  cancelled?: (steps: readonly StepRecord[]) => string | Promise<string>;
}

function stepsOf(value: unknown): readonly StepRecord[] | undefined {
  return (value as { steps?: readonly StepRecord[] } | undefined)?.steps;
}

/**
 * How long the wait for a run's outcome rides out a Temporal that cannot answer (restarting, its
 * store away): the run goes on in the server and the worker meanwhile, so an operator's command
 * should not fail because the server blinked. The SDK's own retries cover about 20 s of it.
 */
export const OUTCOME_OUTAGE_MS = 120_000;
const OUTCOME_RETRY_MS = 1000;

/** A wait for the result that failed only after this long had answers in between (long polls): a new outage. */
const ANSWERED_WAIT_MS = 30_000;

/** The run's result, asked again while Temporal cannot answer, for up to `outageMs` without an answer. */
export async function outcomeOf<R>(handle: { result(): Promise<R> }, outageMs = OUTCOME_OUTAGE_MS): Promise<R> {
  let unansweredSince: number | undefined;
  for (;;) {
    const askedAt = Date.now();
    try {
      return await handle.result();
    } catch (err) {
      // The SDK's own retries take ~20 s: a wait that failed later had been answered until then.
      if (Date.now() - askedAt > ANSWERED_WAIT_MS) unansweredSince = undefined;
      unansweredSince ??= Date.now();
      if (!temporalBusy(err) || Date.now() - unansweredSince >= outageMs) throw err;
      await new Promise((r) => setTimeout(r, OUTCOME_RETRY_MS));
    }
  }
}

/** Awaits the run, reporting its steps meanwhile; then how it closed. Only a workflow's own failure is an outcome: anything else throws. */
export async function followOperation<R>(handle: { result(): Promise<R> }, how: Following): Promise<Settled<R>> {
  const result = outcomeOf(handle);
  const follower = how.handlers && how.run ? followRun(how.run, how.handlers, { pollMs: how.pollMs, handleFor: how.handleFor, within: how.within }) : undefined;
  await follower?.until(result);
  let settled: Settled<R>;
  let steps: readonly StepRecord[] | undefined;
  try {
    settled = { ok: true, result: await result };
    steps = stepsOf(settled.result);
  } catch (err) {
    if (!(err instanceof WorkflowFailedError)) throw err;
    const failed = await describeFailure(err, how);
    settled = {
      ok: false,
      failureType: failed.failureType,
      message: failed.message,
      ...('details' in failed ? { details: failed.details } : {}),
      ...(failed.activity ? { activity: failed.activity } : {}),
    };
    steps = failed.steps ?? stepsOf(failed.details);
  }
  // The steps the last poll did not see: a quick operation may finish between two polls, and a
  // cancelled one records what it undid as it closes.
  if (steps) await follower?.report(steps);
  return settled;
}

async function describeFailure(err: WorkflowFailedError, how: Following): Promise<Failed & { steps?: readonly StepRecord[] }> {
  const { cause } = err;
  if (cause instanceof CancelledFailure && how.cancelled) {
    const steps = await how.readSteps().catch(() => []);
    return { failureType: 'CancelledFailure', message: await how.cancelled(steps), steps };
  }
  if (cause instanceof ApplicationFailure) return { failureType: cause.type ?? 'Error', message: cause.message, details: cause.details?.[0] };
  // A step's failure the run did not catch: which step, and whether it ran out by a timeout (its
  // cause then, as a local activity's last attempt timing out carries nothing else).
  const activity = cause instanceof ActivityFailure ? { activity: { type: cause.activityType, timedOut: cause.cause instanceof TimeoutFailure } } : {};
  return { failureType: cause?.name ?? 'WorkflowFailed', message: cause?.message ?? err.message, ...activity };
}

/** Who started a run, and when: what a process that joined it tells the operator. */
export interface RunOrigin {
  /** This process did not start the run: it was running already under the operation's id. */
  joined: boolean;
  startedAt: Date;
  /** The starting client's identity, or the parent workflow that started it. */
  startedBy: string;
}

/**
 * Read from the run's first event. A start that joins (USE_EXISTING) answers the running run's
 * id like a start that starts, and the SDK drops the response's `started` flag; the run's
 * WorkflowExecutionStarted event names the identity that started it, and this client's identity
 * (pid@host and a random tail, connection.ts clientIdentity) is its own.
 */
export async function runOrigin(client: Client, workflowId: string, runId: string): Promise<RunOrigin | undefined> {
  const res = await client.workflowService.getWorkflowExecutionHistory({
    namespace: client.options.namespace,
    execution: { workflowId, runId },
    maximumPageSize: 1,
  });
  const first = res.history?.events?.[0];
  const attrs = first?.workflowExecutionStartedEventAttributes;
  if (!first || !attrs) return undefined;
  const seconds = Number(first.eventTime?.seconds ?? 0);
  const startedAt = new Date(seconds * 1000 + Math.floor((first.eventTime?.nanos ?? 0) / 1e6));
  const parent = attrs.parentWorkflowExecution?.workflowId;
  const startedBy = parent ? `workflow ${parent}` : attrs.identity || 'an unnamed client';
  return { joined: Boolean(parent) || attrs.identity !== client.workflow.options.identity, startedAt, startedBy };
}
