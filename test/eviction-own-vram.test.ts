// A victim's VRAM confirmed by its own processes on the GPU, not by the whole GPU's memory.used,
// which another serve starting or stopping on the same card during the drain moves as much. On a
// simulated box: real dev server, the reference router, sim serves as separate processes, the fake
// nvidia-smi listing each by its pid. A request held through the router keeps the drain going
// while the other serve starts or stops; the box is sampled (its processes on the GPU, its
// containers) the whole time, not only the ledger's word.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { containerName } from '../src/domain/serve';
import { ledgerSnapshots, serveAcquire, serveDown, serveUp } from '../src/client/operations';
import type { TestServe } from './support/box';
import { startSimTestBox, startSquatter } from './support/sim';
import type { SimTestBox } from './support/sim';
import { sampleBoxUntilStopped } from './support/sim-worker-box';
import { sleep, waitUntil } from './support/wait';
import { waitForPendingActivity } from './support/history-scan';
import { workflowIds } from '../src/shared/messages';
import type { GpuProcess } from '../src/shared/contracts';
import { DelegatingRuntime } from './support/delegating-runtime';

const GPU = { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 };
const SERVES: TestServe[] = [
  { name: 'fast', vram_mib: 14336, router_tier: 'fast-local' },
  { name: 'vision', vram_mib: 12288, class: 'evictable', served_model_name: 'qwen3-vl-4b-instruct', router_tier: 'vision-local' },
  { name: 'comfyui-sim', vram_mib: 8192, class: 'on-demand' },
  // Run on the card by hand, outside the ledger (its manifest entry only lends it a port and a command).
  { name: 'squatter', vram_mib: 12288 },
];
// Long enough for a step taken during the drain (a serve started or stopped, a spawn of the fake
// nvidia-smi each reading: 1-3 s at load 15) to land inside it.
const HELD_REQUEST_MS = 12_000;
/** A squatter that leaves the acquirer its room once vision is down. */
const SMALL_SQUATTER_MIB = 4096;

/** What the box showed at one moment: each process nvidia-smi lists on the GPU, and which serves run. */
interface Sample {
  atMs: number;
  onGpu: GpuProcess[];
  running: string[];
}

/** The worker's runtime, whose process listing (docker top) can be held unanswered, as a hung dockerd would. */
class HeldProcesses extends DelegatingRuntime {
  holding = false;
  private held: (() => void)[] = [];
  override processes(name: string): Promise<number[]> {
    if (!this.holding) return super.processes(name);
    return new Promise<void>((resolve) => this.held.push(resolve)).then(() => super.processes(name));
  }
  /** Lets the held listings go (each then answers as the box does). */
  release(): void {
    this.holding = false;
    for (const go of this.held.splice(0)) go();
  }
}

