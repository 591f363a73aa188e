// The plain script a bring-up and a bring-down are measured against: the same Docker and HTTP
// calls without Temporal. bench/bring-up.ts runs it as it is, and as the one activity of a
// one-step workflow (bench/floor-workflow.ts): the least any workflow can add over it.
import { performance } from 'node:perf_hooks';
import type Docker from 'dockerode';
import { containerName, serveBaseUrl, serveHealthUrl, serveLabels, vllmCommand } from '../src/domain/serve';
import type { GpuSpec, ServeSpec } from '../src/domain/types';
import { workflowIds } from '../src/shared/messages';

export interface PlainUp {
  upMs: number;
  probes: number;
  /** Time spent sleeping between health probes. */
  sleptMs: number;
  /** Where the bring-up time went, phase -> ms. */
  phases: Record<string, number>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Inspect the image, create and start the container with the spec DockerRuntime.ensureRunning
 * gives this serve with --gpus off, poll /health as HttpServeProbe does (2 s a probe, then wait
 * pollMs), and check /v1/models for the served model's name.
 */
export async function plainUp(docker: Docker, node: string, serve: ServeSpec, gpu: GpuSpec, pollMs: number): Promise<PlainUp> {
  const portKey = `${serve.containerPort}/tcp`;
  const t0 = performance.now();
  const mark = phaseClock(t0);
  await docker.getImage(serve.image).inspect();
  const container = await docker.createContainer({
    name: containerName(node, serve.name),
    Image: serve.image,
    Cmd: vllmCommand(serve),
    Env: Object.entries(serve.env).map(([k, v]) => `${k}=${v}`),
    Labels: serveLabels(node, serve, gpu, workflowIds.ledger(node, gpu.role)),
    ExposedPorts: { [portKey]: {} },
    HostConfig: { PortBindings: { [portKey]: [{ HostIp: serve.bind, HostPort: String(serve.port) }] }, Init: true },
  });
  await container.start();
  mark('container');
  const deadline = Date.now() + serve.startTimeoutS * 1000;
  let probes = 0;
  let sleptMs = 0;
  for (;;) {
    probes += 1;
    try {
      const res = await fetch(serveHealthUrl(serve), { signal: AbortSignal.timeout(2000) });
      await res.arrayBuffer();
      if (res.status === 200) break;
    } catch {
      // not listening yet
    }
    if (Date.now() >= deadline) throw new Error(`plain: no 200 from ${serveHealthUrl(serve)} within ${serve.startTimeoutS} s`);
    const z = performance.now();
    await sleep(pollMs);
    sleptMs += performance.now() - z;
  }
  mark('health');
  const res = await fetch(`${serveBaseUrl(serve)}/v1/models`, { signal: AbortSignal.timeout(5000) });
  const body = (await res.json()) as { data?: { id?: unknown }[] };
  const ids = (body.data ?? []).map((m) => String(m.id));
  if (!ids.includes(serve.servedModelName)) throw new Error(`plain: /v1/models reports ${ids.join(', ')}, expected ${serve.servedModelName}`);
  mark('identity');
  return { upMs: performance.now() - t0, probes, sleptMs, phases: mark.phases };
}

/** Stop the serve's container (its stop timeout) and remove it; the ms it took. */
export async function plainDown(docker: Docker, node: string, serve: ServeSpec): Promise<number> {
  const t0 = performance.now();
  const container = docker.getContainer(containerName(node, serve.name));
  await container.stop({ t: serve.stopTimeoutS });
  await container.remove({ force: true });
  return performance.now() - t0;
}

/** Records the time since the previous mark under a phase name. */
function phaseClock(start: number): ((phase: string) => void) & { phases: Record<string, number> } {
  let last = start;
  const phases: Record<string, number> = {};
  const mark = (phase: string) => {
    const now = performance.now();
    phases[phase] = now - last;
    last = now;
  };
  return Object.assign(mark, { phases });
}
