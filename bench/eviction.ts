// Benchmark: what an on-demand acquisition with eviction costs beyond the work it waits for.
//
// On the simulated box (sim serves as local processes, the reference router, the fake
// nvidia-smi; a worker on a dev server), N runs of: fast + vision up; K slow requests
// (`sim_delay_ms`, default 1500 ms) in flight to the vision preset through the router; then
// `serveAcquire(comfyui-sim, --evict)`, which quiesces vision's tier, waits for the drain, stops
// vision, confirms its VRAM came back, hands the MiB over and starts comfyui-sim; then
// `serves down comfyui-sim --restore` brings vision back for the next run. Per run:
//
//   drain→stop      victim.stopIssuedAtEpochMs − victim.drain.drainedAtEpochMs (both worker
//                   clock), and the stop against the client-observed end of the last in-flight
//                   response;
//   acquisition     the client's wall time of serveAcquire, minus the container operations
//                   (stopServeContainer, startServeContainer, waitHealthy: ActivityTaskScheduled
//                   → ActivityTaskCompleted in the workflow's history), minus the drain wait
//                   (drainServe, the same way): what is left is orchestration.
//
// The requests are slower than the 500 ms one might pick because the acquisition spends about
// half a second (resolve, ledger snapshot and acquire, quiesce) before its drain starts: 500 ms
// requests finish about when the drain begins, and the drain column measures next to nothing.
//
//   node dist/bench/eviction.js [--runs N] [--in-flight K] [--delay-ms MS] [--poll-ms MS]
//                                                               (scripts/bench.sh sets the env up)
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { intArg } from './args';
import { serveAcquire, serveDown, serveUp } from '../src/client/operations';
import { parseManifest } from '../src/config/manifest';
import { routerConfigFor, startSimBox } from '../src/sim/box';
import { createGpuresWorker, fileManifest } from '../src/worker/worker';
import { renderManifest, uniqueNode } from '../test/support/box';
import type { TestServe } from '../test/support/box';
import { testTemporal, workflowBundle } from '../test/support/temporal';
import { fetchHistoryJson } from '../src/audit/export';
import { formatShares, formatTasksInside, historyTime, medianShares, tasksInside } from './history-time';
import type { TaskInside, TimeShare } from './history-time';
import { eventAttributes, eventTypeName } from '../src/audit/events';
import type { HistoryJson } from '../src/audit/events';
import { path, str } from '../src/audit/report/read';
import { median, stealLine, stealMeter, targetLine, TARGETS } from './target';

const GPU = { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 };
const SERVES: TestServe[] = [
  { name: 'fast', vram_mib: 14336, router_tier: 'fast-local' },
  // Each run evicts the vision the run before restored: no minimum residency between runs.
  { name: 'vision', vram_mib: 12288, class: 'evictable', served_model_name: 'qwen3-vl-4b-instruct', router_tier: 'vision-local', min_residency_s: 0 },
  { name: 'comfyui-sim', vram_mib: 8192, class: 'on-demand' },
];
const ROUTER_TOKEN = 'bench-router-token';
const CONTAINER_OPS = ['stopServeContainer', 'startServeContainer', 'waitHealthy'] as const;
const NVIDIA_SMI_ACTS = ['readGpu', 'measureGpu', 'confirmVramReleased'];

