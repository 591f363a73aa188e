// Benchmark: one GPU's ledger under concurrent callers, on a dev server left at the server's
// default history.maxInFlightUpdates (10).
//
// For each caller count, a fresh ledger and that many callers, each sending admit/release pairs of
// serves of its own (10 MiB each on a 100000 MiB budget: every admission fits, so every pair is
// two decisions) through one LedgerClient, as the node's worker sends them. Prints decisions/s
// (decisions over the wall time of the round), the p50 and p99 of one update as its caller saw it
// (the wait for an in-flight slot included), and failed updates.
//
// With --raw the callers send straight to the workflow handle, bypassing LedgerClient's bound:
// what issue 9 measured (50 callers 0.2 decisions/s with 82 failed updates). Slow past 10 callers.
//
// With --rate R the callers are open-loop: together they offer R decisions/s (each caller starts
// a pair at its own fixed pace), and an admit's latency runs from when it was due, not when it
// was sent, so a stall counts for every decision it delays. Issue 15's target is read there:
// 50 callers at 200/s sustained, p99 <= 50 ms. The ledger's runs (continue-as-new) are counted.
// Sustained: the first --warmup-s seconds (default 2) at the same pace are sent but not counted
// (their failures are), and with --runs K each caller count gets K rounds on fresh ledgers, every
// round printed and the target read on all their counted decisions together.
//
// --rate takes several rates (`--rate 250,200`): each round of K runs every rate in turn, and each
// rate is read on its own rounds pooled. The target is 200/s with p99 <= 50 ms: at 200/s offered
// its p99 is read where the ledger serves what it is offered; above the ledger's capacity (about
// 235/s on this host's two cores) the p99 is the queue that grows all the round, not a stall.
// The count begins once every warm-up decision is answered (the counted schedule starts then), as
// an installed worker is warm with no queue; --keep-warmup-queue begins it at the warm-up's end,
// its unanswered decisions ahead of the first counted ones: the bench before 2026-12-06 night.
//
// Each round also prints the CPU a decision cost, by process and thread (bench/cpu-split.ts): the
// dev server, this process's main thread (the callers and the worker's JavaScript side), the
// worker's workflow thread (the ledger's code), the SDK core's threads, and the rest (V8's
// collector). On two cores shared by all three, the ledger's workflow-task cycle is CPU: this is
// where it goes, and the figure that compares two builds on a host whose load moves.
//
// Each round prints too how many updates a workflow task of the ledger took, over all its runs:
// the server hands the updates that arrive while a task is out to the next task, so that is what
// the CPU of a task's round trip is shared by. --in-flight N sets LedgerClient's bound (default 8).
//
// With --timeline each round prints, second by second, where its slow decisions fell against the
// ledger's continue-as-new, its workflow tasks, the main thread's collector and the CPU
// (bench/ledger-timeline.ts).
//
//   node dist/bench/ledger-callers.js [--callers 1,10,11,12,50,100] [--decisions N] [--raw] [--rate R[,R2…]] [--runs K] [--warmup-s S]
//                                     [--keep-warmup-queue] [--in-flight N] [--timeline]
//                                                                  (scripts/lib.sh export_test_env)
import { performance, PerformanceObserver } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { LedgerClient, MAX_LEDGER_UPDATES_IN_FLIGHT } from '../src/adapters/ledger/ledger-client';
import type { GpuSpec } from '../src/domain/types';
import { admitUpdate, releaseUpdate, workflowIds } from '../src/shared/messages';
import { uniqueNode } from '../test/support/box';
import { testTemporal } from '../test/support/temporal';
import type { TestTemporal } from '../test/support/temporal';
import { startTestWorker } from '../test/support/worker';
import { stealLine, stealMeter, TARGETS, targetLine } from './target';
import { CPU_GROUPS, cpuMs, perDecisionUs, threadIds } from './cpu-split';
import type { CpuMs } from './cpu-split';
import { ledgerRuns, timelineLines } from './ledger-timeline';
import type { CpuTick, Pause, Sample } from './ledger-timeline';

const GPU: GpuSpec = { role: 'bench', uuid: 'GPU-bench', capacityMib: 100_000, reserveMib: 0 };

