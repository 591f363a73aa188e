// What a start step does with its container when one of its fences fails (MockActivityEnvironment,
// no server; the ledger a stand-in that answers as told): the container goes, by its id, exactly
// when the ledger no longer holds the serve for this run admitted or running, as the `started`
// fence judges; kept for the retry to adopt when it does, and when the ledger cannot say. Some
// ledger states here need more than one race to be reached (this run's reservation asleep while
// its start runs); they are the cases a plain holder compare would get wrong. The race itself with
// real processes and a real box: test/fence-stop-takeover.test.ts.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ActivityCancellationDetails, ApplicationFailure, CancelledFailure } from '@temporalio/common';
import type { LogLevel, LogMetadata } from '@temporalio/common';
import { MockActivityEnvironment, defaultActivityInfo } from '@temporalio/testing';
import { createActivities } from '../src/activities';
import type { StartedContainer } from '../src/activities';
import type { ContainerRuntime } from '../src/adapters/containers/port';
import { LedgerUnanswered } from '../src/adapters/ledger/ledger-client';
import type { LedgerPort } from '../src/adapters/ledger/port';
import { holderOf } from '../src/domain/fence';
import type { LedgerState, Reservation } from '../src/domain/ledger';
import { containerName, LABEL } from '../src/domain/serve';
import type { GpuSpec, ServeSpec } from '../src/domain/types';
import { Failure } from '../src/shared/failures';
import { workflowIds } from '../src/shared/messages';

const NODE = 'cut-box';
// Written out rather than test/support/box.ts's renderManifest, which loads Docker and Temporal support.
const MANIFEST = [
  '[node]',
  `name = "${NODE}"`,
  '[[gpus]]',
  'role = "main"',
  'uuid = "GPU-00000000-0000-0000-0000-000000000000"',
  'capacity_mib = 24000',
  'reserve_mib = 1000',
  '[[serves]]',
  'name = "vision"',
  'gpu_role = "main"',
  'class = "evictable"',
  'vram_mib = 12288',
  'image = "gpures/fake-vllm:test"',
  'model = "test/vision"',
  'served_model_name = "vision"',
  'port = 18765',
  'start_timeout_s = 30',
  'stop_timeout_s = 5',
].join('\n');
// The run MockActivityEnvironment's step belongs to.
const RUN = defaultActivityInfo.workflowExecution ?? { workflowId: 'test', runId: '00000000-0000-0000-0000-000000000000' };
const OURS = holderOf(RUN.workflowId, RUN.runId);
/** A `serves down` that took the serve over; the acquisition that evicts it. */
const DOWN = holderOf(workflowIds.bringDown(NODE, 'vision'), '0000aaaa-0000-0000-0000-000000000000');
const ACQUIRER = holderOf(workflowIds.acquire(NODE, 'comfyui'), '0000bbbb-0000-0000-0000-000000000000');
const NAME = containerName(NODE, 'vision');
const CONTAINER_ID = 'c0ffee';

function ledgerWith(reservations: Reservation[], extra: Partial<LedgerState> = {}): LedgerState {
  return { node: NODE, gpuRole: 'main', gpuUuid: 'GPU-00000000-0000-0000-0000-000000000000', capacityMib: 24000, reserveMib: 1000, reservations, ...extra };
}
const vision = (r: Partial<Reservation>): Reservation => ({ serve: 'vision', vramMib: 12288, class: 'evictable', phase: 'admitted', holder: OURS, ...r });

/** How the step's fence ends, and what the ledger answers when asked after it. */
interface Case {
  /**
   * The second fence: cut by the worker's stop, by the run's own cancel, refused by the ledger,
   * or failed otherwise (unanswered); `start refused`: the first fence, before anything is created.
   */
  cut: 'worker stop' | 'run cancel' | 'refused' | 'unanswered' | 'start refused';
  /** What the ledger answers the question after (answerWhileStopping on a stop, else snapshot). */
  answer: LedgerState | Error;
  /** The container under the serve's name: created now (the default), or an earlier attempt's, labelled with its holder. */
  adopted?: { holder: string };
}

