// Benchmark: the CLI's start-up, against a bare Node start (issue 15's target: `--help` and
// `validate` within 3 x `node -e 0`). Each command is a fresh process, run N times alternating
// with the bare start, so the machine's noise hits both alike; medians and their ratios. Then
// `gpures ledger` on the simulated box (a dev server, a worker with its loopback endpoint, two
// serves up, the fake nvidia-smi): its wall time as a process, against issue 15's 300 ms, as it
// runs where the worker answers (GPURES_METRICS_ADDR at the worker's endpoint) and reading for
// itself through Temporal (GPURES_METRICS_ADDR=off), alternating. Each gpures is run as an
// operator runs it: bin/gpures as a program, through its shebang (env, node and its flag).
//
//   node dist/bench/cli.js [--runs N]     (scripts/bench.sh runs it after the build)
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { promisify } from 'node:util';
import { parseArgs } from 'node:util';
import { serveUp } from '../src/client/operations';
import { FAKE_NVIDIA_SMI } from '../src/sim/box';
import { startSimTestBox } from '../test/support/sim';
import { median, stealLine, stealMeter, targetLine, TARGETS } from './target';

const run = promisify(execFile);
const ROOT = join(__dirname, '..', '..');
const GPURES = join(ROOT, 'bin', 'gpures');
const EXAMPLE = join(ROOT, 'examples', 'primary-node', 'serves.toml');

async function timed(file: string, args: string[], env?: NodeJS.ProcessEnv): Promise<number> {
  const t0 = performance.now();
  await run(file, args, { timeout: 30_000, ...(env ? { env } : {}) });
  return performance.now() - t0;
}

/** `gpures ledger` as a process, N times each way, on a simulated box whose worker runs here. */
async function ledgerOnSimBox(runs: number): Promise<{ viaWorker: number[]; viaTemporal: number[]; reads: number }> {
  const t = await startSimTestBox(
    'bench-cli',
    [{ role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 }],
    [
      { name: 'fast', vram_mib: 14336 },
      { name: 'vision', vram_mib: 12288, class: 'evictable', router_tier: 'vision-local' },
    ],
  );
  try {
    for (const s of ['fast', 'vision']) {
      const up = await serveUp(t.temporal.client, t.node, s);
      if (!up.ok) throw new Error(`serves up ${s}: ${up.message}`);
    }
    const env = {
      ...process.env,
      TEMPORAL_ADDRESS: t.temporal.address,
      GPURES_NVIDIA_SMI: FAKE_NVIDIA_SMI,
      FAKE_NVIDIA_SMI_STATE: t.box.nvidiaSmiStatePath,
    };
    const worker = { ...env, GPURES_METRICS_ADDR: t.endpointAddr };
    const temporal = { ...env, GPURES_METRICS_ADDR: 'off' };
    const args = ['ledger', '--manifest', t.manifestPath];
    await timed(GPURES, args, worker);
    await timed(GPURES, args, temporal);
    const viaWorker: number[] = [];
    const viaTemporal: number[] = [];
    for (let i = 0; i < runs; i++) {
      viaWorker.push(await timed(GPURES, args, worker));
      viaTemporal.push(await timed(GPURES, args, temporal));
    }
    return { viaWorker, viaTemporal, reads: t.ledgerReads() };
  } finally {
    await t.close();
  }
}

async function main(): Promise<void> {
  const steal = stealMeter();
  const { values } = parseArgs({ options: { runs: { type: 'string', default: '9' }, 'poll-ms': { type: 'string' } } });
  const runs = Number(values.runs);
  if (!Number.isInteger(runs) || runs < 1 || runs > 1000) throw new Error(`--runs must be an integer in 1..1000 (got ${values.runs})`);
  const commands: [string, string[]][] = [
    ['--help', ['--help']],
    ['validate', ['validate', EXAMPLE]],
  ];
  const bare: number[] = [];
  const samples = new Map<string, number[]>(commands.map(([name]) => [name, []]));
  // One warm-up of each, not counted: the first start reads the files from disk.
  await timed(process.execPath, ['-e', '0']);
  for (const [, args] of commands) await timed(GPURES, args);
  for (let i = 0; i < runs; i++) {
    bare.push(await timed(process.execPath, ['-e', '0']));
    for (const [name, args] of commands) samples.get(name)?.push(await timed(GPURES, args));
  }
  const base = median(bare);
  console.log(`CLI start-up, medians of ${runs} runs, against a bare node start`);
  console.log(`  node -e 0              ${base.toFixed(0)} ms`);
  for (const [name] of commands) {
    const m = median(samples.get(name) ?? []);
    console.log(`  gpures ${name.padEnd(15)} ${m.toFixed(0)} ms   ratio ${(m / base).toFixed(2)}`);
    console.log(targetLine(`${name} ratio`, m / base, '<=', TARGETS.cliRatio));
  }
  const ledger = await ledgerOnSimBox(runs);
  // Every run through the worker must have been answered by it, or the figure is the fallback's.
  if (ledger.reads !== runs + 1) throw new Error(`the worker's endpoint read the ledger ${ledger.reads} times for ${runs + 1} runs through it`);
  const viaWorker = median(ledger.viaWorker);
  const viaTemporal = median(ledger.viaTemporal);
  console.log(`gpures ledger on the simulated box, a process each time, medians of ${runs}:`);
  console.log(`  answered by the node's worker (/v1/ledger)           ${viaWorker.toFixed(0)} ms`);
  console.log(`  read for itself (Temporal client, nvidia-smi spawn)  ${viaTemporal.toFixed(0)} ms   ratio ${(viaTemporal / viaWorker).toFixed(2)}`);
  console.log(targetLine('ledger', viaWorker, '<=', TARGETS.cliLedgerMs, ' ms'));
  console.log(stealLine(steal(), 'this bench ran'));
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
    process.exit(1);
  },
);