interface Round {
  callers: number;
  /** Decisions/s offered (open loop), or none (closed loop). */
  rate?: number;
  /** Runs of the ledger workflow the round's counted decisions went to (continue-as-new starts another). */
  runs: number;
  maxMs: number;
  decisions: number;
  /** Failed updates, the warm-up's included. */
  failed: number;
  wallMs: number;
  latenciesMs: number[];
  firstFailure?: string;
  /** The host's steal share while the round ran (bench/target.ts). */
  steal: number;
  /** CPU ms by process and thread over the round's updates, the warm-up's included (bench/cpu-split.ts). */
  cpu: { from: CpuMs; to: CpuMs };
  /** Updates answered in the round, the warm-up's included: what the CPU is divided by. */
  answered: number;
  /** Over every run of the round's ledger: workflow tasks completed and updates accepted (how many a task took). */
  tasks: { completed: number; updates: number };
  /**
   * Of the warm-up's decisions (all due before its end), those not yet answered at its end; and how
   * long after its end the count began (none with --keep-warmup-queue: at its end, that backlog ahead).
   */
  warm: { decisions: number; backlog: number; drainMs?: number };
  /** --timeline's lines. */
  timeline?: string[];
}

function quantile(sorted: number[], q: number): number {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? NaN;
}

async function round(
  temporal: TestTemporal,
  callers: number,
  decisions: number,
  raw: boolean,
  rate: number | undefined,
  warmupS: number,
  inFlight: number | undefined,
  keepWarmupQueue: boolean,
  timeline = false,
): Promise<Round> {
  const node = uniqueNode(`bench-callers-${callers}`);
  const beforeWorker = threadIds();
  const worker = await startTestWorker({ temporal, node, manifest: { read: () => Promise.reject(new Error('no manifest in this benchmark')) } });
  try {
    const ledger = new LedgerClient(temporal.client, inFlight === undefined ? {} : { maxUpdatesInFlight: inFlight });
    await ledger.snapshot(node, GPU); // started and reconciled before the clock runs
    const handle = temporal.client.workflow.getHandle(workflowIds.ledger(node, GPU.role));
    const pairs = Math.max(1, Math.round(decisions / 2 / callers));
    const latenciesMs: number[] = [];
    const samples: Sample[] = [];
    let failed = 0;
    let answered = 0;
    // Warm-up decisions answered: those due in it and still unanswered when the count begins carry their wait into it.
    let warmAnswered = 0;
    let warmBacklog = 0;
    let firstFailure: string | undefined;
    const timed = async (send: () => Promise<unknown>, counted: boolean, dueAt?: number): Promise<boolean> => {
      const t0 = dueAt ?? performance.now();
      try {
        await send();
        answered += 1;
        if (!counted) warmAnswered += 1;
        if (counted) {
          const ms = performance.now() - t0;
          latenciesMs.push(ms);
          samples.push({ dueEpochMs: performance.timeOrigin + t0, ms });
        }
        return true;
      } catch (err) {
        failed += 1;
        firstFailure ??= err instanceof Error ? `${err.message}${err.cause instanceof Error ? `: ${err.cause.message}` : ''}` : String(err);
        return false;
      }
    };
    const steal = stealMeter();
    const pauses: Pause[] = [];
    const ticks: CpuTick[] = [];
    const gcs = timeline
      ? new PerformanceObserver((list) => list.getEntries().forEach((e) => pauses.push({ atEpochMs: performance.timeOrigin + e.startTime, ms: e.duration })))
      : undefined;
    gcs?.observe({ entryTypes: ['gc'] });
    const tick = () => ticks.push({ atEpochMs: Date.now(), cpu: cpuMs(beforeWorker) });
    const ticking = timeline ? setInterval(tick, 250) : undefined;
    if (timeline) tick();
    const cpuFrom = cpuMs(beforeWorker);
    const begun = performance.now();
    // Open loop: caller c starts pair p at begun + (p + c / callers) * pairEveryMs. The first
    // warmupPairs of each caller run at the same pace but are not counted: the figure is the
    // sustained rate, not the first second's JIT and connection set-up.
    const pairEveryMs = rate ? (2 * callers * 1000) / rate : 0;
    const warmupPairs = rate ? Math.round((warmupS * 1000) / pairEveryMs) : 0;
    const warmEnd = begun + warmupPairs * pairEveryMs;
    // Where the counted schedule begins: at the warm-up's end, or once its last decision is answered.
    let started = warmEnd;
    const warmDecisions = 2 * warmupPairs * callers;
    const atWarmEnd = setTimeout(() => (warmBacklog = warmDecisions - warmAnswered), Math.max(0, warmEnd - performance.now()));
    let warmCallers = 0;
    let countOpens = () => {};
    const countOpen = new Promise<void>((resolve) => (countOpens = resolve));
    // A caller is through the warm-up once its last warm-up pair is answered: the last one through opens the count.
    const warmedUp = (): Promise<void> => {
      if (++warmCallers === callers) {
        started = Math.max(warmEnd, performance.now());
        countOpens();
      }
      return countOpen;
    };
    const drain = warmupPairs > 0 && !keepWarmupQueue;
    await Promise.all(
      Array.from({ length: callers }, async (_, c) => {
        for (let p = -warmupPairs; p < pairs; p++) {
          const counted = p >= 0;
          if (p === 0 && drain) await warmedUp();
          const dueAt = rate ? started + (p + c / callers) * pairEveryMs : undefined;
          if (dueAt !== undefined && dueAt > performance.now()) await new Promise((r) => setTimeout(r, dueAt - performance.now()));
          const serve = `c${c}-p${p}`;
          const holder = `bench/${serve}`;
          const admit = { serve, vramMib: 10, class: 'resident' as const, holder, gpu: GPU };
          const ok = await timed(
            () => (raw ? handle.executeUpdate(admitUpdate, { args: [admit], updateId: `${holder}/admit` }) : ledger.admit(node, admit, `${holder}/admit`)),
            counted,
            dueAt,
          );
          if (!ok) continue;
          await timed(
            () =>
              raw
                ? handle.executeUpdate(releaseUpdate, { args: [{ serve, holder }], updateId: `${holder}/release` })
                : ledger.release(node, GPU, { serve, holder }, `${holder}/release`),
            counted,
          );
        }
      }),
    );
    const wallMs = performance.now() - started;
    const startedEpochMs = performance.timeOrigin + started;
    const cpu = { from: cpuFrom, to: cpuMs(beforeWorker) };
    clearInterval(ticking);
    clearTimeout(atWarmEnd);
    gcs?.disconnect();
    const sorted = latenciesMs.sort((a, b) => a - b);
    return {
      callers,
      ...(rate ? { rate } : {}),
      runs: (await ledgerRunsSince(temporal, node, startedEpochMs)) + 1,
      maxMs: sorted[sorted.length - 1] ?? NaN,
      decisions: latenciesMs.length,
      failed,
      wallMs,
      latenciesMs: sorted,
      firstFailure,
      steal: steal(),
      cpu,
      answered,
      tasks: await ledgerTasks(temporal, node),
      warm: { decisions: warmDecisions, backlog: warmBacklog, ...(drain ? { drainMs: started - warmEnd } : {}) },
      ...(timeline
        ? {
            timeline: timelineLines(
              samples,
              await ledgerRuns(temporal.client, workflowIds.ledger(node, GPU.role)),
              pauses,
              ticks,
              performance.timeOrigin + started,
            ),
          }
        : {}),
    };
  } finally {
    await worker.stop();
  }
}

