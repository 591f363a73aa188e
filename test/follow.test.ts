// The follower and the plain display on their own: the status line each wait's heartbeat makes,
// a run whose worker predates the liveProgress query, a child's steps in order beneath its
// parent's with their times, and which status lines a plain log takes. No server: runs are fakes
// answering describe() and queries as Temporal would.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { QueryNotRegisteredError, ServiceError } from '@temporalio/client';
import { GrpcStatus } from '../src/adapters/grpc-status';
import { outcomeOf } from '../src/client/start-operation';
import { defaultPayloadConverter } from '@temporalio/common';
import { followRun, formatStep, keepSeen, NO_WORKER_AFTER_MS, pendingOf, statusOf } from '../src/client/follow';
import type { RunHandle, RunReading, StatusLine, TimedStep } from '../src/client/follow';
import { plainDisplay, PLAIN_STATUS_EVERY_MS, terminalDisplay } from '../src/cli/progress-display';
import type { StepRecord } from '../src/shared/messages';

const T0 = Date.UTC(2026, 11, 1, 12, 0, 0);
const at = (ms: number) => new Date(T0 + ms).toISOString();
const step = (name: string, ms: number, outcome = 'done'): StepRecord => ({ step: name, at: at(ms), outcome });

function reading(over: Partial<RunReading>): RunReading {
  return { steps: [], pending: [], children: [], closed: false, ...over };
}

