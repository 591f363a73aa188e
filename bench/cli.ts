// Benchmark: the CLI's start-up, against a bare Node start (issue 15's target: `--help` and
// `validate` within 3 x `node -e 0`). Each command is a fresh process, run N times alternating
// with the bare start, so the machine's noise hits both alike; medians and their ratios.
//
//   node dist/bench/cli.js [--runs N]     (scripts/bench.sh runs it after the build)
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { promisify } from 'node:util';
import { parseArgs } from 'node:util';

const run = promisify(execFile);
const ROOT = join(__dirname, '..', '..');
const GPURES = join(ROOT, 'bin', 'gpures');
const EXAMPLE = join(ROOT, 'examples', 'primary-node', 'serves.toml');
/** Issue 15: within 3 x a bare `node -e 0`. */
const TARGET_RATIO = 3;

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? (s[mid] ?? NaN) : ((s[mid - 1] ?? NaN) + (s[mid] ?? NaN)) / 2;
}

async function timed(file: string, args: string[]): Promise<number> {
  const t0 = performance.now();
  await run(file, args, { timeout: 30_000 });
  return performance.now() - t0;
}

async function main(): Promise<void> {
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
  for (const [, args] of commands) await timed(process.execPath, [GPURES, ...args]);
  for (let i = 0; i < runs; i++) {
    bare.push(await timed(process.execPath, ['-e', '0']));
    for (const [name, args] of commands) samples.get(name)?.push(await timed(process.execPath, [GPURES, ...args]));
  }
  const base = median(bare);
  console.log(`CLI start-up, medians of ${runs} runs; target: within ${TARGET_RATIO} x a bare node start`);
  console.log(`  node -e 0              ${base.toFixed(0)} ms`);
  for (const [name] of commands) {
    const m = median(samples.get(name) ?? []);
    const ratio = m / base;
    console.log(
      `  gpures ${name.padEnd(15)} ${m.toFixed(0)} ms   ratio ${ratio.toFixed(2)}   target <= ${TARGET_RATIO}   ${ratio <= TARGET_RATIO ? 'met' : 'NOT met'}`,
    );
  }
}

main().catch((err: unknown) => {
  console.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
  process.exit(1);
});
