// Benchmark: the worker's resident memory (issue 15's target: <= 200 MiB idle and after a
// 30-operation storm).
//
// The real worker process (`gpures worker`, Docker runtime on the test dockerd, the fake
// nvidia-smi read as a stream, /metrics on) for a node of 15 small fake-vLLM serves. Its VmRSS
// (from /proc) is sampled every 100 ms: idle once it has started (after --settle-s), through a
// storm of 30 operations sent at once (15 `serves up`, then 15 `serves down`), and idle again
// after it: --settle-s after its last operation, and again --rested-s after it. The target is read
// at the second: a worker at rest after a storm, once V8's memory reducer has run (it starts
// mark-compacts that shrink the heap some seconds after the allocation rate falls; 5 s after, the
// main thread's heap was still at its storm size). Prints idle, peak and both afters: against the
// target as an operator starts it (bin/gpures run as a program, whose shebang gives node
// --max-semi-space-size=1 and MALLOC_ARENA_MAX=2), then for comparison as `node bin/gpures worker`
// with neither (V8's default young generation, glibc's default arenas). Idle and after, where the
// RSS goes, from the worker's own /metrics (prom-client's nodejs_*): the main thread's JavaScript
// heap and its external memory; the rest is the workflow thread's heap (its own V8 isolate), the
// SDK core's native memory and code.
//
//   node dist/bench/worker-rss.js [--settle-s S] [--rested-s S] [--installed-only]           (scripts/bench.sh sets the env up)
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { serveDown, serveUp } from '../src/client/operations';
import { FAKE_NVIDIA_SMI } from '../src/sim/box';
import type { FakeNvidiaSmiState } from '../src/sim/fake-nvidia-smi';
import { renderManifest, uniqueNode } from '../test/support/box';
import type { TestServe } from '../test/support/box';
import { testTemporal } from '../test/support/temporal';
import { workflowTraffic } from '../test/support/history-scan';
import type { WorkflowTraffic } from '../test/support/history-scan';
import { workflowIds } from '../src/shared/messages';
import { TARGETS, targetLine } from './target';

const GPURES = join(__dirname, '..', '..', 'bin', 'gpures');
const SERVES: TestServe[] = Array.from({ length: 15 }, (_, i) => ({ name: `s${i}`, vram_mib: 1024, env: { FAKE_START_DELAY_S: '0' } }));

