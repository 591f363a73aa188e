// Eviction by sleeping on Docker, as an operator runs it: `gpures worker` as its own process,
// `gpures serves up --evict` and `serves down --restore` against fake-vLLM containers (the test
// image serves vLLM's sleep-mode endpoints, and what it keeps asleep is what the fake nvidia-smi
// reads), the reference router in front. The container stays the same one through sleep and wake.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { NvidiaSmi } from '../src/adapters/gpu/nvidia-smi';
import { physicalTruth } from '../src/domain/physical';
import { containerName, serveBaseUrl } from '../src/domain/serve';
import { workflowIds } from '../src/shared/messages';
import type { BringUpResult } from '../src/shared/operations';
import { ledgerSnapshots } from '../src/client/operations';
import { FAKE_NVIDIA_SMI } from '../src/sim/box';
import { docker, routedChat, sleepingVision } from './support/box';
import type { TestServe } from './support/box';
import { gpures, show } from './support/cli';
import { startProcessBox } from './support/process-box';
import type { ProcessBox } from './support/process-box';

const GPU = { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 };
const RELOAD_MS = 20_000;
const SERVES: TestServe[] = [
  { name: 'fast', vram_mib: 14336, router_tier: 'fast-local' },
  // A reload of its weights (a wake from level 2) takes 20 s: a wake from level 1 needs none.
  sleepingVision({ SIM_RELOAD_DELAY_MS: String(RELOAD_MS) }),
  { name: 'comfyui-sim', vram_mib: 8192, class: 'on-demand', api: 'none', args: ['sleep', '3600'] },
];

