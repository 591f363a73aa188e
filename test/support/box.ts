// A test box: a manifest of fake-vLLM serves on a private dockerd, a worker on a real dev
// server, and a unique node name so suites and re-runs never see each other's ledgers.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import type { Worker } from '@temporalio/worker';
import { TEST_IMAGES } from '../../src/dev/toolchain';
import { LABEL } from '../../src/domain/serve';
import { parseManifest } from '../../src/config/manifest';
import type { Manifest } from '../../src/domain/types';
import { testTemporal } from './temporal';
import type { TestTemporal } from './temporal';
import { startTestWorker } from './worker';

export const TEST_IMAGE = process.env['GPURES_TEST_IMAGE'] ?? TEST_IMAGES.fakeVllm;

export function docker(): Docker {
  // DOCKER_HOST comes from scripts/test.sh; docker-modem reads it.
  return new Docker();
}

export interface TestServe {
  name: string;
  gpu_role?: string;
  class?: 'resident' | 'evictable' | 'on-demand';
  vram_mib: number;
  served_model_name?: string;
  image?: string;
  env?: Record<string, string>;
  start_timeout_s?: number;
  router_tier?: string;
  api?: 'openai' | 'http' | 'none';
  args?: string[];
  /** Host port; by default the next free one of a sequence. */
  port?: number;
  min_residency_s?: number;
  idle_ttl_s?: number;
  /** Eviction by sleeping: eviction = "sleep" with these. */
  sleep?: { level?: 1 | 2; residual_mib: number; host_ram_mib?: number };
}

export interface TestGpu {
  role: string;
  capacity_mib: number;
  reserve_mib: number;
}

// Below the kernel's ephemeral range (32768+), where a client socket could hold a port first,
// and below the example manifest's 30001-30009.
let nextPort = 20000 + Math.floor(Math.random() * 9000);

export function renderManifest(node: string, gpus: TestGpu[], serves: TestServe[]): string {
  const lines = [`[node]`, `name = "${node}"`, ''];
  gpus.forEach((g, i) => {
    lines.push(
      `[[gpus]]`,
      `role = "${g.role}"`,
      `uuid = "GPU-00000000-0000-0000-0000-00000000000${i}"`,
      `capacity_mib = ${g.capacity_mib}`,
      `reserve_mib = ${g.reserve_mib}`,
      '',
    );
  });
  for (const s of serves) {
    lines.push(
      `[[serves]]`,
      `name = "${s.name}"`,
      `gpu_role = "${s.gpu_role ?? gpus[0]?.role}"`,
      `class = "${s.class ?? 'resident'}"`,
      `vram_mib = ${s.vram_mib}`,
      `image = "${s.image ?? TEST_IMAGE}"`,
      `model = "test/${s.name}"`,
      `served_model_name = "${s.served_model_name ?? s.name}"`,
      `port = ${s.port ?? nextPort++}`,
      `start_timeout_s = ${s.start_timeout_s ?? 30}`,
      `stop_timeout_s = 5`,
    );
    if (s.router_tier) lines.push(`router_tier = "${s.router_tier}"`);
    if (s.idle_ttl_s !== undefined) lines.push(`idle_ttl_s = ${s.idle_ttl_s}`);
    if (s.api) lines.push(`api = "${s.api}"`);
    if (s.min_residency_s !== undefined) lines.push(`min_residency_s = ${s.min_residency_s}`);
    if (s.sleep) {
      lines.push(`eviction = "sleep"`, `sleep_residual_mib = ${s.sleep.residual_mib}`);
      if (s.sleep.level !== undefined) lines.push(`sleep_level = ${s.sleep.level}`);
      if (s.sleep.host_ram_mib !== undefined) lines.push(`sleep_host_ram_mib = ${s.sleep.host_ram_mib}`);
    }
    if (s.args) lines.push(`args = [${s.args.map((a) => JSON.stringify(a)).join(', ')}]`);
    if (s.env)
      lines.push(
        `env = { ${Object.entries(s.env)
          .map(([k, v]) => `${k} = "${v}"`)
          .join(', ')} }`,
      );
    lines.push('');
  }
  return lines.join('\n');
}

/**
 * The field report's vision, evicted by sleeping at level 1 and keeping 600 MiB (the serve, sim
 * or fake-vLLM image, keeps what it declares); `env` adds the serve's sleep knobs.
 */
export function sleepingVision(env: Record<string, string> = {}): TestServe {
  return {
    name: 'vision',
    vram_mib: 12288,
    class: 'evictable',
    served_model_name: 'qwen3-vl-4b-instruct',
    router_tier: 'vision-local',
    sleep: { level: 1, residual_mib: 600, host_ram_mib: 8837 },
    env: { SIM_SLEEP_RESIDUAL_MIB: '600', ...env },
  };
}

/** The manifest written as `dir`/serves.toml and parsed; a manifest the test wrote wrong throws. */
export function writeManifest(dir: string, text: string): { manifestPath: string; manifest: Manifest } {
  const manifestPath = join(dir, 'serves.toml');
  writeFileSync(manifestPath, text);
  const parsed = parseManifest(text, manifestPath);
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.errors));
  return { manifestPath, manifest: parsed.manifest };
}

/** The containers gpures labelled with `node`, running or not. */
export async function nodeContainers(node: string): Promise<{ serve: string; running: boolean }[]> {
  return (await docker().listContainers({ all: true, filters: { label: [`${LABEL.node}=${node}`] } })).map((c) => ({
    serve: c.Labels[LABEL.serve] ?? '?',
    running: c.State === 'running',
  }));
}

/** Removes whatever a suite left of `node`'s containers. */
export async function removeNodeContainers(node: string): Promise<void> {
  const d = docker();
  for (const c of await d.listContainers({ all: true, filters: { label: [`${LABEL.node}=${node}`] } })) await d.getContainer(c.Id).remove({ force: true });
}

export interface TestBox {
  node: string;
  manifestPath: string;
  temporal: TestTemporal;
  worker: Worker;
  containers(): Promise<{ serve: string; running: boolean }[]>;
  close(): Promise<void>;
}

export function uniqueNode(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}${Math.floor(Math.random() * 1e4).toString(36)}`;
}

export async function startTestBox(node: string, manifestText: string): Promise<TestBox> {
  const dir = mkdtempSync(join(tmpdir(), 'gpures-'));
  const manifestPath = join(dir, 'serves.toml');
  writeFileSync(manifestPath, manifestText);
  const temporal = await testTemporal();
  const { worker, stop } = await startTestWorker({ temporal, node, manifest: manifestPath, pollIntervalMs: 200 });
  return {
    node,
    manifestPath,
    temporal,
    worker,
    containers: () => nodeContainers(node),
    async close() {
      await stop();
      await removeNodeContainers(node);
      await temporal.close();
    },
  };
}

/** One chat request through a router: its status, its body (JSON when it parses), and when it ended. */
export async function routedChat(
  routerUrl: string,
  preset: string,
  body: Record<string, unknown> = {},
): Promise<{ status: number; body: unknown; finishedAt: number }> {
  const res = await fetch(`${routerUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: preset, messages: [{ role: 'user', content: 'describe the screenshot' }], ...body }),
  });
  const text = await res.text();
  let parsedBody: unknown = text;
  try {
    parsedBody = JSON.parse(text);
  } catch {
    // SSE or plain text: keep it as it came.
  }
  return { status: res.status, body: parsedBody, finishedAt: Date.now() };
}
