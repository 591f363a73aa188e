// The two readmits an operation makes when it is cancelled with a victim's tier quiesced, racing an
// eviction of that victim decided once the operation has ended: an acquisition's compensation
// readmit of its victim's tier, and a `serves down` cancelled before its stop. The router's admin
// API can take longer than the worker waits (its mutex behind another tier's probes, a slow link):
// the first readmit's attempt times out at the worker, a retry readmits, the operation ends and the
// ledger has vision running again; `serves up od2 --evict` then takes vision and quiesces its tier
// to drain and stop it, and only then does the first attempt's request reach the router. That late
// request must not lift the eviction's quiesce. A `gpures worker` process, fake-vLLM containers, the
// reference router, the CLI as a process; the first readmit request is held by a proxy (the rest go
// through); the box is sampled: the router's tier state, which requests vision answered, its container.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { LedgerClient } from '../src/adapters/ledger/ledger-client';
import { progressQuery, taskQueueFor, workflowIds } from '../src/shared/messages';
import { gpures, show } from './support/cli';
import { lateReadmitBox, visionProbes } from './support/vision-probes';
import { waitUntil } from './support/wait';

describe("a cancelled operation's readmit of vision's tier, reaching the router after an eviction of vision quiesced it", () => {
  const { box, proxy, holdFirstReadmit } = lateReadmitBox('cxreadmit');
  const { tier, routed, running, untilVisionStops } = visionProbes(box);
  const reservations = async () =>
    (await new LedgerClient(box().temporal.client).snapshot(box().node, box().manifest.gpus[0]!)).reservations.map((r) => `${r.serve} ${r.phase}`);

  /** A request straight to vision (not through the router): a drain of vision waits for it. */
  const direct = async (delayMs: number) => {
    const res = await fetch(`${(await tier()).backend}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'qwen3-vl-4b-instruct', messages: [{ role: 'user', content: 'x' }], sim_delay_ms: delayMs }),
    });
    return res.status;
  };

  /** b and vision up, vision's tier active and answering. */
  async function visionServing(): Promise<void> {
    const up = await gpures(['serves', 'up', 'b', 'vision', '--manifest', box().manifestPath], box().env);
    assert.equal(up.code, 0, show(up));
    assert.equal((await routed()).status, 200);
  }

  /**
   * A request through the router, in flight at vision-local before the run starts: the run's drain
   * of vision waits for it whatever the run's pace on a loaded host (sent straight to vision once
   * the run was under way, it sometimes arrived after the drain had found vision idle).
   */
  async function holdingTheDrain(): Promise<{ held: Promise<{ status: number; byVision: boolean }> }> {
    const held = routed(20_000);
    await waitUntil('the request held at vision-local', async () => (await tier()).inFlight > 0, 10_000, 20);
    return { held };
  }

  /**
   * Holds the first readmit the run `workflowId` makes, its drain held by `drainHeld`; cancels it
   * once `step` is done if asked (else it is to fail on its own); resolves once it has ended.
   */
  async function endAt(workflowId: string, step: string, cancel: boolean, drainHeld: Promise<{ status: number }>): Promise<string> {
    const handle = box().temporal.client.workflow.getHandle(workflowId);
    await waitUntil(`${workflowId} at ${step}`, async () => (await handle.query(progressQuery).catch(() => [])).some((s) => s.step === step), 30_000, 20);
    holdFirstReadmit();
    if (cancel) await handle.cancel();
    await waitUntil('the first readmit of vision-local held on its way to the router', () => Promise.resolve(proxy.held > 0), 60_000, 20);
    const ended = await handle.result().then(
      () => assert.fail(`${workflowId} completed`),
      (err: Error) => `${err.message}: ${(err.cause as Error | undefined)?.message ?? ''}`,
    );
    assert.equal((await drainHeld).status, 200);
    return ended;
  }

  /**
   * With vision running again, `serves up od2 --evict` quiesces its tier and drains it (a request
   * straight to vision keeps the drain waiting); the held readmit then reaches the router, and the
   * box is sampled every 200 ms until vision is stopped.
   */
  async function evictWhileTheLateReadmitLands(label: string) {
    const { manifestPath: manifest, env, temporal, node } = box();
    // Long enough to outlast the CLI's start on a loaded host: at 8 s the drain sometimes found
    // vision idle already, and stopped it before anything was sampled.
    const drainHeld = direct(20_000);
    const evicting = gpures(['serves', 'up', 'od2', '--evict', '--manifest', manifest], env, 120_000);
    const od2 = temporal.client.workflow.getHandle(workflowIds.acquire(node, 'od2'));
    await waitUntil(
      "od2's eviction quiescing vision",
      async () => (await od2.query(progressQuery).catch(() => [])).some((s) => s.step === 'quiesce vision'),
      30_000,
      50,
    );
    await waitUntil("od2's quiesce landed", async () => (await tier()).state === 'quiesced', 10_000, 20);
    proxy.resume();
    const samples = await untilVisionStops();
    const evicted = await evicting;
    const afterEviction = await tier();
    const active = samples.filter((x) => x.state === 'active').length;
    const answered = samples.filter((x) => x.byVision).length;
    console.log(
      `  ${label}: from the late readmit's release to vision's stop, ${samples.length} samples: vision-local active in ${active}; ` +
        `requests [${samples.map((x) => x.status).join(', ')}]: ${answered} answered by vision; ` +
        `serves up od2 --evict exit ${evicted.code}; vision running: ${await running('vision')}, od2 running: ${await running('od2')}; vision-local ${afterEviction.state}`,
    );
    assert.equal(evicted.code, 0, show(evicted));
    assert.equal(await drainHeld, 200);
    assert.ok(samples.length >= 5, 'vision was sampled while it drained');
    assert.equal(active, 0, "the late readmit lifted the eviction's quiesce while it drains vision");
    assert.equal(answered, 0, 'requests reached vision after the eviction quiesced its tier');
    assert.equal(await running('vision'), false);
    assert.equal(afterEviction.state, 'quiesced', 'vision is evicted: its tier stays quiesced');
    assert.deepEqual(await reservations(), ['b running', 'vision evicted', 'od2 running']);
    const all = await gpures(['serves', 'down', 'od2', 'b', 'vision', '--manifest', manifest], env, 120_000);
    assert.equal(all.code, 0, show(all));
  }

  test("an acquisition failed at its drain: its compensation's late readmit leaves the eviction's quiesce", async () => {
    await visionServing();
    const { node, temporal } = box();
    const { held: drainHeld } = await holdingTheDrain();
    await temporal.client.workflow.start('acquireWorkflow', {
      workflowId: workflowIds.acquire(node, 'ondemand'),
      taskQueue: taskQueueFor(node),
      args: [{ serve: 'ondemand', evict: true, drainTimeoutS: 3 }],
    });
    const failed = await endAt(workflowIds.acquire(node, 'ondemand'), 'quiesce vision', false, drainHeld);
    assert.match(failed, /failed at drain vision/);
    assert.match(failed, /; compensated: [^;]*readmit tier vision-local/, 'the retry readmitted: the failure says so');
    // The retry readmitted vision; the compensation gave it back to running.
    assert.equal((await tier()).state, 'active');
    assert.deepEqual(await reservations(), ['b running', 'vision running']);
    await evictWhileTheLateReadmitLands('acquisition');
  });

  test("an acquisition failed at its drain with its victim's tier quiesced again meanwhile: the failure says the tier was left quiesced, not readmitted", async () => {
    await visionServing();
    const { node, temporal, manifestPath, env } = box();
    const workflowId = workflowIds.acquire(node, 'ondemand');
    const { held: drainHeld } = await holdingTheDrain();
    const handle = await temporal.client.workflow.start('acquireWorkflow', {
      workflowId,
      taskQueue: taskQueueFor(node),
      args: [{ serve: 'ondemand', evict: true, drainTimeoutS: 3 }],
    });
    await waitUntil("the acquisition's quiesce of vision-local", async () => (await tier()).state === 'quiesced', 30_000, 20);
    // Another quiesce of the tier while the acquisition drains vision (an operator's, as an eviction's or a bring-down's would be).
    const again = await fetch(`${box().router.url}/admin/tiers/vision-local/quiesce`, {
      method: 'POST',
      headers: { authorization: `Bearer ${box().routerToken}` },
    });
    assert.equal(again.status, 200);
    const failed = await handle.result().then(
      () => assert.fail(`${workflowId} completed`),
      (err: Error) => `${err.message}: ${(err.cause as Error | undefined)?.message ?? ''}`,
    );
    try {
      assert.deepEqual(await drainHeld, { status: 200, byVision: true });
      const after = await tier();
      console.log(`  failure: ${failed}; vision-local ${after.state}; ledger [${(await reservations()).join(', ')}]`);
      assert.match(failed, /failed at drain vision/);
      assert.doesNotMatch(failed, /; compensated: [^;]*readmit tier vision-local/, 'the compensation did not readmit: the failure must not say it did');
      assert.match(
        failed,
        /; not undone: readmit tier vision-local \(tier vision-local was quiesced again since this run's quiesce \(.*\), or the router restarted without its state file: left quiesced\)/,
      );
      assert.equal(after.state, 'quiesced', 'the later quiesce is left in force');
      assert.deepEqual(await reservations(), ['b running', 'vision running']);
    } finally {
      // The operator's quiesce lifted by the operator (unguarded), and the box put back for the next case.
      const readmit = await fetch(`${box().router.url}/admin/tiers/vision-local/readmit`, {
        method: 'POST',
        headers: { authorization: `Bearer ${box().routerToken}` },
      });
      assert.equal(readmit.status, 200);
      const down = await gpures(['serves', 'down', 'b', 'vision', '--manifest', manifestPath], env, 120_000);
      assert.equal(down.code, 0, show(down));
    }
  });

  test("a serves down cancelled mid-drain: its late readmit leaves the eviction's quiesce", async () => {
    await visionServing();
    const { node, temporal } = box();
    const { held: drainHeld } = await holdingTheDrain();
    await temporal.client.workflow.start('bringDownWorkflow', {
      workflowId: workflowIds.bringDown(node, 'vision'),
      taskQueue: taskQueueFor(node),
      args: [{ serve: 'vision' }],
    });
    await endAt(workflowIds.bringDown(node, 'vision'), 'quiesce', true, drainHeld);
    assert.equal((await tier()).state, 'active');
    assert.deepEqual(await reservations(), ['b running', 'vision running']);
    await evictWhileTheLateReadmitLands('bring-down');
  });
});
