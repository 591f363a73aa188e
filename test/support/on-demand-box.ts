// A simulated box with the whole closed loop: sim serves as local processes, the fake nvidia-smi,
// a worker on a real dev server, the acquisition API (buildApi, on loopback) and the reference
// router with GPURES_API_URL/TOKEN's equivalent, so on-demand tiers acquire through the API, and
// GPURES_ROUTER_CLIENT_TOKEN's (`clientToken`), which every request to them must carry.
// For the on-demand router tests and bench/router-on-demand.ts.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Client } from '@temporalio/client';
import type { FastifyInstance } from 'fastify';
import { parse as parseToml, stringify as stringifyToml } from 'smol-toml';
import { NvidiaSmiStream } from '../../src/adapters/gpu/nvidia-smi-stream';
import { DEFAULT_NVIDIA_SMI_LOOP_MS } from '../../src/config/env';
import { HttpRouterAdmin } from '../../src/adapters/router-admin/http';
import { buildApi } from '../../src/client/api';
import { serveOperationsRunning } from '../../src/client/operations';
import type { Manifest } from '../../src/domain/types';
import { startRouter } from '../../src/router/server';
import type { RouterOptions } from '../../src/router/server';
import { FAKE_NVIDIA_SMI, routerConfigFor } from '../../src/sim/box';
import type { FakeNvidiaSmiState } from '../../src/sim/fake-nvidia-smi';
import { SimRuntime } from '../../src/sim/runtime';
import { renderManifest, TEST_IMAGE, uniqueNode, writeManifest } from './box';
import type { TestGpu, TestServe } from './box';
import { ROOT } from './cli';
import { testTemporal } from './temporal';
import type { TestTemporal } from './temporal';
import { startTestWorker } from './worker';
import type { TestWorker } from './worker';

export interface OnDemandTier {
  /** The tier (router_tier of `serve` in the manifest). */
  tier: string;
  serve: string;
  evict?: boolean;
  queue_size?: number;
  wait_timeout_s?: number;
  keepalive_s?: number;
}

export interface OnDemandBoxOptions {
  prefix: string;
  gpu: TestGpu;
  serves: TestServe[];
  onDemand: OnDemandTier[];
  retryAfterS?: number;
  pollIntervalMs?: number;
  /** The router's bound on the request bytes all its queues hold (default the router's own). */
  heldBytesLimit?: number;
  /** The acquisition API's URL as the router is given it: a test may put something between them (a stalling proxy). */
  routerApiUrl?: (apiUrl: string) => Promise<string>;
  /**
   * The router as an operator runs it: `node dist/src/router/main.js` as its own process, its
   * tokens and the API's URL in its environment (its own poll interval, 500 ms). In process otherwise.
   */
  routerProcess?: boolean;
  /** Workflow interceptor modules of the test's, bundled into its worker (test/support/worker.ts). */
  workflowInterceptorModules?: string[];
  /** The in-process router's on-demand marks (RouterOptions.onDemandMarks): bench/router-on-demand.ts's clock. */
  onDemandMarks?: RouterOptions['onDemandMarks'];
}

/** The router the box runs: in this process (startRouter) or its own (main.js). */
export interface BoxRouter {
  url: string;
  close(): Promise<void>;
}

export interface OnDemandBox {
  node: string;
  manifest: Manifest;
  /** The manifest's file, for a `gpures` process (--manifest). */
  manifestPath: string;
  temporal: TestTemporal;
  router: BoxRouter;
  admin: HttpRouterAdmin;
  apiUrl: string;
  apiToken: string;
  /** The token requests to an on-demand preset carry (Authorization: Bearer; an OpenAI client's apiKey). */
  clientToken: string;
  runtime: SimRuntime;
  /** GET /admin/tiers as the router answers it, the queue and acquisition included. */
  tiers(): Promise<AdminTier[]>;
  /** A chat completion through the router, with the client token; `extra` goes into the body (sim_delay_ms). */
  chat(model: string, extra?: Record<string, unknown>): Promise<Response>;
  close(): Promise<void>;
}