describe('statusOf: the step under way in words, from the pending activity and its heartbeat', () => {
  test("a drain: the router's and the serve's in-flight counts, elapsed of its timeout; the count is in the key", () => {
    const details = { startedAtEpochMs: T0, polls: 9, first: { router: 3, vllm: 3 }, routerInFlight: 2, vllmRunning: 1, deadlineEpochMs: T0 + 120_000 };
    const r = reading({ underway: { step: 'drain vision', since: at(0) }, pending: [{ activity: 'drainServe', attempt: 1, details }] });
    const s = statusOf(r, T0 + 6200);
    assert.equal(s?.text, '  … drain vision: 2 in flight at the router, 1 running in the serve, 6.2s of 120s');
    assert.equal(s?.figures, true);
    const fewer = statusOf(reading({ ...r, pending: [{ activity: 'drainServe', attempt: 1, details: { ...details, routerInFlight: 1 } }] }), T0 + 6200);
    assert.notEqual(fewer?.key, s?.key);
    assert.equal(statusOf(r, T0 + 9000)?.key, s?.key);
  });

  test('a drain on a worker from before the deadline was heartbeated: elapsed alone; a serve without metrics: the router only', () => {
    const details = { startedAtEpochMs: T0, polls: 2, first: { router: 1, vllm: null }, routerInFlight: 1, vllmRunning: null };
    const s = statusOf(reading({ pending: [{ activity: 'drainServe', attempt: 1, details }] }), T0 + 3000);
    assert.equal(s?.text, '  … drain: 1 in flight at the router, 3.0s');
  });

  test('a health wait: the probe count, the last answer, elapsed of start_timeout_s; nested a level for a child', () => {
    const details = { startedAtEpochMs: T0, probes: 4, last: 'HTTP 404', deadlineEpochMs: T0 + 30_000, timeoutS: 30 };
    const s = statusOf(reading({ underway: { step: 'health', since: at(0) }, pending: [{ activity: 'waitHealthy', attempt: 1, details }] }), T0 + 3000, 1);
    assert.equal(s?.text, '    … health: probe 4, last: HTTP 404, 3.0s of 30s');
  });

  test('a retried identity probe says its attempt; a step with nothing but its time says so, figures false', () => {
    const retried = statusOf(
      reading({ underway: { step: 'identity', since: at(0) }, pending: [{ activity: 'verifyIdentity', attempt: 3, lastFailure: 'connection refused' }] }),
      T0 + 4000,
    );
    assert.equal(retried?.text, '  … identity: attempt 3 (last: connection refused), 4.0s');
    assert.equal(retried?.figures, true);
    const bare = statusOf(reading({ underway: { step: 'start', since: at(0) } }), T0 + 1500);
    assert.deepEqual(bare, { text: '  … start: 1.5s', key: '0/start/0', figures: false, sinceMs: 1500 });
  });

  test("elapsed on the worker's clock: its heartbeat's reading less its start, plus this process's time since it saw that heartbeat", () => {
    // The worker's clock runs an hour ahead of this one: no difference mixes the two.
    const workerT0 = T0 + 3_600_000;
    const details = {
      startedAtEpochMs: workerT0,
      polls: 6,
      routerInFlight: 1,
      vllmRunning: 1,
      deadlineEpochMs: workerT0 + 120_000,
      atEpochMs: workerT0 + 6000,
    };
    const r = reading({ pending: [{ activity: 'drainServe', attempt: 1, details, seenAtMs: T0 + 10_000 }] });
    assert.equal(statusOf(r, T0 + 10_200)?.text, '  … drain: 1 in flight at the router, 1 running in the serve, 6.2s of 120s');
    assert.equal(statusOf(r, T0 + 13_000)?.text, '  … drain: 1 in flight at the router, 1 running in the serve, 9.0s of 120s');
  });

  test('a heartbeat seen later than the last one was (the SDK throttles them) never runs the elapsed back', () => {
    const beat = (atMs: number) => ({ startedAtEpochMs: T0, polls: 1, routerInFlight: 2, vllmRunning: 2, deadlineEpochMs: T0 + 120_000, atEpochMs: T0 + atMs });
    const first = keepSeen([{ activity: 'drainServe', attempt: 1, details: beat(4000) }], [], T0 + 4100);
    assert.equal(statusOf(reading({ pending: first }), T0 + 7500)?.text, '  … drain: 2 in flight at the router, 2 running in the serve, 7.4s of 120s');
    // Read at 6 s by the worker, seen 1.5 s after: carried on from the first (7.4 s), not 6.0 s.
    const second = keepSeen([{ activity: 'drainServe', attempt: 1, details: beat(6000) }], first, T0 + 7500);
    assert.equal(statusOf(reading({ pending: second }), T0 + 7500)?.text, '  … drain: 2 in flight at the router, 2 running in the serve, 7.4s of 120s');
    // The same heartbeat read again keeps when it was first seen.
    assert.deepEqual(keepSeen([{ activity: 'drainServe', attempt: 1, details: beat(6000) }], second, T0 + 9000), second);
  });

  test("its worker gone: an attempt no worker takes for NO_WORKER_AFTER_MS says so, not the dead attempt's probe figures; taken again, the figures", () => {
    const details = { startedAtEpochMs: T0, atEpochMs: T0 + 6000, probes: 2, last: 'HTTP 404', deadlineEpochMs: T0 + 600_000, timeoutS: 600 };
    const dead = { activity: 'waitHealthy', attempt: 2, details, lastFailure: 'activity Heartbeat timeout', scheduled: true };
    const health = (pending: ReturnType<typeof keepSeen>) => reading({ underway: { step: 'health', since: at(0) }, pending });
    // Attempt 1's heartbeat was first seen at +6.5 s; attempt 2 carries it on, and its elapsed goes on, never back to 6.0 s.
    const before = keepSeen([{ activity: 'waitHealthy', attempt: 1, details }], [], T0 + 6500);
    const first = keepSeen([dead], before, T0 + 20_000);
    // Within a retry interval: a running worker takes it any moment, so the wait is told as it was.
    assert.equal(statusOf(health(first), T0 + 20_000)?.text, '  … health: probe 2, last: HTTP 404, 19.5s of 600s');
    const later = keepSeen([dead], first, T0 + 35_000);
    assert.equal(later[0]?.scheduledSeenAtMs, T0 + 20_000, 'first seen scheduled, kept across readings');
    assert.equal(NO_WORKER_AFTER_MS, 15_000);
    const s = statusOf(health(later), T0 + 35_000);
    assert.equal(s?.text, '  … health: no worker has taken attempt 2 for 15.0s (last: activity Heartbeat timeout): is `gpures worker` running for this node?');
    assert.equal(s?.figures, true);
    assert.notEqual(s?.key, statusOf(health(first), T0 + 20_000)?.key, 'a plain log prints it at once');
    // A worker took it: started, the figures again.
    const taken = keepSeen([{ ...dead, scheduled: undefined }], later, T0 + 40_000);
    assert.equal(taken[0]?.scheduledSeenAtMs, undefined);
    assert.match(statusOf(health(taken), T0 + 40_000)?.text ?? '', /^ {2}… health: probe 2, last: HTTP 404, /);
    // Never started at all (the worker was gone before the first attempt): "it".
    const never = keepSeen([{ activity: 'drainServe', attempt: 1, scheduled: true }], [], T0);
    assert.equal(
      statusOf(reading({ pending: never }), T0 + NO_WORKER_AFTER_MS)?.text,
      '  … drain: no worker has taken it for 15.0s: is `gpures worker` running for this node?',
    );
  });

  test("an activity of no step of the operator's (a ledger read) says nothing; nor does a closed run", () => {
    assert.equal(statusOf(reading({ pending: [{ activity: 'ledgerSnapshot', attempt: 1 }] }), T0), undefined);
  });
});

