// A cold start checks the card physically has the room, on a simulated box: real dev server, the
// reference router, sim serves as separate processes, the fake nvidia-smi listing each by its pid,
// a process outside the ledger started on the card by hand, and `gpures serves up` run as its own
// process. The box is sampled (its running containers) the whole time, not only the ledger's word.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { containerName } from '../src/domain/serve';
import { totals } from '../src/domain/ledger';
import { ledgerSnapshots, serveDown, serveUp } from '../src/client/operations';
import { exportWorkflow } from '../src/audit/export';
import { progressQuery, workflowIds } from '../src/shared/messages';
import type { TestServe } from './support/box';
import { startSquatter } from './support/sim';
import { sampleBoxUntilStopped, simTestBoxPerSuite } from './support/sim-worker-box';
import { gpures, show } from './support/cli';
import { waitUntil } from './support/wait';

const GPU = { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 };
const SERVES: TestServe[] = [
  { name: 'fast', vram_mib: 14336, router_tier: 'fast-local' },
  { name: 'vision', vram_mib: 12288, class: 'evictable', served_model_name: 'qwen3-vl-4b-instruct', router_tier: 'vision-local' },
  // Two that fit the budget together (27000 of 27999), each slow to answer health: the second's room
  // is read while the first's container runs, drawing its MiB, not yet running in the ledger.
  { name: 'a', vram_mib: 14000, env: { SIM_START_DELAY_MS: '4000' } },
  { name: 'b', vram_mib: 13000, env: { SIM_START_DELAY_MS: '1000' } },
  // Run on the card by hand, outside the ledger (its manifest entry only lends it a port and a command).
  { name: 'squatter', vram_mib: 12288 },
];
/** Where the refused bring-up's history goes when set (how test/histories/start-room-refused.json was recorded). */
const SAVE_DIR = process.env['GPURES_SAVE_HISTORIES'];

