// Restore with guarded readmit on a simulated box: an evicted serve re-enters rotation only when
// the router's own probes pass health and exact identity; a refusal stops it again.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { parse, stringify } from 'smol-toml';
import { totals } from '../src/domain/ledger';
import { serveAcquire, serveDown, serveUp, ledgerSnapshots } from '../src/client/operations';
import { routerConfigFor } from '../src/sim/box';
import { startSimTestBox } from './support/sim';
import type { SimTestBox } from './support/sim';
import { waitUntil } from './support/wait';
import { taskQueueFor, workflowIds } from '../src/shared/messages';
import { containerName } from '../src/domain/serve';
import type { BringUpResult } from '../src/shared/operations';

describe('restore with guarded readmit', () => {
  let t: SimTestBox;
  before(async () => {
    t = await startSimTestBox(
      'restore',
      [{ role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 }],
      [
        { name: 'fast', vram_mib: 14336, router_tier: 'fast-local' },
        { name: 'vision', vram_mib: 12288, class: 'evictable', served_model_name: 'qwen3-vl-4b-instruct', router_tier: 'vision-local' },
        { name: 'comfyui-sim', vram_mib: 8192, class: 'on-demand' },
        // Loads for 3 s, as a model does: long enough to end its restore's bring-down mid-start.
        { name: 'slow', vram_mib: 12288, class: 'evictable', router_tier: 'slow-local', env: { SIM_START_DELAY_MS: '3000' } },
      ],
    );
  });
  after(async () => {
    await t?.close();
  });

  async function evictVision(): Promise<void> {
    for (const s of ['fast', 'vision']) assert.ok((await serveUp(t.temporal.client, t.node, s)).ok);
    const acq = await serveAcquire(t.temporal.client, t.node, { serve: 'comfyui-sim', evict: true });
    assert.ok(acq.ok, !acq.ok ? acq.message : '');
    assert.equal((await t.routed('vision')).status, 503);
  }

  /** fast and slow up, slow evicted for comfyui-sim, then serves down comfyui-sim --restore until slow's restore has started its container and loads. */
  async function restoringSlow() {
    for (const s of ['fast', 'slow']) assert.ok((await serveUp(t.temporal.client, t.node, s)).ok);
    const acq = await serveAcquire(t.temporal.client, t.node, { serve: 'comfyui-sim', evict: true });
    assert.ok(acq.ok, !acq.ok ? acq.message : '');
    const down = await t.temporal.client.workflow.start('bringDownWorkflow', {
      workflowId: workflowIds.bringDown(t.node, 'comfyui-sim'),
      taskQueue: taskQueueFor(t.node),
      args: [{ serve: 'comfyui-sim', restore: true }],
    });
    const restore = t.temporal.client.workflow.getHandle(workflowIds.bringUp(t.node, 'slow'));
    // slow's container started and loading: its restore is mid-start.
    await waitUntil(
      'the restore of slow to start its container',
      async () => (await t.box.runtime.inspect(containerName(t.node, 'slow')))?.running === true,
      20_000,
      50,
    );
    const child = await restore.describe();
    assert.equal(child.status.name, 'RUNNING');
    return { down, restore, child };
  }

  /** Rewrites the router's config with the vision tier changed, and reloads it. */
  async function routerVisionTier(patch: Record<string, unknown>): Promise<void> {
    const cfg = parse(routerConfigFor(t.manifest, `test.${t.node}.patched`)) as { tiers: Record<string, unknown>[] };
    cfg.tiers = cfg.tiers.map((tier) => (tier['name'] === 'vision-local' ? { ...tier, ...patch } : tier));
    writeFileSync(t.routerConfigPath, stringify(cfg));
    await t.box.routerAdmin.reload();
  }

  test('down comfyui-sim --restore: vision restored, readmit observed the exact identity, routed again', async () => {
    await evictVision();
    const down = await serveDown(t.temporal.client, t.node, 'comfyui-sim', { restore: true });
    assert.ok(down.ok, !down.ok ? down.message : '');
    assert.deepEqual(
      down.result.restored.map((r) => [r.serve, r.ok, r.observedModels]),
      [['vision', true, ['qwen3-vl-4b-instruct']]],
    );
    assert.match(down.result.message, /restore: vision restored$/);
    assert.equal((await t.routed('vision')).status, 200);
    const [l] = await ledgerSnapshots(t.temporal.client, t.manifest);
    assert.ok(l);
    assert.deepEqual(
      l.reservations.map((r) => `${r.serve}:${r.phase}`),
      ['fast:running', 'vision:running'],
    );
    for (const s of ['vision', 'fast']) assert.ok((await serveDown(t.temporal.client, t.node, s)).ok);
  });

  test("serves down of an evicted serve says it stays down, and the acquirer's --restore then leaves it down", async () => {
    await evictVision();
    const downVision = await serveDown(t.temporal.client, t.node, 'vision');
    assert.ok(downVision.ok, !downVision.ok ? downVision.message : '');
    assert.equal(downVision.result.message, 'serves down vision: already stopped (evicted for comfyui-sim); it stays down and is no longer restored with it');
    assert.equal(downVision.result.outcome, 'already-stopped');
    const [mid] = await ledgerSnapshots(t.temporal.client, t.manifest);
    assert.deepEqual(
      mid?.reservations.map((r) => `${r.serve}:${r.phase}`),
      ['fast:running', 'comfyui-sim:running'],
    );

    const down = await serveDown(t.temporal.client, t.node, 'comfyui-sim', { restore: true });
    assert.ok(down.ok, !down.ok ? down.message : '');
    assert.deepEqual(down.result.restored, []);
    assert.equal(down.result.message, "serves down comfyui-sim: stopped, 8192 MiB released on 'dark-fast'");
    assert.equal((await t.routed('vision')).status, 503, 'vision stays down, its tier quiesced');
    assert.ok((await serveDown(t.temporal.client, t.node, 'fast')).ok);
  });

  test('serves down cancelled while it drains: the tier is readmitted, the serve still runs, the run ends Cancelled', async () => {
    assert.ok((await serveUp(t.temporal.client, t.node, 'fast')).ok);
    const slow = t.routed('fast', { sim_delay_ms: 4000 });
    await waitUntil('1 in flight at fast-local', async () => (await t.box.routerAdmin.tierState('fast-local')).inFlight >= 1, 5000);
    const down = serveDown(t.temporal.client, t.node, 'fast');
    await waitUntil('fast-local quiesced', async () => (await t.box.routerAdmin.tierState('fast-local')).state === 'quiesced', 5000);
    const handle = t.temporal.client.workflow.getHandle(workflowIds.bringDown(t.node, 'fast'));
    await handle.cancel();
    const out = await down;
    assert.ok(!out.ok);
    assert.equal((await handle.describe()).status.name, 'CANCELLED');
    assert.equal((await t.box.routerAdmin.tierState('fast-local')).state, 'active');
    assert.equal((await slow).status, 200);
    assert.equal((await t.routed('fast')).status, 200);
    const [l] = await ledgerSnapshots(t.temporal.client, t.manifest);
    assert.deepEqual(
      l?.reservations.map((r) => `${r.serve}:${r.phase}`),
      ['fast:running'],
    );
    assert.ok((await serveDown(t.temporal.client, t.node, 'fast')).ok);
  });

  test('serves down of a routed serve: quiesce, drain (the request in flight finishes), stop; the next up readmits', async () => {
    assert.ok((await serveUp(t.temporal.client, t.node, 'fast')).ok);
    const slow = t.routed('fast', { sim_delay_ms: 3000 });
    await waitUntil('1 in flight at fast-local', async () => (await t.box.routerAdmin.tierState('fast-local')).inFlight >= 1, 5000);
    const down = await serveDown(t.temporal.client, t.node, 'fast');
    assert.ok(down.ok, !down.ok ? down.message : '');
    assert.equal((await slow).status, 200);
    assert.equal(down.result.drain?.drained, true);
    assert.equal(down.result.drain?.routerInFlightAtStart, 1);
    assert.deepEqual(
      down.result.steps.map((x) => x.step),
      ['take', 'quiesce', 'drain', 'stop', 'release'],
    );
    const after = await t.routed('fast');
    assert.equal(after.status, 503, 'a downed tier answers 503, not a connection error');
    const up = await serveUp(t.temporal.client, t.node, 'fast');
    assert.ok(up.ok, !up.ok ? up.message : '');
    assert.equal(up.result.readmittedTier, 'fast-local');
    assert.equal((await t.routed('fast')).status, 200);
    assert.ok((await serveDown(t.temporal.client, t.node, 'fast')).ok);
  });

  test('router expects another model: readmit refused (identity_mismatch), serve stopped, reservation released', async () => {
    await evictVision();
    assert.ok((await serveDown(t.temporal.client, t.node, 'comfyui-sim')).ok);
    await routerVisionTier({ served_model_name: 'qwen3-vl-8b-instruct' });
    try {
      const up = await serveUp(t.temporal.client, t.node, 'vision');
      assert.ok(!up.ok);
      assert.equal(up.failureType, 'ReadmitRefused');
      assert.match(
        up.message,
        /^serves up vision \(restore\) failed at readmit: router refused to readmit tier 'vision-local': identity_mismatch: .*qwen3-vl-4b-instruct/,
      );
      // The tier's requiesce is registered before the guarded readmit (a cancel may land mid-readmit): it runs, a no-op on a tier the router kept quiesced.
      assert.match(up.message, /compensated: quiesce tier vision-local, remove container, release reservation$/);
      assert.equal((await t.box.runtime.inspect(`gpures-${t.node}-vision`)) ?? null, null);
      const [l] = await ledgerSnapshots(t.temporal.client, t.manifest);
      assert.ok(l);
      assert.deepEqual(
        l.reservations.map((r) => r.serve),
        ['fast'],
      );
      assert.equal(totals(l).committedMib, 14336);
      assert.equal((await t.routed('vision')).status, 503);
    } finally {
      await routerVisionTier({});
    }
    assert.ok((await serveDown(t.temporal.client, t.node, 'fast')).ok);
  });

  test("a restore whose bring-up fails says why, in the bring-up's own words, not the child workflow wrapper's", async () => {
    await evictVision();
    await routerVisionTier({ served_model_name: 'qwen3-vl-8b-instruct' });
    try {
      const down = await serveDown(t.temporal.client, t.node, 'comfyui-sim', { restore: true });
      assert.ok(down.ok, !down.ok ? down.message : '');
      const [r] = down.result.restored;
      assert.equal(r?.ok, false);
      assert.match(r?.message ?? '', /^serves up vision \(restore\) failed at readmit: router refused to readmit tier 'vision-local': identity_mismatch/);
      assert.match(down.result.message, /; restore: vision failed \(serves up vision \(restore\) failed at readmit: router refused/);
      assert.equal((await t.box.runtime.inspect(`gpures-${t.node}-vision`)) ?? null, null);
    } finally {
      await routerVisionTier({});
    }
    assert.ok((await serveDown(t.temporal.client, t.node, 'fast')).ok);
  });

  test('tier without model_identity: readmit refused (identity_not_configured), nothing left running', async () => {
    await evictVision();
    assert.ok((await serveDown(t.temporal.client, t.node, 'comfyui-sim')).ok);
    await routerVisionTier({ model_identity: false });
    try {
      const up = await serveUp(t.temporal.client, t.node, 'vision');
      assert.ok(!up.ok);
      assert.equal(up.failureType, 'ReadmitRefused');
      assert.match(up.message, /identity_not_configured/);
      assert.equal((await t.box.runtime.inspect(`gpures-${t.node}-vision`)) ?? null, null);
    } finally {
      await routerVisionTier({});
    }
    assert.ok((await serveDown(t.temporal.client, t.node, 'fast')).ok);
  });

  test("a bring-down terminated while its restore brings a serve up: the restore's bring-up sees it through, nothing held by a dead run", async () => {
    const { down, restore, child } = await restoringSlow();
    await down.terminate('an operator ends the bring-down from the UI');
    const up = (await restore.result()) as BringUpResult;
    assert.match(up.message, /^serves up slow: /);
    // The box: slow's container runs, held running by its restore's run, and routed again.
    assert.equal((await t.box.runtime.inspect(containerName(t.node, 'slow')))?.running, true);
    const [l] = await ledgerSnapshots(t.temporal.client, t.manifest);
    const slow = l?.reservations.find((r) => r.serve === 'slow');
    assert.deepEqual([slow?.phase, slow?.holder], ['running', `${workflowIds.bringUp(t.node, 'slow')}/${child.runId}`]);
    assert.equal((await t.routed('slow')).status, 200);
    for (const s of ['slow', 'fast']) assert.ok((await serveDown(t.temporal.client, t.node, s)).ok);
  });

  test('a bring-down cancelled while its restore brings a serve up: the stop has landed, so the restore is seen through, the victim held running and routed again', async () => {
    const { down, restore, child } = await restoringSlow();
    await down.cancel();
    // The box every 200 ms until the restore's run closes: slow's container and its reservation.
    const samples: string[] = [];
    const t0 = Date.now();
    for (;;) {
      const c = await t.box.runtime.inspect(containerName(t.node, 'slow'));
      const [l] = await ledgerSnapshots(t.temporal.client, t.manifest);
      const r = l?.reservations.find((x) => x.serve === 'slow');
      samples.push(
        `+${Date.now() - t0} ms slow ${c ? (c.running ? 'running' : c.status) : 'gone'}, ledger ${r ? `${r.phase}${r.evictedFor ? ` for ${r.evictedFor}` : ''}` : 'none'}`,
      );
      if ((await restore.describe()).status.name !== 'RUNNING') break;
      assert.ok(Date.now() - t0 < 60_000, `the restore still runs after 60 s: ${samples.join('; ')}`);
      await new Promise((res) => setTimeout(res, 200));
    }
    const downEnd = await down.result().then(
      (r) => `completed: ${(r as { message: string }).message}`,
      (e: Error) => `${e.message}: ${(e.cause as Error | undefined)?.message ?? ''}`,
    );
    const childEnd = (await restore.describe()).status.name;
    const c = await t.box.runtime.inspect(containerName(t.node, 'slow'));
    const [l] = await ledgerSnapshots(t.temporal.client, t.manifest);
    const seen = `serves down comfyui-sim --restore ${downEnd}; restore of slow ${childEnd}; ${samples.length} samples, the last: ${samples.at(-1)}; ledger ${l?.reservations.map((r) => `${r.serve}:${r.phase}`).join(', ')}`;
    console.log(`  ${seen}`);
    const slow = l?.reservations.find((r) => r.serve === 'slow');
    assert.deepEqual(
      [childEnd, c?.running, slow?.phase, slow?.holder],
      ['COMPLETED', true, 'running', `${workflowIds.bringUp(t.node, 'slow')}/${child.runId}`],
      seen,
    );
    assert.equal((await t.routed('slow')).status, 200, seen);
    assert.match(downEnd, /^completed: serves down comfyui-sim: stopped, 8192 MiB released on 'dark-fast'; restore: slow restored; .*cancel/, seen);
    assert.equal(await t.box.runtime.inspect(containerName(t.node, 'comfyui-sim')), undefined, seen);
    assert.deepEqual(l?.reservations.map((r) => `${r.serve}:${r.phase}`).sort(), ['fast:running', 'slow:running'], seen);
    for (const s of ['slow', 'fast']) assert.ok((await serveDown(t.temporal.client, t.node, s)).ok);
  });
});
