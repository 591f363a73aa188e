// Seed T013 step 4 on the real Docker runtime: fake-vLLM containers on the private dockerd, the
// reference router in front of their host ports, the fake nvidia-smi counting the running
// containers' declared VRAM, and a worker on a real dev server wired to all three.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Worker } from '@temporalio/worker';
import { DockerRuntime } from '../src/adapters/containers/docker';
import { NvidiaSmi } from '../src/adapters/gpu/nvidia-smi';
import { HttpRouterAdmin } from '../src/adapters/router-admin/http';
import { ledgerSnapshots, serveAcquire, serveDown, serveUp } from '../src/client/operations';
import { formatLedger, totals } from '../src/domain/ledger';
import type { LedgerState } from '../src/domain/ledger';
import type { Manifest } from '../src/domain/types';
import { startRouter } from '../src/router/server';
import type { RunningRouter } from '../src/router/server';
import { FAKE_NVIDIA_SMI, routerConfigFor } from '../src/sim/box';
import type { FakeNvidiaSmiState } from '../src/sim/fake-nvidia-smi';
import { createGpuresWorker, fileManifest } from '../src/worker/worker';
import type { AcquireResult } from '../src/shared/operations';
import { docker, nodeContainers, removeNodeContainers, renderManifest, uniqueNode, writeManifest } from './support/box';
import type { TestServe } from './support/box';
import { testTemporal, workflowBundle } from './support/temporal';
import { waitUntil } from './support/wait';
import { activitiesInOrder } from './support/history-scan';
import { parse as parseToml, stringify as stringifyToml } from 'smol-toml';
import type { TestTemporal } from './support/temporal';

const GPU = { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 };
const SERVES: TestServe[] = [
  { name: 'fast', vram_mib: 14336, router_tier: 'fast-local' },
  { name: 'vision', vram_mib: 12288, class: 'evictable', served_model_name: 'qwen3-vl-4b-instruct', router_tier: 'vision-local' },
  { name: 'comfyui-sim', vram_mib: 8192, class: 'on-demand' },
  { name: 'comfyui-unbuilt', vram_mib: 8192, class: 'on-demand', image: 'gpures/not-built:none' },
];
const ROUTER_TOKEN = 'test-router-token';
/** Display, sidecars and the like: the part of nvidia-smi's used that no serve declares. */
const BASE_USED_MIB = 1200;

