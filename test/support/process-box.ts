// A box as an operator runs it: `gpures worker` as its own process, configured by its
// environment (the router admin API, nvidia-smi), the reference router in front of fake-vLLM
// containers on the test dockerd, and a GPU uuid of its own that the fake nvidia-smi follows.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse as parseToml, stringify as stringifyToml } from 'smol-toml';
import type { Manifest } from '../../src/domain/types';
import { startRouter } from '../../src/router/server';
import { startApiProcess } from './api-process';
import type { ApiProcess } from './api-process';
import { startRouterProcess } from './on-demand-box';
import { FAKE_NVIDIA_SMI, routerConfigFor } from '../../src/sim/box';
import type { FakeNvidiaSmiState } from '../../src/sim/fake-nvidia-smi';
import { removeNodeContainers, renderManifest, uniqueNode, writeManifest } from './box';
import type { TestGpu, TestServe } from './box';
import { startWorkerProcess } from './cli';
import type { WorkerProcess } from './cli';
import { testTemporal } from './temporal';
import type { TestTemporal } from './temporal';

export interface ProcessBox {
  node: string;
  /** The manifest file every `gpures` command of the suite passes with --manifest. */
  manifestPath: string;
  manifest: Manifest;
  temporal: TestTemporal;
  router: { url: string; close(): Promise<void> };
  routerToken: string;
  /** With `onDemand`: the acquisition API process the router acquires through, and the router process's stderr (its log). */
  api?: { url: string; token: string; clientToken: string; routerLog(): string };
  /** What a `gpures` command needs to reach the suite's Temporal. */
  env: Record<string, string>;
  /** The worker's own environment. */
  workerEnv: Record<string, string>;
  /** The node's worker now: `startWorker` replaces it (after a kill, say). */
  worker: WorkerProcess;
  startWorker(): Promise<WorkerProcess>;
  /** Changes what the fake nvidia-smi the worker runs reads (its state file), the rest kept: a process's VRAM held after its exit, say. */
  writeNvidiaSmiState(change: Partial<FakeNvidiaSmiState>): void;
  close(): Promise<void>;
}

/** With `opts.temporal` the box runs on that server and leaves closing it to its owner; else on testTemporal(). */
export async function startProcessBox(
  prefix: string,
  gpu: TestGpu,
  serves: TestServe[],
  opts: {
    temporal?: TestTemporal;
    workerEnv?: Record<string, string>;
    /** The router's URL as the worker is given it (GPURES_ROUTER_URL): a test may put something between them (a stalling proxy). */
    workerRouterUrl?: (routerUrl: string) => Promise<string>;
    /**
     * On-demand tiers ([tiers.on_demand] of each, by tier name): the router then runs as an operator
     * runs it (main.js, its own process), acquiring through `gpures api` (its own process too).
     */
    onDemand?: Record<string, Record<string, unknown>>;
  } = {},
): Promise<ProcessBox> {
  const node = uniqueNode(prefix);
  const dir = mkdtempSync(join(tmpdir(), `gpures-${prefix}-`));
  const text = renderManifest(node, [gpu], serves).replace(/^uuid = "GPU-[^"]*"$/m, `uuid = "GPU-${randomUUID()}"`);
  const { manifestPath, manifest } = writeManifest(dir, text);

  // The fake vLLM answers chat completions through its CGI, which holds each request for its sim_delay_ms.
  const routerDoc = parseToml(routerConfigFor(manifest, `test.${node}`)) as { tiers: { name: string; backend: string; on_demand?: unknown }[] };
  for (const tier of routerDoc.tiers) {
    tier.backend = `${tier.backend}/cgi-bin/vllm`;
    if (opts.onDemand?.[tier.name]) tier.on_demand = opts.onDemand[tier.name];
  }
  const routerConfigPath = join(dir, 'router.toml');
  writeFileSync(routerConfigPath, stringifyToml(routerDoc));
  const routerToken = `router-token-${randomUUID()}`;
  const temporal = opts.temporal ?? (await testTemporal());
  const env = { TEMPORAL_ADDRESS: temporal.address };
  let api: ApiProcess | undefined;
  let apiCreds: ProcessBox['api'];
  let router: ProcessBox['router'];
  if (opts.onDemand) {
    const token = `api-token-${randomUUID()}`;
    const clientToken = `client-token-${randomUUID()}`;
    api = await startApiProcess(manifestPath, [], { ...env, GPURES_API_TOKEN: token });
    const url = `http://127.0.0.1:${api.port}`;
    const rp = await startRouterProcess(routerConfigPath, {
      GPURES_ROUTER_TOKEN: routerToken,
      GPURES_API_URL: url,
      GPURES_API_TOKEN: token,
      GPURES_ROUTER_CLIENT_TOKEN: clientToken,
    });
    router = rp;
    apiCreds = { url, token, clientToken, routerLog: () => rp.stderr() };
  } else {
    router = await startRouter({ configPath: routerConfigPath, adminToken: routerToken, port: 0 });
  }

  const smiState: FakeNvidiaSmiState = {
    gpus: manifest.gpus.map((g, index) => ({ index, uuid: g.uuid, name: 'NVIDIA GeForce RTX 5090', totalMib: g.capacityMib, baseUsedMib: 1200 })),
    docker: true,
  };
  const smiStatePath = join(dir, 'nvidia-smi.json');
  writeFileSync(smiStatePath, JSON.stringify(smiState));

  const workerEnv = {
    ...env,
    GPURES_ROUTER_URL: opts.workerRouterUrl ? await opts.workerRouterUrl(router.url) : router.url,
    GPURES_ROUTER_TOKEN: routerToken,
    GPURES_NVIDIA_SMI: FAKE_NVIDIA_SMI,
    FAKE_NVIDIA_SMI_STATE: smiStatePath,
    ...opts.workerEnv,
  };
  const startWorker = () => startWorkerProcess(['--manifest', manifestPath, '--gpus', 'off'], workerEnv);
  const box: ProcessBox = {
    node,
    manifestPath,
    manifest: manifest,
    temporal,
    router,
    routerToken,
    ...(apiCreds ? { api: apiCreds } : {}),
    env,
    workerEnv,
    worker: await startWorker(),
    async startWorker() {
      box.worker = await startWorker();
      return box.worker;
    },
    writeNvidiaSmiState(change) {
      writeFileSync(smiStatePath, JSON.stringify({ ...smiState, ...change }));
    },
    async close() {
      await box.worker.stop();
      await removeNodeContainers(node);
      await router.close();
      await api?.stop();
      if (!opts.temporal) await temporal.close();
    },
  };
  return box;
}