describe("a victim's VRAM confirmed by its own processes", () => {
  let t: SimTestBox;
  let held: HeldProcesses;
  let uuid: string;

  before(async () => {
    t = await startSimTestBox('ownvram', [GPU], SERVES, { runtime: (real) => (held = new HeldProcesses(real)) });
    uuid = t.manifest.gpus[0]?.uuid ?? '';
  });
  after(async () => {
    await t?.close();
  });

  const client = () => t.temporal.client;
  const pidsOf = async (serve: string) => t.box.runtime.processes(serve === 'squatter' ? squatterName() : containerName(t.node, serve));
  const squatterName = () => `squatter-${t.node}`;

  /** The box every 100 ms until stopped (2 min at most): the processes on the GPU and the running containers. */
  const sampleBox = () =>
    sampleBoxUntilStopped<Sample>(async () => {
      const [onGpu, containers] = await Promise.all([t.box.gpu.computeApps(), t.box.runtime.list({})]);
      return { atMs: Date.now(), onGpu, running: containers.filter((c) => c.running).map((c) => c.name) };
    });

  async function upFastAndVision(): Promise<void> {
    for (const s of ['fast', 'vision']) {
      const o = await serveUp(client(), t.node, s);
      assert.ok(o.ok, !o.ok ? o.message : '');
    }
  }

  /** Starts comfyui-sim --evict while a request held through the router keeps vision draining; resolves once the drain is under way. */
  async function acquireWhileVisionDrains(releaseTimeoutS: number) {
    const held = t.routed('vision', { sim_delay_ms: HELD_REQUEST_MS });
    await waitUntil('1 in flight at vision-local', async () => (await t.box.routerAdmin.tierState('vision-local')).inFlight >= 1, 10_000);
    const acquisition = serveAcquire(client(), t.node, { serve: 'comfyui-sim', evict: true, releaseTimeoutS });
    // The drain under way: the readings before it (the GPU's, vision's processes) are taken.
    await waitForPendingActivity(client().workflow.getHandle(workflowIds.acquire(t.node, 'comfyui-sim')), 'drainServe');
    return { held, acquisition };
  }

  async function restoreBox(): Promise<void> {
    t.box.writeNvidiaSmiState({ heldPids: [], fixedUsedMib: {}, computeAppsUnsupported: false });
    await t.box.runtime.remove(squatterName());
    for (const s of ['comfyui-sim', 'vision', 'fast']) await serveDown(client(), t.node, s);
    const l = (await ledgerSnapshots(client(), t.manifest)).find((x) => x.gpuRole === GPU.role);
    assert.deepEqual(l?.reservations.map((r) => r.serve) ?? [], []);
  }

  test("a serve started on the GPU while the victim drains: the acquisition completes, confirmed by the victim's own processes", async () => {
    try {
      await upFastAndVision();
      const visionPids = await pidsOf('vision');
      const box = sampleBox();
      const { held, acquisition } = await acquireWhileVisionDrains(5);
      // 4096 MiB: it leaves comfyui-sim its room (fast 14336 + comfyui-sim 8192 + 4096 of 32607),
      // and the whole GPU falls by 8192 where the release needs 11673 of vision's 12288.
      await startSquatter(t, SMALL_SQUATTER_MIB);
      const squatterPids = await pidsOf('squatter');
      // The race is real only if the squatter took its memory while vision still drained.
      const tier = await t.box.routerAdmin.tierState('vision-local');
      assert.equal(tier.inFlight, 1, 'the squatter must start while the drain is under way');
      const o = await acquisition;
      const samples = await box.stop();
      const answered = await held;
      const overlap = samples.find((s) => s.onGpu.some((p) => visionPids.includes(p.pid)) && s.onGpu.some((p) => squatterPids.includes(p.pid)));
      const last = samples[samples.length - 1];
      console.log(
        `  ${samples.length} samples; vision pid ${visionPids.join(',')} and squatter pid ${squatterPids.join(',')} both on the GPU at +${
          overlap ? overlap.atMs - (samples[0]?.atMs ?? 0) : '-'
        } ms; held request ${answered.status}; outcome: ${o.ok ? `ok, ${JSON.stringify(o.result.victims[0]?.vram)}` : `${o.failureType}: ${o.message}`}`,
      );
      assert.ok(overlap, 'no sample saw the squatter on the GPU beside the draining vision');
      assert.equal(answered.status, 200);
      assert.ok(o.ok, !o.ok ? `${o.failureType}: ${o.message}` : '');
      const vram = o.result.victims[0]?.vram;
      assert.equal(vram?.reading?.by, 'own-processes');
      assert.equal(vram?.releasedMib, 12288);
      assert.ok(vram?.reading?.by === 'own-processes' && vram.reading.heldNowMib === 0);
      // The whole GPU fell by less than vision gave back: the squatter took some of it.
      assert.ok((vram?.usedAfterMib ?? 0) >= (vram?.usedBeforeMib ?? 0) - 12288 + SMALL_SQUATTER_MIB - 100, JSON.stringify(vram));
      assert.ok(last?.running.includes(containerName(t.node, 'comfyui-sim')) && last.running.includes(squatterName()), JSON.stringify(last?.running));
      assert.ok(!last?.running.includes(containerName(t.node, 'vision')));
    } finally {
      await restoreBox();
    }
  });

  test("a serve that takes the victim's freed memory while it drains: the acquirer is refused its start, never started, the victim left evicted", async () => {
    try {
      await upFastAndVision();
      const box = sampleBox();
      const { held, acquisition } = await acquireWhileVisionDrains(5);
      // 12288 MiB: all vision gives back. The release is vision's own (its processes gone), but the
      // card then holds fast 14336 + squatter 12288 + 1200 of the driver: comfyui-sim's 8192 do not fit.
      await startSquatter(t, 12288);
      const squatterPids = await pidsOf('squatter');
      assert.equal((await t.box.routerAdmin.tierState('vision-local')).inFlight, 1, 'the squatter must start while the drain is under way');
      const o = await acquisition;
      const samples = await box.stop();
      await held;
      console.log(`  ${samples.length} samples; outcome: ${o.ok ? `ok, ${JSON.stringify(o.result.victims[0]?.vram)}` : `${o.failureType}: ${o.message}`}`);
      assert.ok(!o.ok, `the acquisition started comfyui-sim on a card that cannot hold it: ${o.ok ? o.result.message : ''}`);
      assert.equal(o.failureType, 'GpuRoomShort');
      assert.match(
        o.message,
        new RegExp(
          `start of comfyui-sim \\(8192 MiB\\) refused: the card cannot hold it: ledger commits 22528 MiB on ${uuid} \\(comfyui-sim included\\), ` +
            `processes outside the ledger hold 12288 MiB \\(pid ${squatterPids[0]} \\S+ 12288 MiB\\): 34816 MiB against the card's 32607 MiB, short by 2209 MiB`,
        ),
      );
      assert.ok(!samples.some((s) => s.running.includes(containerName(t.node, 'comfyui-sim'))), 'comfyui-sim was seen running');
      // Vision stays evicted for comfyui-sim, its tier quiesced: the squatter holds its memory, so a
      // restore now would be refused the same way (its cold start is checked too). Once the card
      // has the room, `serves up vision` brings it back.
      const l = (await ledgerSnapshots(client(), t.manifest)).find((x) => x.gpuRole === GPU.role);
      assert.deepEqual(
        l?.reservations.map((r) => `${r.serve} ${r.phase}`),
        ['fast running', 'vision evicted'],
      );
      assert.equal((await t.box.routerAdmin.tierState('vision-local')).state, 'quiesced');
      const early = await serveUp(client(), t.node, 'vision');
      assert.ok(!early.ok && early.failureType === 'GpuRoomShort', early.ok ? 'vision restored beside the squatter' : early.message);
      await t.box.runtime.remove(squatterName());
      const back = await serveUp(client(), t.node, 'vision');
      assert.ok(back.ok, !back.ok ? back.message : '');
      // The refused restore gave its reservation back (as any failed restore): vision comes back as
      // a bring-up whose guarded readmit lets its quiesced tier back.
      assert.equal(back.result.readmittedTier, 'vision-local');
      assert.equal((await t.box.routerAdmin.tierState('vision-local')).state, 'active');
    } finally {
      await restoreBox();
    }
  });

  test("a serve stopped while the victim drains: the victim's memory still held by its process is not confirmed, the acquirer not started", async () => {
    try {
      await upFastAndVision();
      const visionPids = await pidsOf('vision');
      const [visionPid] = visionPids;
      assert.ok(visionPid);
      const box = sampleBox();
      const { held, acquisition } = await acquireWhileVisionDrains(3);
      // Vision's memory stays held after its exit (the driver has not torn its context down): its
      // pid stays listed with its MiB. And fast, 14336 MiB, stops on the same card meanwhile.
      t.box.writeNvidiaSmiState({ heldPids: [{ gpuUuid: uuid, pid: visionPid, vramMib: 12288 }] });
      const down = await serveDown(client(), t.node, 'fast');
      assert.ok(down.ok, !down.ok ? down.message : '');
      assert.equal((await t.box.routerAdmin.tierState('vision-local')).inFlight, 1, 'fast must stop while the drain is under way');
      const o = await acquisition;
      const samples = await box.stop();
      const answered = await held;
      const fastGone = samples.find((s) => !s.running.includes(containerName(t.node, 'fast')));
      const visionHeld = samples.filter((s) => !s.running.includes(containerName(t.node, 'vision')) && s.onGpu.some((p) => p.pid === visionPid));
      console.log(
        `  ${samples.length} samples; fast gone at +${fastGone ? fastGone.atMs - (samples[0]?.atMs ?? 0) : '-'} ms; ` +
          `${visionHeld.length} samples with vision stopped and its pid ${visionPid} still on the GPU; held request ${answered.status}; ` +
          `outcome: ${o.ok ? `ok, ${JSON.stringify(o.result.victims[0]?.vram)}` : `${o.failureType}: ${o.message}`}`,
      );
      assert.ok(visionHeld.length > 0, "no sample saw vision's memory held after its stop");
      assert.ok(!o.ok, `the acquisition completed on memory vision still holds: ${o.ok ? JSON.stringify(o.result.victims[0]?.vram) : ''}`);
      assert.equal(o.failureType, 'VramNotReleased');
      assert.match(o.message, new RegExp(`VRAM of vision not released on GPU ${uuid}: 12288 MiB still held by its own processes`));
      assert.equal((await t.box.runtime.inspect(containerName(t.node, 'comfyui-sim'))) ?? null, null);
    } finally {
      await restoreBox();
    }
  });

  test("nvidia-smi refusing the process query during the wait is not a release: the victim's memory counts as still held", async () => {
    try {
      await upFastAndVision();
      const [visionPid] = await pidsOf('vision');
      assert.ok(visionPid);
      const { held, acquisition } = await acquireWhileVisionDrains(3);
      // Listed on the GPU by the drain's reading; vision's memory stays held under its pid after
      // its stop, and once it is stopped the driver refuses the query for the rest of the wait.
      t.box.writeNvidiaSmiState({ heldPids: [{ gpuUuid: uuid, pid: visionPid, vramMib: 12288 }] });
      await waitUntil('vision stopped', async () => !(await t.box.runtime.inspect(containerName(t.node, 'vision')))?.running, 30_000, 20);
      t.box.writeNvidiaSmiState({ computeAppsUnsupported: true });
      const o = await acquisition;
      await held;
      console.log(`  outcome: ${o.ok ? `ok, ${JSON.stringify(o.result.victims[0]?.vram)}` : `${o.failureType}: ${o.message}`}`);
      assert.ok(!o.ok, `the acquisition completed on a refused process query: ${o.ok ? JSON.stringify(o.result.victims[0]?.vram) : ''}`);
      assert.equal(o.failureType, 'VramNotReleased');
      assert.match(o.message, /not listed in the last reading \(.*Not Supported.*\), counted as still held/);
      assert.equal((await t.box.runtime.inspect(containerName(t.node, 'comfyui-sim'))) ?? null, null);
    } finally {
      await restoreBox();
    }
  });

  test('a process listing that never answers holds the drain at most 5 s past its end: the whole GPU confirms, and says why', async () => {
    try {
      await upFastAndVision();
      held.holding = true;
      const began = Date.now();
      const acquisition = serveAcquire(client(), t.node, { serve: 'comfyui-sim', evict: true, releaseTimeoutS: 10 });
      // Bounded here: without the bound the drain waits on the listing until its own timeout.
      const o = await Promise.race([acquisition, sleep(40_000).then(() => undefined)]);
      console.log(
        `  after ${Date.now() - began} ms: ${o === undefined ? 'no outcome' : o.ok ? JSON.stringify(o.result.victims[0]?.vram) : `${o.failureType}: ${o.message}`}`,
      );
      assert.ok(o, "the acquisition did not end within 40 s while the victim's process listing hung");
      assert.ok(o.ok, !o.ok ? `${o.failureType}: ${o.message}` : '');
      const vram = o.result.victims[0]?.vram;
      assert.equal(vram?.reading?.by, 'whole-gpu');
      assert.match(vram?.reading?.by === 'whole-gpu' ? vram.reading.why : '', /not read within 5 s of the drain's end/);
      assert.equal(vram?.releasedMib, 12288);
    } finally {
      held.release();
      await restoreBox();
    }
  });

  test('where nvidia-smi cannot list processes, the whole GPU confirms, and the result says why', async () => {
    try {
      await upFastAndVision();
      t.box.writeNvidiaSmiState({ computeAppsUnsupported: true });
      const o = await serveAcquire(client(), t.node, { serve: 'comfyui-sim', evict: true, releaseTimeoutS: 10 });
      assert.ok(o.ok, !o.ok ? `${o.failureType}: ${o.message}` : '');
      const vram = o.result.victims[0]?.vram;
      console.log(`  ${JSON.stringify(vram)}`);
      assert.equal(vram?.reading?.by, 'whole-gpu');
      assert.match(vram?.reading?.by === 'whole-gpu' ? vram.reading.why : '', /nvidia-smi lists no compute process/);
      assert.equal(vram?.releasedMib, 12288);
    } finally {
      await restoreBox();
    }
  });
});
