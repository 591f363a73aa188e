// Live progress of a running operation: polls its steps (the `liveProgress` query, or `progress`
// on a worker from before it) and its description (the activity it waits in, with the figures
// that activity heartbeats; the child runs it waits for), and reports each new step once with
// its times, the step under way as one status line, and a child's steps (a restore's bring-ups,
// a lease's bring-down) beneath its parent's, until the workflow closes. What the operator
// watches while a drain runs out or a vLLM serve takes minutes to load.
import { QueryNotRegisteredError } from '@temporalio/client';
import type { WorkflowHandle } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { defaultPayloadConverter } from '@temporalio/common';
import { liveProgressQuery, progressQuery } from '../shared/messages';
import type { StepRecord } from '../shared/messages';
import type { DrainBeat, HealthBeat, StepUnderWay, VramBeat } from '../shared/progress';

/** A step as completed, with when: since the operation began, and since the step before it (or its run's start). */
export interface TimedStep extends StepRecord {
  /** 0: the operation's own step; 1: a step of a child it waits for; 2: a grandchild's. */
  depth: number;
  elapsedMs?: number;
  tookMs?: number;
}

/** The line about the step under way: `key` changes only when something worth a new plain line does (a count, the step). */
export interface StatusLine {
  text: string;
  key: string;
  /** It tells more than the time (a count, a retry): a plain log takes it at once. */
  figures: boolean;
  /** How long the step has been under way, where that is all it tells. */
  sinceMs?: number;
}

/** How a follower reports; every callback may be left out. */
export interface FollowHandlers {
  onStep?: (step: TimedStep) => void;
  /** A child run first seen, before its steps. */
  onChild?: (child: ChildRun, depth: number) => void;
  /** The step under way now; undefined when none is (between steps, or closed). */
  onStatus?: (status: StatusLine | undefined) => void;
}

export interface ChildRun {
  workflowId: string;
  runId: string;
  workflowType: string;
}

/** An activity the run waits in, as describe() shows it. */
export interface PendingWait {
  activity: string;
  attempt: number;
  /** The attempt's latest heartbeat details, decoded. */
  details?: unknown;
  lastFailure?: string;
  lastStartedAtMs?: number;
  /** When this process first read these details (its own clock): how long ago the worker's figures were true. */
  seenAtMs?: number;
  /** The wait's elapsed time (worker's clock) when these details were first seen: never less than the last heartbeat's carried on. */
  elapsedAtSeenMs?: number;
  /** No worker has this attempt: it is due, or waits out its retry interval (the server's SCHEDULED). */
  scheduled?: boolean;
  /** When this process first saw this attempt scheduled (its own clock). */
  scheduledSeenAtMs?: number;
}

/** What one poll of a run reads. */
export interface RunReading {
  steps: readonly StepRecord[];
  underway?: StepUnderWay;
  startedAtMs?: number;
  pending: PendingWait[];
  children: ChildRun[];
  closed: boolean;
}

/** What a follower needs of Temporal for one run: `client.workflow.getHandle(id, runId)`. */
export type RunHandle = Pick<WorkflowHandle, 'workflowId' | 'query' | 'describe'>;

/** Opens a child's handle by id and run. */
export type HandleFor = (workflowId: string, runId: string) => RunHandle;

type Raw = temporal.api.workflowservice.v1.IDescribeWorkflowExecutionResponse;

function decodeDetails(payloads: temporal.api.common.v1.IPayload[] | null | undefined): unknown {
  const first = payloads?.[0];
  if (!first) return undefined;
  try {
    return defaultPayloadConverter.fromPayload(first);
  } catch {
    return undefined;
  }
}

function tsMs(ts: { seconds?: unknown; nanos?: number | null } | null | undefined): number | undefined {
  if (!ts?.seconds) return undefined;
  return Number(ts.seconds) * 1000 + Math.floor((ts.nanos ?? 0) / 1e6);
}

