// Benchmark: replaying recorded histories against the current workflow code (issue 15's target:
// >= 100 histories per second).
//
// `gpures audit replay` as an operator runs it (a fresh process: start-up, the bundle loaded, every
// history replayed), on test/histories and on a directory of the recordings repeated (--copies,
// default 20), with the replayer processes it starts for that many and with one; the replayer's
// own rate on those files, from the first history handed over to the last outcome, in its
// replayer processes (their start included: the target's figure) and on the same batch in memory in one
// process (the figure earlier benches printed). All use the build's prebuilt workflow bundle
// where it is current.
// Beside them, the replayer's floor on histories recorded here of workflows that do nothing
// (bench/floor-workflow.ts): the smallest history there is, and one with as many workflow tasks
// as the recordings have on average.
//
//   node dist/bench/audit-replay.js [--runs N] [--copies K]
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs, promisify } from 'node:util';
import { availableParallelism, tmpdir } from 'node:os';
import { copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { createContext, Script } from 'node:vm';
import { Client, Connection } from '@temporalio/client';
import { bundleWorkflowCode, NativeConnection, Worker } from '@temporalio/worker';
import type { WorkflowBundleWithSourceMap } from '@temporalio/worker';
import type { HistoryJson } from '../src/audit/events';
import { startDevServer } from '../src/dev/dev-server';
import { historyFiles, historyJson, readHistoryFile } from '../src/audit/history';
import { eventTypeName, historyIdentity } from '../src/audit/events';
import { currentWorkflowBundle, quietLogger, quietReplayRuntime, replayFiles, replayInLanes } from '../src/audit/replay';
import { replayProcessCount } from '../src/audit/replay-processes';
import { DEBUG_MODE_ISOLATE_TIMEOUT_MS } from '../src/audit/replay-costs';
import { prebuiltBundle } from '../src/worker/prebuilt-bundle';
import { FLOOR_WORKFLOWS } from './floor-activities';
import { median, stealLine, stealMeter, targetLine, TARGETS } from './target';

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

/** The calls into a V8 context `run` makes, and how many of them carry a timeout: Script.prototype.runInContext counted under whatever the replay puts in front of it. */
async function vmCalls(run: () => Promise<unknown>): Promise<{ calls: number; timed: number }> {
  const proto = Script.prototype as unknown as { runInContext: (this: Script, ...args: unknown[]) => unknown };
  const original = proto.runInContext;
  const seen = { calls: 0, timed: 0 };
  proto.runInContext = function (this: Script, ...args: unknown[]) {
    seen.calls++;
    if ((args[1] as { timeout?: number } | undefined)?.timeout !== undefined) seen.timed++;
    return original.apply(this, args);
  };
  try {
    await run();
  } finally {
    proto.runInContext = original;
  }
  return seen;
}

/**
 * `count` histories of each floor workflow, recorded on a dev server started for them: floorNothing
 * (returns at once) and floorSteps(steps).
 */
async function recordFloorHistories(count: number, steps: number): Promise<{ nothing: HistoryJson[]; steps: HistoryJson[] }> {
  const server = await startDevServer();
  const connection = await Connection.connect({ address: server.address });
  const nativeConnection = await NativeConnection.connect({ address: server.address });
  try {
    const client = new Client({ connection });
    const taskQueue = 'bench-replay-floor';
    const activities = { floorStep: () => Promise.resolve() };
    const worker = await Worker.create({ connection: nativeConnection, taskQueue, workflowsPath: FLOOR_WORKFLOWS, activities });
    return await worker.runUntil(async () => {
      const record = async (type: 'floorNothing' | 'floorSteps', args: number[]) => {
        const histories: HistoryJson[] = [];
        for (let i = 0; i < count; i++) {
          const handle = await client.workflow.start(type, { taskQueue, workflowId: `${type}-${i}`, args });
          await handle.result();
          histories.push(historyJson(await handle.fetchHistory()));
        }
        return histories;
      };
      return { nothing: await record('floorNothing', []), steps: await record('floorSteps', [steps]) };
    });
  } finally {
    await nativeConnection.close();
    await connection.close();
    await server.stop();
  }
}

/** Histories replayed per second by `replay` (which answers how many of the `count` failed), median of `runs` passes. */
async function replayRate(count: number, runs: number, replay: () => Promise<number>): Promise<number> {
  const rates: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t0 = performance.now();
    const failed = await replay();
    const ms = performance.now() - t0;
    if (failed) throw new Error(`${failed} of ${count} histories failed to replay`);
    rates.push((count * 1000) / ms);
  }
  return median(rates);
}

/** The batch replayed in this process's lanes, answering how many failed. */
const inLanes = (batch: { workflowId: string; history: HistoryJson }[], workflowBundle: WorkflowBundleWithSourceMap) => async () =>
  (await replayInLanes(batch, workflowBundle)).filter(Boolean).length;

/** `histories` repeated to `length`, each under an id of its own. */
function batchOf(histories: HistoryJson[], length: number): { workflowId: string; history: HistoryJson }[] {
  return Array.from({ length }, (_, i) => histories[i % histories.length] as HistoryJson).map((history, i) => ({
    workflowId: `${historyIdentity(history).workflowId}#${i}`,
    history,
  }));
}