/** Runs startServeContainer with the box and ledger of `c`; what it removed, what it logged, how it ended. */
async function startCut(c: Case): Promise<{ removed: string[]; warned: string[]; asked: string[]; ended: unknown }> {
  const removed: string[] = [];
  const warned: string[] = [];
  const asked: string[] = [];
  const log = (level: LogLevel, message: string, _meta?: LogMetadata) => void (level === 'WARN' && warned.push(message));
  const logger = { log, trace: () => undefined, debug: () => undefined, info: () => undefined, warn: (m: string) => log('WARN', m), error: () => undefined };
  const env = new MockActivityEnvironment({}, { logger });
  const no = () => Promise.reject(new Error('not used here'));
  const runtime: ContainerRuntime = {
    // The container comes up (or is found running) while the step's cancel arrives (the worker's stop, or the run's).
    ensureRunning: () => {
      if (c.cut === 'worker stop') env.cancel('WORKER_SHUTDOWN', new ActivityCancellationDetails({ workerShutdown: true }));
      if (c.cut === 'run cancel') env.cancel('CANCELLED', new ActivityCancellationDetails({ cancelRequested: true }));
      return Promise.resolve({ id: CONTAINER_ID, created: !c.adopted, gpuPinned: true });
    },
    hasImage: no,
    inspect: () =>
      Promise.resolve(
        c.adopted && {
          id: CONTAINER_ID,
          name: NAME,
          running: true,
          status: 'running',
          exitCode: 0,
          restartCount: 0,
          labels: { [LABEL.holder]: c.adopted.holder },
        },
      ),
    stop: no,
    remove: (name, onlyId) => (removed.push(`${name} ${onlyId ?? '(any)'}`), Promise.resolve('removed' as const)),
    list: () => Promise.resolve([]),
    logsTail: () => Promise.resolve(''),
  };
  const answer = () => (c.answer instanceof Error ? Promise.reject(c.answer) : Promise.resolve(c.answer));
  const ledger = {
    fence: (_node: string, _gpu: GpuSpec, args: { step: string }) => {
      const refused = () =>
        Promise.reject(ApplicationFailure.create({ type: Failure.ReservationLost, message: `${args.step} of vision refused`, nonRetryable: true }));
      if (args.step === 'start') return c.cut === 'start refused' ? refused() : Promise.resolve({ ok: true });
      if (c.cut === 'refused') return refused();
      if (c.cut === 'unanswered') return Promise.reject(new LedgerUnanswered('the ledger did not answer within 12 s'));
      return Promise.reject(new CancelledFailure(c.cut === 'worker stop' ? 'WORKER_SHUTDOWN' : 'CANCELLED'));
    },
    answerWhileStopping: () => (asked.push('answerWhileStopping'), answer()),
    snapshot: () => (asked.push('snapshot'), answer()),
  } as unknown as LedgerPort;
  const activities = createActivities({
    runtime,
    probe: { health: no, modelIds: no, requestsRunning: () => Promise.resolve(null) },
    manifest: { read: () => Promise.resolve({ text: MANIFEST, file: 'serves.toml' }) },
    ledger,
    operations: { status: no, runningPast: no, cancel: no },
  });
  const serve = { name: 'vision' } as ServeSpec;
  const gpu = { role: 'main', uuid: 'GPU-00000000-0000-0000-0000-000000000000' } as GpuSpec;
  const ended = await env
    .run<[], StartedContainer, () => Promise<StartedContainer>>(() => activities.startServeContainer({ node: NODE, serve, gpu }))
    .then(
      (r) => r,
      (err: unknown) => err,
    );
  return { removed, warned, asked, ended };
}

const REMOVED = [`${NAME} ${CONTAINER_ID}`];
const vanished = ledgerWith([]);
const takenOver = ledgerWith([vision({ phase: 'stopping', holder: DOWN })]);