/** The activities a run waits in and the children it waits for, from its description. */
export function pendingOf(raw: Raw): { pending: PendingWait[]; children: ChildRun[] } {
  const pending = (raw.pendingActivities ?? []).map((a) => ({
    activity: a.activityType?.name ?? '?',
    attempt: a.attempt ?? 1,
    details: decodeDetails(a.heartbeatDetails?.payloads),
    ...(a.lastFailure?.message ? { lastFailure: a.lastFailure.message } : {}),
    ...(tsMs(a.lastStartedTime) ? { lastStartedAtMs: tsMs(a.lastStartedTime) } : {}),
    ...(a.state === temporal.api.enums.v1.PendingActivityState.PENDING_ACTIVITY_STATE_SCHEDULED ? { scheduled: true } : {}),
  }));
  const children = (raw.pendingChildren ?? []).flatMap((c) =>
    c.workflowId && c.runId ? [{ workflowId: c.workflowId, runId: c.runId, workflowType: c.workflowTypeName ?? '?' }] : [],
  );
  return { pending, children };
}

const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);

/** A poll's bound on one answer: a poll is advice, the next one asks again (shorter than a node's NODE_ANSWER_MS). */
export const FOLLOW_ANSWER_MS = 5_000;
/**
 * As often as a poll: heartbeat details change at most every 2 s, but a restore's child bring-up is
 * seen only while it is pending in the description, and one can start and end within a second
 * (cli-progress: a 0.9 s restore's child was missed at 1.5 s).
 */
export const DESCRIBE_EVERY_MS = 500;
/** The last poll after the run closed (a child's last steps): never longer than this before the outcome prints. */
export const FINAL_POLL_MS = 2_000;

/** Bounds one call to Temporal. */
export type Within = <T>(call: () => Promise<T>) => Promise<T>;

/** A follower's bound on each call: FOLLOW_ANSWER_MS past its start, as a gRPC deadline (the call is abandoned, not only unawaited). */
export function followDeadline(client: { withDeadline<R>(deadline: number, fn: () => Promise<R>): Promise<R> }): Within {
  return (call) => client.withDeadline(Date.now() + FOLLOW_ANSWER_MS, call);
}

/** What every follower of one operation shares: its clock, its bound on calls, whether its polls still report. */
interface FollowContext {
  /** When the operation began: the clock every line's elapsed time is on. */
  origin: { ms?: number };
  within: Within;
  describeEveryMs: number;
  /** Bumped when a poll is given up (the run settled first): an answer arriving after reports nothing. */
  epoch: number;
  /** The top run's steps are events (a lease's extend, release), not work ended: no 'took'. */
  topStepsAreEvents: boolean;
}

/**
 * The pending waits, each with when its details were first seen (this process's clock) and the
 * wait's elapsed then. A heartbeat reaches the server some time after its reading (the SDK
 * throttles them): the one seen later may have waited longer, so the elapsed shown is carried on
 * from the last one where that is more, and never runs back.
 */
export function keepSeen(now: PendingWait[], before: PendingWait[], nowMs: number): PendingWait[] {
  return now.map((p) => {
    const was = before.find((b) => b.activity === p.activity && b.attempt === p.attempt);
    // A retry carries the last attempt's heartbeat on: its elapsed goes on from where it was.
    const seen = seenDetails(p, was ?? before.find((b) => b.activity === p.activity), nowMs);
    if (!p.scheduled) return seen;
    return { ...seen, scheduledSeenAtMs: was?.scheduled && was.scheduledSeenAtMs !== undefined ? was.scheduledSeenAtMs : nowMs };
  });
}

/** The wait's heartbeat details with when they were first seen, carried on from the last reading of the same attempt. */
function seenDetails(p: PendingWait, was: PendingWait | undefined, nowMs: number): PendingWait {
  const beat = (d: unknown) => d as { atEpochMs?: unknown; startedAtEpochMs?: unknown } | undefined;
  const at = num(beat(p.details)?.atEpochMs);
  const started = num(beat(p.details)?.startedAtEpochMs);
  if (was?.seenAtMs !== undefined && at !== undefined && num(beat(was.details)?.atEpochMs) === at) {
    return { ...p, seenAtMs: was.seenAtMs, ...(was.elapsedAtSeenMs !== undefined ? { elapsedAtSeenMs: was.elapsedAtSeenMs } : {}) };
  }
  if (at === undefined || started === undefined) return { ...p, seenAtMs: nowMs };
  const carried =
    was?.seenAtMs !== undefined && was.elapsedAtSeenMs !== undefined && num(beat(was.details)?.startedAtEpochMs) === started
      ? was.elapsedAtSeenMs + (nowMs - was.seenAtMs)
      : undefined;
  return { ...p, seenAtMs: nowMs, elapsedAtSeenMs: Math.max(at - started, carried ?? 0) };
}