/** How many runs of the ledger workflow started after `sinceEpochMs` (each continue-as-new starts one). */
async function ledgerRunsSince(temporal: TestTemporal, node: string, sinceEpochMs: number): Promise<number> {
  let n = 0;
  const runs = temporal.client.workflow.list({ query: `WorkflowId = '${workflowIds.ledger(node, GPU.role)}'` });
  for await (const run of runs) if (run.startTime.getTime() > sinceEpochMs) n += 1;
  return n;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      callers: { type: 'string', default: '1,10,11,12,50,100' },
      decisions: { type: 'string', default: '400' },
      raw: { type: 'boolean', default: false },
      rate: { type: 'string' },
      runs: { type: 'string', default: '1' },
      'warmup-s': { type: 'string' },
      'poll-ms': { type: 'string' },
      'in-flight': { type: 'string' },
      'keep-warmup-queue': { type: 'boolean', default: false },
      timeline: { type: 'boolean', default: false },
    },
  });
  const rounds = Number(values.runs);
  if (!Number.isInteger(rounds) || rounds < 1 || rounds > 20) throw new Error(`--runs: rounds per caller count, an integer from 1 to 20 (got ${values.runs})`);
  const warmupS = Number(values['warmup-s'] ?? 2);
  if (!Number.isFinite(warmupS) || warmupS < 0 || warmupS > 60) throw new Error(`--warmup-s: seconds from 0 to 60 (got ${values['warmup-s']})`);
  if (values['warmup-s'] !== undefined && values.rate === undefined) throw new Error('--warmup-s needs --rate: a closed loop has no pace to warm up at');
  const rates = values.rate === undefined ? [undefined] : values.rate.split(',').map((x) => Number(x.trim()));
  if (rates.some((r) => r !== undefined && (!Number.isFinite(r) || r < 1 || r > 10_000)) || rates.length > 4)
    throw new Error(`--rate: up to 4 comma-separated decisions/s, each from 1 to 10000 (got ${values.rate})`);
  if (values['keep-warmup-queue'] && values.rate === undefined) throw new Error('--keep-warmup-queue needs --rate: a closed loop has no warm-up');
  const inFlight = values['in-flight'] === undefined ? undefined : Number(values['in-flight']);
  if (inFlight !== undefined && (!Number.isInteger(inFlight) || inFlight < 1 || inFlight > MAX_LEDGER_UPDATES_IN_FLIGHT))
    throw new Error(`--in-flight: LedgerClient's updates in flight, an integer from 1 to ${MAX_LEDGER_UPDATES_IN_FLIGHT} (got ${values['in-flight']})`);
  const counts = values.callers.split(',').map((x) => Number(x.trim()));
  const decisions = Number(values.decisions);
  if (counts.some((n) => !Number.isInteger(n) || n < 1 || n > 1000))
    throw new Error(`--callers: integers from 1 to 1000, comma-separated (got ${values.callers})`);
  if (!Number.isInteger(decisions) || decisions < 2 || decisions > 100_000)
    throw new Error(`--decisions: an integer from 2 to 100000 (got ${values.decisions})`);

  const temporal = await testTemporal();
  try {
    console.log(
      `ledger under concurrent callers, ${values.raw ? 'straight to the workflow (no caller-side bound)' : `through one LedgerClient (${inFlight === undefined ? 'default bound' : `${inFlight} in flight`})`}; ~${decisions} decisions a round; dev server at the default history.maxInFlightUpdates`,
    );
    const keep = values['keep-warmup-queue'];
    if (values.rate !== undefined)
      console.log(
        `open loop: the callers together offer ${values.rate} decisions/s; latency from when each admit was due; ` +
          `the first ${warmupS} s at that pace not counted (its failures are), ` +
          `${keep ? 'the count begun at its end, its unanswered decisions ahead' : 'the count begun once all its decisions are answered'}; ` +
          `${rounds} round${rounds === 1 ? '' : 's'} per caller count${rates.length > 1 ? ' and rate, the rates in turn' : ''}, each on a fresh ledger`,
      );
    console.log('callers  offered/s  decisions  failed   wall s  decisions/s   p50 ms   p99 ms   max ms  runs  steal %');
    for (const n of counts) {
      const results: Round[] = [];
      for (let k = 0; k < rounds; k++)
        for (const rate of rates) results.push(printRound(await round(temporal, n, decisions, values.raw, rate, warmupS, inFlight, keep, values.timeline)));
      if (n === 50)
        for (const rate of rates)
          if (rate)
            printTarget(
              rate,
              rounds,
              results.filter((r) => r.rate === rate),
            );
    }
  } finally {
    await temporal.close();
  }
}

