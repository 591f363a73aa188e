// No thrash, end to end on a simulated box (the reference router, a real dev server): an
// acquisition evicts vision, `serves down --restore` brings it back, and an acquisition right
// after is denied with the residency's own words and a retryAfterS; after that many seconds the
// same acquisition is admitted and evicts vision again.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { serveAcquire, serveDown, serveUp, ledgerSnapshots } from '../src/client/operations';
import { startSimTestBox } from './support/sim';
import type { SimTestBox } from './support/sim';

/** Short, so the test waits it out; long enough that the acquisition right after the restore lands inside it. */
const WINDOW_S = 5;

describe('minimum residency: a restored serve is not evicted again inside its window', () => {
  let t: SimTestBox;
  before(async () => {
    t = await startSimTestBox(
      'residency',
      [{ role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 }],
      [
        { name: 'fast', vram_mib: 14336, router_tier: 'fast-local' },
        {
          name: 'vision',
          vram_mib: 12288,
          class: 'evictable',
          served_model_name: 'qwen3-vl-4b-instruct',
          router_tier: 'vision-local',
          min_residency_s: WINDOW_S,
        },
        { name: 'comfyui-sim', vram_mib: 8192, class: 'on-demand' },
      ],
    );
  });
  after(async () => {
    await t?.close();
  });

  const phases = async () => (await ledgerSnapshots(t.temporal.client, t.manifest))[0]?.reservations.map((r) => `${r.serve}:${r.phase}`);

  test('evict, restore, denied with "may be evicted in N s" and retryAfterS, then admitted once the window has ended', async () => {
    const { client } = t.temporal;
    for (const s of ['fast', 'vision']) assert.ok((await serveUp(client, t.node, s)).ok);
    // A plain bring-up has no window: T013's eviction right after it goes ahead.
    const first = await serveAcquire(client, t.node, { serve: 'comfyui-sim', evict: true });
    assert.ok(first.ok, !first.ok ? first.message : '');
    assert.deepEqual(
      first.result.victims.map((v) => v.serve),
      ['vision'],
    );

    const restore = await serveDown(client, t.node, 'comfyui-sim', { restore: true });
    assert.ok(restore.ok && restore.result.restored[0]?.ok, JSON.stringify(restore));
    assert.equal((await t.routed('vision')).status, 200);

    const denied = await serveAcquire(client, t.node, { serve: 'comfyui-sim', evict: true });
    assert.ok(!denied.ok, 'the acquisition right after the restore must be denied');
    assert.equal(denied.failureType, 'AdmissionDenied');
    const m =
      /^serves up comfyui-sim denied: over budget by 6817 MiB, nothing started; vision came back (\d+) s ago and stays resident for 5 s: it may be evicted in (\d+) s$/.exec(
        denied.message,
      );
    assert.ok(m, denied.message);
    const [agoS, inS] = [Number(m[1]), Number(m[2])];
    assert.equal(agoS + inS, WINDOW_S, denied.message);
    const details = denied.details as { retryAfterS?: unknown; residency?: { serve: string }[] };
    assert.equal(details.retryAfterS, inS, 'details[0].retryAfterS: the seconds until the window ends');
    assert.deepEqual(
      details.residency?.map((w) => w.serve),
      ['vision'],
    );
    // Nothing was touched: vision is in rotation and answers; no MiB are held for comfyui-sim.
    assert.equal((await t.box.routerAdmin.tierState('vision-local')).state, 'active');
    assert.equal((await t.routed('vision')).status, 200);
    assert.deepEqual(await phases(), ['fast:running', 'vision:running']);

    // As a client honouring Retry-After would: the same acquisition after retryAfterS seconds.
    await sleep(inS * 1000);
    const admitted = await serveAcquire(client, t.node, { serve: 'comfyui-sim', evict: true });
    assert.ok(admitted.ok, !admitted.ok ? admitted.message : '');
    assert.deepEqual(
      admitted.result.victims.map((v) => v.serve),
      ['vision'],
    );
    assert.equal((await t.routed('vision')).status, 503);
    assert.deepEqual(await phases(), ['fast:running', 'vision:evicted', 'comfyui-sim:running']);

    for (const s of ['comfyui-sim', 'vision', 'fast']) assert.ok((await serveDown(client, t.node, s)).ok);
  });
});