test("pendingOf: an activity's heartbeat details decoded from describe()'s payload, its retry, the children waited for", () => {
  const raw = {
    pendingActivities: [
      {
        activityType: { name: 'drainServe' },
        attempt: 2,
        heartbeatDetails: { payloads: [defaultPayloadConverter.toPayload({ routerInFlight: 2, polls: 5 })] },
        lastFailure: { message: 'activity Heartbeat timeout' },
        // PENDING_ACTIVITY_STATE_SCHEDULED: no worker has this attempt yet.
        state: 1,
      },
    ],
    pendingChildren: [{ workflowId: 'serves-up/n/vision', runId: 'r1', workflowTypeName: 'bringUpWorkflow' }],
  };
  assert.deepEqual(pendingOf(raw), {
    pending: [{ activity: 'drainServe', attempt: 2, details: { routerInFlight: 2, polls: 5 }, lastFailure: 'activity Heartbeat timeout', scheduled: true }],
    children: [{ workflowId: 'serves-up/n/vision', runId: 'r1', workflowType: 'bringUpWorkflow' }],
  });
});

test('formatStep: the step, its outcome, then its times; indented by depth', () => {
  assert.equal(formatStep({ ...step('admit', 400), depth: 0, elapsedMs: 400, tookMs: 400 }), '  admit: done  [+0.4s, took 0.4s]');
  assert.equal(formatStep({ ...step('running', 0), depth: 1, elapsedMs: 125_000, tookMs: 65_500 }), '    running: done  [+2m05s, took 1m05s]');
  assert.equal(formatStep(step('old', 0)), '  old: done');
});

/** Advanced by the parent's describe: what every fake run answers follows it, as one box's state would. */
const clock = { tick: 0 };

/** A run answering as a worker would: `phase(tick)` says what its queries and description find. */
function fakeRun(
  workflowId: string,
  startMs: number,
  phase: (tick: number) => { steps: StepRecord[]; children?: { workflowId: string; runId: string; workflowTypeName: string }[]; status?: string },
  opts: { live: boolean; ticks?: boolean },
): RunHandle {
  const run = {
    workflowId,
    query(def: { name: string } | string) {
      const name = typeof def === 'string' ? def : def.name;
      const { steps } = phase(clock.tick);
      if (name === 'liveProgress') {
        if (!opts.live) return Promise.reject(new QueryNotRegisteredError('Workflow did not register a handler for liveProgress', 3));
        return Promise.resolve({ steps });
      }
      return Promise.resolve(steps);
    },
    describe() {
      if (opts.ticks) clock.tick += 1;
      const now = phase(clock.tick);
      const raw = { pendingActivities: [], pendingChildren: now.children ?? [] };
      return Promise.resolve({ startTime: new Date(startMs), status: { name: now.status ?? 'RUNNING' }, raw });
    },
  };
  return run as unknown as RunHandle;
}

