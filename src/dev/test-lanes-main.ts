// `node dist/src/dev/test-lanes-main.js [node --test args…] -- FILE…`: the last step of `npm test`
// (scripts/test.sh). Runs each compiled test file in its own `node --test`, GPURES_TEST_LANES (2)
// at a time in the order src/dev/test-lanes.ts gives, each file bounded by
// GPURES_TEST_FILE_TIMEOUT_S (900): a file whose hook hangs is killed and counted failed instead of
// holding the run until CI's own limit. A file's output is printed whole when it ends, so two
// files' lines never interleave; the end prints the summed TAP counters, the wall time, and the
// slowest files, and test-artifacts/test-times.json holds every file's seconds for refreshing test/lanes.json.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { notJsonReason } from '../config/bounded-read';
import { die } from './log';
import {
  DEFAULT_SECONDS,
  MAX_LANES,
  TAP_COUNTERS,
  type LanePlan,
  type QueuedFile,
  type TapCounts,
  lanePlanProblems,
  failureLines,
  nextToStart,
  queueFiles,
  tapCounts,
  testKey,
} from './test-lanes';

const ROOT = join(__dirname, '..', '..', '..');
const PLAN_FILE = join(ROOT, 'test', 'lanes.json');
/** Where each file's measured seconds go (GPURES_TEST_TIMES; the runner's own test points it elsewhere): not dist/, which every build starts afresh. */
const TIMES_FILE = process.env['GPURES_TEST_TIMES'] || join(ROOT, 'test-artifacts', 'test-times.json');
/** After SIGTERM to a timed-out file's process group, how long before SIGKILL. */
const KILL_GRACE_MS = 10_000;

interface Ended {
  file: QueuedFile;
  lane: number;
  seconds: number;
  counts: TapCounts | null;
  /** Why the file failed: its exit, a timeout; undefined when it passed. */
  failed?: string;
}

function boundedInt(name: string, fallback: number, min: number, max: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < min || n > max) die(`${name}: must be a whole number in ${min}..${max} (got ${JSON.stringify(raw)})`);
  return n;
}

function readPlan(): LanePlan {
  if (!existsSync(PLAN_FILE)) return { seconds: {}, alone: {} };
  let doc: unknown;
  try {
    doc = JSON.parse(readFileSync(PLAN_FILE, 'utf8'));
  } catch (err) {
    die(`${PLAN_FILE}: not JSON: ${notJsonReason(err)}`);
  }
  const problems = lanePlanProblems(doc);
  if (problems.length > 0) die(`${PLAN_FILE}: ${problems.join('; ')}`);
  return doc as LanePlan;
}

/** The files running now: their process group's kill, for Ctrl-C. */
const running = new Map<number, (signal: NodeJS.Signals) => void>();

