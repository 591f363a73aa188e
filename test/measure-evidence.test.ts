// What a bring-up measures of the VRAM its serve took is evidence, not a gate: nvidia-smi failing
// once the serve runs (a driver hiccup, its timeout) must not throw away a serve that is healthy
// and verified, and the model load it paid for.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ledgerSnapshots, serveDown, serveUp } from '../src/client/operations';
import { containerName } from '../src/domain/serve';
import { startSimTestBox } from './support/sim';
import type { SimTestBox } from './support/sim';

describe('the measured delta', () => {
  let t: SimTestBox;
  before(async () => {
    t = await startSimTestBox(
      'measure',
      [{ role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 }],
      [{ name: 'fast', vram_mib: 14336, router_tier: 'fast-local' }],
    );
  });
  after(async () => {
    await t?.close();
  });

  test('measured by its own processes: the whole GPU is not read once the serve runs (it would go unused)', async () => {
    const gpu = t.box.gpu;
    const read = gpu.readGpus.bind(gpu);
    const name = containerName(t.node, 'fast');
    let readAfterStart = 0;
    gpu.readGpus = async (...args: Parameters<typeof read>) => {
      if ((await t.box.runtime.inspect(name))?.running) readAfterStart++;
      return read(...args);
    };
    try {
      const up = await serveUp(t.temporal.client, t.node, 'fast');
      assert.ok(up.ok, !up.ok ? up.message : '');
      const measure = up.result.steps.find((s) => s.step === 'measure')?.outcome ?? '';
      // What the fake nvidia-smi lists for the serve's own processes, the box's word beside the result's.
      const pids = (await t.box.runtime.processes?.(name)) ?? [];
      const ownMib = (await gpu.computeApps()).filter((p) => pids.includes(p.pid)).reduce((sum, p) => sum + (p.usedMib ?? 0), 0);
      console.log(`  measure: ${measure}; whole-GPU readings once the container ran: ${readAfterStart}`);
      assert.match(measure, /^fast measured \d+ MiB by its own processes \(pid [\d, ]+\)/);
      assert.equal(up.result.measuredDeltaMib, ownMib);
      assert.equal(readAfterStart, 0);
    } finally {
      gpu.readGpus = read;
      await serveDown(t.temporal.client, t.node, 'fast');
    }
  });

  test('nvidia-smi failing once the serve runs: the serve stays up, running in the ledger, its delta not measured', async () => {
    const gpu = t.box.gpu;
    const read = gpu.readGpus.bind(gpu);
    const name = containerName(t.node, 'fast');
    const apps = gpu.computeApps.bind(gpu);
    let failed = 0;
    gpu.readGpus = async (...args: Parameters<typeof read>) => {
      if ((await t.box.runtime.inspect(name))?.running) {
        failed++;
        throw new Error('nvidia-smi --query-gpu exited with code 15: Unable to determine the device handle for GPU0000:01:00.0: Unknown Error');
      }
      return read(...args);
    };
    // Both of its queries fail, as nvidia-smi does when the driver does: its own processes cannot say either.
    gpu.computeApps = async (...args: Parameters<typeof apps>) => {
      if ((await t.box.runtime.inspect(name))?.running) throw new Error('nvidia-smi --query-compute-apps exited with code 15: Unknown Error');
      return apps(...args);
    };
    try {
      const up = await serveUp(t.temporal.client, t.node, 'fast');
      assert.ok(up.ok, !up.ok ? up.message : '');
      assert.ok(failed > 0, 'the reading after health failed');
      assert.equal(up.result.measuredDeltaMib, undefined);
      const measure = up.result.steps.find((s) => s.step === 'measure');
      assert.match(measure?.outcome ?? '', /^fast's VRAM not measured \(nvidia-smi: .*exited with code 15.*\); it runs on its declared reservation$/);
    } finally {
      gpu.readGpus = read;
      gpu.computeApps = apps;
    }
    // The box, not only the result: the container runs, and the ledger holds it running at its declared MiB.
    assert.equal((await t.box.runtime.inspect(name))?.running, true);
    const [l] = await ledgerSnapshots(t.temporal.client, t.manifest);
    assert.deepEqual(
      l?.reservations.map((r) => [r.serve, r.phase, r.vramMib]),
      [['fast', 'running', 14336]],
    );
  });
});