export interface AdminTier {
  tier: string;
  state: 'active' | 'quiesced';
  inFlight: number;
  queued: number;
  acquisition: { workflowId: string | null; step: string | null; startedAtEpochMs: number; serveGoingDown?: string; abandonAtEpochMs?: number } | null;
  abandon: { workflowId: string; askedAtEpochMs: number; answer: string; detail?: string } | null;
  quiesceReason?: string;
}

export async function startOnDemandBox(o: OnDemandBoxOptions): Promise<OnDemandBox> {
  const node = uniqueNode(o.prefix);
  const dir = mkdtempSync(join(tmpdir(), `gpures-${o.prefix}-`));
  const text = renderManifest(node, [o.gpu], o.serves).replace(/^uuid = "GPU-[^"]*"$/m, `uuid = "GPU-${randomUUID()}"`);
  const { manifestPath, manifest } = writeManifest(dir, text);

  const servesDir = join(dir, 'serves');
  mkdirSync(servesDir, { recursive: true });
  // Only the test image exists: a serve naming another one fails with ImageMissing.
  const runtime = new SimRuntime({ stateDir: servesDir, knownImages: [TEST_IMAGE] });
  const smiState: FakeNvidiaSmiState = {
    gpus: manifest.gpus.map((g, index) => ({ index, uuid: g.uuid, name: 'NVIDIA GeForce RTX 5090', totalMib: g.capacityMib, baseUsedMib: 1200 })),
    simStateDir: servesDir,
  };
  const smiStatePath = join(dir, 'nvidia-smi.json');
  writeFileSync(smiStatePath, JSON.stringify(smiState));
  // As an installed worker reads it (GPURES_NVIDIA_SMI_LOOP_MS): one -lms stream, not a process a reading.
  const gpu = new NvidiaSmiStream({ binary: FAKE_NVIDIA_SMI, env: { FAKE_NVIDIA_SMI_STATE: smiStatePath }, intervalMs: DEFAULT_NVIDIA_SMI_LOOP_MS });

  const temporal = await testTemporal();
  const apiToken = `api-token-${randomUUID()}`;
  const api: FastifyInstance = buildApi({ client: temporal.client, manifest, manifestFile: manifestPath, token: apiToken });
  await api.listen({ host: '127.0.0.1', port: 0 });
  const address = api.server.address();
  if (!address || typeof address === 'string') throw new Error('the acquisition API did not bind a TCP port');
  const apiUrl = `http://127.0.0.1:${address.port}`;

  const doc = parseToml(routerConfigFor(manifest, `test.${node}`)) as { retry_after_s?: number; tiers: Record<string, unknown>[] };
  if (o.retryAfterS !== undefined) doc.retry_after_s = o.retryAfterS;
  for (const od of o.onDemand) {
    const tier = doc.tiers.find((t) => t['name'] === od.tier);
    if (!tier) throw new Error(`no tier ${od.tier} in the router config`);
    tier['on_demand'] = Object.fromEntries(Object.entries(od).filter(([k]) => k !== 'tier'));
  }
  const routerConfigPath = join(dir, 'router.toml');
  writeFileSync(routerConfigPath, stringifyToml(doc));
  const routerToken = `router-token-${randomUUID()}`;
  const clientToken = `client-token-${randomUUID()}`;
  const acquisitions = { url: o.routerApiUrl ? await o.routerApiUrl(apiUrl) : apiUrl, token: apiToken };
  const router: BoxRouter = o.routerProcess
    ? await startRouterProcess(routerConfigPath, {
        GPURES_ROUTER_TOKEN: routerToken,
        GPURES_API_URL: acquisitions.url,
        GPURES_API_TOKEN: acquisitions.token,
        GPURES_ROUTER_CLIENT_TOKEN: clientToken,
      })
    : await startRouter({
        configPath: routerConfigPath,
        adminToken: routerToken,
        port: 0,
        acquisitions,
        clientToken,
        acquisitionPollMs: 200,
        ...(o.heldBytesLimit !== undefined ? { heldBytesLimit: o.heldBytesLimit } : {}),
        ...(o.onDemandMarks ? { onDemandMarks: o.onDemandMarks } : {}),
      });
  const admin = new HttpRouterAdmin({ baseUrl: router.url, token: routerToken });

  let worker: TestWorker | undefined;
  try {
    worker = await startTestWorker({
      temporal,
      node,
      manifest: manifestPath,
      runtime,
      router: admin,
      gpu,
      pollIntervalMs: o.pollIntervalMs ?? 100,
      ...(o.workflowInterceptorModules ? { workflowInterceptorModules: o.workflowInterceptorModules } : {}),
    });
  } catch (err) {
    gpu.close();
    await router.close();
    await api.close();
    throw err;
  }
  const w = worker;
  return {
    node,
    manifest,
    manifestPath,
    temporal,
    router,
    admin,
    apiUrl,
    apiToken,
    clientToken,
    runtime,
    async tiers() {
      const res = await fetch(`${router.url}/admin/tiers`, { headers: { authorization: `Bearer ${routerToken}` } });
      return ((await res.json()) as { tiers: AdminTier[] }).tiers;
    },
    chat(model, extra = {}) {
      return fetch(`${router.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${clientToken}` },
        body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hello' }], ...extra }),
      });
    },
    async close() {
      await operationsEnded(temporal.client, node);
      await router.close();
      await api.close();
      await w.stop();
      gpu.close();
      for (const c of await runtime.list({})) await runtime.remove(c.name);
      await temporal.close();
    },
  };
}