/**
 * Workflow tasks completed and updates accepted over all runs of the node's ledger: the server
 * hands the updates that arrive while a task is out to the next one, so at capacity one task
 * carries several, up to what is in flight.
 */
async function ledgerTasks(temporal: TestTemporal, node: string): Promise<Round['tasks']> {
  const out = { completed: 0, updates: 0 };
  const workflowId = workflowIds.ledger(node, GPU.role);
  for await (const run of temporal.client.workflow.list({ query: `WorkflowId = '${workflowId}'` })) {
    const history = await temporal.client.workflow.getHandle(workflowId, run.runId).fetchHistory();
    for (const e of history.events ?? []) {
      if (e.workflowTaskCompletedEventAttributes) out.completed += 1;
      if (e.workflowExecutionUpdateAcceptedEventAttributes) out.updates += 1;
    }
  }
  return out;
}

/**
 * The target read on every counted decision of a rate's rounds together: a round that misses is not
 * outvoted. At or below the target's 200/s the rate answered is what was offered (less the last
 * decisions' wait), so only the p99 is a target there; above it, decisions/s is the capacity.
 */
function printTarget(rate: number, rounds: number, results: Round[]): void {
  const sum = (f: (r: Round) => number) => results.reduce((t, r) => t + f(r), 0);
  const pooled = results.flatMap((r) => r.latenciesMs).sort((a, b) => a - b);
  const of = rounds > 1 ? ` (${rounds} rounds pooled: ${pooled.length} decisions, ${sum((r) => r.failed)} failed)` : '';
  const perSecond = (sum((r) => r.decisions) * 1000) / sum((r) => r.wallMs);
  const at = `at ${rate}/s offered${rate === TARGETS.ledgerPerSecond ? " (the target's rate)" : ''}`;
  if (rate > TARGETS.ledgerPerSecond) console.log(targetLine(`decisions/s from 50 callers ${at}${of}`, perSecond, '>=', TARGETS.ledgerPerSecond));
  else console.log(`  ${at}: ${perSecond.toFixed(1)} decisions/s answered${of}`);
  console.log(
    `  p50 from 50 callers ${at}: ${quantile(pooled, 0.5).toFixed(0)} ms` +
      (rate > TARGETS.ledgerPerSecond ? " (above the target's rate: where the ledger answers less than offered, the p99 below is its queue)" : ''),
  );
  // The target's p99 is the one at its own rate: above it, where the ledger answers less than offered, it is a queue's.
  if (rate > TARGETS.ledgerPerSecond)
    console.log(`  p99 from 50 callers ${at}${of}: ${quantile(pooled, 0.99).toFixed(0)} ms (the target's p99 is read at ${TARGETS.ledgerPerSecond}/s)`);
  else console.log(targetLine(`p99 from 50 callers ${at}${of}`, quantile(pooled, 0.99), '<=', TARGETS.ledgerP99Ms, ' ms'));
  if (rounds > 1) console.log(cpuLine(` ${at} (${rounds} rounds pooled)`, results));
  console.log(stealLine(sum((r) => r.steal * r.wallMs) / sum((r) => r.wallMs), 'its rounds ran'));
}

