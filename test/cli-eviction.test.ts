// The operator's eviction path as processes: `gpures worker` with the router and nvidia-smi from
// its environment, and `gpures serves up --evict` / `serves down --restore` against fake-vLLM
// containers on the test dockerd, the reference router in front of them.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse as parseToml, stringify as stringifyToml } from 'smol-toml';
import { parseManifest } from '../src/domain/manifest';
import { startRouter } from '../src/router/server';
import type { RunningRouter } from '../src/router/server';
import { FAKE_NVIDIA_SMI, routerConfigFor } from '../src/sim/box';
import type { FakeNvidiaSmiState } from '../src/sim/fake-nvidia-smi';
import { removeNodeContainers, renderManifest, uniqueNode } from './support/box';
import type { TestServe } from './support/box';
import { gpures, show, startWorkerProcess } from './support/cli';
import type { WorkerProcess } from './support/cli';
import { testTemporal } from './support/temporal';
import type { TestTemporal } from './support/temporal';

const GPU = { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 };
const SERVES: TestServe[] = [
  { name: 'fast', vram_mib: 14336, router_tier: 'fast-local' },
  { name: 'vision', vram_mib: 12288, class: 'evictable', served_model_name: 'qwen3-vl-4b-instruct', router_tier: 'vision-local' },
  // The report's stand-in: no HTTP, a container that just holds its reservation.
  { name: 'comfyui-sim', vram_mib: 8192, class: 'on-demand', api: 'none', args: ['sleep', '3600'] },
];
const ROUTER_TOKEN = `router-token-${randomUUID()}`;
const header = (committed: number, free: number) => `gpu_role 'dark-fast': capacity 32607 MiB, reserve 4608 MiB, committed ${committed} MiB, free ${free} MiB`;

describe('gpures serves up --evict and serves down --restore, as processes on Docker', () => {
  let temporal: TestTemporal | undefined;
  let router: RunningRouter | undefined;
  let worker: WorkerProcess | undefined;
  let node: string;
  let manifest: string;
  let env: Record<string, string>;

  before(async () => {
    node = uniqueNode('cli-evict');
    const dir = mkdtempSync(join(tmpdir(), 'gpures-cli-evict-'));
    // A GPU uuid of its own: the fake nvidia-smi counts the running containers labelled with it.
    const text = renderManifest(node, [GPU], SERVES).replace(/^uuid = "GPU-[^"]*"$/m, `uuid = "GPU-${randomUUID()}"`);
    manifest = join(dir, 'serves.toml');
    writeFileSync(manifest, text);
    const parsed = parseManifest(text, manifest);
    if (!parsed.ok) throw new Error(JSON.stringify(parsed.errors));

    const routerDoc = parseToml(routerConfigFor(parsed.manifest, `test.${node}`)) as { tiers: { backend: string }[] };
    for (const tier of routerDoc.tiers) tier.backend = `${tier.backend}/cgi-bin/vllm`;
    const routerConfigPath = join(dir, 'router.toml');
    writeFileSync(routerConfigPath, stringifyToml(routerDoc));
    router = await startRouter({ configPath: routerConfigPath, adminToken: ROUTER_TOKEN, port: 0 });

    const smiState: FakeNvidiaSmiState = {
      gpus: parsed.manifest.gpus.map((g, index) => ({ index, uuid: g.uuid, name: 'NVIDIA GeForce RTX 5090', totalMib: g.capacityMib, baseUsedMib: 1200 })),
      docker: true,
    };
    const smiStatePath = join(dir, 'nvidia-smi.json');
    writeFileSync(smiStatePath, JSON.stringify(smiState));

    temporal = await testTemporal();
    env = { TEMPORAL_ADDRESS: temporal.address };
    worker = await startWorkerProcess(['--manifest', manifest, '--gpus', 'off'], {
      ...env,
      GPURES_ROUTER_URL: router.url,
      GPURES_ROUTER_TOKEN: ROUTER_TOKEN,
      GPURES_NVIDIA_SMI: FAKE_NVIDIA_SMI,
      FAKE_NVIDIA_SMI_STATE: smiStatePath,
    });
  });

  after(async () => {
    await worker?.stop();
    await removeNodeContainers(node);
    await router?.close();
    await temporal?.close();
  });

  async function routedVision(): Promise<number> {
    assert.ok(router);
    const res = await fetch(`${router.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'vision', messages: [{ role: 'user', content: 'describe the dashboard' }] }),
    });
    await res.text();
    return res.status;
  }

  test('evict vision for comfyui-sim, then restore it through the guarded readmit', async () => {
    const up = await gpures(['serves', 'up', 'fast', 'vision', '--manifest', manifest], env);
    assert.equal(up.code, 0, show(up));
    assert.ok(up.stdout.endsWith(`${[header(26624, 1375), '  fast 14336 MiB (resident, running)', '  vision 12288 MiB (evictable, running)'].join('\n')}\n`), show(up));
    assert.equal(await routedVision(), 200);

    const evict = await gpures(['serves', 'up', 'comfyui-sim', '--evict', '--manifest', manifest], env);
    assert.equal(evict.code, 0, show(evict));
    // Live progress, in the report's order, then the outcome.
    const progress = evict.stderr.split('\n').filter((l) => l.startsWith('  ')).map((l) => l.trim().split(':')[0]);
    const order = ['plan', 'preflight', 'quiesce vision', 'drain vision', 'stop vision', 'release vision', 'start', 'health', 'running'];
    assert.deepEqual(progress.filter((p) => order.includes(p ?? '')), order, show(evict));
    assert.match(evict.stderr, /^ {2}release vision: nvidia-smi: 12288 MiB back on GPU-/m);
    assert.match(evict.stderr, /^ {2}health: container gpures-.*-comfyui-sim stayed running \(api none: no HTTP to probe\)$/m);
    assert.match(evict.stderr, /^serves up comfyui-sim --evict: running, 8192 MiB committed on 'dark-fast'; evicted vision$/m);
    assert.ok(
      evict.stdout.endsWith(`${[header(22528, 5471), '  fast 14336 MiB (resident, running)', '  vision 12288 MiB (evictable, evicted)', '  comfyui-sim 8192 MiB (on-demand, running)'].join('\n')}\n`),
      show(evict),
    );
    assert.equal(await routedVision(), 503);

    const restore = await gpures(['serves', 'down', 'comfyui-sim', '--restore', '--manifest', manifest], env);
    assert.equal(restore.code, 0, show(restore));
    assert.match(restore.stderr, /^serves down comfyui-sim: stopped, 8192 MiB released on 'dark-fast'; restore: vision restored$/m);
    assert.ok(restore.stdout.endsWith(`${[header(26624, 1375), '  fast 14336 MiB (resident, running)', '  vision 12288 MiB (evictable, running)'].join('\n')}\n`), show(restore));
    // Answered by the vision container again, through the readmitted tier.
    assert.equal(await routedVision(), 200);

    const down = await gpures(['serves', 'down', 'vision', 'fast', '--manifest', manifest], env);
    assert.equal(down.code, 0, show(down));
    assert.ok(down.stdout.endsWith(`${header(0, 27999)}\n`), show(down));
  });
});
