// Benchmark: replaying recorded histories against the current workflow code (issue 15's target:
// >= 100 histories per second).
//
// Two figures: `gpures audit replay test/histories` as an operator runs it (a fresh process:
// start-up, the bundle loaded, every recording replayed), and the replayer's own rate on a batch
// of the recordings repeated (--copies, default 20) in one process, from the first history handed
// over to the last outcome. Both use the build's prebuilt workflow bundle where it is current.
//
//   node dist/bench/audit-replay.js [--runs N] [--copies K]
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs, promisify } from 'node:util';
import { availableParallelism } from 'node:os';
import { createContext, Script } from 'node:vm';
import { historyFiles, readHistoryFile } from '../src/audit/history';
import { historyIdentity } from '../src/audit/events';
import { currentWorkflowBundle, quietReplayRuntime, replayInLanes } from '../src/audit/replay';
import { prebuiltBundle } from '../src/worker/prebuilt-bundle';
import { median, targetLine, TARGETS } from './target';

const run = promisify(execFile);
const ROOT = join(__dirname, '..', '..');
const HISTORIES = join(ROOT, 'test', 'histories');

/** A call into a V8 context with and without a timeout, as the SDK's workflow VM makes them (5000 of each, microseconds per call). */
function vmCallCost(): { withTimeoutUs: number; withoutUs: number } {
  const context = createContext({});
  const script = new Script('1 + 1');
  const perCall = (options: { timeout?: number }) => {
    const t0 = performance.now();
    for (let i = 0; i < 5000; i++) script.runInContext(context, options);
    return ((performance.now() - t0) * 1000) / 5000;
  };
  perCall({});
  return { withTimeoutUs: perCall({ timeout: 5000 }), withoutUs: perCall({}) };
}

/** How many calls into a V8 context with a timeout `run` makes: Script.prototype.runInContext counted while it runs (the bench's own process only). */
async function timedVmCalls(run: () => Promise<unknown>): Promise<number> {
  const proto = Script.prototype as unknown as { runInContext: (this: Script, ...args: unknown[]) => unknown };
  const original = proto.runInContext;
  let calls = 0;
  proto.runInContext = function (this: Script, ...args: unknown[]) {
    if ((args[1] as { timeout?: number } | undefined)?.timeout !== undefined) calls++;
    return original.apply(this, args);
  };
  try {
    await run();
  } finally {
    proto.runInContext = original;
  }
  return calls;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { runs: { type: 'string', default: '5' }, copies: { type: 'string', default: '20' }, 'poll-ms': { type: 'string' } },
  });
  const runs = Number(values.runs);
  const copies = Number(values.copies);
  if (!Number.isInteger(runs) || runs < 1 || runs > 100) throw new Error(`--runs: a whole number from 1 to 100 (got ${values.runs})`);
  if (!Number.isInteger(copies) || copies < 1 || copies > 1000) throw new Error(`--copies: a whole number from 1 to 1000 (got ${values.copies})`);
  const files = historyFiles([HISTORIES]);
  const bundle = prebuiltBundle() ? 'the prebuilt bundle (npm run build)' : 'a bundle made at start (no current prebuilt one)';

  const cli: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    // As an operator runs it: bin/gpures as a program, through its shebang.
    await run(join(ROOT, 'bin', 'gpures'), ['audit', 'replay', HISTORIES], { timeout: 120_000 });
    cli.push(performance.now() - t0);
  }
  const cliMs = median(cli);
  console.log(`audit replay with ${bundle}, ${files.length} recordings`);
  console.log(
    `  gpures audit replay test/histories, a process (median of ${runs}): ${cliMs.toFixed(0)} ms, ${((files.length * 1000) / cliMs).toFixed(0)} histories/s`,
  );

  quietReplayRuntime();
  const workflowBundle = await currentWorkflowBundle();
  const loaded = files.map((f) => readHistoryFile(f));
  const batch = Array.from({ length: copies }, () => loaded)
    .flat()
    .map((history, i) => ({ workflowId: `${historyIdentity(history).workflowId}#${i}`, history }));
  const rates: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    const failed = (await replayInLanes(batch, { workflowBundle })).filter(Boolean).length;
    const ms = performance.now() - t0;
    if (failed) throw new Error(`${failed} of ${batch.length} histories failed to replay`);
    rates.push((batch.length * 1000) / ms);
  }
  const rate = median(rates);
  console.log(
    `  the replayer on ${batch.length} histories (${copies} x the recordings) in one process, in ${Math.min(availableParallelism(), 4)} lanes (median of ${runs}): ${rate.toFixed(0)} histories/s`,
  );
  console.log(targetLine('histories/s in one replay', rate, '>=', TARGETS.replayPerSecond));
  const vm = vmCallCost();
  const calls = await timedVmCalls(() => replayInLanes(batch, { workflowBundle }));
  const perHistory = calls / batch.length;
  console.log(
    `  where a replay's time goes in part: the SDK calls into a workflow's V8 context with node:vm and a timeout (its isolateExecutionTimeout), ` +
      `which starts a watchdog thread per call: ${vm.withTimeoutUs.toFixed(1)} us a call against ${vm.withoutUs.toFixed(1)} us without; ` +
      `${perHistory.toFixed(0)} such calls per history, ${((perHistory * vm.withTimeoutUs) / 1000).toFixed(1)} ms of every history's replay`,
  );
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
    process.exit(1);
  },
);