/**
 * How long close() lets the node's operations still running end first (a bench that failed
 * mid-run, a test that closes right after a first byte): an acquisition's steps after its readmit
 * take milliseconds.
 */
const OPERATIONS_END_MS = 30_000;

/**
 * Waits, up to OPERATIONS_END_MS, for the serve operations running on the node to end, while the
 * worker still polls. Stopped under one, the worker polls no workflow task, the ledger's included:
 * a local step's ledger Update is never answered, and the shutdown waited for the step's five
 * attempts of 30 s (166 s). The installed worker exits past its bound instead (src/worker/stop.ts),
 * which a worker inside this test's process cannot do. Their outcomes are not this wait's concern.
 */
async function operationsEnded(client: Client, node: string): Promise<void> {
  const stop = new AbortController();
  const deadline = sleep(OPERATIONS_END_MS, undefined, { ref: false, signal: stop.signal }).catch(() => undefined);
  const ended = (op: { workflowId: string; runId: string }) =>
    client.workflow
      .getHandle(op.workflowId, op.runId)
      .result()
      .catch(() => undefined);
  try {
    await Promise.race([serveOperationsRunning(client, node).then((running) => Promise.all(running.map(ended))), deadline]);
  } finally {
    stop.abort();
  }
}

/** `node dist/src/router/main.js --config FILE --port 0`, its tokens in its environment only: its URL once it listens. */
export async function startRouterProcess(configPath: string, env: Record<string, string>): Promise<BoxRouter & { stderr(): string }> {
  const main = join(ROOT, 'dist', 'src', 'router', 'main.js');
  const p = spawn(process.execPath, [main, '--config', configPath, '--port', '0'], { env: { ...process.env, ...env }, stdio: ['ignore', 'ignore', 'pipe'] });
  const exited = new Promise<number | null>((resolve) => p.on('close', (code) => resolve(code)));
  let stderr = '';
  const url = await new Promise<string>((resolve, reject) => {
    p.stderr.on('data', (c: Buffer) => {
      stderr += c.toString();
      const m = /router listening on (http:\/\/\S+)/.exec(stderr);
      if (m?.[1]) resolve(m[1]);
    });
    void exited.then((code) => reject(new Error(`the router process exited ${code}: ${stderr}`)));
  });
  return {
    url,
    stderr: () => stderr,
    async close() {
      p.kill('SIGTERM');
      await exited;
    },
  };
}