test("followRun: a restore's child followed beneath its parent, in order, timed on the operation's clock; a worker without liveProgress still followed", async () => {
  const child = fakeRun(
    'serves-up/n/vision',
    T0 + 1500,
    (tick) => ({ steps: tick < 2 ? [step('admit', 2000)] : [step('admit', 2000), step('running', 4000)], status: tick < 2 ? 'RUNNING' : 'COMPLETED' }),
    { live: true },
  );
  const childRef = { workflowId: child.workflowId, runId: 'c1', workflowTypeName: 'bringUpWorkflow' };
  // The parent's worker predates the liveProgress query: its steps come from `progress`.
  const parent = fakeRun(
    'serves-down/n/comfyui-sim',
    T0,
    (tick) => (tick < 2 ? { steps: [step('take', 1000)], children: [childRef] } : { steps: [step('take', 1000), step('restore', 5000)] }),
    { live: false, ticks: true },
  );
  const seen: string[] = [];
  const steps: TimedStep[] = [];
  let done!: () => void;
  const closed = new Promise<void>((r) => (done = r));
  const follower = followRun(
    parent,
    {
      onStep: (s) => {
        steps.push(s);
        seen.push(`${s.depth}:${s.step}`);
        if (s.step === 'restore') done();
      },
      onChild: (c, depth) => seen.push(`${depth}:child ${c.workflowId}`),
    },
    { pollMs: 5, describeEveryMs: 0, handleFor: (id) => (id === child.workflowId ? child : parent) },
  );
  await follower.until(closed);
  assert.deepEqual(seen, ['0:take', '1:child serves-up/n/vision', '1:admit', '1:running', '0:restore']);
  assert.deepEqual(
    steps.map((s) => [s.step, s.elapsedMs, s.tookMs]),
    [
      ['take', 1000, 1000],
      ['admit', 2000, 500],
      ['running', 4000, 2000],
      ['restore', 5000, 4000],
    ],
  );
  // The final list from the result reports nothing twice.
  await follower.report([step('take', 1000), step('restore', 5000)]);
  assert.equal(steps.length, 4);
});

test("followRun with topStepsAreEvents (a lease): the run's own steps carry their time since its start and no 'took' (the gap between an extend and a release); a child's steps keep theirs", async () => {
  const child = fakeRun('serves-down/n/comfyui-sim', T0 + 9000, () => ({ steps: [step('take', 9500), step('stop', 11_000)], status: 'COMPLETED' }), {
    live: true,
  });
  const childRef = { workflowId: child.workflowId, runId: 'c1', workflowTypeName: 'bringDownWorkflow' };
  const lease = fakeRun('lease/n/comfyui-sim', T0, () => ({ steps: [step('start', 100), step('extend', 8000), step('release', 9000)], children: [childRef] }), {
    live: true,
  });
  const steps: TimedStep[] = [];
  let done!: () => void;
  const closed = new Promise<void>((r) => (done = r));
  const follower = followRun(
    lease,
    {
      onStep: (s) => {
        steps.push(s);
        if (s.step === 'stop') done();
      },
    },
    { pollMs: 5, describeEveryMs: 0, handleFor: (id) => (id === child.workflowId ? child : lease), topStepsAreEvents: true },
  );
  await follower.until(closed);
  assert.deepEqual(
    steps.map((s) => [s.depth, s.step, s.elapsedMs, s.tookMs]),
    [
      [0, 'start', 100, undefined],
      [0, 'extend', 8000, undefined],
      [0, 'release', 9000, undefined],
      [1, 'take', 9500, 500],
      [1, 'stop', 11_000, 1500],
    ],
  );
  assert.equal(formatStep(steps[1] as TimedStep), '  extend: done  [+8.0s]');
});

