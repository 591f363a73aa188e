// A cancel of an acquisition while it drains its victim: does it end the drain at once, leave the
// victim running and its tier readmitted? (Last session's note: "the drain ran 20 s after a cancel,
// stopped vision, then released as cancelled".) A `gpures worker` process, fake-vLLM containers,
// the reference router; vision holds a request through the router, so the drain waits on it; the
// run is cancelled mid-drain and the box sampled every 200 ms until the request completes: vision's
// container, its tier, and when the run ended.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { LedgerClient } from '../src/adapters/ledger/ledger-client';
import { liveProgressQuery, taskQueueFor, workflowIds } from '../src/shared/messages';
import { gpures, show } from './support/cli';
import { startProcessBox } from './support/process-box';
import type { ProcessBox } from './support/process-box';
import { GPU, SERVES, visionProbes } from './support/vision-probes';
import { sleep, waitUntil } from './support/wait';

describe('an acquisition cancelled while it drains its victim', () => {
  let box: ProcessBox;
  before(async () => {
    box = await startProcessBox('cxdrain', GPU, SERVES);
  });
  after(async () => {
    await box?.close();
  });

  const { tier, routed, running } = visionProbes(() => box);
  const reservations = async () =>
    (await new LedgerClient(box.temporal.client).snapshot(box.node, box.manifest.gpus[0]!)).reservations.map((r) => `${r.serve} ${r.phase}`);

  test('the drain ends with the cancel: vision keeps running, its tier is readmitted, its request completes', async () => {
    const { node, temporal, manifestPath, env } = box;
    const up = await gpures(['serves', 'up', 'b', 'vision', '--manifest', manifestPath], env);
    assert.equal(up.code, 0, show(up));
    assert.equal((await routed()).status, 200);
    // Held 15 s at vision: the drain (its timeout 60 s) waits for it.
    const held = routed(15_000);
    await waitUntil('the request held at vision-local', async () => (await tier()).inFlight > 0, 10_000, 20);
    const handle = await temporal.client.workflow.start('acquireWorkflow', {
      workflowId: workflowIds.acquire(node, 'ondemand'),
      taskQueue: taskQueueFor(node),
      args: [{ serve: 'ondemand', evict: true, drainTimeoutS: 60 }],
    });
    await waitUntil(
      'the acquisition draining vision',
      async () => (await handle.query(liveProgressQuery).catch(() => undefined))?.underway?.step === 'drain vision',
      30_000,
      50,
    );
    // Well into the drain: its activity has polled and heartbeated.
    await sleep(2000);
    const cancelledAt = Date.now();
    await handle.cancel();
    let endedAt: number | undefined;
    const ended = handle.result().then(
      () => 'completed',
      (err: Error) => {
        endedAt = Date.now();
        return `${err.message}: ${(err.cause as Error | undefined)?.message ?? ''}`;
      },
    );
    let heldStatus: number | undefined;
    void held.then((r) => (heldStatus = r.status));
    const samples: string[] = [];
    let activeAt: number | undefined;
    for (let t0 = Date.now(); heldStatus === undefined && Date.now() - t0 < 30_000; await sleep(200)) {
      const [t, up] = await Promise.all([tier(), running('vision')]);
      const at = Date.now() - cancelledAt;
      if (t.state === 'active') activeAt ??= at;
      samples.push(`+${at}ms ${t.state}${up ? '' : ' vision-stopped'}${endedAt ? ' run-ended' : ''}`);
    }
    const end = await ended;
    const steps = (await handle.query(liveProgressQuery).catch(() => undefined))?.steps ?? [];
    const stopped = samples.filter((s) => s.includes('vision-stopped')).length;
    console.log(
      `  cancel → run ended in ${endedAt === undefined ? '?' : endedAt - cancelledAt} ms (${end}); vision-local active at +${activeAt ?? '-'} ms; ` +
        `${samples.length} samples, vision stopped in ${stopped}; held request ${heldStatus}; steps: ${steps.map((s) => `${s.step}: ${s.outcome}`).join(' | ')}`,
    );
    assert.equal(stopped, 0, 'vision was stopped after the cancel');
    assert.ok(
      endedAt !== undefined && endedAt - cancelledAt < 10_000,
      `the run ended ${endedAt === undefined ? 'never' : endedAt - cancelledAt} ms after the cancel`,
    );
    assert.ok(activeAt !== undefined && activeAt < 10_000, 'vision-local was readmitted within 10 s of the cancel');
    assert.equal(heldStatus, 200, "vision's in-flight request completed");
    assert.equal(await running('vision'), true);
    assert.deepEqual(await reservations(), ['b running', 'vision running']);
    const down = await gpures(['serves', 'down', 'b', 'vision', '--manifest', manifestPath], env, 120_000);
    assert.equal(down.code, 0, show(down));
  });
});