/** A run whose worker has no handler for the query (one from before it): the SDK's name for that answer. */
function isQueryUnknown(err: unknown): boolean {
  return err instanceof QueryNotRegisteredError;
}

/** One run followed: its steps reported once each, its children followed beneath it. */
class RunFollower {
  private seen = 0;
  private startedAtMs: number | undefined;
  private lastAtMs: number | undefined;
  private live = true;
  private readonly children = new Map<string, RunFollower>();
  private reading: RunReading | undefined;
  private described: { atMs: number; pending: PendingWait[]; children: ChildRun[]; closed: boolean } | undefined;

  constructor(
    private readonly handle: RunHandle,
    private readonly depth: number,
    private readonly handlers: FollowHandlers,
    private readonly handleFor: HandleFor | undefined,
    private readonly ctx: FollowContext,
  ) {}

  private get origin(): { ms?: number } {
    return this.ctx.origin;
  }

  private async readSteps(): Promise<{ steps: readonly StepRecord[]; underway?: StepUnderWay }> {
    if (this.live) {
      try {
        return await this.ctx.within(() => this.handle.query(liveProgressQuery));
      } catch (err) {
        if (!isQueryUnknown(err)) throw err;
        this.live = false;
      }
    }
    return { steps: await this.ctx.within(() => this.handle.query(progressQuery)) };
  }

  /** The run's description, read again only every describeEveryMs (or when `fresh`): the steps are what changes between. */
  private async describeRun(fresh: boolean): Promise<{ pending: PendingWait[]; children: ChildRun[]; closed: boolean }> {
    const nowMs = Date.now();
    if (!fresh && this.described && nowMs - this.described.atMs < this.ctx.describeEveryMs) return this.described;
    const d = await this.ctx.within(() => this.handle.describe());
    this.startedAtMs ??= d.startTime.getTime();
    if (this.depth === 0) this.origin.ms ??= d.startTime.getTime();
    const { pending, children } = pendingOf(d.raw);
    this.described = { atMs: nowMs, pending: keepSeen(pending, this.described?.pending ?? [], nowMs), children, closed: d.status.name !== 'RUNNING' };
    return this.described;
  }

  /** Reads the run (steps and description together); undefined when neither answered (no worker yet, say). */
  async read(fresh = false): Promise<RunReading | undefined> {
    const [steps, desc] = await Promise.allSettled([this.readSteps(), this.describeRun(fresh)]);
    if (steps.status === 'rejected' && desc.status === 'rejected') return undefined;
    const { pending, children, closed } = desc.status === 'fulfilled' ? desc.value : { pending: [], children: [], closed: false };
    const s = steps.status === 'fulfilled' ? steps.value : { steps: [] };
    return { steps: s.steps, underway: s.underway, startedAtMs: this.startedAtMs, pending, children, closed };
  }

  /**
   * One poll, in the order things happened: the children already followed (one that closed since
   * reports its last steps before the parent's step about it), this run's steps, then the
   * children it started since (after the steps it took before starting them).
   */
  async poll(fresh = false): Promise<void> {
    const epoch = this.ctx.epoch;
    const r = await this.read(fresh);
    // Given up while it waited for an answer: what it read is reported by the final list, or not at all.
    if (!r || epoch !== this.ctx.epoch) return;
    this.reading = r;
    const pendingIds = new Set(r.children.map((c) => c.runId));
    for (const [runId, child] of this.children) {
      await child.poll(fresh).catch(() => undefined);
      if (epoch !== this.ctx.epoch) return;
      // Closed: its last steps were read by the poll above; it is not asked again.
      if (!pendingIds.has(runId)) this.children.delete(runId);
    }
    this.report(r.steps);
    for (const c of r.children) {
      if (this.children.has(c.runId) || !this.handleFor) continue;
      const child = new RunFollower(this.handleFor(c.workflowId, c.runId), this.depth + 1, this.handlers, this.handleFor, this.ctx);
      this.children.set(c.runId, child);
      this.handlers.onChild?.(c, this.depth + 1);
      await child.poll(fresh).catch(() => undefined);
      if (epoch !== this.ctx.epoch) return;
    }
  }