describe('plainDisplay: which status lines a log takes', () => {
  const line = (text: string, key: string, figures = true, sinceMs?: number): StatusLine => ({
    text,
    key,
    figures,
    ...(sinceMs !== undefined ? { sinceMs } : {}),
  });

  test('a new key at once, the same key again only after PLAIN_STATUS_EVERY_MS; after a clear, at once', () => {
    let now = 0;
    const out: string[] = [];
    const d = plainDisplay(
      (t) => out.push(t),
      () => now,
    );
    d.status(line('3 in flight', 'drain/3'));
    now = 1000;
    d.status(line('3 in flight, later', 'drain/3'));
    d.status(line('2 in flight', 'drain/2'));
    now = 1000 + PLAIN_STATUS_EVERY_MS;
    d.status(line('2 in flight, still', 'drain/2'));
    d.status(undefined);
    d.status(line('2 in flight, after a step', 'drain/2'));
    d.note('a step');
    assert.deepEqual(out, ['3 in flight\n', '2 in flight\n', '2 in flight, still\n', '2 in flight, after a step\n', 'a step\n']);
  });

  test('a line with only a time is left out until the step has run PLAIN_STATUS_EVERY_MS', () => {
    const out: string[] = [];
    const d = plainDisplay(
      (t) => out.push(t),
      () => 0,
    );
    d.status(line('start: 0.1s', 'start', false, 100));
    d.status(line('start: 5.0s', 'start', false, PLAIN_STATUS_EVERY_MS));
    assert.deepEqual(out, ['start: 5.0s\n']);
  });
});

/** A run whose queries answer only when the test says (a worker killed mid-drain answers none), describing itself each time asked. */
function stalledRun(): { run: RunHandle; answer: (steps: StepRecord[]) => void; describes: () => number; queries: () => number } {
  let describes = 0;
  let queries = 0;
  const waiting: ((v: { steps: StepRecord[] }) => void)[] = [];
  const run = {
    workflowId: 'serves-down/n/vision',
    query: () => {
      queries += 1;
      return new Promise((r) => waiting.push(r));
    },
    describe: () => {
      describes += 1;
      return Promise.resolve({ startTime: new Date(T0), status: { name: 'RUNNING' }, raw: { pendingActivities: [], pendingChildren: [] } });
    },
  };
  return {
    run: run as unknown as RunHandle,
    answer: (steps) => waiting.splice(0).forEach((r) => r({ steps })),
    describes: () => describes,
    queries: () => queries,
  };
}

test('followRun: a poll its worker never answers gives way to the run settling, the final poll is bounded, and an answer arriving after reports nothing', async () => {
  const s = stalledRun();
  const seen: string[] = [];
  let settle!: () => void;
  const done = new Promise<void>((r) => (settle = r));
  const follower = followRun(s.run, { onStep: (x) => seen.push(x.step), onStatus: () => seen.push('status') }, { pollMs: 5, finalPollMs: 20 });
  const until = follower.until(done);
  // The first poll's query hangs; the run settles meanwhile.
  while (s.queries() < 1) await new Promise((r) => setImmediate(r));
  settle();
  // Resolves although no query has ever answered: the loop's and the final poll's.
  await until;
  const after = seen.length;
  s.answer([step('drain vision', 1000)]);
  await new Promise((r) => setImmediate(r));
  assert.equal(seen.length, after, `nothing reported once until() returned: ${seen.join(', ')}`);
  await follower.report([step('drain vision', 1000)]);
  assert.deepEqual(
    seen.filter((x) => x !== 'status'),
    ['drain vision'],
  );
});

