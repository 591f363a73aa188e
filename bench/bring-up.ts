// Benchmark: what running a bring-up as a Temporal workflow costs over the plain Docker calls.
//
// One serve that is healthy at once (fake vLLM, FAKE_START_DELAY_S=0), brought up N times as a
// workflow (serveUp against an in-process worker on a dev server, then serveDown) and N times
// by a plain dockerode script making the same calls (inspect image, create with the same spec,
// start, poll /health until 200, GET /v1/models, then stop + remove), alternating in the same
// run. Both poll /health at the same interval. Each workflow run's history is read afterwards
// (bench/history-time.ts) for where its time went, share by share, by the server's clock.
//
//   node dist/bench/bring-up.js [--runs N] [--poll-ms MS]     (scripts/bench.sh sets the env up)
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import Docker from 'dockerode';
import { DockerRuntime } from '../src/adapters/containers/docker';
import { serveDown, serveUp } from '../src/client/operations';
import { parseManifest } from '../src/config/manifest';
import { containerName, LABEL, serveBaseUrl, serveHealthUrl, serveLabels, vllmCommand } from '../src/domain/serve';
import type { GpuSpec, ServeSpec } from '../src/domain/types';
import { workflowIds } from '../src/shared/messages';
import { renderManifest, uniqueNode } from '../test/support/box';
import { testTemporal } from '../test/support/temporal';
import { startTestWorker } from '../test/support/worker';
import { fetchHistoryJson } from '../src/audit/export';
import { formatShares, historyTime, medianShares, runTotals } from './history-time';
import type { TimeShare } from './history-time';
import { median, targetLine, TARGETS } from './target';

const SERVE = 'bench';