describe("a start step's container when a fence fails", () => {
  const goes: [string, LedgerState][] = [
    ['the ledger holds the serve for a `serves down` that took it over', takenOver],
    ['the serve holds no reservation (released)', vanished],
    ["this run's reservation is evicted for another serve", ledgerWith([vision({ phase: 'evicted', evictedFor: 'comfyui', evictedBy: ACQUIRER })])],
    ["this run's reservation sleeps for another serve", ledgerWith([vision({ phase: 'sleeping', evictedFor: 'comfyui', evictedBy: ACQUIRER })])],
    ["this run's reservation is being evicted by another run", ledgerWith([vision({ phase: 'evicting', evictedFor: 'comfyui', evictedBy: ACQUIRER })])],
  ];
  for (const [what, state] of goes) {
    test(`the worker stops and ${what}: the container goes, by its id`, async () => {
      const r = await startCut({ cut: 'worker stop', answer: state });
      assert.deepEqual(r.asked, ['answerWhileStopping'], "a stopping worker asks the node's other worker, not its own poll");
      assert.deepEqual(r.removed, REMOVED);
      assert.ok(r.ended instanceof CancelledFailure, `the step ends with its cancel: ${String(r.ended)}`);
      assert.deepEqual(r.warned, []);
    });
  }

  for (const phase of ['admitted', 'running'] as const) {
    test(`the worker stops and the ledger holds the serve for this run, ${phase}: kept for the retry to adopt`, async () => {
      const r = await startCut({ cut: 'worker stop', answer: ledgerWith([vision({ phase })]) });
      assert.deepEqual([r.asked, r.removed, r.warned], [['answerWhileStopping'], [], []]);
      assert.ok(r.ended instanceof CancelledFailure, String(r.ended));
    });
  }

  const unsure: [string, LedgerState | Error, RegExp][] = [
    ['no other worker answers', new LedgerUnanswered(`no other worker polls gpures.${NODE}`), /no other worker polls/],
    ['the ledger still reconciles (it adopts the container for its run)', ledgerWith([], { reconciling: true }), /the ledger is reconciling/],
  ];
  for (const [what, answer, why] of unsure) {
    test(`the worker stops and ${what}: kept, and the worker's log says why`, async () => {
      const r = await startCut({ cut: 'worker stop', answer });
      assert.deepEqual([r.asked, r.removed], [['answerWhileStopping'], []]);
      assert.ok(r.ended instanceof CancelledFailure, String(r.ended));
      assert.equal(r.warned.length, 1, r.warned.join('\n'));
      assert.ok((r.warned[0] ?? '').startsWith(`start of vision cut by the worker's stop: ${NAME} kept for the retry to adopt (`), r.warned[0]);
      assert.match(r.warned[0] ?? '', why);
    });
  }

  test("a container adopted from an earlier attempt goes only when its label names this run (another run's stays)", async () => {
    const ours = await startCut({ cut: 'worker stop', answer: takenOver, adopted: { holder: OURS } });
    assert.deepEqual(ours.removed, REMOVED);
    const theirs = await startCut({ cut: 'worker stop', answer: takenOver, adopted: { holder: DOWN } });
    assert.deepEqual([theirs.asked, theirs.removed], [['answerWhileStopping'], []]);
  });

  const byRunCancel: [string, LedgerState | Error, string[]][] = [
    ['the serve taken over: goes', takenOver, REMOVED],
    ["this run's, admitted: kept", ledgerWith([vision({})]), []],
    ['the ledger unread: kept', new Error('the ledger could not be read within 10 s'), []],
  ];
  for (const [what, answer, removed] of byRunCancel) {
    test(`the run's own cancel, judged by the ledger's snapshot: ${what}`, async () => {
      const r = await startCut({ cut: 'run cancel', answer });
      assert.deepEqual([r.asked, r.removed, r.warned], [['snapshot'], removed, []]);
      assert.ok(r.ended instanceof CancelledFailure, String(r.ended));
    });
  }

  test('the second fence refused (ReservationLost): the container goes without asking again', async () => {
    const r = await startCut({ cut: 'refused', answer: new Error('not asked') });
    assert.deepEqual([r.asked, r.removed], [[], REMOVED]);
    assert.ok(r.ended instanceof ApplicationFailure && r.ended.type === Failure.ReservationLost, String(r.ended));
  });

  test("the first fence refused: an earlier attempt's container goes when its label names this run, before anything is created", async () => {
    const r = await startCut({ cut: 'start refused', answer: new Error('not asked'), adopted: { holder: OURS } });
    assert.deepEqual([r.asked, r.removed], [[], REMOVED]);
    const theirs = await startCut({ cut: 'start refused', answer: new Error('not asked'), adopted: { holder: DOWN } });
    assert.deepEqual(theirs.removed, []);
    assert.ok(r.ended instanceof ApplicationFailure && r.ended.type === Failure.ReservationLost, String(r.ended));
  });

  test('the second fence failed otherwise (unanswered): kept, nothing asked', async () => {
    const r = await startCut({ cut: 'unanswered', answer: new Error('not asked') });
    assert.deepEqual([r.asked, r.removed], [[], []]);
    assert.ok(r.ended instanceof LedgerUnanswered, String(r.ended));
  });
});
