// The router's own guarded readmit of an on-demand tier, after the acquisition it started has
// completed, racing an eviction of that serve that began meanwhile. The acquisition readmits the
// tier itself, which releases the held request, while the router's status GET is held (the
// acquisition API or Temporal stalled for a few seconds); then the operator's `serves up x --evict`
// takes the serve as its victim and quiesces the tier to drain and stop it. When the GET is
// answered ("completed"), the tier must stay quiesced: the eviction relies on it. Sim serves
// (processes), a real dev server and worker, the acquisition API; the box is sampled: the router's
// tier state, which requests the victim answered, its container, while the eviction runs.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { serveAcquire } from '../src/client/operations';
import { workflowIds } from '../src/shared/messages';
import type { TestServe } from './support/box';
import { startOnDemandBox } from './support/on-demand-box';
import { StallingProxy } from './support/stalling-proxy';
import type { OnDemandBox } from './support/on-demand-box';
import { waitUntil } from './support/wait';

// s and x do not fit together: x --evict takes s.
const GPU = { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 };
const SERVES: TestServe[] = [
  { name: 's', vram_mib: 16000, class: 'evictable', router_tier: 's-local', min_residency_s: 0 },
  { name: 'x', vram_mib: 16000, class: 'on-demand', router_tier: 'x-local' },
  // Its acquisition fails at once (the image is not on the box).
  { name: 'u', vram_mib: 256, class: 'on-demand', router_tier: 'u-local', image: 'gpures/not-built:none' },
];

describe("the router's readmit after its acquisition, racing an eviction of the serve", () => {
  let box: OnDemandBox;
  // Holds the router's status GETs of its acquisitions.
  const proxy = new StallingProxy((method, url) => method === 'GET' && url.startsWith('/v1/acquisitions/'));

  before(async () => {
    box = await startOnDemandBox({
      prefix: 'router-rq',
      gpu: GPU,
      serves: SERVES,
      retryAfterS: 1,
      onDemand: [
        { tier: 's-local', serve: 's', wait_timeout_s: 120 },
        { tier: 'u-local', serve: 'u' },
      ],
      routerApiUrl: (apiUrl) => proxy.start(apiUrl),
    });
  });
  after(async () => {
    await box?.close();
    await proxy.close();
  });

  const chat = (delayMs = 0) => box.chat('s', delayMs ? { sim_delay_ms: delayMs } : {});
  const tierS = async () => {
    const t = (await box.tiers()).find((x) => x.tier === 's-local');
    assert.ok(t);
    return t;
  };
  const running = async (serve: string) => (await box.runtime.list({})).some((c) => c.name.endsWith(`-${serve}`) && c.running);

  test("a failed acquisition gives back only the router's own quiesce: an operator's drain made meanwhile stays", async () => {
    proxy.stall();
    const held = box.chat('u');
    const handle = box.temporal.client.workflow.getHandle(workflowIds.acquire(box.node, 'u'));
    await waitUntil(
      'the router acquiring u',
      async () => (await box.tiers()).some((t) => t.tier === 'u-local' && t.acquisition?.workflowId != null),
      30_000,
      50,
    );
    await handle.result().catch(() => undefined);
    // The operator drains u-local (POST /admin/tiers/u-local/quiesce) before the router hears of the failure.
    const drained = await box.admin.quiesce('u-local');
    proxy.resume();
    const res = await held;
    await waitUntil("the router's acquisition over", async () => (await box.tiers()).some((t) => t.tier === 'u-local' && t.acquisition === null), 30_000, 20);
    const state = (await box.tiers()).find((t) => t.tier === 'u-local')?.state;
    console.log(`  u's acquisition failed; operator's quiesce answered ${drained.state}; held request ${res.status}; u-local now ${state}`);
    assert.equal(res.status, 503);
    assert.equal(state, 'quiesced', "the router's undo lifted the operator's quiesce");
  });

  test("an eviction that quiesced the tier after the router's acquisition ended keeps it quiesced: no request reaches the serve it drains and stops", async () => {
    proxy.stall();
    // s is down and its tier active (the router never saw it up): the router quiesces it and acquires s.
    const first = chat();
    const acquisition = box.temporal.client.workflow.getHandle(workflowIds.acquire(box.node, 's'));
    await waitUntil('the router acquiring s', async () => (await tierS()).acquisition?.workflowId != null, 30_000, 50);
    const acquired = (await acquisition.result()) as { outcome: string; steps: { step: string; outcome: string }[] };
    console.log(`  acquisition of s: ${acquired.outcome}; readmit: ${acquired.steps.find((st) => st.step === 'readmit')?.outcome ?? '-'}`);
    assert.equal((await tierS()).state, 'active', "the acquisition's own guarded readmit let the tier back");
    // Released by that readmit, its status GET still held: answered by s, before any eviction.
    const firstRes = await first;
    assert.equal(firstRes.status, 200);
    assert.equal(firstRes.headers.get('x-gpures-tier'), 's-local');
    assert.equal(proxy.held > 0, true, "the router's status GET was held");

    // A long request in flight on s, so the eviction's drain lasts; then `serves up x --evict`.
    const long = chat(6000);
    await waitUntil('the long request in flight', async () => (await tierS()).inFlight === 1, 10_000, 20);
    const evicting = serveAcquire(box.temporal.client, box.node, { serve: 'x', evict: true });
    await waitUntil("the eviction's quiesce of s-local", async () => (await tierS()).state === 'quiesced', 30_000, 20);
    const evictedAt = Date.now();

    // Now the router's held GET is answered: its acquisition completed.
    const heldGets = proxy.held;
    proxy.resume();
    await waitUntil("the router's acquisition over", async () => (await tierS()).acquisition === null, 30_000, 20);
    // Time for the held GETs' answers to reach the router (its acquisition ended at the readmit: not read).
    await new Promise((r) => setTimeout(r, 500));
    const afterRouter = await tierS();
    // Requests sent while the eviction drains s: none may reach s.
    const during = await Promise.all([chat(), chat(), chat()]);
    const sRunningDuring = await running('s');
    const answeredByS = during.filter((r) => r.status === 200 && r.headers.get('x-gpures-tier') === 's-local').length;
    console.log(
      `  after the router's ${heldGets} held GETs were answered (${Date.now() - evictedAt} ms after the eviction's quiesce): ` +
        `s-local ${afterRouter.state}, in flight ${afterRouter.inFlight}; s running: ${sRunningDuring}; ` +
        `held request ${firstRes.status} (before the eviction), requests during the drain [${during.map((r) => r.status).join(', ')}]: ${answeredByS} answered by s`,
    );
    const out = await evicting;
    await long;
    const drain = out.ok ? out.result.victims[0]?.drain : undefined;
    console.log(
      `  serves up x --evict: ${out.ok ? out.result.message : `${out.failureType}: ${out.message}`}; drain of s: ${drain ? `${drain.polls} polls, ${drain.waitedMs} ms, router in flight at end ${drain.routerInFlightAtEnd}` : '-'}; ` +
        `s running: ${await running('s')}, x running: ${await running('x')}; s-local ${(await tierS()).state}`,
    );
    assert.equal(afterRouter.state, 'quiesced', "the router's readmit undid the eviction's quiesce while it drains s");
    assert.equal(answeredByS, 0, 'requests reached s after the eviction quiesced its tier');
    assert.ok(out.ok, out.ok ? '' : out.message);
    assert.equal(await running('s'), false);
    assert.equal((await tierS()).state, 'quiesced', 's is evicted: its tier stays quiesced');
  });
});