describe('eviction by sleeping and restore by waking, as processes on Docker', () => {
  let box: ProcessBox;

  before(async () => {
    box = await startProcessBox('sleep-docker', GPU, SERVES);
  });
  after(async () => {
    await box?.close();
  });

  // 3 min a command: a loaded host (load 20 on 2 cores) took a bring-up past the default 60 s.
  const run = (args: string[]) => gpures([...args, '--manifest', box.manifestPath], box.env, 180_000);
  const visionId = async () => (await docker().getContainer(containerName(box.node, 'vision')).inspect()).Id;
  /** nvidia-smi (the fake, reading the containers) less what the ledger says its serves hold. */
  async function nonLedgerDraw(): Promise<number> {
    const [l] = await ledgerSnapshots(box.temporal.client, box.manifest);
    assert.ok(l);
    const smi = new NvidiaSmi({ binary: FAKE_NVIDIA_SMI, env: { FAKE_NVIDIA_SMI_STATE: box.workerEnv['FAKE_NVIDIA_SMI_STATE'] ?? '' } });
    const readings = await smi.readGpus();
    const reading = readings.find((g) => g.uuid === l.gpuUuid);
    assert.ok(reading, `nvidia-smi shows ${JSON.stringify(readings)}; the ledger's GPU is ${l.gpuUuid}`);
    return physicalTruth(l, reading).nonLedgerDrawMib;
  }

  test('vision is put to sleep for comfyui-sim (its container keeps running, 600 MiB held), then woken through the guarded readmit', async () => {
    const up = await run(['serves', 'up', 'fast', 'vision']);
    assert.equal(up.code, 0, show(up));
    const before = await visionId();
    assert.equal((await routedChat(box.router.url, 'vision')).status, 200);

    const evict = await run(['serves', 'up', 'comfyui-sim', '--evict']);
    assert.equal(evict.code, 0, show(evict));
    // Live progress on stderr, the ledger on stdout.
    assert.match(evict.stderr, /^ {2}sleep vision: asleep at level 1 after \d+ ms/m);
    assert.match(evict.stderr, /^ {2}release vision: nvidia-smi: 11688 MiB back on GPU-/m);
    assert.match(evict.stderr, /^serves up comfyui-sim --evict: running, 8192 MiB committed on 'dark-fast'; put to sleep vision$/m);
    assert.doesNotMatch(evict.stderr, /stop vision/);
    assert.match(evict.stdout, /vision 12288 MiB \(evictable, sleeping at level 1 for comfyui-sim, 600 MiB held\)/);
    const asleep = await docker().getContainer(containerName(box.node, 'vision')).inspect();
    assert.equal(asleep.State.Running, true);
    assert.equal(asleep.Id, before);
    assert.equal((await routedChat(box.router.url, 'vision')).status, 503);
    assert.equal(await nonLedgerDraw(), 1200);

    const down = await run(['serves', 'down', 'comfyui-sim', '--restore']);
    assert.equal(down.code, 0, show(down));
    assert.match(down.stderr, /restore: vision restored/);
    assert.equal(await visionId(), before, 'restored by a new container, not by waking the one that slept');
    assert.equal((await routedChat(box.router.url, 'vision')).status, 200);
    assert.equal(await nonLedgerDraw(), 1200);
  });

  test('a ledger lost while vision sleeps at level 1: the fresh ledger holds it at level 1, and the restore wakes it from host RAM, without reloading its weights', async () => {
    // Brought up afresh (not restored): a restored serve stays resident for its min_residency_s.
    const down0 = await run(['serves', 'down', 'comfyui-sim', 'vision']);
    assert.equal(down0.code, 0, show(down0));
    const up = await run(['serves', 'up', 'fast', 'vision']);
    assert.equal(up.code, 0, show(up));
    const before = await visionId();
    const evict = await run(['serves', 'up', 'comfyui-sim', '--evict']);
    assert.equal(evict.code, 0, show(evict));
    assert.match(evict.stderr, /^ {2}sleep vision: asleep at level 1 after \d+ ms/m);
    await box.temporal.client.workflow.getHandle(workflowIds.ledger(box.node, GPU.role)).terminate('test: the ledger is lost while vision sleeps');
    // `gpures ledger` starts the fresh one, which finds vision asleep on the box.
    const listed = await run(['ledger']);
    assert.equal(listed.code, 0, show(listed));
    const vision = box.manifest.serves.find((s) => s.name === 'vision');
    assert.ok(vision);
    const asleep = async () =>
      ((await (await fetch(`${serveBaseUrl(vision)}/is_sleeping`, { signal: AbortSignal.timeout(2000) })).json()) as { is_sleeping: boolean }).is_sleeping;
    const comfyRunning = async () =>
      (
        await docker()
          .getContainer(containerName(box.node, 'comfyui-sim'))
          .inspect()
          .catch(() => undefined)
      )?.State.Running === true;
    // The box every 200 ms while the restore runs: from comfyui-sim's stop to vision awake.
    let ended = false;
    const down = run(['serves', 'down', 'comfyui-sim', '--restore']).finally(() => (ended = true));
    let comfyGoneAt: number | undefined;
    let awakeAt: number | undefined;
    while (!ended || awakeAt === undefined) {
      const [sleeping, comfy] = await Promise.all([asleep().catch(() => true), comfyRunning()]);
      const now = Date.now();
      if (!comfy) comfyGoneAt ??= now;
      if (!sleeping && comfyGoneAt !== undefined) awakeAt ??= now;
      if (ended && awakeAt === undefined) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    const downRun = await down;
    const restored = (await box.temporal.client.workflow.getHandle(workflowIds.bringUp(box.node, 'vision')).result()) as BringUpResult;
    const wake = restored.steps.find((s) => s.step === 'wake')?.outcome ?? '';
    const asleepForMs = comfyGoneAt !== undefined && awakeAt !== undefined ? awakeAt - comfyGoneAt : undefined;
    const held = listed.stdout.split('\n').find((l) => l.includes('vision')) ?? '';
    console.log(`  the fresh ledger: '${held.trim()}'; the restore's wake: ${wake}; vision asleep ${asleepForMs ?? '?'} ms after comfyui-sim stopped`);
    assert.match(held, /vision 12288 MiB \(evictable, sleeping at level 1 for comfyui-sim, 600 MiB held\)/);
    assert.equal(downRun.code, 0, show(downRun));
    assert.match(downRun.stderr, /restore: vision restored/);
    assert.match(wake, /^awake from level 1 after \d+ ms$/);
    assert.equal(await visionId(), before, 'woken in the container that slept');
    assert.ok(
      asleepForMs !== undefined && asleepForMs < RELOAD_MS,
      `vision woke ${asleepForMs ?? '(never)'} ms after comfyui-sim stopped: its weights were reloaded`,
    );
    assert.equal((await routedChat(box.router.url, 'vision')).status, 200);
    const after = await run(['serves', 'down', 'vision']);
    assert.equal(after.code, 0, show(after));
  });
});