  /** Reports the steps not seen yet, e.g. the final list from a result or failure details. */
  report(steps: readonly StepRecord[]): void {
    for (; this.seen < steps.length; this.seen++) {
      const s = steps[this.seen];
      if (!s) continue;
      const at = Date.parse(s.at);
      const from = this.lastAtMs ?? this.startedAtMs;
      const timed: TimedStep = { ...s, depth: this.depth };
      if (!Number.isNaN(at)) {
        if (this.origin.ms !== undefined) timed.elapsedMs = at - this.origin.ms;
        if (from !== undefined && !(this.depth === 0 && this.ctx.topStepsAreEvents)) timed.tookMs = at - from;
        this.lastAtMs = at;
      }
      this.handlers.onStep?.(timed);
    }
  }

  /** The status of the deepest run waiting on something: a child's wait is what the parent waits on. */
  status(nowMs: number): StatusLine | undefined {
    for (const child of this.children.values()) {
      const s = child.status(nowMs);
      if (s) return s;
    }
    return this.reading && !this.reading.closed ? statusOf(this.reading, nowMs, this.depth) : undefined;
  }

  /** Makes sure the run's start is known, for the times of steps reported after it closed. */
  async knowStart(): Promise<void> {
    if (this.startedAtMs !== undefined) return;
    try {
      const d = await this.ctx.within(() => this.handle.describe());
      this.startedAtMs = d.startTime.getTime();
      if (this.depth === 0) this.origin.ms ??= this.startedAtMs;
    } catch {
      // Steps then go without times.
    }
  }
}

export interface StepFollower {
  /** Reports the steps not seen yet, e.g. the final list from a result or failure details. */
  report(this: void, steps: readonly StepRecord[]): Promise<void>;
  /** Resolves once `done` settles, having polled meanwhile. */
  until(done: Promise<unknown>): Promise<void>;
}

export interface FollowOptions {
  pollMs?: number;
  /** How often the description (the waits' heartbeats, the children) is read again; DESCRIBE_EVERY_MS unless set. */
  describeEveryMs?: number;
  handleFor?: HandleFor;
  /** Bounds each query and describe (a worker killed mid-wait answers no query); unbounded unless set. */
  within?: Within;
  /** The last poll's bound once the run has settled; FINAL_POLL_MS unless set. */
  finalPollMs?: number;
  /**
   * The top run records events, not steps of work (a lease: extended, released, an hour apart):
   * each is shown with its time since the start, without a 'took' that would be the gap between them.
   */
  topStepsAreEvents?: boolean;
}

/** A timer cleared once raced, so a settled follower leaves none behind to hold the process. */
function sleep(ms: number): { done: Promise<void>; clear: () => void } {
  let timer: NodeJS.Timeout | undefined;
  const done = new Promise<void>((r) => {
    timer = setTimeout(r, ms);
  });
  return { done, clear: () => clearTimeout(timer) };
}

