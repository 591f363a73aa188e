// Benchmark: what the router's on-demand path costs beyond the work it waits for.
//
// On the simulated box with the acquisition API and the reference router wired as in production
// (test/support/on-demand-box.ts): fast + vision up, then N runs of
//
//   cold   one request for the on-demand preset `big` while its serve is down: the router POSTs
//          the acquisition (evict vision), holds the request, and forwards it once the guarded
//          readmit lets the tier back. request → first byte, against the physical work in the
//          acquire workflow's history (drainServe + stopServeContainer + startServeContainer +
//          waitHealthy, ActivityTaskScheduled → Completed), as a ratio; then
//          `serves down big --restore` for the next run. And where that first byte went, along
//          the one path the request waits on (bench/on-demand-loop.ts), medians per share: the
//          router's marks (held, POST) by this process's clock, the acquire run's history from
//          its start to its last step's (the guarded readmit's) start by the server's (each
//          interval charged to what ends it, as bench/bring-up.ts prints), then the router's
//          again: the tier active, the held request released, its first byte back.
//   warm   with big up, K sequential requests through the router against the same requests
//          straight to the backend: the median difference is what the router (its token and queue checks
//          included) adds when the serve is up.
//
//   node dist/bench/router-on-demand.js [--runs N] [--warm K] [--poll-ms MS]    (scripts/bench.sh sets the env up)
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import type { Client } from '@temporalio/client';
import { tsToMs } from '@temporalio/common/lib/time';
import { serveDown, serveUp } from '../src/client/operations';
import { serveBaseUrl } from '../src/domain/serve';
import { taskQueueFor, workflowIds } from '../src/shared/messages';
import type { TestServe } from '../test/support/box';
import { startOnDemandBox } from '../test/support/on-demand-box';
import { exportQuery, fetchHistoryJson } from '../src/audit/export';
import type { HistoryJson } from '../src/audit/events';
import { medianShares } from './history-time';
import type { TimeShare } from './history-time';
import { loopShares, readmitEvents } from './on-demand-loop';
import type { Marks } from './on-demand-loop';

const GPU = { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 };
const SERVES: TestServe[] = [
  { name: 'fast', vram_mib: 14336, router_tier: 'fast-local' },
  // No residency: each run evicts the vision the previous run restored.
  { name: 'vision', vram_mib: 12288, class: 'evictable', served_model_name: 'qwen3-vl-4b-instruct', router_tier: 'vision-local', min_residency_s: 0 },
  { name: 'big', vram_mib: 8192, class: 'on-demand', router_tier: 'big-local' },
];
const PHYSICAL = new Set(['drainServe', 'stopServeContainer', 'startServeContainer', 'waitHealthy']);

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? (s[mid] ?? NaN) : ((s[mid - 1] ?? NaN) + (s[mid] ?? NaN)) / 2;
};

/** Summed durations of the physical steps in the latest run of the workflow. */
async function physicalMs(client: Client, workflowId: string): Promise<number> {
  const history = await client.workflow.getHandle(workflowId).fetchHistory();
  const scheduled = new Map<string, { type: string; at: number }>();
  let total = 0;
  for (const e of history.events ?? []) {
    const s = e.activityTaskScheduledEventAttributes;
    if (s?.activityType?.name) scheduled.set(String(e.eventId), { type: s.activityType.name, at: tsToMs(e.eventTime) });
    const c = e.activityTaskCompletedEventAttributes;
    const from = c ? scheduled.get(String(c.scheduledEventId)) : undefined;
    if (from && PHYSICAL.has(from.type)) total += tsToMs(e.eventTime) - from.at;
  }
  return total;
}

/** Milliseconds from sending the request to the response's first body byte; `token` for the router's on-demand preset. */
async function firstByteMs(url: string, model: string, token?: string): Promise<number> {
  return (await firstByte(url, model, token)).ms;
}

