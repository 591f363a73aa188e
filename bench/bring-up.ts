// Benchmark: what running a bring-up as a Temporal workflow costs over the plain Docker calls.
//
// One serve that is healthy at once (fake vLLM, FAKE_START_DELAY_S=0), brought up N times as a
// workflow (serveUp against an in-process worker on a dev server, then serveDown) and N times
// by a plain dockerode script making the same calls (bench/plain.ts: inspect image, create with
// the same spec, start, poll /health until 200, GET /v1/models, then stop + remove), and N times
// as that script run as the one activity of a workflow that does nothing else (the floor), in
// rotating order in the same run. All poll /health at the same interval. Each workflow run's history is read afterwards
// (bench/history-time.ts) for where its time went, share by share, by the server's clock.
//
//   node dist/bench/bring-up.js [--runs N] [--poll-ms MS] [--load-s S] [--worker-poll installed]
//   (scripts/bench.sh sets the env up)
//
// --worker-poll installed: the worker polls /health at an installed worker's default (no
// pollIntervalMs), the plain script and the floor still at --poll-ms; the workflow's sleeps are
// then left in its figures (their length is the worker's to choose), so its ratio is the wall
// an operator waits against the plain script's.
// --load-s S: the serve answers /health S seconds after its start, as a loading model does (vLLM
// takes 30 s or more); issue 15's ratio is read on S = 0, where the orchestration's share is largest.
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import type { Client } from '@temporalio/client';
import { Worker } from '@temporalio/worker';
import Docker from 'dockerode';
import { DockerRuntime } from '../src/adapters/containers/docker';
import { serveDown, serveUp } from '../src/client/operations';
import { parseManifest } from '../src/config/manifest';
import { LABEL } from '../src/domain/serve';
import type { GpuSpec, ServeSpec } from '../src/domain/types';
import { renderManifest, uniqueNode } from '../test/support/box';
import { testTemporal } from '../test/support/temporal';
import { startTestWorker } from '../test/support/worker';
import { fetchHistoryJson } from '../src/audit/export';
import { formatShares, formatTasksInside, historyTime, medianShares, runTotals, tasksInside } from './history-time';
import type { TaskInside, TimeShare } from './history-time';
import { median, stealLine, stealMeter, targetLine, TARGETS } from './target';
import { createFloorActivities, FLOOR_WORKFLOWS } from './floor-activities';
import type { floorDown, floorUp } from './floor-workflow';
import { plainDown, plainUp } from './plain';
import type { PlainUp } from './plain';

const SERVE = 'bench';

interface Sample extends PlainUp {
  downMs: number;
  /** The workflow's runs, up and down, share by share from their histories. */
  history?: { up: TimeShare[]; down: TimeShare[] };
  /** The serve's workflow only: inside its workflow tasks, when each local step ended. */
  inside?: { up: TaskInside[]; down: TaskInside[] };
}

/** The plain script, up then down. */
async function plainBringUp(docker: Docker, node: string, serve: ServeSpec, gpu: GpuSpec, pollMs: number): Promise<Sample> {
  const up = await plainUp(docker, node, serve, gpu, pollMs);
  return { ...up, downMs: await plainDown(docker, node, serve) };
}

/**
 * The plain script as the one activity of a one-step workflow (bench/floor-workflow.ts), on its
 * own worker and task queue on the same server: its wall time from the client, up then down; its
 * probes and sleeps are the activity's.
 */