const workflowTasks = (h: HistoryJson) => (h.events ?? []).filter((e) => eventTypeName(e.eventType ?? '') === 'WorkflowTaskCompleted').length;

async function main(): Promise<void> {
  const steal = stealMeter();
  const { values } = parseArgs({
    options: { runs: { type: 'string', default: '5' }, copies: { type: 'string', default: '20' }, 'poll-ms': { type: 'string' } },
  });
  const runs = Number(values.runs);
  const copies = Number(values.copies);
  if (!Number.isInteger(runs) || runs < 1 || runs > 100) throw new Error(`--runs: a whole number from 1 to 100 (got ${values.runs})`);
  if (!Number.isInteger(copies) || copies < 1 || copies > 1000) throw new Error(`--copies: a whole number from 1 to 1000 (got ${values.copies})`);
  const files = historyFiles([HISTORIES]);
  const lanes = Math.min(availableParallelism(), 4);
  let rate = 0;
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
  // The recordings repeated as files, as an archive of exported histories would lie.
  const dir = mkdtempSync(join(tmpdir(), 'gpures-bench-replay-'));
  try {
    const copied = Array.from({ length: files.length * copies }, (_, i) => {
      const file = join(dir, `${String(i).padStart(5, '0')}.json`);
      copyFileSync(files[i % files.length] as string, file);
      return file;
    });
    const processes = replayProcessCount(copied.length);
    const cliRuns = Math.min(runs, 3);
    for (const asked of processes > 1 ? [undefined, 1] : [undefined]) {
      const ms: number[] = [];
      for (let i = 0; i < cliRuns; i++) {
        const t0 = performance.now();
        await run(join(ROOT, 'bin', 'gpures'), ['audit', 'replay', ...(asked ? ['--processes', String(asked)] : []), dir], { timeout: 300_000 });
        ms.push(performance.now() - t0);
      }
      console.log(
        `  gpures audit replay${asked ? ` --processes ${asked}` : ''} on ${copied.length} history files (${copies} x the recordings), ${asked ? 'a process' : `the ${processes} replayer processes it starts`} (median of ${cliRuns}): ${median(ms).toFixed(0)} ms, ${((copied.length * 1000) / median(ms)).toFixed(0)} histories/s`,
      );
    }

    rate = await replayRate(copied.length, runs, async () => (await replayFiles(copied, workflowBundle)).outcomes.filter((o) => !o.ok).length);
    console.log(
      `  the replayer on those ${copied.length} files ${processes > 1 ? `in the ${processes} replayer processes it starts, this one handing out the files` : `in this process, in ${lanes} lanes`}, their start included (median of ${runs}): ${rate.toFixed(0)} histories/s`,
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }

  const loaded = files.map((f) => readHistoryFile(f));
  const batch = batchOf(Array.from({ length: copies }, () => loaded).flat(), loaded.length * copies);
  const oneProcess = await replayRate(batch.length, runs, inLanes(batch, workflowBundle));
  console.log(
    `  the replayer on the same ${batch.length} histories in memory, in one process, in ${lanes} lanes (median of ${runs}): ${oneProcess.toFixed(0)} histories/s`,
  );

  // The same replayer on histories of workflows that do nothing: what it costs whatever the workflow.
  const meanTasks = Math.round(loaded.reduce((n, h) => n + workflowTasks(h), 0) / loaded.length);
  const floor = await recordFloorHistories(20, meanTasks - 1);
  const floorBundle = await bundleWorkflowCode({ workflowsPath: FLOOR_WORKFLOWS, logger: quietLogger });
  for (const [what, histories] of [
    ['a workflow that returns at once', floor.nothing],
    [`a workflow of ${meanTasks - 1} activities that do nothing, ${meanTasks} workflow tasks as the recordings have on average`, floor.steps],
  ] as const) {
    const floorRate = await replayRate(batch.length, runs, inLanes(batchOf(histories, batch.length), floorBundle));
    const first = histories[0] as HistoryJson;
    console.log(
      `  floor, the same replayer on ${batch.length} histories of ${what} (${first.events?.length ?? 0} events, ${workflowTasks(first)} workflow tasks each), in the same lanes (median of ${runs}): ${floorRate.toFixed(0)} histories/s`,
    );
  }
  console.log(targetLine('histories/s in one replay of many', rate, '>=', TARGETS.replayPerSecond));
  console.log(stealLine(steal(), 'this bench ran'));
  const vm = vmCallCost();
  const calls = await vmCalls(() => replayInLanes(batch, workflowBundle));
  const perHistory = calls.calls / batch.length;
  console.log(
    `  calls into a workflow's V8 context: ${perHistory.toFixed(0)} per history, ${calls.timed} of ${calls.calls} with a timeout; ` +
      `node:vm starts a watchdog thread for each call with one (${vm.withTimeoutUs.toFixed(1)} us a call against ${vm.withoutUs.toFixed(1)} us without), ` +
      `which the replay's calls skip (src/audit/replay-costs.ts: the SDK's debug-mode timeout is ${DEBUG_MODE_ISOLATE_TIMEOUT_MS} ms): ` +
      `${((perHistory * (vm.withTimeoutUs - vm.withoutUs)) / 1000).toFixed(1)} ms of every history's replay`,
  );
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err instanceof Error ? (err.stack ?? err.message) : String(err));
    process.exit(1);
  },
);
