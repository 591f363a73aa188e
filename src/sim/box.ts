// The simulated box: serves as local model-server processes, a fake nvidia-smi whose memory
// follows them plus a non-ledger draw, and the reference router. The workflows and activity
// interfaces are the Docker box's; only the runtime adapter differs.
import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { stringify } from 'smol-toml';
import { HttpRouterAdmin } from '../adapters/router-admin/http';
import { NvidiaSmiStream } from '../adapters/gpu/nvidia-smi-stream';
import { DEFAULT_NVIDIA_SMI_LOOP_MS } from '../config/env';
import { serveBaseUrl } from '../domain/serve';
import type { Manifest } from '../domain/types';
import { startRouter } from '../router/server';
import type { RunningRouter } from '../router/server';
import type { FakeNvidiaSmiState } from './fake-nvidia-smi';
import { SimRuntime } from './runtime';
import { writeFileAtomic } from './state-dir';

export const FAKE_NVIDIA_SMI = resolve(__dirname, '..', '..', '..', 'bin', 'fake-nvidia-smi');

/**
 * A router config that routes each serve's tier to it: one preset per serve (its name), and
 * model_identity on every tier so every readmit is guarded.
 */
export function routerConfigFor(manifest: Manifest, mappingVersion: string): string {
  const served = manifest.serves.filter((s) => s.routerTier);
  return stringify({
    mapping_version: mappingVersion,
    tiers: served.map((s) => ({ name: s.routerTier, backend: serveBaseUrl(s), served_model_name: s.servedModelName, model_identity: true })),
    presets: served.map((s) => ({ name: s.name, tier: s.routerTier })),
  });
}

export interface SimBoxOptions {
  manifest: Manifest;
  stateDir: string;
  routerConfigPath: string;
  routerToken: string;
  /** Display, sidecars and the like: what the ledger's reserve is meant to cover. */
  nonLedgerDrawMib: number;
  routerPort?: number;
  /** The acquisition API the router's on-demand tiers acquire through; without it they are ordinary tiers. */
  acquisitions?: { url: string; token: string };
  /** The token requests to the router's on-demand presets must carry; required with `acquisitions` for an on-demand tier. */
  clientToken?: string;
}

export interface SimBox {
  runtime: SimRuntime;
  /** The fake nvidia-smi as a worker reads it by default: one -lms stream. */
  gpu: NvidiaSmiStream;
  router: RunningRouter;
  routerAdmin: HttpRouterAdmin;
  nvidiaSmiStatePath: string;
  writeNvidiaSmiState(patch: Partial<FakeNvidiaSmiState>): void;
  close(): Promise<void>;
}

export async function startSimBox(o: SimBoxOptions): Promise<SimBox> {
  const servesDir = join(o.stateDir, 'serves');
  mkdirSync(servesDir, { recursive: true });
  const runtime = new SimRuntime({ stateDir: servesDir });
  const nvidiaSmiStatePath = join(o.stateDir, 'nvidia-smi.json');
  let smiState: FakeNvidiaSmiState = {
    gpus: o.manifest.gpus.map((g, index) => ({
      index,
      uuid: g.uuid,
      name: 'NVIDIA GeForce RTX 5090',
      totalMib: g.capacityMib,
      baseUsedMib: o.nonLedgerDrawMib,
    })),
    simStateDir: servesDir,
  };
  const writeNvidiaSmiState = (patch: Partial<FakeNvidiaSmiState>) => {
    smiState = { ...smiState, ...patch };
    // Renamed into place: the -lms loop reads it on every interval, and half a file would end the loop.
    writeFileAtomic(nvidiaSmiStatePath, JSON.stringify(smiState, null, 2));
  };
  writeNvidiaSmiState({});
  const gpu = new NvidiaSmiStream({ binary: FAKE_NVIDIA_SMI, env: { FAKE_NVIDIA_SMI_STATE: nvidiaSmiStatePath }, intervalMs: DEFAULT_NVIDIA_SMI_LOOP_MS });
  const router = await startRouter({
    configPath: o.routerConfigPath,
    adminToken: o.routerToken,
    port: o.routerPort ?? 0,
    stateFile: join(o.stateDir, 'router-state.json'),
    ...(o.acquisitions ? { acquisitions: o.acquisitions, acquisitionPollMs: 200 } : {}),
    ...(o.clientToken ? { clientToken: o.clientToken } : {}),
  });
  const routerAdmin = new HttpRouterAdmin({ baseUrl: router.url, token: o.routerToken });
  return {
    runtime,
    gpu,
    router,
    routerAdmin,
    nvidiaSmiStatePath,
    writeNvidiaSmiState,
    async close() {
      gpu.close();
      await router.close();
      for (const c of await runtime.list({})) await runtime.remove(c.name);
    },
  };
}
