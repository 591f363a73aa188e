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
import { DEBUG_MODE_ISOLATE_TIMEOUT_MS, sdkGlobalHandlers, withoutLiveWorkerCosts } from '../src/audit/replay-costs';

const HISTORIES = join(__dirname, '..', '..', 'test', 'histories');

Runtime.install({
  logger: new DefaultLogger('ERROR', () => undefined),
  telemetryOptions: { logging: { filter: { core: 'ERROR', other: 'ERROR' }, forward: {} } },
});

type RunInContext = (this: Script, context: object, options?: { timeout?: number }) => unknown;
const proto = Script.prototype as unknown as { runInContext: RunInContext };

describe('replay without the live worker costs', () => {
  const seen = { calls: 0, withDebugTimeout: 0, timeouts: new Set<number | undefined>() };
  let outcomes: ReplayOutcome[] = [];
  let counting: RunInContext;

  before(async () => {
    // Counts what reaches node:vm, under whatever the replay puts in front of it.
    const underlying = proto.runInContext;
    counting = function (this: Script, context, options) {
      seen.calls++;
      seen.timeouts.add(options?.timeout);
      if (options?.timeout === DEBUG_MODE_ISOLATE_TIMEOUT_MS) seen.withDebugTimeout++;
      return underlying.call(this, context, options);
    };
    proto.runInContext = counting;
    try {
      outcomes = await replayHistoryFiles([join(HISTORIES, 'bring-up.json'), join(HISTORIES, 'ledger.json')], { lanes: 2 });
    } finally {
      proto.runInContext = underlying;
    }
  });

  test('the recordings still replay', () => {
    assert.equal(outcomes.length, 2);
    for (const o of outcomes) assert.ok(o.ok, formatReplayOutcome(o));
  });

  test("the SDK's workflow handlers are where replay-costs.ts looks for them, installed without the stack-trace hook", () => {
    const handlers = sdkGlobalHandlers();
    assert.ok(handlers, '@temporalio/worker/lib/workflow/vm-shared has no globalHandlers of the expected shape');
    assert.equal(handlers.installed, true);
    assert.equal(handlers.promiseHookInstalled, false);
  });

  test('no call into a workflow context carries the debug-mode timeout, so none starts a watchdog', () => {
    assert.ok(seen.calls > 40, `only ${seen.calls} calls into a V8 context were seen`);
    assert.equal(seen.withDebugTimeout, 0, `timeouts seen: ${[...seen.timeouts].join(', ')}`);
  });

  test('node:vm is left as it was after the replay', () => {
    assert.notEqual(proto.runInContext, counting);
    const before = proto.runInContext;
    return withoutLiveWorkerCosts(() => {
      assert.notEqual(proto.runInContext, before);
      return Promise.resolve();
    }).then(() => assert.equal(proto.runInContext, before));
  });

  test('any other timeout still holds while replays run', async () => {
    await withoutLiveWorkerCosts(() => {
      const context = createContext({});
      assert.throws(() => new Script('for (;;) {}').runInContext(context, { timeout: 50 }), { code: 'ERR_SCRIPT_EXECUTION_TIMEOUT' });
      return Promise.resolve();
    });
  });
});