function runFile(q: QueuedFile, lane: number, nodeArgs: string[], timeoutS: number): Promise<Ended> {
  const started = Date.now();
  // Its own process group: a timeout kills the file's test process and what it started in the group.
  const child = spawn(process.execPath, ['--enable-source-maps', '--test', '--test-reporter=tap', ...nodeArgs, q.file], {
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    // Set when this runner itself runs under node --test (its own test): a child would then refuse to run its file.
    env: { ...process.env, NODE_TEST_CONTEXT: undefined },
  });
  const chunks: Buffer[] = [];
  child.stdout.on('data', (b: Buffer) => chunks.push(b));
  child.stderr.on('data', (b: Buffer) => chunks.push(b));
  let timedOut = false;
  const killGroup = (signal: NodeJS.Signals) => {
    try {
      process.kill(-(child.pid as number), signal);
    } catch {
      // The group has already gone.
    }
  };
  const timer = setTimeout(() => {
    timedOut = true;
    killGroup('SIGTERM');
    setTimeout(() => killGroup('SIGKILL'), KILL_GRACE_MS).unref();
  }, timeoutS * 1000);
  running.set(child.pid as number, killGroup);
  return new Promise((resolve) => {
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      running.delete(child.pid as number);
      const output = Buffer.concat(chunks).toString('utf8');
      const seconds = (Date.now() - started) / 1000;
      const counts = tapCounts(output);
      const why = timedOut
        ? `killed after ${timeoutS} s (GPURES_TEST_FILE_TIMEOUT_S): a test or hook did not end`
        : code !== 0
          ? `exited ${code ?? signal}`
          : counts === null
            ? 'printed no TAP summary'
            : undefined;
      const failed = why && `${why}; ${failureLines(output)}`;
      const head = `# file ${q.file}: ${failed ? `FAILED, ${failed}` : 'ok'}, ${seconds.toFixed(1)} s (lane ${lane})`;
      process.stdout.write(`${head}\n${output}${output.endsWith('\n') ? '' : '\n'}`);
      resolve({ file: q, lane, seconds, counts, ...(failed ? { failed } : {}) });
    });
  });
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const dash = argv.indexOf('--');
  if (dash < 0) die('usage: test-lanes-main.js [node --test args…] -- FILE…');
  const nodeArgs = argv.slice(0, dash);
  const files = argv.slice(dash + 1);
  if (files.length === 0) die('no test files given');
  const lanes = boundedInt('GPURES_TEST_LANES', 2, 1, MAX_LANES);
  const timeoutS = boundedInt('GPURES_TEST_FILE_TIMEOUT_S', 900, 10, 3600);
  const plan = readPlan();
  const queue = queueFiles(files, plan);
  const unplanned = queue.filter((q) => plan.seconds[testKey(q.file)] === undefined).map((q) => testKey(q.file));
  process.stdout.write(
    `# ${files.length} file(s), ${lanes} at a time, each bounded by ${timeoutS} s` +
      (unplanned.length ? `; not in test/lanes.json (taken as ${DEFAULT_SECONDS} s): ${unplanned.join(', ')}` : '') +
      '\n',
  );
  for (const signal of ['SIGINT', 'SIGTERM'] as const)
    process.on(signal, () => {
      for (const kill of running.values()) kill('SIGKILL');
      process.exit(130);
    });

  const started = Date.now();
  const ended: Ended[] = [];
  const inFlight = new Map<QueuedFile, { lane: number; done: Promise<Ended> }>();
  const freeLanes = Array.from({ length: lanes }, (_, i) => lanes - i);
  while (queue.length > 0 || inFlight.size > 0) {
    for (;;) {
      const i = nextToStart(queue, [...inFlight.keys()], lanes);
      if (i < 0) break;
      const [q] = queue.splice(i, 1) as [QueuedFile];
      const lane = freeLanes.pop() as number;
      inFlight.set(q, { lane, done: runFile(q, lane, nodeArgs, timeoutS) });
    }
    const e = await Promise.race([...inFlight.values()].map((f) => f.done));
    inFlight.delete(e.file);
    freeLanes.push(e.lane);
    ended.push(e);
  }

  const wallS = (Date.now() - started) / 1000;
  const total = Object.fromEntries(TAP_COUNTERS.map((c) => [c, 0])) as TapCounts;
  for (const e of ended) {
    if (e.counts) for (const c of TAP_COUNTERS) total[c] += e.counts[c];
    // A file killed or crashed before its summary counts as one failed test, so `# fail 0` never heads a failed run.
    else {
      total.tests += 1;
      total.fail += 1;
    }
  }
  const failedFiles = ended.filter((e) => e.failed);
  const summed = ended.reduce((s, e) => s + e.seconds, 0);
  mkdirSync(dirname(TIMES_FILE), { recursive: true });
  writeFileSync(TIMES_FILE, JSON.stringify(Object.fromEntries(ended.map((e) => [testKey(e.file.file), Math.round(e.seconds)])), null, 2) + '\n');
  const slowest = [...ended].sort((a, b) => b.seconds - a.seconds).slice(0, 12);
  const lines = [
    `# files ${ended.length}, failed ${failedFiles.length}; wall ${wallS.toFixed(0)} s with ${lanes} at a time, the files' own ${summed.toFixed(0)} s summed (${(summed / wallS).toFixed(2)}×); each file's seconds in ${TIMES_FILE}`,
    `# slowest: ${slowest.map((e) => `${testKey(e.file.file)} ${e.seconds.toFixed(0)} s`).join(', ')}`,
    ...failedFiles.map((e) => `# FAILED ${e.file.file}: ${e.failed}`),
    ...TAP_COUNTERS.map((c) => `# ${c} ${total[c]}`),
    `# duration_ms ${Math.round(wallS * 1000)}`,
  ];
  process.stdout.write(lines.join('\n') + '\n');
  process.exit(failedFiles.length > 0 || total.fail > 0 ? 1 : 0);
}

void main();
