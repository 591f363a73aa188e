// The simulated box (runtime, router, fake nvidia-smi) with its worker as a process of its own
// (test/support/fleet-worker.ts, which takes the test seams): for tests that kill a worker and
// start the next one on the same box, as an operator's restart would.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Manifest } from '../../src/domain/types';
import { FAKE_NVIDIA_SMI, routerConfigFor, startSimBox } from '../../src/sim/box';
import type { SimBox } from '../../src/sim/box';
import { renderManifest, uniqueNode, writeManifest } from './box';
import type { TestGpu, TestServe } from './box';
import { ROOT, startWorkerProcess } from './cli';
import type { WorkerProcess } from './cli';
import { ROUTER_TOKEN } from './sim';
import { testTemporal } from './temporal';
import type { TestTemporal } from './temporal';

const SIM_WORKER = join(ROOT, 'dist', 'test', 'support', 'fleet-worker.js');

export interface SimWorkerBox {
  node: string;
  manifest: Manifest;
  /** The manifest file a `gpures` command passes with --manifest. */
  manifestPath: string;
  box: SimBox;
  temporal: TestTemporal;
  /** A worker process for the box; `extra` arguments are fleet-worker's seams (--kill-after-stop …). */
  startWorker(extra?: string[]): Promise<WorkerProcess>;
  close(): Promise<void>;
}

export async function startSimWorkerBox(prefix: string, gpu: TestGpu, serves: TestServe[]): Promise<SimWorkerBox> {
  const node = uniqueNode(prefix);
  const dir = mkdtempSync(join(tmpdir(), `gpures-${prefix}-`));
  const { manifest, manifestPath } = writeManifest(dir, renderManifest(node, [gpu], serves));
  const routerConfigPath = join(dir, 'router.toml');
  writeFileSync(routerConfigPath, routerConfigFor(manifest, `test.${node}`));
  const box = await startSimBox({ manifest, stateDir: join(dir, 'box'), routerConfigPath, routerToken: ROUTER_TOKEN, nonLedgerDrawMib: 1200 });
  const temporal = await testTemporal();
  const env = {
    TEMPORAL_ADDRESS: temporal.address,
    GPURES_ROUTER_URL: box.router.url,
    GPURES_ROUTER_TOKEN: ROUTER_TOKEN,
    GPURES_NVIDIA_SMI: FAKE_NVIDIA_SMI,
    FAKE_NVIDIA_SMI_STATE: box.nvidiaSmiStatePath,
  };
  return {
    node,
    manifest,
    manifestPath,
    box,
    temporal,
    startWorker: (extra = []) =>
      startWorkerProcess(['--manifest', manifestPath, '--state', join(dir, 'box', 'serves'), ...extra], env, [process.execPath, SIM_WORKER]),
    close: async () => {
      await box.close();
      await temporal.close();
    },
  };
}

/**
 * Samples the box every `everyMs` until `run` settles; returns how it ended ("completed: …" or
 * "failed: …", the failure's cause when it has one) and the samples.
 */
export async function sampleUntilEnded<S>(
  run: Promise<{ message?: string }>,
  sample: () => Promise<S>,
  everyMs = 200,
): Promise<{ ended: string; samples: S[] }> {
  let ended: string | undefined;
  const result = run.then(
    (r) => (ended = `completed: ${r.message ?? ''}`),
    (e: Error) => (ended = `failed: ${(e.cause as Error | undefined)?.message ?? e.message}`),
  );
  const samples: S[] = [];
  while (ended === undefined) {
    samples.push(await sample());
    await new Promise((r) => setTimeout(r, everyMs));
  }
  await result;
  return { ended, samples };
}
