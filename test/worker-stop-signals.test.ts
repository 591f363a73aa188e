// The installed worker says it is up ("worker for node …", what a supervisor or a test waits for)
// only once its stop signals are its own. Said before, a SIGTERM sent on that line could find no
// handler and end the process by the signal (the idle case of worker-stop.test.ts, once in a CI run
// at load: 30 ms, killed by SIGTERM instead of exit 0).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { Worker } from '@temporalio/worker';
import { LocalSteps, STOP_SIGNALS, stopWithin } from '../src/worker/stop';

/** Enough of a Worker for stopWithin: its run ends at once. */
const endedWorker = {
  run: () => Promise.resolve(),
  getState: () => 'STOPPED',
  shutdown: () => undefined,
  getStatus: () => ({ numInFlightNonLocalActivities: 0 }),
  numInFlightActivations$: { subscribe: () => ({ unsubscribe: () => undefined }) },
} as unknown as Worker;

test('the worker announces itself once its stop signals are handled, and leaves no handler after its run', async () => {
  const before = STOP_SIGNALS.map((s) => process.listenerCount(s));
  let atAnnounce: number[] = [];
  await stopWithin(endedWorker, new LocalSteps(), () => {
    atAnnounce = STOP_SIGNALS.map((s) => process.listenerCount(s));
  });
  assert.deepEqual(
    atAnnounce,
    before.map((n) => n + 1),
    `listeners of ${STOP_SIGNALS.join(', ')} when it said it was up`,
  );
  assert.deepEqual(
    STOP_SIGNALS.map((s) => process.listenerCount(s)),
    before,
  );
});