/** Prints a round's line; returns the round. */
function printRound(r: Round): Round {
  const line = [
    String(r.callers).padStart(7),
    (r.rate === undefined ? '-' : String(r.rate)).padStart(10),
    String(r.decisions).padStart(10),
    String(r.failed).padStart(7),
    (r.wallMs / 1000).toFixed(1).padStart(8),
    ((r.decisions * 1000) / r.wallMs).toFixed(1).padStart(12),
    quantile(r.latenciesMs, 0.5).toFixed(0).padStart(8),
    quantile(r.latenciesMs, 0.99).toFixed(0).padStart(8),
    r.maxMs.toFixed(0).padStart(8),
    String(r.runs).padStart(5),
    (r.steal * 100).toFixed(0).padStart(8),
  ].join(' ');
  console.log(r.firstFailure ? `${line}   first failure: ${r.firstFailure}` : line);
  console.log(cpuLine('', [r]));
  const { completed, updates } = r.tasks;
  console.log(`  workflow tasks: ${completed} for ${updates} updates, ${(updates / completed).toFixed(2)} updates a task`);
  if (r.warm.decisions)
    console.log(
      r.warm.drainMs !== undefined
        ? `  warm-up: ${r.warm.backlog} of its ${r.warm.decisions} decisions unanswered at its end; the count began ${r.warm.drainMs.toFixed(0)} ms later, all answered`
        : `  warm-up: ${r.warm.backlog} of its ${r.warm.decisions} decisions unanswered when the count began (their wait is the first counted decisions')`,
    );
  for (const line of r.timeline ?? []) console.log(line);
  return r;
}

/** `  cpu a decision: server … µs, main …, …; total … µs (N updates)`, over the rounds given together. */
function cpuLine(of: string, rs: Round[]): string {
  const sum = (pick: (r: Round) => CpuMs) => Object.fromEntries(CPU_GROUPS.map((g) => [g, rs.reduce((t, r) => t + pick(r)[g], 0)])) as CpuMs;
  const answered = rs.reduce((t, r) => t + r.answered, 0);
  const us = perDecisionUs(
    sum((r) => r.cpu.from),
    sum((r) => r.cpu.to),
    answered,
  );
  const parts = CPU_GROUPS.map((g, i) => `${g} ${us[g].toFixed(0)}${i === 0 ? ' µs' : ''}`).join(', ');
  return `  cpu a decision${of}: ${parts}; total ${us.total.toFixed(0)} µs (${answered} updates)`;
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
  process.exit(1);
});
