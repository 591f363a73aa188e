// The replayer runs without the live worker's stack-trace promise hook and without a watchdog
// thread per call into a workflow's V8 context (src/audit/replay-costs.ts), and still replays:
// checked on a recorded history, with node:vm's calls counted as they reach it. If an SDK upgrade
// moves what replay-costs.ts reaches for, this fails instead of the replay silently slowing down.
import { before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { createContext, Script } from 'node:vm';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { formatReplayOutcome, replayHistoryFiles } from '../src/audit/replay';
import type { ReplayOutcome } from '../src/audit/replay';
import { DEBUG_MODE_ISOLATE_TIMEOUT_MS, withoutLiveWorkerCosts } from '../src/audit/replay-costs';
import { sdkWorkflowHandlers } from '../src/worker/sdk-workflow-handlers';

const HISTORIES = join(__dirname, '..', '..', 'test', 'histories');

Runtime.install({
  logger: new DefaultLogger('ERROR', () => undefined),
  telemetryOptions: { logging: { filter: { core: 'ERROR', other: 'ERROR' }, forward: {} } },
});

type RunInContext = (this: Script, context: object, options?: { timeout?: number }) => unknown;
const proto = Script.prototype as unknown as { runInContext: RunInContext };

describe('replay without the live worker costs', () => {
  const seen = { calls: 0, withDebugTimeout: 0, timeouts: new Set<number | undefined>(), hookDuringReplay: false, handlersMarked: true };
  let outcomes: ReplayOutcome[] = [];
  let counting: RunInContext;
  let restoredAfterReplay = false;

  before(async () => {
    // Counts what reaches node:vm, under whatever the replay puts in front of it.
    const underlying = proto.runInContext;
    counting = function (this: Script, context, options) {
      seen.calls++;
      seen.timeouts.add(options?.timeout);
      const handlers = sdkWorkflowHandlers();
      seen.hookDuringReplay ||= handlers?.promiseHookInstalled ?? true;
      seen.handlersMarked &&= handlers?.installed ?? false;
      if (options?.timeout === DEBUG_MODE_ISOLATE_TIMEOUT_MS) seen.withDebugTimeout++;
      return underlying.call(this, context, options);
    };
    proto.runInContext = counting;
    try {
      outcomes = await replayHistoryFiles([join(HISTORIES, 'bring-up.json'), join(HISTORIES, 'ledger.json')], { lanes: 2 });
      restoredAfterReplay = proto.runInContext === counting;
    } finally {
      proto.runInContext = underlying;
    }
  });

  test('the recordings still replay', () => {
    assert.equal(outcomes.length, 2);
    for (const o of outcomes) assert.ok(o.ok, formatReplayOutcome(o));
  });

  test("the SDK's workflow handlers are where replay-costs.ts looks for them: installed without the stack-trace hook while replays ran, unmarked after", () => {
    const handlers = sdkWorkflowHandlers();
    assert.ok(handlers, '@temporalio/worker/lib/workflow/vm-shared has no globalHandlers of the expected shape');
    assert.equal(seen.handlersMarked, true, 'a call into a workflow context ran with the handlers not installed');
    assert.equal(seen.hookDuringReplay, false, 'the stack-trace promise hook was installed during the replay');
    // So a debug-mode worker started later in this process installs them with the hook, as the SDK does.
    assert.equal(handlers.installed, false);
    assert.equal(handlers.promiseHookInstalled, false);
  });

  test('no call into a workflow context carries the debug-mode timeout, so none starts a watchdog', () => {
    assert.ok(seen.calls > 40, `only ${seen.calls} calls into a V8 context were seen`);
    assert.equal(seen.withDebugTimeout, 0, `timeouts seen: ${[...seen.timeouts].join(', ')}`);
  });

  test('node:vm is left as it was after the replay', () => {
    assert.equal(restoredAfterReplay, true, 'the replay left its wrapper on Script.prototype.runInContext');
  });

  test('overlapping replays: node:vm is put back after the last one ends, also when it fails', async () => {
    const before = proto.runInContext;
    let releaseFirst: () => void = () => undefined;
    const first = withoutLiveWorkerCosts(() => new Promise<void>((r) => (releaseFirst = r)));
    const patched = proto.runInContext;
    assert.notEqual(patched, before);
    await assert.rejects(
      withoutLiveWorkerCosts(() => Promise.reject(new Error('lane failed'))),
      /lane failed/,
    );
    assert.equal(proto.runInContext, patched, 'the failed replay ended, the first still runs');
    releaseFirst();
    await first;
    assert.equal(proto.runInContext, before);
  });

  test('any other timeout still holds while replays run', async () => {
    await withoutLiveWorkerCosts(() => {
      const context = createContext({});
      assert.throws(() => new Script('for (;;) {}').runInContext(context, { timeout: 50 }), { code: 'ERR_SCRIPT_EXECUTION_TIMEOUT' });
      return Promise.resolve();
    });
  });
});