test("followRun: the description (the waits' heartbeats) is read at most every describeEveryMs, the steps every poll", async () => {
  let queries = 0;
  let describes = 0;
  const run = {
    workflowId: 'serves-down/n/vision',
    query: () => {
      queries += 1;
      return Promise.resolve({ steps: [] });
    },
    describe: () => {
      describes += 1;
      return Promise.resolve({ startTime: new Date(T0), status: { name: 'RUNNING' }, raw: { pendingActivities: [], pendingChildren: [] } });
    },
  } as unknown as RunHandle;
  let settle!: () => void;
  const done = new Promise<void>((r) => (settle = r));
  const follower = followRun(run, {}, { pollMs: 1, describeEveryMs: 3_600_000 });
  const until = follower.until(done);
  while (queries < 20) await new Promise((r) => setTimeout(r, 1));
  settle();
  await until;
  // The first poll's, then the final poll's (which reads it afresh for the children's last steps).
  assert.equal(describes, 2, `${describes} describes for ${queries} queries`);
});

test('terminalDisplay: log-update is loaded when a status line is first drawn, not for notes alone; its line is drawn once it has', async () => {
  const loaded = () => Object.keys(require.cache).some((k) => k.includes(`${'node_modules'}/log-update/`));
  const out: string[] = [];
  const stream = {
    isTTY: true,
    columns: 80,
    rows: 24,
    write: (t: string) => out.push(t) > 0,
    on: () => stream,
    off: () => stream,
  } as unknown as NodeJS.WriteStream;
  const d = terminalDisplay(stream);
  d.note('a note');
  assert.equal(loaded(), false, 'a command that only notes (validate) does not load it');
  d.status({ text: '  … drain: 2 in flight', key: 'drain/2', figures: true });
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(loaded(), true);
  d.status(undefined);
  assert.equal(out[0], 'a note\n');
  assert.match(out.join(''), /… drain: 2 in flight/);
  // Cleared: log-update's erase sequence, after the line it drew.
  assert.ok(out.slice(1).join('').includes('\u001b[2K'), JSON.stringify(out));
});

describe('outcomeOf: a run awaited across a Temporal that cannot answer for a moment', () => {
  /** An error as the SDK throws it when the server answers with this gRPC code. */
  const grpcError = (code: number) =>
    new ServiceError('Failed to get Workflow execution history', { cause: Object.assign(new Error(`code ${code}`), { code, details: '', metadata: {} }) });
  /** A handle whose result() fails with each error in turn, then answers. */
  const handle = (errors: Error[], answer = 'closed') => {
    let calls = 0;
    return {
      calls: () => calls,
      result: () => {
        calls += 1;
        const err = errors.shift();
        return err ? Promise.reject(err) : Promise.resolve(answer);
      },
    };
  };

  test('UNAVAILABLE and DEADLINE_EXCEEDED are asked again; the outcome is the run’s', async () => {
    const h = handle([grpcError(GrpcStatus.UNAVAILABLE), grpcError(GrpcStatus.DEADLINE_EXCEEDED)]);
    assert.equal(await outcomeOf(h), 'closed');
    assert.equal(h.calls(), 3);
  });

  test('an answer that will not change (NOT_FOUND, a plain error) is thrown at once', async () => {
    for (const err of [grpcError(GrpcStatus.NOT_FOUND), new TypeError('a bug')]) {
      const h = handle([err]);
      await assert.rejects(outcomeOf(h), (e) => e === err);
      assert.equal(h.calls(), 1);
    }
  });

  test('past the outage bound the last error is thrown', async () => {
    const errors = Array.from({ length: 10 }, () => grpcError(GrpcStatus.UNAVAILABLE));
    const h = handle(errors);
    await assert.rejects(outcomeOf(h, 1500), ServiceError);
    assert.ok(h.calls() >= 2 && h.calls() <= 3, `${h.calls()} calls within 1.5 s, one a second`);
  });
});
