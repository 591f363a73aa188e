// A bring-down that takes over an acquisition's hold readmits the victims it left running, racing
// an eviction of one of them decided after the take. The acquisition was terminated while it drained
// vision (its tier quiesced, vision still up); `serves down ondemand` takes its hold over, vision
// runs again in the ledger, and its tier is to go back into rotation. Before that readmit lands (the
// worker's call to the router held), `serves up od2 --evict` takes vision as its victim and quiesces
// its tier to drain and stop it. The readmit must not lift that quiesce. A `gpures worker` process,
// fake-vLLM containers, the reference router, operations from other processes; the box is sampled:
// the router's tier state, which requests vision answered, its container, while the eviction drains.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { LedgerClient } from '../src/adapters/ledger/ledger-client';
import { progressQuery, taskQueueFor, workflowIds } from '../src/shared/messages';
import { gpures, show } from './support/cli';
import { startProcessBox } from './support/process-box';
import type { ProcessBox } from './support/process-box';
import { StallingProxy } from './support/stalling-proxy';
import { GPU, SERVES, visionProbes } from './support/vision-probes';
import { waitUntil } from './support/wait';

describe("a take-over's readmit of its victims, racing an eviction of one of them", () => {
  let box: ProcessBox;
  // Holds the worker's guarded readmits of vision's tier.
  const proxy = new StallingProxy((method, url) => method === 'POST' && url.startsWith('/admin/tiers/vision-local/readmit'));

  before(async () => {
    box = await startProcessBox('vreadmit', GPU, SERVES, { workerRouterUrl: (url) => proxy.start(url) });
    // The router starts with every tier active; a first `serves down` leaves vision's quiesced, as gpures keeps it.
    const down = await gpures(['serves', 'down', 'vision', '--manifest', box.manifestPath], box.env);
    assert.equal(down.code, 0, show(down));
  });
  after(async () => {
    await box?.close();
    await proxy.close();
  });

  const { tier, routed, running, untilVisionStops } = visionProbes(() => box);

  test("an eviction that quiesced the victim's tier after the take keeps it quiesced: the take-over's readmit does not lift it", async () => {
    const { manifestPath: manifest, env, temporal, node } = box;
    const up = await gpures(['serves', 'up', 'b', 'vision', '--manifest', manifest], env);
    assert.equal(up.code, 0, show(up));
    assert.equal((await routed()).status, 200);

    // An acquisition of ondemand drains vision (a request in flight), and is lost for good.
    const slow = routed(3000);
    await waitUntil('a vision request in flight', async () => (await tier()).inFlight === 1, 10_000, 20);
    const acquire = await temporal.client.workflow.start('acquireWorkflow', {
      workflowId: workflowIds.acquire(node, 'ondemand'),
      taskQueue: taskQueueFor(node),
      args: [{ serve: 'ondemand', evict: true }],
    });
    await waitUntil('the acquisition draining vision', async () => (await acquire.query(progressQuery)).some((s) => s.step === 'quiesce vision'), 15_000);
    await acquire.terminate('test: a worker lost for good');
    assert.equal((await tier()).state, 'quiesced');

    // serves down ondemand takes its hold over; its readmit of vision-local is held on the way to the router.
    proxy.stall();
    const down = gpures(['serves', 'down', 'ondemand', '--manifest', manifest], env, 120_000);
    await waitUntil("the take-over's readmit of vision-local", () => Promise.resolve(proxy.held > 0), 60_000, 20);
    // A request straight to vision (not through the router) keeps the coming eviction's drain waiting.
    const direct = fetch(`${(await tier()).backend}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'qwen3-vl-4b-instruct', messages: [{ role: 'user', content: 'x' }], sim_delay_ms: 10_000 }),
    }).then((r) => r.status);
    const evicting = gpures(['serves', 'up', 'od2', '--evict', '--manifest', manifest], env, 120_000);
    const od2 = temporal.client.workflow.getHandle(workflowIds.acquire(node, 'od2'));
    await waitUntil(
      "od2's eviction quiescing vision",
      async () => (await od2.query(progressQuery).catch(() => [])).some((s) => s.step === 'quiesce vision'),
      30_000,
      50,
    );
    const quiescedAt = Date.now();

    // The readmit reaches the router now. Until vision is stopped, the box is sampled every 200 ms:
    // the tier's state, and a request through the router.
    proxy.resume();
    const samples = await untilVisionStops();
    const downRun = await down;
    const evicted = await evicting;
    const afterEviction = await tier();
    const active = samples.filter((x) => x.state === 'active').length;
    const answered = samples.filter((x) => x.byVision).length;
    console.log(
      `  from od2's quiesce to vision's stop (${Date.now() - quiescedAt} ms after it), ${samples.length} samples: vision-local active in ${active}; ` +
        `requests [${samples.map((x) => x.status).join(', ')}]: ${answered} answered by vision`,
    );
    console.log(
      `  ${downRun.stderr
        .split('\n')
        .filter((l) => /still runs/.test(l))
        .join('\n  ')}`,
    );
    console.log(
      `  serves up od2 --evict exit ${evicted.code}: ${evicted.stderr
        .split('\n')
        .filter((l) => l.startsWith('serves up'))
        .join(' ')}; ` + `vision running: ${await running('vision')}, od2 running: ${await running('od2')}; vision-local ${afterEviction.state}`,
    );
    assert.equal(downRun.code, 0, show(downRun));
    assert.equal(evicted.code, 0, show(evicted));
    assert.equal((await slow).status, 200);
    assert.equal(await direct, 200);
    assert.ok(samples.length >= 5, 'vision was sampled while it drained');
    assert.equal(active, 0, "the take-over's readmit lifted the eviction's quiesce while it drains vision");
    assert.equal(answered, 0, 'requests reached vision after the eviction quiesced its tier');
    assert.match(downRun.stderr, /^ {2}take: vision still runs; tier vision-local was quiesced again since the take .*: left quiesced {2}\[/m, show(downRun));
    assert.equal(await running('vision'), false);
    assert.equal(afterEviction.state, 'quiesced', 'vision is evicted: its tier stays quiesced');
    const l = await new LedgerClient(temporal.client).snapshot(node, box.manifest.gpus[0]!);
    assert.deepEqual(
      l.reservations.map((r) => `${r.serve} ${r.phase}`),
      ['b running', 'vision evicted', 'od2 running'],
    );
    const all = await gpures(['serves', 'down', 'od2', 'b', 'vision', '--manifest', manifest], env, 120_000);
    assert.equal(all.code, 0, show(all));
  });
});
