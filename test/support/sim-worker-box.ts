// The simulated box (runtime, router, fake nvidia-smi) with its worker as a process of its own
// (test/support/fleet-worker.ts, which takes the test seams): for tests that kill a worker and
// start the next one on the same box, as an operator's restart would.
import { after, before } from 'node:test';
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
import { ROUTER_TOKEN, startSimTestBox } from './sim';
import type { SimTestBox } from './sim';
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

/**
 * Samples the box every 100 ms until stopped, and once more at the stop: the loop's last sample
 * began before the caller's step ended (a sample may spawn the fake nvidia-smi, hundreds of ms on a
 * loaded host). Bounded by `boundMs`: a case that fails before it stops the sampling does not keep
 * the file's process up.
 */
export function sampleBoxUntilStopped<S>(sample: () => Promise<S>, boundMs = 120_000): { stop: () => Promise<S[]> } {
  const samples: S[] = [];
  let going = true;
  const until = Date.now() + boundMs;
  const loop = (async () => {
    while (going && Date.now() < until) {
      samples.push(await sample());
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  return {
    stop: async () => {
      going = false;
      await loop;
      samples.push(await sample());
      return samples;
    },
  };
}

/**
 * A suite's simulated box with its one GPU, started before its cases and closed after them: the
 * box (`t`), the GPU's uuid, and the environment a `gpures` process reaches its Temporal with.
 */
export function simTestBoxPerSuite(
  prefix: string,
  gpu: TestGpu,
  serves: TestServe[],
): { readonly t: SimTestBox; readonly uuid: string; readonly env: Record<string, string> } {
  let box: SimTestBox | undefined;
  before(async () => {
    box = await startSimTestBox(prefix, [gpu], serves);
  });
  after(async () => {
    await box?.close();
  });
  return {
    get t() {
      if (!box) throw new Error(`the sim box of ${prefix} is not started`);
      return box;
    },
    get uuid() {
      return this.t.manifest.gpus[0]?.uuid ?? '';
    },
    get env() {
      return { TEMPORAL_ADDRESS: this.t.temporal.address };
    },
  };
}
