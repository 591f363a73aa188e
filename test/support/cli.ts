// `bin/gpures` as an operator runs it: a real process, its stdout, stderr and exit code.
import { execFile, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { renderManifest, uniqueNode } from './box';
import type { TestGpu, TestServe } from './box';
import { testTemporal } from './temporal';
import type { TestTemporal } from './temporal';

// dist/test/support/cli.js -> repo root
export const ROOT = join(__dirname, '..', '..', '..');
export const GPURES = join(ROOT, 'bin', 'gpures');

export interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** Runs FILE ARGS with `env` over this process's; never rejects, so every assertion sees all three outputs. */
function capture(file: string, args: string[], env: Record<string, string>, timeoutMs: number): Promise<Run> {
  const started = Date.now();
  return new Promise((resolve) => {
    execFile(file, args, { cwd: ROOT, env: { ...process.env, ...env }, timeout: timeoutMs, maxBuffer: 32 * 1024 * 1024 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : null) : 0;
      resolve({ code, stdout, stderr, ms: Date.now() - started });
    });
  });
}

/** Runs `bin/gpures ARGS` with `env` over this process's; never rejects, so every assertion sees all three outputs. */
export function gpures(args: string[], env: Record<string, string>, timeoutMs = 60_000): Promise<Run> {
  return capture(process.execPath, [GPURES, ...args], env, timeoutMs);
}

/**
 * `bin/gpures ARGS` as a process, as gpures() runs it, and once it has printed `text` (on stdout or
 * stderr): for a command that goes on after a line worth waiting for (a `serves up` that joined).
 */
export function gpuresSaying(args: string[], env: Record<string, string>, text: string, timeoutMs = 60_000): { said: Promise<void>; run: Promise<Run> } {
  const started = Date.now();
  const child = spawn(process.execPath, [GPURES, ...args], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  let stdout = '';
  let stderr = '';
  let tell: (() => void) | undefined;
  const said = new Promise<void>((resolve) => (tell = resolve));
  const heard = () => {
    if ((stdout + stderr).includes(text)) tell?.();
  };
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => ((stdout += chunk), heard()));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => ((stderr += chunk), heard()));
  const run = new Promise<Run>((resolve) =>
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, ms: Date.now() - started });
    }),
  );
  // A process that ended without saying it: said rejects, naming what it printed.
  const saidOrEnded = Promise.race([said, run.then((r) => Promise.reject(new Error(`never printed '${text}': ${show(r)}`)))]);
  saidOrEnded.catch(() => undefined);
  return { said: saidOrEnded, run };
}

/** Runs `bin/gpures ARGS` as a program, as an installed `gpures` runs: through its shebang line. */
export function gpuresAsInstalled(args: string[], env: Record<string, string>, timeoutMs = 60_000): Promise<Run> {
  return capture(GPURES, args, env, timeoutMs);
}

export function show(r: Run): string {
  return `exit ${r.code} after ${r.ms} ms\n--- stdout\n${r.stdout}--- stderr\n${r.stderr}`;
}

export interface WorkerProcess {
  child: ChildProcess;
  /** How the process exited, once it has. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  stderr(): string;
  /** SIGTERM (its local steps end, then the SDK drains: src/worker/stop.ts), SIGKILL after 15 s. */
  stop(): Promise<void>;
}

/**
 * `gpures worker ARGS` as its own process, resolved once it says it is up; `command` runs another
 * worker entry point instead (the fleet test's, inside a network namespace). No /metrics unless
 * `env` asks for an address: the default 127.0.0.1:9475 is the box's real worker's.
 */
export function startWorkerProcess(args: string[], env: Record<string, string>, command = [process.execPath, GPURES, 'worker']): Promise<WorkerProcess> {
  const [file = process.execPath, ...prefix] = command;
  const child = spawn(file, [...prefix, ...args], {
    cwd: ROOT,
    // A failed start's kept lines go to this test process's own directory, not the user's ~/.local/state.
    env: { ...process.env, GPURES_METRICS_ADDR: 'off', GPURES_STATE_DIR: join(tmpdir(), `gpures-test-state-${process.pid}`), ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) => child.once('exit', (code, signal) => r({ code, signal })));
  const worker: WorkerProcess = {
    child,
    exited,
    stderr: () => stderr,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(timer);
    },
  };
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`worker not up within 60 s; stderr:\n${stderr}`)), 60_000);
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk: string) => {
      stderr += chunk;
      if (stderr.includes('worker for node')) {
        clearTimeout(timer);
        resolve(worker);
      }
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`worker exited (${code ?? signal}) before it was up; stderr:\n${stderr}`));
    });
  });
}

/** A word as POSIX sh reads it literally. */
function shellWord(s: string): string {
  return `'${s.replace(/'/g, `'\\''`)}'`;
}

/**
 * `bin/gpures ARGS` on a pseudo-terminal, as an operator at a terminal runs it: util-linux's
 * `script` gives it one (stdout and stderr both go to it, so `stdout` here is what the terminal
 * showed, escape sequences and all). script runs its command through sh, so every word is quoted;
 * the pty gets a size first (one nobody sized is 0x0, where nothing is redrawn). `stdoutTo`: the
 * command's stdout goes to that file instead, stderr alone to the terminal, as `gpures … >file`.
 */
export function gpuresUnderPty(args: string[], env: Record<string, string>, timeoutMs = 60_000, stdoutTo?: string): Promise<Run> {
  const redirect = stdoutTo !== undefined ? ` >${shellWord(stdoutTo)}` : '';
  const command = `stty cols 160 rows 50; exec ${[process.execPath, GPURES, ...args].map(shellWord).join(' ')}${redirect}`;
  return capture('script', ['-qefc', command, '/dev/null'], env, timeoutMs);
}

/** What a describe of `gpures` processes runs against (startCliWorker). */
export interface CliWorker {
  temporal: TestTemporal;
  /** TEMPORAL_ADDRESS and the box's GPURES_STATE_DIR: a command names its manifest (--manifest, or GPURES_MANIFEST added). */
  env: Record<string, string>;
  /** The manifest's directory, where a case may write others. */
  dir: string;
  node: string;
  manifest: string;
  worker: WorkerProcess;
}

/** A Temporal dev server, a fresh node's manifest (serves.toml in a directory of its own) and a `gpures worker` process serving it, GPUs off. */
export async function startCliWorker(prefix: string, gpus: TestGpu[], serves: TestServe[]): Promise<CliWorker> {
  const temporal = await testTemporal();
  const dir = mkdtempSync(join(tmpdir(), `gpures-${prefix}-`));
  // The box's own state directory (a failed start's kept lines), for its worker and its CLI alike.
  const env = { TEMPORAL_ADDRESS: temporal.address, GPURES_STATE_DIR: join(dir, 'state') };
  const node = uniqueNode(prefix);
  const manifest = join(dir, 'serves.toml');
  try {
    writeFileSync(manifest, renderManifest(node, gpus, serves));
    const worker = await startWorkerProcess(['--manifest', manifest, '--gpus', 'off'], env);
    return { temporal, env, dir, node, manifest, worker };
  } catch (err) {
    // The caller never gets the server to close: left running, it held the test file open until its
    // runner's bound (a worker that could not reach Docker kept serves-logs waiting 790 s).
    await temporal.close();
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
}
