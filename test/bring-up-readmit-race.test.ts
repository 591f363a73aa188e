// A bring-up's own readmit of its serve's tier, racing an eviction of that serve decided once the
// bring-up has ended. The bring-up quiesced nothing, so it had no mark to send: the router's admin
// API takes longer than the worker waits, the first readmit's attempt times out at the worker, a
// retry readmits, vision runs; `serves up od2 --evict` then quiesces vision's tier to drain and stop
// it, and only then does the first attempt's request reach the router. It must not lift the
// eviction's quiesce (test/readmit-after-cancel-race.test.ts has the same race for the readmits of a
// cancelled operation). A `gpures worker` process, fake-vLLM containers, the reference router, the
// CLI as a process; the first readmit request is held by a proxy; the box is sampled: the router's
// tier state, which requests vision answered, its container.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { progressQuery, workflowIds } from '../src/shared/messages';
import { gpures, show } from './support/cli';
import { lateReadmitBox, visionProbes } from './support/vision-probes';
import { waitUntil } from './support/wait';

describe("a bring-up's readmit of vision's tier, reaching the router after an eviction of vision quiesced it", () => {
  const { box, proxy, holdFirstReadmit } = lateReadmitBox('bureadmit');
  const { tier, untilVisionStops } = visionProbes(box);

  test("serves up vision's late first readmit leaves the quiesce of od2's eviction", async () => {
    const { manifestPath: manifest, env, temporal, node } = box();
    let r = await gpures(['serves', 'up', 'b', 'vision', '--manifest', manifest], env);
    assert.equal(r.code, 0, show(r));
    // Down and quiesced, so the next bring-up has a readmit to make.
    r = await gpures(['serves', 'down', 'vision', '--manifest', manifest], env, 120_000);
    assert.equal(r.code, 0, show(r));
    assert.equal((await tier()).state, 'quiesced');
    holdFirstReadmit();
    r = await gpures(['serves', 'up', 'vision', '--manifest', manifest], env, 120_000);
    assert.equal(r.code, 0, show(r));
    assert.equal(proxy.held, 1, 'the first readmit was held');
    assert.equal((await tier()).state, 'active');
    // A request straight to vision keeps od2's drain waiting while the held readmit lands.
    const direct = fetch(`${(await tier()).backend}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'qwen3-vl-4b-instruct', messages: [{ role: 'user', content: 'x' }], sim_delay_ms: 20_000 }),
    }).then((x) => x.status);
    const evicting = gpures(['serves', 'up', 'od2', '--evict', '--manifest', manifest], env, 120_000);
    const od2 = temporal.client.workflow.getHandle(workflowIds.acquire(node, 'od2'));
    await waitUntil('od2 quiescing vision', async () => (await od2.query(progressQuery).catch(() => [])).some((s) => s.step === 'quiesce vision'), 30_000, 50);
    await waitUntil("od2's quiesce landed", async () => (await tier()).state === 'quiesced', 10_000, 20);
    proxy.resume();
    const samples = await untilVisionStops();
    const evicted = await evicting;
    const active = samples.filter((x) => x.state === 'active').length;
    const answered = samples.filter((x) => x.byVision).length;
    console.log(
      `  bring-up: ${samples.length} samples: vision-local active in ${active}; requests [${samples.map((x) => x.status).join(', ')}]: ` +
        `${answered} answered by vision; od2 exit ${evicted.code}; the request in flight: ${await direct}`,
    );
    assert.equal(evicted.code, 0, show(evicted));
    assert.equal(await direct, 200);
    assert.ok(samples.length >= 5, 'vision was sampled while it drained');
    assert.equal(active, 0, "the bring-up's late readmit lifted the eviction's quiesce while it drained vision");
    assert.equal(answered, 0, 'requests were routed to vision while it was drained and stopped');
  });
});
