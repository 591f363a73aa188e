// What a bring-up measures of the VRAM its serve took is evidence, not a gate: nvidia-smi failing
// once the serve runs (a driver hiccup, its timeout) must not throw away a serve that is healthy
// and verified, and the model load it paid for.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ledgerSnapshots, serveUp } from '../src/client/operations';
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

  test('nvidia-smi failing once the serve runs: the serve stays up, running in the ledger, its delta not measured', async () => {
    const gpu = t.box.gpu;
    const read = gpu.readGpus.bind(gpu);
    const name = containerName(t.node, 'fast');
    let failed = 0;
    gpu.readGpus = async (...args: Parameters<typeof read>) => {
      if ((await t.box.runtime.inspect(name))?.running) {
        failed++;
        throw new Error('nvidia-smi --query-gpu exited with code 15: Unable to determine the device handle for GPU0000:01:00.0: Unknown Error');
      }
      return read(...args);
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