interface Sample {
  upMs: number;
  downMs: number;
  probes: number;
  /** Time spent sleeping between health probes. */
  sleptMs: number;
  /** Where the bring-up time went, phase -> ms. */
  phases: Record<string, number>;
  /** The workflow's runs, up and down, share by share from their histories. */
  history?: { up: TimeShare[]; down: TimeShare[] };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * The plain script: the Docker and HTTP calls of a bring-up without Temporal. The container spec
 * is the one DockerRuntime.ensureRunning creates for this serve with --gpus off.
 */
async function plainBringUp(docker: Docker, node: string, serve: ServeSpec, gpu: GpuSpec, pollMs: number): Promise<Sample> {
  const name = containerName(node, serve.name);
  const portKey = `${serve.containerPort}/tcp`;
  const t0 = performance.now();
  const mark = phaseClock(t0);
  await docker.getImage(serve.image).inspect();
  const container = await docker.createContainer({
    name,
    Image: serve.image,
    Cmd: vllmCommand(serve),
    Env: Object.entries(serve.env).map(([k, v]) => `${k}=${v}`),
    Labels: serveLabels(node, serve, gpu, workflowIds.ledger(node, gpu.role)),
    ExposedPorts: { [portKey]: {} },
    HostConfig: { PortBindings: { [portKey]: [{ HostIp: serve.bind, HostPort: String(serve.port) }] }, Init: true },
  });
  await container.start();
  mark('container');
  // The same probe as HttpServeProbe: 2 s timeout per request, then wait pollMs.
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
  const upMs = performance.now() - t0;

  const t1 = performance.now();
  await container.stop({ t: serve.stopTimeoutS });
  await container.remove({ force: true });
  return { upMs, downMs: performance.now() - t1, probes, sleptMs, phases: mark.phases };
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

/**
 * The workflow's phases from its step records. A step's `at` is workflow time (the timestamp of
 * the workflow task that recorded it, from the server's clock), so these are approximate; the
 * first phase runs from the client's start call and the last ends at the client's result.
 */
function workflowPhases(t0Epoch: number, steps: { step: string; at: string }[], endEpoch: number): Record<string, number> {
  const at = (name: string) => Date.parse(steps.find((s) => s.step === name)?.at ?? '');
  const names: [string, string][] = [
    ['admit', 'resolve+admit'],
    ['start', 'container'],
    ['health', 'health'],
    ['identity', 'identity'],
    ['running', 'mark running'],
  ];
  const phases: Record<string, number> = {};
  let last = t0Epoch;
  for (const [step, label] of names) {
    const t = at(step);
    phases[label] = t - last;
    last = t;
  }
  phases['result to client'] = endEpoch - last;
  return phases;
}

/**
 * The workflow's time share by share from its histories (medians per share), and per run, then
 * their medians: what lies outside its activities (workflow tasks with their local activities and
 * ledger Updates, dispatches, the client's calls), and the activities' own time without the poll
 * sleeps, against the plain script's. The start activity's two fence Updates, its manifest read
 * and its image and container inspections count as the activity's.
 */
function historyLines(what: string, runs: { shares: TimeShare[]; sleptMs: number }[], plainMs: number): void {
  const { shares, otherShapes } = medianShares(runs.map((r) => r.shares));
  const totals = runs.map((r) => runTotals(r.shares));
  const outside = median(totals.map((t) => t.temporalMs));
  const activities = median(totals.map((t, i) => t.activitiesMs - (runs[i]?.sleptMs ?? 0)));
  const shaped = otherShapes ? ` (${otherShapes} of ${runs.length} runs had other steps: their shares are mixed in)` : '';
  process.stdout.write(`  ${what}, workflow, from its histories (medians per share, server clock)${shaped}: ${formatShares(shares)} ms\n`);
  process.stdout.write(
    `  ${what}, medians per run: outside its activities ${fmt(outside)} ms (workflow tasks, dispatch, client); its activities ${fmt(activities)} ms (poll sleeps out) against the plain script's ${fmt(plainMs)} ms\n`,
  );
}

function fmt(ms: number): string {
  return `${Math.round(ms)}`;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      runs: { type: 'string', default: '7' },
      'poll-ms': { type: 'string', default: '200' },
    },
  });
  const runs = Number(values.runs);
  const pollMs = Number(values['poll-ms']);
  if (!Number.isInteger(runs) || runs < 1) throw new Error(`--runs must be a positive integer (got ${values.runs})`);
  if (!Number.isInteger(pollMs) || pollMs < 1) throw new Error(`--poll-ms must be a positive integer (got ${values['poll-ms']})`);

  const node = uniqueNode('bench');
  const text = renderManifest(
    node,
    [{ role: 'bench-gpu', capacity_mib: 32607, reserve_mib: 4608 }],
    [{ name: SERVE, vram_mib: 1024, env: { FAKE_START_DELAY_S: '0' }, start_timeout_s: 30 }],
  );
  const parsed = parseManifest(text, 'bench-serves.toml');
  if (!parsed.ok) throw new Error(parsed.errors.map((e) => `${e.path}: ${e.message}`).join('\n'));
  const serve = parsed.manifest.serves[0];
  const gpu = parsed.manifest.gpus[0];
  if (!serve || !gpu) throw new Error('bench manifest has no serve');
  const dir = mkdtempSync(join(tmpdir(), 'gpures-bench-'));
  const manifestPath = join(dir, 'serves.toml');
  writeFileSync(manifestPath, text);

  const docker = new Docker();
  const removeLeftovers = async () => {
    for (const c of await docker.listContainers({ all: true, filters: { label: [`${LABEL.node}=${node}`] } })) {
      await docker.getContainer(c.Id).remove({ force: true });
    }
  };

  const temporal = await testTemporal();
  const worker = await startTestWorker({
    temporal,
    node,
    manifest: manifestPath,
    runtime: new DockerRuntime(docker, { gpus: 'off' }),
    pollIntervalMs: pollMs,
  });

  const viaWorkflow = async (): Promise<Sample> => {
    const t0Epoch = Date.now();
    const t0 = performance.now();
    const up = await serveUp(temporal.client, node, SERVE);
    const upMs = performance.now() - t0;
    const endEpoch = Date.now();
    if (!up.ok) throw new Error(`workflow: ${up.message}`);
    if (up.result.outcome !== 'started') throw new Error(`workflow: ${up.result.message}`);
    const health = up.result.steps.find((s) => s.step === 'health')?.outcome ?? '';
    const probes = Number(/after (\d+) probes/.exec(health)?.[1] ?? NaN);
    const t1Epoch = Date.now();
    const t1 = performance.now();
    const down = await serveDown(temporal.client, node, SERVE);
    const downMs = performance.now() - t1;
    const downEndEpoch = Date.now();
    if (!down.ok || down.result.outcome !== 'stopped') throw new Error(`workflow down: ${down.ok ? down.result.message : down.message}`);
    // Read after both runs, outside their timings.
    const history = {
      up: historyTime(await fetchHistoryJson(temporal.client, up.workflowId, up.runId), t0Epoch, endEpoch),
      down: historyTime(await fetchHistoryJson(temporal.client, down.workflowId, down.runId), t1Epoch, downEndEpoch),
    };
    return { upMs, downMs, probes, sleptMs: (probes - 1) * pollMs, phases: workflowPhases(t0Epoch, up.result.steps, endEpoch), history };
  };
  const viaPlain = () => plainBringUp(docker, node, serve, gpu, pollMs);

  const wf: Sample[] = [];
  const plain: Sample[] = [];
  const order: string[] = [];
  try {
    await removeLeftovers();
    // Warm-up, not counted: the first workflow also starts the ledger entity workflow and warms
    // the worker's caches; the first create warms dockerd.
    await viaWorkflow();
    await viaPlain();
    for (let i = 0; i < runs; i++) {
      // Alternate which goes first, so neither always runs on the other's freshly freed port.
      if (i % 2 === 0) {
        wf.push(await viaWorkflow());
        plain.push(await viaPlain());
        order.push('wf, plain');
      } else {
        plain.push(await viaPlain());
        wf.push(await viaWorkflow());
        order.push('plain, wf');
      }
    }
  } finally {
    await worker.stop();
    await removeLeftovers();
    await temporal.close();
  }

  const out = (line: string) => process.stdout.write(`${line}\n`);
  out(`bring-up of one fake-vLLM serve healthy at once (FAKE_START_DELAY_S=0), image ${serve.image}`);
  out(`/health polled every ${pollMs} ms by both (2 s probe timeout); ${runs} runs each, alternating, after 1 warm-up of each (not counted)`);
  out('workflow = serveUp (start workflow .. result: resolve, ledger admit, start container, health, identity, mark running);');
  out('plain    = dockerode: inspect image, create, start, poll /health, GET /v1/models. down = serveDown vs stop + remove.');
  out('');
  const header = ['run', 'order', 'workflow up ms', 'plain up ms', 'diff ms', 'wf probes', 'plain probes', 'workflow down ms', 'plain down ms'];
  const rows = wf.map((w, i) => {
    const p = plain[i] as Sample;
    return [String(i + 1), order[i] ?? '', fmt(w.upMs), fmt(p.upMs), fmt(w.upMs - p.upMs), String(w.probes), String(p.probes), fmt(w.downMs), fmt(p.downMs)];
  });
  const widths = header.map((h, c) => Math.max(h.length, ...rows.map((r) => (r[c] ?? '').length)));
  const line = (cells: string[]) => cells.map((cell, c) => (c < 2 ? cell.padEnd(widths[c] ?? 0) : cell.padStart(widths[c] ?? 0))).join('  ');
  out(line(header));
  for (const r of rows) out(line(r));
  out('');

  const wfUp = median(wf.map((s) => s.upMs));
  const plainUp = median(plain.map((s) => s.upMs));
  const pairDiff = median(wf.map((w, i) => w.upMs - (plain[i]?.upMs ?? NaN)));
  out(`bring-up median: workflow ${fmt(wfUp)} ms, plain dockerode ${fmt(plainUp)} ms, ratio ${(wfUp / plainUp).toFixed(2)} (${runs} runs)`);
  out(`workflow overhead: ${fmt(wfUp - plainUp)} ms (median workflow - median plain); per-run difference median ${fmt(pairDiff)} ms`);
  const wfActive = median(wf.map((s) => s.upMs - s.sleptMs));
  const plainActive = median(plain.map((s) => s.upMs - s.sleptMs));
  out(
    `with the ${pollMs} ms poll sleeps taken out: workflow ${fmt(wfActive)} ms, plain ${fmt(plainActive)} ms, ratio ${(wfActive / plainActive).toFixed(2)}, overhead ${fmt(wfActive - plainActive)} ms`,
  );
  const phaseLine = (label: string, samples: Sample[]) => {
    const keys = Object.keys(samples[0]?.phases ?? {});
    return `${label}: ${keys.map((k) => `${k} ${fmt(median(samples.map((s) => s.phases[k] ?? NaN)))}`).join(', ')} ms`;
  };
  out(phaseLine('where the time goes, workflow (medians; from step timestamps, approximate)', wf));
  out(phaseLine('where the time goes, plain    (medians)', plain));
  historyLines(
    'bring-up',
    wf.map((s) => ({ shares: s.history?.up ?? [], sleptMs: s.sleptMs })),
    median(plain.map((s) => s.upMs - s.sleptMs)),
  );
  const wfDown = median(wf.map((s) => s.downMs));
  const plainDown = median(plain.map((s) => s.downMs));
  out(`bring-down median: workflow ${fmt(wfDown)} ms, plain dockerode ${fmt(plainDown)} ms, ratio ${(wfDown / plainDown).toFixed(2)}`);
  historyLines(
    'bring-down',
    wf.map((s) => ({ shares: s.history?.down ?? [], sleptMs: 0 })),
    plainDown,
  );
  // With the poll sleeps out: at a long poll the plain script's second probe waits a whole interval
  // the workflow's later first probe does not, and the raw ratio then flatters the workflow.
  out(targetLine('bring-up ratio, poll sleeps taken out', wfActive / plainActive, '<=', TARGETS.bringRatio));
  out(targetLine('bring-down ratio', wfDown / plainDown, '<=', TARGETS.bringRatio));
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`bench: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