/** Follows one run and, where `handleFor` is given, the children it waits for. */
export function followRun(handle: RunHandle, handlers: FollowHandlers, opts: FollowOptions = {}): StepFollower {
  const pollMs = opts.pollMs ?? 500;
  const ctx: FollowContext = {
    origin: {},
    within: opts.within ?? ((call) => call()),
    describeEveryMs: opts.describeEveryMs ?? DESCRIBE_EVERY_MS,
    epoch: 0,
    topStepsAreEvents: opts.topStepsAreEvents === true,
  };
  // A step completed: the status line about it is stale until the next poll says what is under way.
  const onStep = (step: TimedStep) => {
    handlers.onStatus?.(undefined);
    handlers.onStep?.(step);
  };
  const top = new RunFollower(handle, 0, { ...handlers, onStep }, opts.handleFor, ctx);
  const showStatus = () => handlers.onStatus?.(top.status(Date.now()));
  return {
    async report(steps) {
      await top.knowStart();
      handlers.onStatus?.(undefined);
      top.report(steps);
    },
    async until(done) {
      let finished = false;
      const settled = done.then(
        () => undefined,
        () => undefined,
      );
      void settled.then(() => {
        finished = true;
      });
      while (!finished) {
        // A poll waiting on a worker that died gives way to the run's settling: the outcome is not held up.
        await Promise.race([settled, top.poll().catch(() => undefined)]);
        // A poll unanswered (no worker yet, or gone) still redraws the last status: its time moves on.
        if (!finished) showStatus();
        if (finished) break;
        const pause = sleep(pollMs);
        await Promise.race([settled, pause.done]);
        pause.clear();
      }
      ctx.epoch += 1;
      // The children's last steps: a restore's last bring-up may close with its parent. A closed
      // run's query needs a worker to replay it: bounded, the final list carries the run's own steps.
      const bound = sleep(opts.finalPollMs ?? FINAL_POLL_MS);
      await Promise.race([top.poll(true).catch(() => undefined), bound.done]);
      bound.clear();
      ctx.epoch += 1;
      handlers.onStatus?.(undefined);
    },
  };
}

/** 0.4s, 12.3s, 2m05s, 1h02m: to a tenth under a minute, where a drain's or a probe's pace shows. */
export function formatElapsed(ms: number): string {
  const s = Math.max(0, ms) / 1000;
  if (s < 60) return `${s.toFixed(1)}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m${String(Math.floor(s % 60)).padStart(2, '0')}s`;
  return `${Math.floor(m / 60)}h${String(m % 60).padStart(2, '0')}m`;
}

/** One line per step, as the CLI prints progress: indented by depth, its times after it. */
export function formatStep(s: StepRecord & Partial<TimedStep>): string {
  const times = [
    s.elapsedMs !== undefined ? `+${formatElapsed(s.elapsedMs)}` : undefined,
    s.tookMs !== undefined ? `took ${formatElapsed(s.tookMs)}` : undefined,
  ]
    .filter(Boolean)
    .join(', ');
  return `${'  '.repeat((s.depth ?? 0) + 1)}${s.step}: ${s.outcome}${times ? `  [${times}]` : ''}`;
}

/** The line a child's steps go under. */
export function formatChild(c: ChildRun, depth: number): string {
  return `${'  '.repeat(depth)}${c.workflowId} (${c.workflowType}):`;
}

/** How an activity's wait is named when the run names no step under way. */
const WAIT_NAMES: Record<string, string> = {
  drainServe: 'drain',
  waitHealthy: 'health',
  verifyIdentity: 'identity',
  confirmVramReleased: 'release',
  stopServeContainer: 'stop',
  startServeContainer: 'start',
};

/**
 * How long a wait has run, on the worker's clock alone: from its start to the heartbeat's reading,
 * plus the time (this process's clock) since that heartbeat was first seen. Two machines' clocks
 * never meet in one difference; a worker from before atEpochMs is read against this clock.
 */
export function waitElapsedMs(
  d: { startedAtEpochMs: number; atEpochMs?: unknown },
  nowMs: number,
  wait: Pick<PendingWait, 'seenAtMs' | 'elapsedAtSeenMs'> = {},
): number {
  const at = num(d.atEpochMs);
  const { seenAtMs } = wait;
  if (at === undefined || seenAtMs === undefined) return nowMs - d.startedAtEpochMs;
  return (wait.elapsedAtSeenMs ?? at - d.startedAtEpochMs) + Math.max(0, nowMs - seenAtMs);
}

function ofBound(elapsedMs: number, startedAtMs: number, deadlineMs: number | undefined, timeoutS?: number): string {
  const elapsed = formatElapsed(elapsedMs);
  const bound = timeoutS ?? (deadlineMs !== undefined ? Math.round((deadlineMs - startedAtMs) / 1000) : undefined);
  return bound !== undefined ? `${elapsed} of ${bound}s` : elapsed;
}