describe('a cold start checks the card has the room, physically', () => {
  const suite = simTestBoxPerSuite('start-room', GPU, SERVES);

  const client = () => suite.t.temporal.client;
  const squatterName = () => `squatter-${suite.t.node}`;
  const cli = (...args: string[]) => gpures([...args, '--manifest', suite.t.manifestPath], suite.env, 120_000);
  const freeMib = async () => totals((await ledgerSnapshots(client(), suite.t.manifest))[0]!).freeMib;

  /** The running containers, every 100 ms until stopped (2 min at most). */
  const sampleRunning = () => sampleBoxUntilStopped(async () => (await suite.t.box.runtime.list({})).filter((c) => c.running).map((c) => c.name));

  async function restoreBox(): Promise<void> {
    suite.t.box.writeNvidiaSmiState({ computeAppsUnsupported: false });
    await suite.t.box.runtime.remove(squatterName());
    for (const s of ['a', 'b', 'vision', 'fast']) await serveDown(client(), suite.t.node, s);
    const l = (await ledgerSnapshots(client(), suite.t.manifest))[0];
    assert.deepEqual(l?.reservations.map((r) => r.serve) ?? [], []);
  }

  test('serves up on a card where a process outside the ledger holds more than the reserve: refused, nothing started, the ledger as before', async () => {
    try {
      const up = await serveUp(client(), suite.t.node, 'fast');
      assert.ok(up.ok, !up.ok ? up.message : '');
      const [squatterPid] = await startSquatter(suite.t, 12288);
      const freeBefore = await freeMib();
      // The ledger's free figure holds vision (13663 MiB free for its 12288); the card does not.
      const gpu = (await suite.t.box.gpu.readGpus()).find((g) => g.uuid === suite.uuid);
      assert.ok(freeBefore >= 12288 && (gpu?.freeMib ?? 0) < 12288, `ledger free ${freeBefore}, nvidia-smi free ${gpu?.freeMib}`);
      const box = sampleRunning();
      const r = await cli('serves', 'up', 'vision');
      const samples = await box.stop();
      const freeAfter = await freeMib();
      console.log(`  exit ${r.code}; ${samples.length} samples; ledger free ${freeBefore} → ${freeAfter} MiB; stderr: ${r.stderr.trim().split('\n').pop()}`);
      assert.equal(r.code, 1, show(r));
      assert.match(
        r.stderr,
        new RegExp(`start of vision \\(12288 MiB\\) refused: the card cannot hold it: ledger commits 26624 MiB on ${suite.uuid} \\(vision included\\)`),
      );
      assert.match(
        r.stderr,
        new RegExp(
          `processes outside the ledger hold 12288 MiB \\(pid ${squatterPid} \\S+ 12288 MiB\\): 38912 MiB against the card's 32607 MiB, short by 6305 MiB; nothing was started`,
        ),
      );
      assert.match(r.stderr, /stop that process, then bring it up again/);
      assert.match(r.stderr, /compensated: release reservation/);
      assert.ok(!samples.some((s) => s.includes(containerName(suite.t.node, 'vision'))), 'a container of vision was seen running');
      assert.equal(freeAfter, freeBefore);
      if (SAVE_DIR) {
        mkdirSync(SAVE_DIR, { recursive: true });
        await exportWorkflow(client(), workflowIds.bringUp(suite.t.node, 'vision'), { file: join(SAVE_DIR, 'start-room-refused.json') });
      }
    } finally {
      await restoreBox();
    }
  });

  test('a process outside the ledger that leaves the room: the start goes ahead, the step saying what was read', async () => {
    try {
      const up = await serveUp(client(), suite.t.node, 'fast');
      assert.ok(up.ok, !up.ok ? up.message : '');
      await startSquatter(suite.t, 4096);
      const o = await serveUp(client(), suite.t.node, 'vision');
      assert.ok(o.ok, !o.ok ? `${o.failureType}: ${o.message}` : '');
      const room = o.result.steps.find((s) => s.step === 'room')?.outcome ?? '';
      console.log(`  room: ${room}`);
      assert.match(room, /^ledger commits 26624 MiB .* processes outside the ledger hold 4096 MiB \(pid \d+ \S+ 4096 MiB\): 30720 of the card's 32607 MiB$/);
    } finally {
      await restoreBox();
    }
  });

  test('where nvidia-smi cannot list processes, the whole GPU decides, and the refusal says so', async () => {
    try {
      const up = await serveUp(client(), suite.t.node, 'fast');
      assert.ok(up.ok, !up.ok ? up.message : '');
      await startSquatter(suite.t, 12288);
      suite.t.box.writeNvidiaSmiState({ computeAppsUnsupported: true });
      const o = await serveUp(client(), suite.t.node, 'vision');
      console.log(`  ${o.ok ? 'started' : `${o.failureType}: ${o.message}`}`);
      assert.ok(!o.ok);
      assert.equal(o.failureType, 'GpuRoomShort');
      // used 1200 + 14336 + 12288 = 27824, fast's 14336 counted whole: 13488 outside the ledger.
      assert.match(
        o.message,
        /13488 MiB are held outside the ledger by the whole GPU's reading \(used 27824 MiB, 14336 MiB of it at most the other serves'; its processes could not say which: nvidia-smi did not list its compute processes \(.*Not Supported/,
      );
      assert.match(o.message, /short by 7505 MiB/);
      assert.equal((await suite.t.box.runtime.inspect(containerName(suite.t.node, 'vision'))) ?? null, null);
    } finally {
      await restoreBox();
    }
  });

  test('two bring-ups admitted on one GPU at once, each from its own process, with room for both: both start', async () => {
    try {
      const box = sampleRunning();
      const first = cli('serves', 'up', 'a');
      // The second once the first's container runs (drawing its 14000 MiB) and the ledger has it still starting.
      await waitUntil('a container running', async () => Boolean((await suite.t.box.runtime.inspect(containerName(suite.t.node, 'a')))?.running), 60_000, 50);
      const aPhase = (await ledgerSnapshots(client(), suite.t.manifest))[0]?.reservations.find((r) => r.serve === 'a')?.phase;
      const second = cli('serves', 'up', 'b');
      const [ra, rb] = await Promise.all([first, second]);
      const samples = await box.stop();
      const bRoom =
        (await client().workflow.getHandle(workflowIds.bringUp(suite.t.node, 'b')).query(progressQuery)).find((s) => s.step === 'room')?.outcome ?? '';
      const both = samples.filter((s) => s.includes(containerName(suite.t.node, 'a')) && s.includes(containerName(suite.t.node, 'b')));
      console.log(
        `  a was ${aPhase} when b began; a exit ${ra.code}, b exit ${rb.code}; b's room: ${bRoom}; ${both.length} of ${samples.length} samples with both running`,
      );
      assert.equal(aPhase, 'admitted', 'b must begin while a is still starting');
      assert.equal(ra.code, 0, show(ra));
      assert.equal(rb.code, 0, show(rb));
      assert.match(bRoom, /^ledger commits 27000 MiB .*no process outside the ledger holds any: 27000 of the card's 32607 MiB$/);
      const l = (await ledgerSnapshots(client(), suite.t.manifest))[0];
      assert.deepEqual(
        l?.reservations.map((r) => `${r.serve} ${r.phase}`),
        ['a running', 'b running'],
      );
      assert.ok(both.length > 0 && samples[samples.length - 1]?.includes(containerName(suite.t.node, 'b')));
    } finally {
      await restoreBox();
    }
  });
});