async function floorBringUp(client: Client, taskQueue: string, run: number): Promise<Sample> {
  const timed = async <R>(type: 'floorUp' | 'floorDown') => {
    const startEpoch = Date.now();
    const t0 = performance.now();
    const handle = await client.workflow.start(type, { taskQueue, workflowId: `${taskQueue}-${type}-${run}` });
    const result = (await handle.result()) as R;
    const ms = performance.now() - t0;
    const endEpoch = Date.now();
    return { result, ms, read: async () => historyTime(await fetchHistoryJson(client, handle.workflowId, handle.firstExecutionRunId), startEpoch, endEpoch) };
  };
  const up = await timed<Awaited<ReturnType<typeof floorUp>>>('floorUp');
  const down = await timed<Awaited<ReturnType<typeof floorDown>>>('floorDown');
  // Read after both runs, outside their timings.
  return { ...up.result, upMs: up.ms, downMs: down.ms, history: { up: await up.read(), down: await down.read() } };
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
function historyLines(what: string, samples: Sample[], way: 'up' | 'down', plainMs: number): void {
  // A bring-down polls nothing: only a bring-up's sleeps are taken out.
  const runs = samples.map((s) => ({ shares: s.history?.[way] ?? [], sleptMs: way === 'up' ? s.sleptMs : 0 }));
  const { shares, otherShapes } = medianShares(runs.map((r) => r.shares));
  const totals = runs.map((r) => runTotals(r.shares));
  const outside = median(totals.map((t) => t.temporalMs));
  const activities = median(totals.map((t, i) => t.activitiesMs - (runs[i]?.sleptMs ?? 0)));
  const shaped = otherShapes ? ` (${otherShapes} of ${runs.length} runs had other steps: their shares are mixed in)` : '';
  process.stdout.write(`  ${what}, workflow, from its histories (medians per share, server clock)${shaped}: ${formatShares(shares)} ms\n`);
  process.stdout.write(
    `  ${what}, medians per run: outside its activities ${fmt(outside)} ms (workflow tasks, dispatch, client); its activities ${fmt(activities)} ms (poll sleeps out) against the plain script's ${fmt(plainMs)} ms\n`,
  );
  // The floor runs no local step: only the serve's workflow has this line.
  const inside = samples.map((s) => s.inside?.[way]).filter((x): x is TaskInside[] => x !== undefined);
  if (inside.length) {
    process.stdout.write(
      `  ${what}, inside its workflow tasks, each local step's end in workflow time (the task's start plus the steps' run times so far; activations and dispatches are in none of them, only in completed), ms from the task's start (medians): ${formatTasksInside(inside)}\n`,
    );
  }
}

function fmt(ms: number): string {
  return `${Math.round(ms)}`;
}

async function main(): Promise<void> {
  const steal = stealMeter();
  const { values } = parseArgs({
    options: {
      runs: { type: 'string', default: '7' },
      'poll-ms': { type: 'string', default: '200' },
      // A serve that loads: the target is read on one healthy at once, where Temporal's share is largest.
      'load-s': { type: 'string', default: '0' },
      'worker-poll': { type: 'string' },
    },
  });
  const runs = Number(values.runs);
  const pollMs = Number(values['poll-ms']);
  if (!Number.isInteger(runs) || runs < 1) throw new Error(`--runs must be a positive integer (got ${values.runs})`);
  if (!Number.isInteger(pollMs) || pollMs < 1) throw new Error(`--poll-ms must be a positive integer (got ${values['poll-ms']})`);
  const installedPoll = values['worker-poll'] !== undefined;
  if (installedPoll && values['worker-poll'] !== 'installed') throw new Error(`--worker-poll takes only 'installed' (got ${values['worker-poll']})`);
  const loadS = values['load-s'];
  if (!/^\d+(\.\d+)?$/.test(loadS) || Number(loadS) > 120) throw new Error(`--load-s: seconds from 0 to 120 until the serve is healthy (got ${loadS})`);

  const node = uniqueNode('bench');
  const text = renderManifest(
    node,
    [{ role: 'bench-gpu', capacity_mib: 32607, reserve_mib: 4608 }],
    [{ name: SERVE, vram_mib: 1024, env: { FAKE_START_DELAY_S: loadS }, start_timeout_s: 30 + Math.ceil(Number(loadS)) }],
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
    ...(installedPoll ? {} : { pollIntervalMs: pollMs }),
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
    const upHistory = await fetchHistoryJson(temporal.client, up.workflowId, up.runId);
    const downHistory = await fetchHistoryJson(temporal.client, down.workflowId, down.runId);
    const history = { up: historyTime(upHistory, t0Epoch, endEpoch), down: historyTime(downHistory, t1Epoch, downEndEpoch) };
    const inside = { up: tasksInside(upHistory), down: tasksInside(downHistory) };
    const phases = workflowPhases(t0Epoch, up.result.steps, endEpoch);
    return { upMs, downMs, probes, sleptMs: installedPoll ? 0 : (probes - 1) * pollMs, phases, history, inside };
  };
  const viaPlain = () => plainBringUp(docker, node, serve, gpu, pollMs);

  // The floor's worker: its own task queue and workflow code, the SDK's default options.
  const floorQueue = `bench-floor-${node}`;
  const floorWorker = await Worker.create({
    connection: temporal.nativeConnection,
    namespace: 'default',
    taskQueue: floorQueue,
    workflowsPath: FLOOR_WORKFLOWS,
    activities: createFloorActivities(docker, node, serve, gpu, pollMs),
  });
  const floorRunning = floorWorker.run();
  let floorRuns = 0;
  const viaFloor = () => floorBringUp(temporal.client, floorQueue, floorRuns++);

  const variants = { wf: viaWorkflow, plain: viaPlain, floor: viaFloor };
  const samples: Record<keyof typeof variants, Sample[]> = { wf: [], plain: [], floor: [] };
  const names = Object.keys(variants) as (keyof typeof variants)[];
  const order: string[] = [];
  try {
    await removeLeftovers();
    // Warm-up, not counted: the first workflow also starts the ledger entity workflow and warms
    // the worker's caches; the first create warms dockerd.
    for (const name of names) await variants[name]();
    for (let i = 0; i < runs; i++) {
      // Rotate which goes first, so none always runs on another's freshly freed port.
      const turn = names.map((_, k) => names[(i + k) % names.length] as keyof typeof variants);
      for (const name of turn) samples[name].push(await variants[name]());
      order.push(turn.join(', '));
    }
  } finally {
    await worker.stop();
    floorWorker.shutdown();
    await floorRunning;
    await removeLeftovers();
    await temporal.close();
  }
  const { wf, plain, floor } = samples;

  const out = (line: string) => process.stdout.write(`${line}\n`);
  out(
    `bring-up of one fake-vLLM serve healthy ${Number(loadS) ? `${loadS} s after its start` : 'at once'} (FAKE_START_DELAY_S=${loadS}), image ${serve.image}`,
  );
  out(
    installedPoll
      ? `/health polled by the worker at its installed default, its sleeps left in its figures; by the plain script and the floor every ${pollMs} ms (2 s probe timeout); ${runs} runs each, in rotating order, after 1 warm-up of each (not counted)`
      : `/health polled every ${pollMs} ms by both (2 s probe timeout); ${runs} runs each, in rotating order, after 1 warm-up of each (not counted)`,
  );
  out('workflow = serveUp (start workflow .. result: resolve, ledger admit, start container, health, identity, mark running);');
  out('plain    = dockerode: inspect image, create, start, poll /health, GET /v1/models. down = serveDown vs stop + remove.');
  out('floor    = the plain script as the one activity of a workflow that does nothing else (bench/floor-workflow.ts).');
  out('');
  const header = [
    'run',
    'order',
    'workflow up ms',
    'plain up ms',
    'floor up ms',
    'diff ms',
    'wf probes',
    'plain probes',
    'workflow down ms',
    'plain down ms',
    'floor down ms',
  ];
  const rows = wf.map((w, i) => {
    const p = plain[i] as Sample;
    const f = floor[i] as Sample;
    return [
      String(i + 1),
      order[i] ?? '',
      fmt(w.upMs),
      fmt(p.upMs),
      fmt(f.upMs),
      fmt(w.upMs - p.upMs),
      String(w.probes),
      String(p.probes),
      fmt(w.downMs),
      fmt(p.downMs),
      fmt(f.downMs),
    ];
  });
  const widths = header.map((h, c) => Math.max(h.length, ...rows.map((r) => (r[c] ?? '').length)));
  const line = (cells: string[]) => cells.map((cell, c) => (c < 2 ? cell.padEnd(widths[c] ?? 0) : cell.padStart(widths[c] ?? 0))).join('  ');
  out(line(header));
  for (const r of rows) out(line(r));
  out('');

  const wfUp = median(wf.map((s) => s.upMs));
  const plainUpMs = median(plain.map((s) => s.upMs));
  const pairDiff = median(wf.map((w, i) => w.upMs - (plain[i]?.upMs ?? NaN)));
  out(`bring-up median: workflow ${fmt(wfUp)} ms, plain dockerode ${fmt(plainUpMs)} ms, ratio ${(wfUp / plainUpMs).toFixed(2)} (${runs} runs)`);
  out(`workflow overhead: ${fmt(wfUp - plainUpMs)} ms (median workflow - median plain); per-run difference median ${fmt(pairDiff)} ms`);
  const wfActive = median(wf.map((s) => s.upMs - s.sleptMs));
  const plainActive = median(plain.map((s) => s.upMs - s.sleptMs));
  out(
    `with the ${pollMs} ms poll sleeps taken out${installedPoll ? " (the plain script's only)" : ''}: workflow ${fmt(wfActive)} ms, plain ${fmt(plainActive)} ms, ratio ${(wfActive / plainActive).toFixed(2)}, overhead ${fmt(wfActive - plainActive)} ms`,
  );
  const phaseLine = (label: string, samples: Sample[]) => {
    const keys = Object.keys(samples[0]?.phases ?? {});
    return `${label}: ${keys.map((k) => `${k} ${fmt(median(samples.map((s) => s.phases[k] ?? NaN)))}`).join(', ')} ms`;
  };
  out(phaseLine('where the time goes, workflow (medians; from step timestamps, approximate)', wf));
  out(phaseLine('where the time goes, plain    (medians)', plain));
  historyLines('bring-up', wf, 'up', plainActive);
  const wfDown = median(wf.map((s) => s.downMs));
  const plainDownMs = median(plain.map((s) => s.downMs));
  out(`bring-down median: workflow ${fmt(wfDown)} ms, plain dockerode ${fmt(plainDownMs)} ms, ratio ${(wfDown / plainDownMs).toFixed(2)}`);
  historyLines('bring-down', wf, 'down', plainDownMs);
  // The floor: what a workflow whose one activity is the plain script adds over it. A target
  // below the floor's ratio is out of reach of any workflow on this server and host.
  const floorActive = median(floor.map((s) => s.upMs - s.sleptMs));
  const floorDownMs = median(floor.map((s) => s.downMs));
  out(
    `floor, the plain script as the one activity of a one-step workflow (its own worker, SDK defaults): ` +
      `up ${fmt(floorActive)} ms with the poll sleeps out, ${fmt(floorActive - plainActive)} ms over the plain script, ratio ${(floorActive / plainActive).toFixed(2)}; ` +
      `down ${fmt(floorDownMs)} ms, ${fmt(floorDownMs - plainDownMs)} ms over, ratio ${(floorDownMs / plainDownMs).toFixed(2)}`,
  );
  historyLines('floor up', floor, 'up', plainActive);
  historyLines('floor down', floor, 'down', plainDownMs);
  out(
    `against the floor: bring-up ${(wfActive / floorActive).toFixed(2)} x (${fmt(wfActive - floorActive)} ms for the ledger's four Updates, the serve's resolution, GPU reading and fences, and the health and identity steps); ` +
      `bring-down ${(wfDown / floorDownMs).toFixed(2)} x (${fmt(wfDown - floorDownMs)} ms)`,
  );
  // With the poll sleeps out: at a long poll the plain script's second probe waits a whole interval
  // the workflow's later first probe does not, and the raw ratio then flatters the workflow.
  out(targetLine('bring-up ratio, poll sleeps taken out', wfActive / plainActive, '<=', TARGETS.bringRatio));
  out(targetLine('bring-down ratio', wfDown / plainDownMs, '<=', TARGETS.bringRatio));
  out(stealLine(steal(), 'this bench ran'));
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`bench: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