/**
 * How long an attempt may be seen scheduled before no worker taking it is said: longer than the
 * activities' longest retry interval (maximumInterval 10 s, src/workflows/proxies.ts), which an
 * attempt waits out scheduled with a worker running, and far longer than a running worker takes.
 */
export const NO_WORKER_AFTER_MS = 15_000;

/** The step under way in the operator's words, with the figures its activity heartbeats. */
export function statusOf(r: RunReading, nowMs: number, depth = 0): StatusLine | undefined {
  const wait = r.pending.find((p) => p.activity in WAIT_NAMES);
  // An activity of no step of the operator's (a ledger read, a measure) goes unsaid.
  const step = r.underway?.step ?? (wait ? WAIT_NAMES[wait.activity] : undefined);
  if (!step) return undefined;
  const indent = '  '.repeat(depth + 1);
  const line = (what: string, key = step, figures = true) => ({ text: `${indent}… ${step}: ${what}`, key: `${depth}/${key}`, figures });
  // Its worker gone (stopped, killed), the last heartbeat's figures would read as a step still under way.
  const unclaimedMs = wait?.scheduled && wait.scheduledSeenAtMs !== undefined ? nowMs - wait.scheduledSeenAtMs : 0;
  if (wait && unclaimedMs >= NO_WORKER_AFTER_MS) {
    const what = wait.attempt > 1 ? `attempt ${wait.attempt}` : 'it';
    const last = wait.lastFailure ? ` (last: ${wait.lastFailure})` : '';
    return line(
      `no worker has taken ${what} for ${formatElapsed(unclaimedMs)}${last}: is \`gpures worker\` running for this node?`,
      `${step}/${wait.attempt}/no-worker`,
    );
  }
  const d = (wait?.details ?? {}) as Partial<DrainBeat & HealthBeat & VramBeat>;
  const started = num(d.startedAtEpochMs);
  const elapsedMs = started !== undefined ? waitElapsedMs({ startedAtEpochMs: started, atEpochMs: d.atEpochMs }, nowMs, wait) : 0;
  if (wait?.activity === 'drainServe' && started !== undefined && num(d.routerInFlight) !== undefined) {
    const vllm = num(d.vllmRunning);
    const inFlight = `${d.routerInFlight} in flight at the router${vllm !== undefined ? `, ${vllm} running in the serve` : ''}`;
    return line(`${inFlight}, ${ofBound(elapsedMs, started, num(d.deadlineEpochMs))}`, `${step}/${d.routerInFlight}/${vllm ?? '-'}`);
  }
  if (wait?.activity === 'waitHealthy' && started !== undefined && num(d.probes) !== undefined) {
    const last = typeof d.last === 'string' ? `, last: ${d.last}` : '';
    return line(`probe ${d.probes}${last}, ${ofBound(elapsedMs, started, num(d.deadlineEpochMs), num(d.timeoutS))}`);
  }
  if (wait?.activity === 'confirmVramReleased' && started !== undefined && num(d.expectedMib) !== undefined) {
    // By its own processes, what they still hold is the figure to watch; by the whole GPU, how much came back.
    const own = d.reading?.by === 'own-processes' ? num(d.reading.heldNowMib) : undefined;
    const figures = own !== undefined ? `its own processes hold ${own} MiB` : `${Math.max(0, num(d.releasedMib) ?? 0)} of ${d.expectedMib} MiB back`;
    return line(`${figures}, ${ofBound(elapsedMs, started, num(d.deadlineEpochMs))}`);
  }
  const since = r.underway ? Date.parse(r.underway.since) : (wait?.lastStartedAtMs ?? NaN);
  const retry = wait && wait.attempt > 1 ? `attempt ${wait.attempt}${wait.lastFailure ? ` (last: ${wait.lastFailure})` : ''}, ` : '';
  const sinceMs = Number.isNaN(since) ? undefined : nowMs - since;
  return {
    ...line(`${retry}${sinceMs === undefined ? 'under way' : formatElapsed(sinceMs)}`, `${step}/${wait?.attempt ?? 0}`, Boolean(retry)),
    ...(sinceMs !== undefined ? { sinceMs } : {}),
  };
}
