// The workflow threads of a gpures worker record stack traces with the lazy hook
// (src/worker/lazy-stack-traces.ts) and answer the stack-trace queries as the SDK's own hook does:
// the same workflow on two workers of one bundle, one created as gpures creates its worker's
// threads and one as the SDK does, asked `__stack_trace` and `__enhanced_stack_trace` at the same
// points. If an SDK upgrade moves what the hook reaches for, the thread's report says so and this fails.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { bundleWorkflowCode, Worker } from '@temporalio/worker';
import type { WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { testTemporal } from './support/temporal';
import type { TestTemporal } from './support/temporal';
import { withLazyStackTraces } from '../src/worker/workflow-threads';
import { withLeanSourceMap } from '../src/worker/workflow-code';
import type { ThreadReport } from '../src/worker/workflow-threads';
import { moreWaits } from './support/stack-workflows';

interface Answers {
  stack: string;
  enhanced: unknown;
}

describe('lazy stack traces in the workflow threads', () => {
  let t: TestTemporal;
  let bundle: WorkflowBundleWithSourceMap;
  const reports: ThreadReport[] = [];
  const answers: Record<'lazy' | 'sdk', { first: Answers; later: Answers }> = {} as never;
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- the module object the SDK reads Worker from
  const threads = require('node:worker_threads') as { Worker: unknown };
  const threadClass = threads.Worker;
  let classAfter: unknown;

  before(async () => {
    t = await testTemporal();
    // The worker's own source map (lines only, no names): frames are named from V8's call sites, as in production.
    bundle = await bundleWorkflowCode({
      workflowsPath: require.resolve('./support/stack-workflows'),
      webpackConfigHook: withLeanSourceMap,
      logger: { log: () => undefined, trace: () => undefined, debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined },
    });
    const make = (taskQueue: string) => Worker.create({ connection: t.nativeConnection, taskQueue, workflowBundle: bundle });
    const lazyQueue = `lazy-stacks-${randomUUID()}`;
    const sdkQueue = `sdk-stacks-${randomUUID()}`;
    const lazy = await withLazyStackTraces(
      () => make(lazyQueue),
      (r) => reports.push(r),
    );
    classAfter = threads.Worker;
    const sdk = await make(sdkQueue);
    const ask = async (taskQueue: string) => {
      const handle = await t.client.workflow.start('stackTraced', { taskQueue, workflowId: `${taskQueue}-run` });
      const read = async (): Promise<Answers> => ({
        stack: await handle.query<string>('__stack_trace'),
        enhanced: await handle.query('__enhanced_stack_trace'),
      });
      const first = await read();
      await handle.signal(moreWaits);
      const later = await read();
      await handle.terminate('stack traces read');
      return { first, later };
    };
    await lazy.runUntil(async () => {
      await sdk.runUntil(async () => {
        answers.lazy = await ask(lazyQueue);
        answers.sdk = await ask(sdkQueue);
      });
    });
  });

  after(async () => {
    await t?.close();
  });

  test("the gpures worker's workflow thread says its hook is the lazy one, once the SDK installed it", () => {
    assert.deepEqual(reports, [{ installed: true }]);
  });

  test("the SDK's Worker class is put back once the worker is created", () => {
    assert.equal(classAfter, threadClass);
  });

  test('the stacks say where the workflow waits (the queries are answered, not empty)', () => {
    // The SDK answers the leaves of its promise graph: an aggregate's members are linked into it.
    for (const fn of ['waitsInTurn', 'stackTraced']) assert.match(answers.sdk.first.stack, new RegExp(`at ${fn} \\(`), fn);
    assert.match(answers.sdk.later.stack, /at laterRace \(/);
    assert.match(answers.sdk.first.stack, /stack-workflows\.ts:\d+:\d+/);
  });

  test("__stack_trace answers as with the SDK's hook, before and after a later activation's waits", () => {
    assert.equal(answers.lazy.first.stack, answers.sdk.first.stack);
    assert.equal(answers.lazy.later.stack, answers.sdk.later.stack);
  });

  test("__enhanced_stack_trace answers as with the SDK's hook: the same stacks, the same structured frames", () => {
    assert.deepEqual(answers.lazy.first.enhanced, answers.sdk.first.enhanced);
    assert.deepEqual(answers.lazy.later.enhanced, answers.sdk.later.enhanced);
  });
});