describe('on-demand acquisition with eviction on Docker', () => {
  const d = docker();
  let node: string;
  let manifest: Manifest;
  let router: RunningRouter | undefined;
  let routerAdmin: HttpRouterAdmin;
  let temporal: TestTemporal | undefined;
  let worker: Worker | undefined;
  let running: Promise<void> | undefined;

  const containers = () => nodeContainers(node);

  before(async () => {
    node = uniqueNode('evict-docker');
    const dir = mkdtempSync(join(tmpdir(), 'gpures-evict-docker-'));
    // A GPU uuid of its own: the fake nvidia-smi counts every running container labelled with the
    // uuid on this dockerd, and other suites' containers must not move this suite's readings.
    const text = renderManifest(node, [GPU], SERVES).replace(/^uuid = "GPU-[^"]*"$/m, `uuid = "GPU-${randomUUID()}"`);
    const written = writeManifest(dir, text);
    const manifestPath = written.manifestPath;
    manifest = written.manifest;

    const routerConfigPath = join(dir, 'router.toml');
    // Through the fake vLLM's CGI: busybox httpd answers a plain POST with 501 (see its entrypoint).
    const routerDoc = parseToml(routerConfigFor(manifest, `test.${node}`)) as { tiers: { backend: string }[] };
    for (const tier of routerDoc.tiers) tier.backend = `${tier.backend}/cgi-bin/vllm`;
    writeFileSync(routerConfigPath, stringifyToml(routerDoc));
    router = await startRouter({ configPath: routerConfigPath, adminToken: ROUTER_TOKEN, port: 0 });
    routerAdmin = new HttpRouterAdmin({ baseUrl: router.url, token: ROUTER_TOKEN });

    const smiStatePath = join(dir, 'nvidia-smi.json');
    const smiState: FakeNvidiaSmiState = {
      gpus: manifest.gpus.map((g, index) => ({ index, uuid: g.uuid, name: 'NVIDIA GeForce RTX 5090', totalMib: g.capacityMib, baseUsedMib: BASE_USED_MIB })),
      docker: true,
    };
    writeFileSync(smiStatePath, JSON.stringify(smiState, null, 2));

    temporal = await testTemporal();
    worker = await createGpuresWorker({
      connection: temporal.nativeConnection,
      client: temporal.client,
      namespace: 'default',
      node,
      manifest: fileManifest(manifestPath),
      runtime: new DockerRuntime(d, { gpus: 'off' }),
      router: routerAdmin,
      gpu: new NvidiaSmi({ binary: FAKE_NVIDIA_SMI, env: { FAKE_NVIDIA_SMI_STATE: smiStatePath } }),
      pollIntervalMs: 100,
      workflowBundle: await workflowBundle(),
    });
    running = worker.run();
  });

  after(async () => {
    worker?.shutdown();
    await running;
    if (node) await removeNodeContainers(node);
    await router?.close();
    await temporal?.close();
  });

  const client = () => {
    assert.ok(temporal);
    return temporal.client;
  };
  async function ledger(): Promise<LedgerState> {
    const [l] = await ledgerSnapshots(client(), manifest);
    assert.ok(l);
    return l;
  }
  async function routed(preset: string, delayMs = 0): Promise<{ status: number; body: string }> {
    assert.ok(router);
    const res = await fetch(`${router.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: preset, messages: [{ role: 'user', content: 'describe the screenshot' }], sim_delay_ms: delayMs }),
    });
    return { status: res.status, body: await res.text() };
  }

  test('seed T013 step 4 on Docker: comfyui-sim --evict takes vision; quiesce < drain < stop < confirm < hand-over < start; committed 22528; vision 503', async () => {
    for (const s of ['fast', 'vision']) {
      const o = await serveUp(client(), node, s);
      assert.ok(o.ok, !o.ok ? o.message : '');
    }
    assert.equal(totals(await ledger()).committedMib, 26624);
    assert.deepEqual(
      (await containers()).sort((a, b) => a.serve.localeCompare(b.serve)),
      [
        { serve: 'fast', running: true },
        { serve: 'vision', running: true },
      ],
    );
    // Answered by the vision container itself: the fake vLLM's CGI names the model it serves.
    const beforeEviction = await routed('vision');
    assert.equal(beforeEviction.status, 200, beforeEviction.body);
    assert.match(beforeEviction.body, /"model":"qwen3-vl-4b-instruct".*"finish_reason":"stop"/);
    assert.equal((await routerAdmin.tierState('vision-local')).state, 'active');

    const o = await serveAcquire(client(), node, { serve: 'comfyui-sim', evict: true });
    assert.ok(o.ok, !o.ok ? o.message : '');
    const r: AcquireResult = o.result;
    assert.equal(r.outcome, 'started');
    assert.deepEqual(
      r.victims.map((v) => v.serve),
      ['vision'],
    );
    assert.match(r.evictionReason ?? '', /short by 6817 MiB; vision \(12288 MiB\) is the smallest set/);

    const acts = await activitiesInOrder(client(), o.workflowId);
    const at = (name: string) => acts.indexOf(name);
    assert.ok(at('quiesceTier') >= 0 && at('quiesceTier') < at('drainServe'), acts.join(','));
    assert.ok(at('drainServe') < at('stopServeContainer'), acts.join(','));
    assert.ok(at('stopServeContainer') < at('confirmVramReleased'), acts.join(','));
    assert.ok(at('confirmVramReleased') < at('ledgerVictimReleased'), acts.join(','));
    assert.ok(at('ledgerVictimReleased') < at('startServeContainer'), acts.join(','));

    const v = r.victims[0];
    assert.ok(v);
    assert.equal(v.drain?.drained, true);
    assert.equal(v.inFlightAtStop, 0);
    // nvidia-smi (the fake, counting running containers): fast + vision + base before, vision's MiB back after.
    assert.equal(v.vram?.usedBeforeMib, BASE_USED_MIB + 14336 + 12288);
    assert.equal(v.vram?.releasedMib, 12288);
    assert.equal(r.measuredDeltaMib, 8192);

    assert.deepEqual(formatLedger(await ledger()), [
      "gpu_role 'dark-fast': capacity 32607 MiB, reserve 4608 MiB, committed 22528 MiB, free 5471 MiB",
      '  fast 14336 MiB (resident, running)',
      '  vision 12288 MiB (evictable, evicted for comfyui-sim): not committed',
      '  comfyui-sim 8192 MiB (on-demand, running)',
    ]);

    const afterEviction = await routed('vision');
    assert.equal(afterEviction.status, 503);
    assert.match(afterEviction.body, /"type":"tier_unavailable"/);
    assert.match(afterEviction.body, /vision-local/);
    assert.equal((await routed('fast')).status, 200);

    assert.deepEqual(
      (await containers()).sort((a, b) => a.serve.localeCompare(b.serve)),
      [
        { serve: 'comfyui-sim', running: true },
        { serve: 'fast', running: true },
      ],
    );

    for (const s of ['comfyui-sim', 'vision', 'fast']) {
      const down = await serveDown(client(), node, s);
      assert.ok(down.ok, !down.ok ? down.message : '');
    }
    assert.equal(totals(await ledger()).committedMib, 0);
    assert.deepEqual(await containers(), []);
  });

  test('no request cut off on Docker: 3 slow requests in flight all finish 200, a later one 503, the stop after the last', async () => {
    for (const s of ['fast', 'vision']) {
      const o = await serveUp(client(), node, s);
      assert.ok(o.ok, !o.ok ? o.message : '');
    }
    // Long enough that the drain still has them to wait for on a loaded host, where the steps
    // before it (the start, admission, preflight, quiesce) took 4 s of 5 (CI: 'drained after 930
    // ms'), and, at load 13, more than 5 s to the quiesce.
    const slow = Array.from({ length: 3 }, () => routed('vision', 20_000));
    await waitUntil('3 in flight at vision-local', async () => (await routerAdmin.tierState('vision-local')).inFlight >= 3, 5000);
    const acquisition = serveAcquire(client(), node, { serve: 'comfyui-sim', evict: true });
    await waitUntil('vision-local quiesced', async () => (await routerAdmin.tierState('vision-local')).state === 'quiesced', 15_000);
    const late = await routed('vision');
    assert.equal(late.status, 503, late.body);
    // docker stop takes the whole container down: a request still being answered would be cut.
    const done = await Promise.all(slow);
    assert.deepEqual(
      done.map((d) => d.status),
      [200, 200, 200],
      done.map((d) => d.body).join('\n'),
    );
    const o = await acquisition;
    assert.ok(o.ok, !o.ok ? o.message : '');
    const v = o.result.victims[0];
    assert.equal(v?.inFlightAtQuiesce, 3);
    // Both counts: the router's, and the serve's own (vllm:num_requests_running from the container).
    assert.deepEqual(
      [v?.drain?.routerInFlightAtStart, v?.drain?.vllmRunningAtStart, v?.drain?.routerInFlightAtEnd, v?.drain?.vllmRunningAtEnd, v?.drain?.drained],
      [3, 3, 0, 0, true],
    );
    assert.equal(v?.inFlightAtStop, 0);
    assert.ok((v?.drain?.waitedMs ?? 0) >= 1000, `drained after ${v?.drain?.waitedMs} ms: it must have waited for the requests`);
    for (const s of ['comfyui-sim', 'vision', 'fast']) assert.ok((await serveDown(client(), node, s)).ok);
    assert.equal(totals(await ledger()).committedMib, 0);
  });

  test('an on-demand serve whose image is missing is refused before any victim is touched', async () => {
    for (const s of ['fast', 'vision']) {
      const o = await serveUp(client(), node, s);
      assert.ok(o.ok, !o.ok ? o.message : '');
    }
    const before = formatLedger(await ledger());
    const o = await serveAcquire(client(), node, { serve: 'comfyui-unbuilt', evict: true });
    assert.ok(!o.ok);
    assert.equal(o.failureType, 'ImageMissing');
    assert.match(o.message, /failed at preflight: image 'gpures\/not-built:none' is not on this Docker host; pull or load it first/);
    const acts = await activitiesInOrder(client(), o.workflowId);
    assert.ok(acts.includes('preflightEviction'), acts.join(','));
    for (const touched of ['quiesceTier', 'drainServe', 'stopServeContainer', 'startServeContainer'])
      assert.ok(!acts.includes(touched), `${touched} ran: ${acts.join(',')}`);
    assert.deepEqual(formatLedger(await ledger()), before);
    assert.equal((await routerAdmin.tierState('vision-local')).state, 'active');
    assert.equal((await routed('vision')).status, 200, 'vision still answered by its container');
    assert.deepEqual(
      (await containers()).sort((a, b) => a.serve.localeCompare(b.serve)),
      [
        { serve: 'fast', running: true },
        { serve: 'vision', running: true },
      ],
    );
    for (const s of ['vision', 'fast']) assert.ok((await serveDown(client(), node, s)).ok);
    assert.equal(totals(await ledger()).committedMib, 0);
  });
});