interface Sample {
  /** victim.stopIssuedAtEpochMs − victim.drain.drainedAtEpochMs */
  drainToStopMs: number;
  /** victim.stopIssuedAtEpochMs − client-observed end of the last in-flight response */
  lastResponseToStopMs: number;
  wallMs: number;
  containerOpsMs: number;
  drainMs: number;
  /** What the drain activity itself measured (first poll to in-flight 0). */
  drainWaitedMs: number;
  orchestrationMs: number;
  /** Part of orchestration: the other activities' own durations (ledger, router, nvidia-smi, …). */
  otherActivitiesMs: number;
  nvidiaSmiMs: number;
  /** nvidia-smi --query-compute-apps processes the acquisition spawned (the drain's read, each reading of the release wait). */
  processQueries: number;
  /** Listings served from the latest one instead (the room before the start, after the release wait's). */
  processListingsReused: number;
  /** Activities in the history, and each type's summed duration in order of first use. */
  activities: number;
  byType: Map<string, number>;
  /** The run's history, interval by interval (bench/history-time.ts): workflow tasks with their local activities, dispatches, activities, the client's calls. */
  shares: TimeShare[];
  /** Inside each workflow task that ran local steps: each one's end in workflow time, from the task's start (history-time.ts). */
  inside: TaskInside[];
  legs: Legs;
  inFlightAtQuiesce: number;
  statuses: number[];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function fmt(ms: number): string {
  return `${Math.round(ms)}`;
}

/**
 * The orchestration between the physical steps, by the server's clock (scheduled and completed
 * events are written as they happen, in order; a started event is written with its activity's
 * completion, so the shares of overlapped activities are not read from it): the run's start to
 * its first quiesce scheduled (admission, preflight, the room before the eviction), the release
 * seen to the acquirer's create scheduled (the hand-over, the room before the start), and health
 * to the run's close (identity, measure, the slot's give, running).
 */
interface Legs {
  toQuiesceMs: number;
  releaseToStartMs: number;
  healthyToCloseMs: number;
}

type HistoryEvent = HistoryJson['events'][number];
const eventMs = (e: HistoryEvent) => Date.parse(e.eventTime ?? '');

/** Each activity's ActivityTaskScheduled event, by its event id, with its type. */
function scheduledActivities(h: HistoryJson): Map<string, { type: string; event: HistoryEvent }> {
  const scheduled = new Map<string, { type: string; event: HistoryEvent }>();
  for (const e of h.events) {
    const type = str(path(eventAttributes(e), 'activityType', 'name'));
    if (eventTypeName(e.eventType) === 'ActivityTaskScheduled' && type) scheduled.set(e.eventId, { type, event: e });
  }
  return scheduled;
}

function legsOf(h: HistoryJson): Legs {
  const scheduled = scheduledActivities(h);
  const first = (pred: (type: string, e: HistoryEvent) => boolean) => h.events.find((e) => pred(eventTypeName(e.eventType), e));
  const ends = (activity: string) => (type: string, e: HistoryEvent) =>
    type === 'ActivityTaskCompleted' && scheduled.get(String(eventAttributes(e)['scheduledEventId']))?.type === activity;
  const starts = (activity: string) => (type: string, e: HistoryEvent) => type === 'ActivityTaskScheduled' && scheduled.get(e.eventId)?.type === activity;
  const ms = (from: HistoryEvent | undefined, to: HistoryEvent | undefined) => (from && to ? eventMs(to) - eventMs(from) : NaN);
  return {
    toQuiesceMs: ms(h.events[0], first(starts('quiesceTier'))),
    releaseToStartMs: ms(first(ends('confirmVramReleased')), first(starts('startServeContainer'))),
    healthyToCloseMs: ms(
      first(ends('waitHealthy')),
      first((t) => t === 'WorkflowExecutionCompleted'),
    ),
  };
}

/** Each activity of the run's history: type and ActivityTaskScheduled → ActivityTaskCompleted in ms. */
function activityDurations(h: HistoryJson, workflowId: string): { type: string; ms: number }[] {
  const scheduled = scheduledActivities(h);
  const out: { type: string; ms: number }[] = [];
  for (const e of h.events) {
    if (eventTypeName(e.eventType) !== 'ActivityTaskCompleted') continue;
    const id = String(eventAttributes(e)['scheduledEventId']);
    const from = scheduled.get(id);
    if (!from) throw new Error(`${workflowId}: ActivityTaskCompleted ${e.eventId} has no scheduled event ${id}`);
    out.push({ type: from.type, ms: eventMs(e) - eventMs(from.event) });
  }
  return out;
}

async function main(): Promise<void> {
  const steal = stealMeter();
  const { values } = parseArgs({
    options: {
      runs: { type: 'string', default: '7' },
      'in-flight': { type: 'string', default: '3' },
      'delay-ms': { type: 'string', default: '1500' },
      'poll-ms': { type: 'string', default: '100' },
    },
  });
  const positiveInt = (name: string, v: string | undefined): number => intArg(name, v, 1, 1_000_000);
  const runs = positiveInt('runs', values.runs);
  const inFlight = positiveInt('in-flight', values['in-flight']);
  const delayMs = positiveInt('delay-ms', values['delay-ms']);
  const pollMs = positiveInt('poll-ms', values['poll-ms']);

  const node = uniqueNode('bench-evict');
  const dir = mkdtempSync(join(tmpdir(), 'gpures-bench-evict-'));
  const text = renderManifest(node, [GPU], SERVES);
  const manifestPath = join(dir, 'serves.toml');
  writeFileSync(manifestPath, text);
  const parsed = parseManifest(text, manifestPath);
  if (!parsed.ok) throw new Error(parsed.errors.map((e) => `${e.path}: ${e.message}`).join('\n'));
  const manifest = parsed.manifest;
  const routerConfigPath = join(dir, 'router.toml');
  writeFileSync(routerConfigPath, routerConfigFor(manifest, `bench.${node}`));

  const box = await startSimBox({ manifest, stateDir: join(dir, 'box'), routerConfigPath, routerToken: ROUTER_TOKEN, nonLedgerDrawMib: 1200 });
  const temporal = await testTemporal();
  const client = temporal.client;
  const worker = await createGpuresWorker({
    connection: temporal.nativeConnection,
    client,
    namespace: 'default',
    node,
    manifest: fileManifest(manifestPath),
    runtime: box.runtime,
    router: box.routerAdmin,
    gpu: box.gpu,
    pollIntervalMs: pollMs,
    workflowBundle: await workflowBundle(),
  });
  const running = worker.run();
  // The process list is a spawn per query (the GPU's figures come from the stream), or the latest
  // listing where the caller allows a recent one: the adapter counts both.
  const listings = box.gpu.listings;

  const routed = async (body: Record<string, unknown>): Promise<{ status: number; finishedAt: number }> => {
    const res = await fetch(`${box.router.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'vision', messages: [{ role: 'user', content: 'describe the screenshot' }], ...body }),
    });
    await res.arrayBuffer();
    return { status: res.status, finishedAt: Date.now() };
  };

  const up = async (serve: string) => {
    const o = await serveUp(client, node, serve);
    if (!o.ok) throw new Error(`serves up ${serve}: ${o.message}`);
  };

  const oneRun = async (): Promise<Sample> => {
    await up('fast');
    await up('vision');
    const slow = Array.from({ length: inFlight }, () => routed({ sim_delay_ms: delayMs }));
    // Only once all K are at the serve does the acquisition start.
    for (let i = 0; (await box.routerAdmin.tierState('vision-local')).inFlight < inFlight; i++) {
      if (i >= 200) throw new Error(`the ${inFlight} slow requests did not all reach vision-local within 2 s`);
      await sleep(10);
    }
    const spawnedBefore = listings.spawned;
    const reusedBefore = listings.reused;
    const startEpoch = Date.now();
    const t0 = performance.now();
    const o = await serveAcquire(client, node, { serve: 'comfyui-sim', evict: true });
    const wallMs = performance.now() - t0;
    const endEpoch = Date.now();
    const queries = listings.spawned - spawnedBefore;
    const reused = listings.reused - reusedBefore;
    const done = await Promise.all(slow);
    if (!o.ok) throw new Error(`acquire comfyui-sim: ${o.message} [${o.failureType}]`);
    const v = o.result.victims[0];
    if (o.result.outcome !== 'started' || o.result.victims.length !== 1 || v?.serve !== 'vision')
      throw new Error(`acquire comfyui-sim: unexpected result ${o.result.message}`);
    if (v.stopIssuedAtEpochMs === undefined || v.drain?.drainedAtEpochMs === undefined)
      throw new Error('acquire comfyui-sim: the victim record has no drain or stop time');

    // One read of the run's history for its activities, its shares and its legs.
    const history = await fetchHistoryJson(client, o.workflowId, o.runId);
    const acts = activityDurations(history, o.workflowId);
    const shares = historyTime(history, startEpoch, endEpoch);
    const sum = (pred: (type: string) => boolean) => acts.filter((a) => pred(a.type)).reduce((s, a) => s + a.ms, 0);
    const containerOpsMs = sum((t) => (CONTAINER_OPS as readonly string[]).includes(t));
    const drainMs = sum((t) => t === 'drainServe');
    const otherActivitiesMs = sum((t) => t !== 'drainServe' && !(CONTAINER_OPS as readonly string[]).includes(t));

    const down = await serveDown(client, node, 'comfyui-sim', { restore: true });
    if (!down.ok) throw new Error(`serves down comfyui-sim --restore: ${down.message}`);
    const restored = down.result.restored.find((r) => r.serve === 'vision');
    if (!restored?.ok) throw new Error(`serves down comfyui-sim --restore: vision not restored (${restored?.message ?? 'not attempted'})`);

    return {
      drainToStopMs: v.stopIssuedAtEpochMs - v.drain.drainedAtEpochMs,
      lastResponseToStopMs: v.stopIssuedAtEpochMs - Math.max(...done.map((d) => d.finishedAt)),
      wallMs,
      containerOpsMs,
      drainMs,
      drainWaitedMs: v.drain.waitedMs,
      orchestrationMs: wallMs - containerOpsMs - drainMs,
      otherActivitiesMs,
      nvidiaSmiMs: sum((t) => NVIDIA_SMI_ACTS.includes(t)),
      processQueries: queries,
      processListingsReused: reused,
      activities: acts.length,
      byType: acts.reduce((m, a) => m.set(a.type, (m.get(a.type) ?? 0) + a.ms), new Map<string, number>()),
      shares,
      inside: tasksInside(history),
      legs: legsOf(history),
      inFlightAtQuiesce: v.inFlightAtQuiesce ?? 0,
      statuses: done.map((d) => d.status),
    };
  };

  const samples: Sample[] = [];
  try {
    // Warm-up, not counted: the first acquisition also starts the ledger entity workflow and
    // warms the worker's caches.
    await oneRun();
    for (let i = 0; i < runs; i++) samples.push(await oneRun());
  } finally {
    worker.shutdown();
    await running;
    await box.close();
    await temporal.close();
  }

  const out = (line: string) => process.stdout.write(`${line}\n`);
  out(`eviction: serves up comfyui-sim --evict (8192 MiB) over fast (14336) + vision (12288, evictable) on a simulated box`);
  out(`${inFlight} requests of ${delayMs} ms (sim_delay_ms) in flight to vision through the reference router when the acquisition starts;`);
  out(
    `worker poll interval ${pollMs} ms (drain polls at most every 100 ms); ${runs} runs after 1 warm-up (not counted); reset by serves down comfyui-sim --restore`,
  );
  out('drain→stop = victim.stopIssuedAtEpochMs − drain.drainedAtEpochMs; last resp→stop = stop issued − client-observed end of the last slow response;');
  out('container ops = stopServeContainer + startServeContainer + waitHealthy, drain = drainServe (ActivityTaskScheduled → ActivityTaskCompleted in history);');
  out(
    "orchestration = wall − container ops − drain; of it, other activities = the remaining activities' own durations (ledger, router, nvidia-smi, inspect, identity).",
  );
  out('');
  const header = [
    'run',
    'statuses',
    'in flight',
    'drain→stop ms',
    'last resp→stop ms',
    'wall ms',
    'container ops ms',
    'drain ms',
    'orchestration ms',
    'other acts ms',
    'nvidia-smi ms',
    'process queries',
  ];
  const rows = samples.map((s, i) => [
    String(i + 1),
    s.statuses.join(','),
    String(s.inFlightAtQuiesce),
    fmt(s.drainToStopMs),
    fmt(s.lastResponseToStopMs),
    fmt(s.wallMs),
    fmt(s.containerOpsMs),
    fmt(s.drainMs),
    fmt(s.orchestrationMs),
    fmt(s.otherActivitiesMs),
    fmt(s.nvidiaSmiMs),
    String(s.processQueries),
  ]);
  const widths = header.map((h, c) => Math.max(h.length, ...rows.map((r) => (r[c] ?? '').length)));
  const line = (cells: string[]) => cells.map((cell, c) => (c < 2 ? cell.padEnd(widths[c] ?? 0) : cell.padStart(widths[c] ?? 0))).join('  ');
  out(line(header));
  for (const r of rows) out(line(r));
  out('');
  const m = (f: (s: Sample) => number) => fmt(median(samples.map(f)));
  out(
    `drain→stop median ${m((s) => s.drainToStopMs)} ms (last response→stop ${m((s) => s.lastResponseToStopMs)} ms); ` +
      `acquisition ${m((s) => s.wallMs)} ms wall, container ops ${m((s) => s.containerOpsMs)} ms, drain ${m((s) => s.drainMs)} ms, ` +
      `orchestration ${m((s) => s.orchestrationMs)} ms (${runs} runs)`,
  );
  out(
    `acquisition minus container ops only: ${m((s) => s.wallMs - s.containerOpsMs)} ms; drain activity's own wait ${m((s) => s.drainWaitedMs)} ms; ` +
      `orchestration = other activities ${m((s) => s.otherActivitiesMs)} ms (nvidia-smi ${m((s) => s.nvidiaSmiMs)} ms) + between activities ${m((s) => s.orchestrationMs - s.otherActivitiesMs)} ms (medians)`,
  );
  const counts = (xs: number[]) => [...new Set(xs)].join('/');
  const types = [...(samples[0]?.byType.keys() ?? [])];
  out(
    `per activity type, summed per run (medians, ms; ${counts(samples.map((s) => s.activities))} activities per acquisition): ` +
      types.map((t) => `${t} ${m((s) => s.byType.get(t) ?? 0)}`).join(', '),
  );
  // Between the activities, task by task: each workflow task with the local activities it ran (ledger Updates, reads), the dispatches, the client's calls.
  const { shares, otherShapes } = medianShares(samples.map((s) => s.shares));
  out(
    `the acquisition's history, interval by interval (medians per share, server clock${otherShapes ? `; ${otherShapes} of ${runs} runs had other steps, mixed in` : ''}): ` +
      `${formatShares(shares)} ms`,
  );
  out(
    `inside the workflow tasks, each local step's end in workflow time (the task's start plus the steps' run times so far; activations and dispatches are in none of them, only in completed), ms from the task's start (medians; steps side by side end in any order): ` +
      formatTasksInside(samples.map((s) => s.inside)),
  );
  out(
    `between the physical steps (medians, server clock): start to the quiesce scheduled ${m((s) => s.legs.toQuiesceMs)} ms, ` +
      `release seen to the create scheduled ${m((s) => s.legs.releaseToStartMs)} ms, healthy to the run's close ${m((s) => s.legs.healthyToCloseMs)} ms`,
  );
  out(
    `nvidia-smi --query-compute-apps spawns per acquisition: ${counts(samples.map((s) => s.processQueries))} ` +
      "(the room before the eviction, the drain's read of the victim's processes, one per reading of the release wait, the room before the start, the measure); " +
      `latest listing reused instead: ${counts(samples.map((s) => s.processListingsReused))}`,
  );
  out(`acquisition wall against its physical work (drain + container ops), medians: ${m((s) => s.wallMs)} / ${m((s) => s.containerOpsMs + s.drainMs)} ms`);
  out(targetLine('eviction ratio (median of the runs)', median(samples.map((s) => s.wallMs / (s.containerOpsMs + s.drainMs))), '<=', TARGETS.evictionRatio));
  out(stealLine(steal(), 'this bench ran'));
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`bench: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
