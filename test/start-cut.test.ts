// What a start step does with the container it created when its second fence is cut short
// (MockActivityEnvironment, no server; the ledger a stand-in that answers as told): the container
// goes, by its id, exactly when the ledger no longer holds the serve for this run admitted or
// running, as the `started` fence judges; kept for the retry to adopt when it does, and when the
// ledger cannot say. The same race with real processes and a real box: test/fence-stop-takeover.test.ts.
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
import { containerName } from '../src/domain/serve';
import type { GpuSpec, ServeSpec } from '../src/domain/types';
import { Failure } from '../src/shared/failures';
import { renderManifest } from './support/box';

const NODE = 'cut-box';
const MANIFEST = renderManifest(NODE, [{ role: 'main', capacity_mib: 24000, reserve_mib: 1000 }], [{ name: 'vision', vram_mib: 12288, class: 'evictable' }]);
// The run MockActivityEnvironment's step belongs to.
const RUN = defaultActivityInfo.workflowExecution ?? { workflowId: 'test', runId: '00000000-0000-0000-0000-000000000000' };
const OURS = holderOf(RUN.workflowId, RUN.runId);
const OTHER = 'serves-down/cut-box/vision/0000aaaa-0000-0000-0000-000000000000';
const CONTAINER_ID = 'c0ffee';

function ledgerWith(reservations: Reservation[], extra: Partial<LedgerState> = {}): LedgerState {
  return { node: NODE, gpuRole: 'main', gpuUuid: 'GPU-00000000-0000-0000-0000-000000000000', capacityMib: 24000, reserveMib: 1000, reservations, ...extra };
}
const vision = (r: Partial<Reservation>): Reservation => ({ serve: 'vision', vramMib: 12288, class: 'evictable', phase: 'admitted', holder: OURS, ...r });

/** How the step's second fence ends, and what the ledger answers when asked after it. */
interface Case {
  /** The second fence: cut by the worker's stop, by the run's own cancel, or refused by the ledger. */
  cut: 'worker stop' | 'run cancel' | 'refused';
  /** What the ledger answers the question after (answerWhileStopping on a stop, else snapshot). */
  answer: LedgerState | Error;
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
    // The container comes up while the step's cancel arrives (the worker's stop, or the run's).
    ensureRunning: () => {
      if (c.cut === 'worker stop') env.cancel('WORKER_SHUTDOWN', new ActivityCancellationDetails({ workerShutdown: true }));
      if (c.cut === 'run cancel') env.cancel('CANCELLED', new ActivityCancellationDetails({ cancelRequested: true }));
      return Promise.resolve({ id: CONTAINER_ID, created: true, gpuPinned: true });
    },
    hasImage: no,
    inspect: no,
    stop: no,
    remove: (name, onlyId) => (removed.push(`${name} ${onlyId ?? '(any)'}`), Promise.resolve('removed' as const)),
    list: () => Promise.resolve([]),
    logsTail: () => Promise.resolve(''),
  };
  const answer = () => (c.answer instanceof Error ? Promise.reject(c.answer) : Promise.resolve(c.answer));
  const ledger = {
    fence: (_node: string, _gpu: GpuSpec, args: { step: string }) => {
      if (args.step === 'start') return Promise.resolve({ ok: true });
      if (c.cut === 'refused')
        return Promise.reject(ApplicationFailure.create({ type: Failure.ReservationLost, message: 'started of vision refused', nonRetryable: true }));
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

const REMOVED = [`${containerName(NODE, 'vision')} ${CONTAINER_ID}`];

describe("a start step's container when its second fence is cut short", () => {
  const goes: [string, LedgerState][] = [
    ["another run's (a `serves down` took it over)", ledgerWith([vision({ phase: 'stopping', holder: OTHER })])],
    ['released: the serve holds no reservation', ledgerWith([])],
    ["this run's, evicted for another serve", ledgerWith([vision({ phase: 'evicted', evictedFor: 'comfyui', evictedBy: OTHER })])],
    ["this run's, asleep for another serve", ledgerWith([vision({ phase: 'sleeping', evictedFor: 'comfyui', evictedBy: OTHER })])],
    ["this run's, being evicted by another run", ledgerWith([vision({ phase: 'evicting', evictedFor: 'comfyui', evictedBy: OTHER })])],
  ];
  for (const [what, state] of goes) {
    test(`the worker stops and the ledger holds it ${what}: the container goes, by its id`, async () => {
      const r = await startCut({ cut: 'worker stop', answer: state });
      assert.deepEqual(r.asked, ['answerWhileStopping'], "a stopping worker asks the node's other worker, not its own poll");
      assert.deepEqual(r.removed, REMOVED);
      assert.ok(r.ended instanceof CancelledFailure, `the step ends with its cancel: ${String(r.ended)}`);
      assert.deepEqual(r.warned, []);
    });
  }

  for (const phase of ['admitted', 'running'] as const) {
    test(`the worker stops and the ledger holds it for this run, ${phase}: kept for the retry to adopt`, async () => {
      const r = await startCut({ cut: 'worker stop', answer: ledgerWith([vision({ phase })]) });
      assert.deepEqual(r.removed, []);
      assert.ok(r.ended instanceof CancelledFailure, String(r.ended));
    });
  }

  const unsure: [string, LedgerState | Error, RegExp][] = [
    ['no other worker answers', new LedgerUnanswered('no other worker polls gpures-cut-box'), /no other worker polls/],
    ['the ledger still reconciles (it adopts the container for its run)', ledgerWith([], { reconciling: true }), /the ledger is reconciling/],
  ];
  for (const [what, answer, why] of unsure) {
    test(`the worker stops and ${what}: kept, and the worker's log says why`, async () => {
      const r = await startCut({ cut: 'worker stop', answer });
      assert.deepEqual(r.removed, []);
      assert.equal(r.warned.length, 1, r.warned.join('\n'));
      assert.match(r.warned[0] ?? '', /^start of vision cut by the worker's stop: gpures-cut-box-vision kept for the retry to adopt \(/);
      assert.match(r.warned[0] ?? '', why);
    });
  }

  test("the run's own cancel: judged by the ledger's snapshot, the same way (another run's: goes; this run's: kept; unread: kept)", async () => {
    const taken = await startCut({ cut: 'run cancel', answer: ledgerWith([vision({ phase: 'stopping', holder: OTHER })]) });
    assert.deepEqual([taken.asked, taken.removed], [['snapshot'], REMOVED]);
    const ours = await startCut({ cut: 'run cancel', answer: ledgerWith([vision({})]) });
    assert.deepEqual(ours.removed, []);
    const unread = await startCut({ cut: 'run cancel', answer: new Error('the ledger could not be read within 10 s') });
    assert.deepEqual(unread.removed, []);
  });

  test('the fence refused (ReservationLost): the container goes without asking again', async () => {
    const r = await startCut({ cut: 'refused', answer: new Error('not asked') });
    assert.deepEqual([r.asked, r.removed], [[], REMOVED]);
    assert.ok(r.ended instanceof ApplicationFailure && r.ended.type === Failure.ReservationLost, String(r.ended));
  });
});
