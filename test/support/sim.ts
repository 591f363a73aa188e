// A simulated box for workflow tests: sim serves, the reference router, the fake nvidia-smi,
// and a worker on the real dev server wired to them, with the worker's loopback endpoint
// (/metrics and /v1/ledger) on a port of its own, as `gpures worker` serves it.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Client } from '@temporalio/client';
import type { Worker } from '@temporalio/worker';
import type { LedgerPort } from '../../src/adapters/ledger/port';
import type { ContainerRuntime } from '../../src/adapters/containers/port';
import type { RouterAdmin } from '../../src/adapters/router-admin/port';
import type { Manifest } from '../../src/domain/types';
import { routerConfigFor, startSimBox } from '../../src/sim/box';
import type { SimBox } from '../../src/sim/box';
import { renderManifest, routedChat, uniqueNode, writeManifest } from './box';
import type { TestGpu, TestServe } from './box';
import { testTemporal } from './temporal';
import type { TestTemporal } from './temporal';
import { startTestWorker } from './worker';
import type { LedgerState } from '../../src/domain/ledger';
import { physicalTruth } from '../../src/domain/physical';
import { LABEL, serveCommand } from '../../src/domain/serve';
import { startMetricsServer } from '../../src/worker/metrics-server';
import { WorkerMetrics } from '../../src/worker/metrics';
import { workerLedgerRead } from '../../src/worker/ledger-endpoint';
import type { LedgerRead } from '../../src/worker/ledger-endpoint';
import { fileManifest } from '../../src/worker/worker';

export const ROUTER_TOKEN = 'test-router-token';

export interface SimTestBox {
  node: string;
  manifest: Manifest;
  manifestPath: string;
  routerConfigPath: string;
  box: SimBox;
  temporal: TestTemporal;
  worker: Worker;
  /** The worker's loopback endpoint, as GPURES_METRICS_ADDR names it (HOST:PORT). */
  endpointAddr: string;
  /** How many ledger reads the endpoint answered (200). */
  ledgerReads(): number;
  /** POST a chat completion for `preset` through the router. */
  routed(preset: string, body?: Record<string, unknown>): Promise<{ status: number; body: unknown; finishedAt: number }>;
  close(): Promise<void>;
}

export interface SimTestBoxOptions {
  /** The ledgers as the worker's activities reach them, made from the test's client (default: the worker's own). */
  ledger?: (client: Client) => LedgerPort;
  /** Workflow interceptor modules of the test's, bundled beside the worker's own. */
  workflowInterceptorModules?: string[];
  /** The container runtime as the worker's activities reach it, made from the box's own (default: the box's). */
  runtime?: (box: ContainerRuntime) => ContainerRuntime;
  /** The router's admin API as the worker's activities reach it, made from the box's own (default: the box's). */
  router?: (box: RouterAdmin) => RouterAdmin;
}

export async function startSimTestBox(prefix: string, gpus: TestGpu[], serves: TestServe[], opts: SimTestBoxOptions = {}): Promise<SimTestBox> {
  const node = uniqueNode(prefix);
  const dir = mkdtempSync(join(tmpdir(), 'gpures-sim-'));
  const text = renderManifest(node, gpus, serves);
  const { manifestPath, manifest } = writeManifest(dir, text);
  const routerConfigPath = join(dir, 'router.toml');
  writeFileSync(routerConfigPath, routerConfigFor(manifest, `test.${node}`));
  const box = await startSimBox({ manifest, stateDir: join(dir, 'box'), routerConfigPath, routerToken: ROUTER_TOKEN, nonLedgerDrawMib: 1200 });
  const temporal = await testTemporal();
  const { worker, stop } = await startTestWorker({
    temporal,
    node,
    manifest: manifestPath,
    runtime: opts.runtime ? opts.runtime(box.runtime) : box.runtime,
    router: opts.router ? opts.router(box.routerAdmin) : box.routerAdmin,
    gpu: box.gpu,
    pollIntervalMs: 100,
    ...(opts.ledger ? { ledger: opts.ledger(temporal.client) } : {}),
    ...(opts.workflowInterceptorModules ? { workflowInterceptorModules: opts.workflowInterceptorModules } : {}),
  });
  const read = workerLedgerRead({
    client: temporal.client,
    temporal: { address: temporal.address, namespace: 'default' },
    node,
    manifest: fileManifest(manifestPath),
    gpu: box.gpu,
  });
  let reads = 0;
  const counted: LedgerRead = async () => {
    const answer = await read();
    reads++;
    return answer;
  };
  const endpoint = await startMetricsServer({ host: '127.0.0.1', port: 0, metrics: new WorkerMetrics(), ledger: counted });
  return {
    node,
    manifest,
    manifestPath,
    routerConfigPath,
    box,
    temporal,
    worker,
    endpointAddr: new URL(endpoint.url).host,
    ledgerReads: () => reads,
    routed: (preset, body) => routedChat(box.router.url, preset, body),
    async close() {
      await endpoint.close();
      await stop();
      await box.close();
      await temporal.close();
    },
  };
}

/**
 * What nvidia-smi shows used on the ledger's GPU less what the ledger says its serves hold, a serve
 * in flux (starting, stopping, being evicted) at its whole reservation: the box's non-ledger draw,
 * when the ledger is the box.
 */
export async function nonLedgerDrawOf(box: SimBox, l: LedgerState): Promise<number> {
  const reading = (await box.gpu.readGpus()).find((g) => g.uuid === l.gpuUuid);
  if (!reading) throw new Error(`nvidia-smi shows no GPU ${l.gpuUuid}`);
  return physicalTruth(l, reading).nonLedgerDrawMinMib;
}

/**
 * A process outside the ledger holding `mib` on the box's first GPU: the manifest's serve named
 * `squatter` (it lends a port and a command) run by hand as `squatter-<node>`, a separate process
 * the fake nvidia-smi lists with its MiB. Returns its pids.
 */
export async function startSquatter(t: SimTestBox, mib: number): Promise<number[]> {
  const spec = t.manifest.serves.find((s) => s.name === 'squatter');
  const uuid = t.manifest.gpus[0]?.uuid;
  if (!spec || !uuid) throw new Error('the manifest has no serve named squatter, or no GPU');
  const name = `squatter-${t.node}`;
  await t.box.runtime.ensureRunning({
    name,
    image: spec.image,
    cmd: serveCommand(spec),
    env: spec.env,
    labels: { [LABEL.gpuUuid]: uuid, [LABEL.vramMib]: String(mib) },
    bind: spec.bind,
    hostPort: spec.port,
    containerPort: spec.containerPort,
    gpuUuid: uuid,
  });
  return t.box.runtime.processes(name);
}