function rssMib(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no VmRSS for pid ${pid}`);
  return Number(m[1]) / 1024;
}

/** The process's CPU time so far (user + system), in seconds, from /proc (clock ticks of 10 ms). */
function cpuS(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/**
 * The process's resident memory by kind of mapping, from /proc/PID/smaps: files (code: node, the
 * SDK core's .node, libraries), malloc's main arena (brk), its thread arenas (glibc's 64 MiB-aligned
 * heaps: the SDK core's threads allocate there), and other anonymous memory (the V8 heaps of both
 * isolates, large mallocs). What /metrics cannot say: which allocator holds "the rest".
 */
function rssByMapping(pid: number): string {
  const ARENA = 64 * MIB;
  const kinds = new Map<string, number>();
  let kind = '';
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const range = /^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (range) {
      const [start, end, perms, name] = [parseInt(range[1]!, 16), parseInt(range[2]!, 16), range[3]!, range[4]!.trim()];
      if (name.startsWith('/')) kind = 'files';
      else if (name === '[heap]') kind = 'malloc main arena';
      else if (name !== '') kind = 'other named';
      else if (start % ARENA === 0 && end - start <= ARENA && perms.startsWith('rw')) kind = 'malloc thread arenas';
      else kind = 'other anonymous (V8 heaps, large mallocs)';
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB$/.exec(line);
    if (rss) kinds.set(kind, (kinds.get(kind) ?? 0) + Number(rss[1]) / 1024);
  }
  return [...kinds]
    .sort((a, b) => b[1] - a[1])
    .map(([k, mib]) => `${k} ${mib.toFixed(0)}`)
    .join(', ');
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const MIB = 1024 * 1024;

/** A gauge's value in a Prometheus text exposition (no labels). */
function gauge(text: string, name: string): number | undefined {
  const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : undefined;
}

/** `rss R MiB: main heap H (used U), external E, the rest X` from the worker's /metrics at the moment its RSS is read. */
async function whereItGoes(metricsUrl: string | undefined, rss: number): Promise<string> {
  if (!metricsUrl) return 'no /metrics to read';
  const res = await fetch(metricsUrl, { signal: AbortSignal.timeout(5000) });
  const text = await res.text();
  const heap = gauge(text, 'nodejs_heap_size_total_bytes');
  const used = gauge(text, 'nodejs_heap_size_used_bytes');
  const external = gauge(text, 'nodejs_external_memory_bytes');
  if (heap === undefined || used === undefined || external === undefined) return `${metricsUrl} has no nodejs_heap_* figures`;
  const mib = (b: number) => (b / MIB).toFixed(0);
  return `main thread's heap ${mib(heap)} MiB (used ${mib(used)}), external ${mib(external)}; the rest (the workflow thread's heap, the SDK core, code) ${(rss - (heap + external) / MIB).toFixed(0)}`;
}

/** How the worker is started: as installed (the launcher's shebang and its flag), or by node itself with no flag. */
interface Start {
  label: string;
  command: string;
  args: string[];
  /** Whether the run's figures are read against the target. */
  target: boolean;
}
const STARTS: Start[] = [
  { label: 'bin/gpures worker, as installed (its shebang: MALLOC_ARENA_MAX=2 node --max-semi-space-size=1)', command: GPURES, args: [], target: true },
  { label: 'node bin/gpures worker, no flag, malloc uncapped (for comparison)', command: process.execPath, args: [GPURES], target: false },
];

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      'settle-s': { type: 'string', default: '5' },
      'rested-s': { type: 'string', default: '30' },
      'installed-only': { type: 'boolean', default: false },
      runs: { type: 'string' },
      'poll-ms': { type: 'string' },
    },
  });
  const settleS = Number(values['settle-s']);
  if (!Number.isFinite(settleS) || settleS < 0 || settleS > 120) throw new Error(`--settle-s: seconds from 0 to 120 (got ${values['settle-s']})`);
  const restedS = Number(values['rested-s']);
  if (!Number.isFinite(restedS) || restedS < settleS || restedS > 300)
    throw new Error(`--rested-s: seconds from --settle-s (${settleS}) to 300 (got ${values['rested-s']})`);
  const temporal = await testTemporal();
  try {
    for (const start of values['installed-only'] ? STARTS.filter((s) => s.target) : STARTS) await storm(temporal, settleS, restedS, start);
  } finally {
    await temporal.close();
  }
}

async function storm(temporal: Awaited<ReturnType<typeof testTemporal>>, settleS: number, restedS: number, start: Start): Promise<void> {
  const node = uniqueNode('bench-rss');
  const dir = mkdtempSync(join(tmpdir(), 'gpures-bench-rss-'));
  const manifestPath = join(dir, 'serves.toml');
  writeFileSync(manifestPath, renderManifest(node, [{ role: 'bench', capacity_mib: 32607, reserve_mib: 4608 }], SERVES));
  const smiState = join(dir, 'nvidia-smi.json');
  // The serves' containers draw their MiB on the fake card (docker: true), as a real card shows a
  // serve's memory: without it each stop's release check saw nothing freed and held the GPU's
  // start slot its whole 30 s, and the 15 downs, one stop at a time, took 7.5 minutes.
  const state: FakeNvidiaSmiState = {
    gpus: [{ index: 0, uuid: 'GPU-00000000-0000-0000-0000-000000000000', name: 'NVIDIA GeForce RTX 5090', totalMib: 32607, baseUsedMib: 1200 }],
    docker: true,
  };
  writeFileSync(smiState, JSON.stringify(state));

  // Neither start inherits a malloc cap from this process: the installed one has its shebang's, the
  // comparison none, whatever the bench was run with.
  const inherited = { ...process.env };
  delete inherited['MALLOC_ARENA_MAX'];
  const worker = spawn(start.command, [...start.args, 'worker', '--manifest', manifestPath, '--gpus', 'off'], {
    env: {
      ...inherited,
      TEMPORAL_ADDRESS: temporal.address,
      GPURES_NVIDIA_SMI: FAKE_NVIDIA_SMI,
      FAKE_NVIDIA_SMI_STATE: smiState,
      GPURES_METRICS_ADDR: '127.0.0.1:0',
      NODE_OPTIONS: '',
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const pid = worker.pid;
  if (pid === undefined) throw new Error('the worker did not start');
  let said = '';
  worker.stderr.setEncoding('utf8');
  worker.stderr.on('data', (d: string) => (said += d));
  const samples: number[] = [];
  const sampler = setInterval(() => {
    try {
      samples.push(rssMib(pid));
    } catch {
      // exited
    }
  }, 100);
  const mark = () => samples.length;
  const peak = (from: number, to = samples.length) => Math.max(...samples.slice(from, to));
  try {
    for (let i = 0; !/worker for node/.test(said); i++) {
      if (i > 600 || worker.exitCode !== null) throw new Error(`the worker did not start: ${said.slice(-500)}`);
      await sleep(100);
    }
    await sleep(settleS * 1000);
    const idle = rssMib(pid);
    const metricsUrl = /metrics (http:\/\/\S+)/.exec(said)?.[1];
    const idleWhere = await whereItGoes(metricsUrl, idle);
    const idleMaps = rssByMapping(pid);
    const stormFrom = mark();
    const client = temporal.client;
    const stormAt = Date.now();
    const cpuAtStorm = cpuS(pid);
    const ups = await Promise.all(SERVES.map((s) => serveUp(client, node, s.name)));
    const upsMs = Date.now() - stormAt;
    const ledgerId = workflowIds.ledger(node, 'bench');
    const cpuAfterUps = cpuS(pid);
    const afterUps = await workflowTraffic(client, ledgerId);
    const downsAt = Date.now();
    const downs = await Promise.all(SERVES.map((s) => serveDown(client, node, s.name)));
    const downsMs = Date.now() - downsAt;
    const cpuAfterDowns = cpuS(pid);
    const afterDowns = await workflowTraffic(client, ledgerId);
    const failed = [...ups, ...downs].filter((o) => !o.ok);
    if (failed.length) throw new Error(`${failed.length} of 30 operations failed: ${failed.map((f) => f.message).join('; ')}`);
    const stormPeak = peak(stormFrom);
    await sleep(settleS * 1000);
    const settled = rssMib(pid);
    const settledWhere = await whereItGoes(metricsUrl, settled);
    const settledMaps = rssByMapping(pid);
    await sleep((restedS - settleS) * 1000);
    const after = rssMib(pid);
    const afterWhere = await whereItGoes(metricsUrl, after);
    const afterMaps = rssByMapping(pid);
    console.log(`worker RSS (a process: Docker runtime, nvidia-smi stream, /metrics), ${SERVES.length} serves, ${start.label}`);
    console.log(
      `  idle ${idle.toFixed(0)} MiB; through 30 operations at once (15 up in ${(upsMs / 1000).toFixed(1)} s, then 15 down in ${(downsMs / 1000).toFixed(1)} s) peak ${stormPeak.toFixed(0)} MiB; ${settleS} s after ${settled.toFixed(0)} MiB; ${restedS} s after ${after.toFixed(0)} MiB`,
    );
    console.log(`  idle: ${idleWhere}`);
    console.log(`    by mapping: ${idleMaps}`);
    console.log(`  ${settleS} s after: ${settledWhere}`);
    console.log(`    by mapping: ${settledMaps}`);
    console.log(`  ${restedS} s after: ${afterWhere}`);
    console.log(`    by mapping: ${afterMaps}`);
    // The ledger's share: each waiter told of a give asks again by an Update.
    const traffic = (t: WorkflowTraffic) => `${t.updates} Updates, ${t.signalsSent} signals sent, ${t.events} events in ${t.runs} run(s)`;
    const minus = (a: WorkflowTraffic, b: WorkflowTraffic): WorkflowTraffic => ({
      runs: a.runs - b.runs + 1,
      events: a.events - b.events,
      updates: a.updates - b.updates,
      signalsSent: a.signalsSent - b.signalsSent,
    });
    console.log(
      `  the worker's CPU time: through the ups ${(cpuAfterUps - cpuAtStorm).toFixed(2)} s, through the downs ${(cpuAfterDowns - cpuAfterUps).toFixed(2)} s`,
    );
    console.log(`  the ledger: through the ups ${traffic(afterUps)}; through the downs ${traffic(minus(afterDowns, afterUps))}`);
    if (start.target) {
      console.log(targetLine('RSS idle', idle, '<=', TARGETS.workerRssMib, ' MiB'));
      console.log(
        `  RSS ${settleS} s after the storm ${settled.toFixed(0)} MiB, ${settled <= TARGETS.workerRssMib ? 'within' : 'over'} the target's ${TARGETS.workerRssMib} (not held there: read at rest, below)`,
      );
      console.log(targetLine(`RSS ${restedS} s after the storm`, after, '<=', TARGETS.workerRssMib, ' MiB'));
    }
  } finally {
    clearInterval(sampler);
    worker.kill('SIGTERM');
    await new Promise((r) => worker.once('exit', r));
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
    process.exit(1);
  },
);