/** The same, with the epoch times of the send and of the first byte (the router's marks and history's clock). */
async function firstByte(url: string, model: string, token?: string): Promise<{ ms: number; sentEpochMs: number; firstByteEpochMs: number }> {
  const sentEpochMs = Date.now();
  const t0 = performance.now();
  const res = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hello' }] }),
  });
  const reader = res.body?.getReader();
  await reader?.read();
  const ms = performance.now() - t0;
  const firstByteEpochMs = Date.now();
  await reader?.cancel();
  if (res.status !== 200) throw new Error(`${url} answered ${res.status}`);
  return { ms, sentEpochMs, firstByteEpochMs };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { runs: { type: 'string', default: '5' }, warm: { type: 'string', default: '50' }, 'poll-ms': { type: 'string', default: '100' } },
  });
  const pollIntervalMs = Number(values['poll-ms']);
  const runs = Number(values.runs);
  const warm = Number(values.warm);
  if (!Number.isInteger(runs) || runs < 1 || !Number.isInteger(warm) || warm < 1) throw new Error('--runs and --warm must be positive integers');

  // The router's marks of the cold run under way, big-local's only (a restore readmits vision-local).
  let marks: Marks = {};
  const box = await startOnDemandBox({
    prefix: 'bench-od',
    gpu: GPU,
    serves: SERVES,
    onDemand: [{ tier: 'big-local', serve: 'big', evict: true }],
    pollIntervalMs,
    onDemandMarks: (tier, mark) => {
      if (tier === 'big-local') marks[mark] ??= Date.now();
    },
  });
  const client = box.temporal.client;
  try {
    for (const s of ['fast', 'vision']) {
      const o = await serveUp(client, box.node, s);
      if (!o.ok) throw new Error(`serves up ${s}: ${o.message}`);
    }
    const cold: { ttfbMs: number; physicalMs: number; loop: TimeShare[] }[] = [];
    for (let i = 0; i < runs; i++) {
      marks = {};
      try {
        const fb = await firstByte(box.router.url, 'big', box.clientToken);
        if (fb.ms > SLOW_COLD_MS) {
          const dir = await keepHistories(client, box.node);
          process.stderr.write(`bench: cold run ${i + 1}: first byte after ${(fb.ms / 1000).toFixed(1)} s; the box's histories are in ${dir}\n`);
        }
        const acquire = workflowIds.acquire(box.node, 'big');
        const loop = loopShares(await historyWithReadmitStarted(client, acquire), marks, fb.sentEpochMs, fb.firstByteEpochMs);
        cold.push({ ttfbMs: fb.ms, physicalMs: await physicalMs(client, acquire), loop });
        if (i < runs - 1) {
          const down = await serveDown(client, box.node, 'big', { restore: true });
          if (!down.ok) throw new Error(`serves down big --restore: ${down.message}`);
        }
      } catch (err) {
        const dir = await keepHistories(client, box.node).catch((e: unknown) => `none (their export failed: ${e instanceof Error ? e.message : String(e)})`);
        throw new Error(`cold run ${i + 1}: ${err instanceof Error ? err.message : String(err)}; the box's histories are in ${dir}`, { cause: err });
      }
    }
    // big is up now: the router's path against the backend's own.
    const big = box.manifest.serves.find((s) => s.name === 'big');
    if (!big) throw new Error('no serve big');
    const direct: number[] = [];
    const routed: number[] = [];
    for (let i = 0; i < warm; i++) {
      direct.push(await firstByteMs(serveBaseUrl(big), 'big'));
      routed.push(await firstByteMs(box.router.url, 'big', box.clientToken));
    }

    process.stdout.write(`router on demand (sim box, ${runs} cold runs, ${warm} warm pairs)\n`);
    process.stdout.write('cold: request -> first byte, serve acquired first (evicting vision)\n');
    process.stdout.write('  run  first-byte-ms  physical-ms (drain+stop+start+health)  ratio\n');
    cold.forEach((c, i) => {
      process.stdout.write(
        `  ${String(i + 1).padStart(3)}  ${c.ttfbMs.toFixed(0).padStart(13)}  ${c.physicalMs.toFixed(0).padStart(36)}  ${(c.ttfbMs / c.physicalMs).toFixed(2)}\n`,
      );
    });
    const mt = median(cold.map((c) => c.ttfbMs));
    const mp = median(cold.map((c) => c.physicalMs));
    process.stdout.write(`  median first byte ${mt.toFixed(0)} ms, physical ${mp.toFixed(0)} ms, ratio ${(mt / mp).toFixed(2)}\n`);
    const { shares, otherShapes } = medianShares(cold.map((c) => c.loop));
    const shaped = otherShapes ? ` (${otherShapes} of ${runs} runs had other steps: their shares are mixed in)` : '';
    process.stdout.write(`  where the first byte went, request to first byte along its path (medians per share)${shaped}:\n`);
    for (const s of shares) process.stdout.write(`    ${s.label.padEnd(60)} ${s.ms.toFixed(0).padStart(6)} ms\n`);
    process.stdout.write(
      `    ${'sum of the medians'.padEnd(60)} ${shares
        .reduce((n, s) => n + s.ms, 0)
        .toFixed(0)
        .padStart(6)} ms\n`,
    );
    const md = median(direct);
    const mr = median(routed);
    process.stdout.write(`warm: median first byte direct ${md.toFixed(2)} ms, through the router ${mr.toFixed(2)} ms, added ${(mr - md).toFixed(2)} ms\n`);
  } finally {
    await box.close();
  }
}

/**
 * A cold run's first byte past this keeps the box's histories, as a failed run does: cold runs
 * take 1.6-2.3 s. The whole bench at ab4bd6d failed with only the worker's log left, its box gone
 * (and its close 166 s long under the run's last local step, since made to wait for it).
 */
const SLOW_COLD_MS = 30_000;

/** Every run on the box's task queue (the ledger's, the acquisitions', the bring-downs' and restores'), a file each, before the box goes: the directory. */
async function keepHistories(client: Client, node: string): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'gpures-bench-od-'));
  await exportQuery(client, `TaskQueue = '${taskQueueFor(node)}'`, dir);
  return dir;
}

/** How long the run's readmit may take to show as started after the first byte (readmitEvents says why it can lag). */
const READMIT_RECORDED_MS = 10_000;

async function historyWithReadmitStarted(client: Client, workflowId: string): Promise<HistoryJson> {
  const deadline = Date.now() + READMIT_RECORDED_MS;
  for (;;) {
    const h = await fetchHistoryJson(client, workflowId);
    if (readmitEvents(h).started || Date.now() > deadline) return h;
    await new Promise((r) => setTimeout(r, 50));
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    process.stderr.write(`bench: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
