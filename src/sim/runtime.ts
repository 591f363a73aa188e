// ContainerRuntime without Docker or a GPU: each "container" is a detached local process of the
// simulated vLLM server (model-server-main.js). Its state is one JSON file per container name in a
// state directory (state-dir.ts), so separate processes (a worker, the CLI, the fake nvidia-smi)
// see the same box, and the processes outlive the worker that started them, as containers outlive
// dockerd's clients. Semantics follow docker.ts: idempotent ensureRunning, stop of a stopped or
// absent container is fine, an unknown image is a PermanentError('ImageMissing').
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, fstatSync, mkdirSync, openSync, readFileSync, readSync, rmSync, writeFileSync } from 'node:fs';
import { constants as osConstants } from 'node:os';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ContainerLogs, ContainerRuntime, ContainerSpec, ContainerState, LogRequest } from '../adapters/containers/port';
import { imageMissing, PermanentError } from '../adapters/errors';
import { LABEL } from '../domain/serve';
import { HAS_PROC, processAlive, procStat } from '../adapters/host-process';
import { errCode, listSimContainers, processTree, readRecordFile, simDrawFile, withFileLock, writeRecordFile } from './state-dir';
import type { SimContainerRecord } from './state-dir';

export interface SimRuntimeOptions {
  /** Shared by every process that looks at this box; created when missing. */
  stateDir: string;
  /** Images this box "has"; unset: any image. Others fail with PermanentError('ImageMissing'). */
  knownImages?: string[];
  /** The compiled server entry point; default: model-server-main.js next to this file. */
  serverMain?: string;
}

const NAME_RE = /^[a-zA-Z0-9][a-zA-Z0-9_.-]+$/;
const KILL_WAIT_MS = 5_000;
const LISTEN_WAIT_MS = 10_000;

/** The spec's cmd listening on bind:hostPort instead of the container's 0.0.0.0:containerPort. */
export function rewriteListenArgs(cmd: readonly string[], bind: string, hostPort: number): string[] {
  const out: string[] = [];
  let sawHost = false;
  let sawPort = false;
  for (let i = 0; i < cmd.length; i++) {
    const arg = cmd[i] ?? '';
    if (arg === '--host' || arg === '--port') {
      out.push(arg, arg === '--host' ? bind : String(hostPort));
      if (arg === '--host') sawHost = true;
      else sawPort = true;
      i++;
    } else if (arg.startsWith('--host=')) {
      out.push(`--host=${bind}`);
      sawHost = true;
    } else if (arg.startsWith('--port=')) {
      out.push(`--port=${hostPort}`);
      sawPort = true;
    } else {
      out.push(arg);
    }
  }
  if (!sawHost) out.push('--host', bind);
  if (!sawPort) out.push('--port', String(hostPort));
  return out;
}

function signalExitCode(signal: NodeJS.Signals | null): number {
  const n = signal ? (osConstants.signals as Record<string, number | undefined>)[signal] : undefined;
  return n === undefined ? -1 : 128 + n;
}

export class SimRuntime implements ContainerRuntime, ContainerLogs {
  readonly stateDir: string;
  private readonly knownImages: Set<string> | undefined;
  private readonly serverMain: string;

  constructor(options: SimRuntimeOptions) {
    this.stateDir = resolve(options.stateDir);
    this.knownImages = options.knownImages ? new Set(options.knownImages) : undefined;
    // By way of dist/src: this code also runs from the CLI's bundle in dist/src/cli (src/cli/launch.ts).
    this.serverMain = options.serverMain ?? join(__dirname, '..', 'sim', 'model-server-main.js');
    mkdirSync(this.stateDir, { recursive: true });
  }

  private file(name: string, ext: 'json' | 'log' | 'exit' | 'lock'): string {
    return join(this.stateDir, `${name}.${ext}`);
  }

  private read(name: string): SimContainerRecord | undefined {
    return NAME_RE.test(name) ? readRecordFile(this.file(name, 'json')) : undefined;
  }

  private write(record: SimContainerRecord): void {
    writeRecordFile(this.stateDir, record);
  }

  /** First writer wins: the server itself on a clean exit, else whoever saw it die. */
  private recordExit(name: string, id: string, exitCode: number): void {
    try {
      writeFileSync(this.file(name, 'exit'), JSON.stringify({ id, exitCode }), { flag: 'wx' });
    } catch {
      // Already recorded, or the container was removed meanwhile.
    }
  }

  private exitCodeOf(record: SimContainerRecord): number {
    if (record.exitCode !== undefined) return record.exitCode;
    try {
      const parsed = JSON.parse(readFileSync(this.file(record.name, 'exit'), 'utf8')) as { id?: unknown; exitCode?: unknown };
      if (parsed.id === record.id && typeof parsed.exitCode === 'number') return parsed.exitCode;
    } catch {
      // Not recorded (killed while nobody watched): unknown.
    }
    return -1;
  }

  private state(record: SimContainerRecord): ContainerState {
    const running = processAlive(record.pid, record.procStart);
    return {
      id: record.id,
      name: record.name,
      running,
      status: running ? 'running' : 'exited',
      exitCode: running ? 0 : this.exitCodeOf(record),
      restartCount: 0,
      labels: { ...record.labels },
    };
  }

  /** A per-name lock, so concurrent processes don't start a name twice. */
  private withLock<T>(name: string, fn: () => Promise<T>): Promise<T> {
    return withFileLock(this.file(name, 'lock'), fn);
  }

  private async waitDead(record: SimContainerRecord, timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (processAlive(record.pid, record.procStart)) {
      if (Date.now() >= deadline) return false;
      await sleep(25);
    }
    return true;
  }

  private async kill(record: SimContainerRecord): Promise<void> {
    try {
      process.kill(record.pid, 'SIGKILL');
    } catch (err) {
      if (errCode(err) !== 'ESRCH') throw err;
    }
    if (!(await this.waitDead(record, KILL_WAIT_MS))) throw new Error(`sim container ${record.name}: pid ${record.pid} survived SIGKILL`);
    this.recordExit(record.name, record.id, 137);
  }

  private removeFiles(name: string): void {
    for (const ext of ['json', 'log', 'exit'] as const) rmSync(this.file(name, ext), { force: true });
    rmSync(simDrawFile(this.stateDir, name), { force: true });
  }

  hasImage(image: string): Promise<boolean> {
    return Promise.resolve(this.hasImageNow(image));
  }

  private hasImageNow(image: string): boolean {
    return !this.knownImages || this.knownImages.has(image);
  }

  ensureRunning(spec: ContainerSpec): Promise<{ id: string; created: boolean; gpuPinned: boolean }> {
    if (!NAME_RE.test(spec.name)) {
      return Promise.reject(new PermanentError('InvalidContainerName', `invalid container name '${spec.name}': only [a-zA-Z0-9][a-zA-Z0-9_.-]+ are allowed`));
    }
    return this.withLock(spec.name, async () => {
      const existing = this.read(spec.name);
      if (existing && processAlive(existing.pid, existing.procStart)) return { id: existing.id, created: false, gpuPinned: false };
      // A stopped leftover may carry an older manifest's settings: start from a clean container.
      if (existing) this.removeFiles(spec.name);
      if (!this.hasImageNow(spec.image)) throw imageMissing(spec.image);
      const id = randomBytes(32).toString('hex');
      const cmd = rewriteListenArgs(spec.cmd, spec.bind, spec.hostPort);
      const exitFile = this.file(spec.name, 'exit');
      rmSync(exitFile, { force: true });
      // A new process draws its whole reservation until it sleeps.
      const drawFile = simDrawFile(this.stateDir, spec.name);
      rmSync(drawFile, { force: true });
      const logFd = openSync(this.file(spec.name, 'log'), 'w');
      let pid: number;
      try {
        const child = spawn(process.execPath, [this.serverMain, ...cmd], {
          detached: true,
          // fd 3: the server says when it listens, so the port is bound when this returns (as
          // after docker start), or the process has already exited (a crash, a port taken).
          stdio: ['ignore', logFd, logFd, 'pipe'],
          cwd: this.stateDir,
          // Like a container, the server sees its own environment, not the worker's.
          env: {
            ...spec.env,
            SIM_CONTAINER_ID: id,
            SIM_EXIT_CODE_FILE: exitFile,
            SIM_READY_FD: '3',
            SIM_DRAW_FILE: drawFile,
            ...(spec.labels[LABEL.vramMib] ? { SIM_VRAM_MIB: spec.labels[LABEL.vramMib] } : {}),
          },
        });
        await new Promise<void>((ok, fail) => {
          child.once('spawn', ok);
          child.once('error', fail);
        });
        if (child.pid === undefined) throw new Error(`sim container ${spec.name}: spawn gave no pid`);
        pid = child.pid;
        // While this process lives it hears the exit (a crash, a signal) and records the code.
        child.once('exit', (code, signal) => this.recordExit(spec.name, id, code ?? signalExitCode(signal)));
        child.unref();
        const ready = child.stdio[3];
        if (ready) {
          await new Promise<void>((done) => {
            const timer = setTimeout(done, LISTEN_WAIT_MS);
            const finish = () => {
              clearTimeout(timer);
              done();
            };
            ready.once('data', finish);
            ready.once('close', finish);
            ready.once('error', finish);
          });
          ready.destroy();
        }
      } finally {
        closeSync(logFd);
      }
      const procStart = HAS_PROC ? procStat(pid)?.[19] : undefined;
      this.write({
        id,
        name: spec.name,
        pid,
        labels: { ...spec.labels },
        image: spec.image,
        cmd,
        env: { ...spec.env },
        hostPort: spec.hostPort,
        bind: spec.bind,
        containerPort: spec.containerPort,
        ...(spec.gpuUuid !== undefined ? { gpuUuid: spec.gpuUuid } : {}),
        startedAt: new Date().toISOString(),
        ...(procStart !== undefined ? { procStart } : {}),
      });
      return { id, created: true, gpuPinned: false };
    });
  }

  inspect(name: string): Promise<ContainerState | undefined> {
    const record = this.read(name);
    return Promise.resolve(record ? this.state(record) : undefined);
  }

  async stop(name: string, timeoutS: number, onlyId?: string): Promise<'stopped' | 'already-stopped' | 'absent'> {
    const record = this.read(name);
    if (!record || (onlyId !== undefined && record.id !== onlyId)) return 'absent';
    if (!processAlive(record.pid, record.procStart)) return 'already-stopped';
    try {
      process.kill(record.pid, 'SIGTERM');
    } catch (err) {
      if (errCode(err) === 'ESRCH') return 'already-stopped';
      throw err;
    }
    if (!(await this.waitDead(record, Math.max(0, timeoutS) * 1000))) await this.kill(record);
    return 'stopped';
  }

  remove(name: string, onlyId?: string): Promise<'removed' | 'absent'> {
    if (!NAME_RE.test(name)) return Promise.resolve('absent');
    return this.withLock(name, async () => {
      const record = this.read(name);
      if (!record || (onlyId !== undefined && record.id !== onlyId)) return 'absent';
      if (processAlive(record.pid, record.procStart)) await this.kill(record);
      this.removeFiles(name);
      return 'removed';
    });
  }

  list(labels: Record<string, string>): Promise<ContainerState[]> {
    const wanted = Object.entries(labels);
    return Promise.resolve(
      listSimContainers(this.stateDir)
        .filter(({ record }) => wanted.every(([k, v]) => record.labels[k] === v))
        .map(({ record }) => this.state(record)),
    );
  }

  /** The server process and its descendants, as `docker top` lists a container's (host pids). */
  processes(name: string): Promise<number[]> {
    const record = this.read(name);
    return Promise.resolve(record && processAlive(record.pid, record.procStart) ? processTree(record.pid) : []);
  }

  logsTail(name: string, lines: number): Promise<string> {
    if (!NAME_RE.test(name) || lines <= 0) return Promise.resolve('');
    try {
      return Promise.resolve(readTail(this.file(name, 'log'), lines).text);
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  logs(name: string, req: LogRequest): Promise<AsyncIterable<Buffer> | undefined> {
    const record = this.read(name);
    return Promise.resolve(record ? this.followLog(record, req) : undefined);
  }

  /** The tail, then with `follow` what the server appends, until its process is gone, its record removed or replaced, or the signal aborts. */
  private async *followLog(record: SimContainerRecord, req: LogRequest): AsyncIterable<Buffer> {
    const path = this.file(record.name, 'log');
    const { text, size } = readTail(path, req.tail);
    // Within the last lines, as Docker takes --since with --tail: the lines are in time order.
    const shown = req.sinceEpochMs !== undefined ? linesSince(text, req.sinceEpochMs) : text;
    if (shown) yield Buffer.from(shown);
    if (!req.follow) return;
    let offset = size;
    while (!req.signal.aborted) {
      const more = readFrom(path, offset);
      offset += more.length;
      if (more.length) {
        yield more;
        continue;
      }
      const now = this.read(record.name);
      // Gone: its last bytes were read above, after it died (a dead process writes nothing more).
      if (now?.id !== record.id || !processAlive(record.pid, record.procStart)) {
        const last = readFrom(path, offset);
        if (last.length) yield last;
        return;
      }
      // Cut short by the abort; the timer takes its abort listener off when it fires (one added a
      // poll and left piled up: node warned at the eleventh, two seconds into a --follow).
      await sleep(FOLLOW_POLL_MS, undefined, { signal: req.signal }).catch(() => undefined);
    }
  }
}

/** The time the simulated server stamps each line of its own with (model-server-main.ts's log). */
const STAMP = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z) /;

/**
 * The lines written at or after `sinceMs`, by their stamps. A line without one (a stack trace's,
 * node's own) goes with the stamped line before it; one before any stamp with the first stamped
 * line after it (written no later); where none is stamped, nothing tells their time and all are kept.
 */
export function linesSince(text: string, sinceMs: number): string {
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  const out: string[] = [];
  const unplaced: string[] = [];
  let keep: boolean | undefined;
  for (const line of lines) {
    const stamp = STAMP.exec(line)?.[1];
    if (stamp !== undefined) {
      keep = Date.parse(stamp) >= sinceMs;
      if (keep) out.push(...unplaced);
      unplaced.length = 0;
    }
    if (keep === undefined) unplaced.push(line);
    else if (keep) out.push(line);
  }
  out.push(...unplaced);
  return out.length ? `${out.join('\n')}\n` : '';
}

/** How often a followed log is looked at for more: the simulated server writes a line per request at most. */
const FOLLOW_POLL_MS = 200;
/** One read of a followed log, at most. */
const FOLLOW_READ_BYTES = 64 * 1024;

/** The last `lines` lines of the file as it is now, and its size then: a follower goes on from there. Absent: nothing. */
function readTail(path: string, lines: number): { text: string; size: number } {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (err) {
    if (errCode(err) === 'ENOENT') return { text: '', size: 0 };
    throw err;
  }
  try {
    const size = fstatSync(fd).size;
    const length = Math.min(size, Math.max(64 * 1024, lines * 512));
    const buf = Buffer.alloc(length);
    readSync(fd, buf, 0, length, size - length);
    const all = buf.toString('utf8').split('\n');
    if (all[all.length - 1] === '') all.pop();
    // The read began inside a line: drop the fragment.
    if (length < size) all.shift();
    const tail = all.slice(-lines);
    return { text: tail.length > 0 ? `${tail.join('\n')}\n` : '', size };
  } finally {
    closeSync(fd);
  }
}

/** What the file holds past `offset`, at most FOLLOW_READ_BYTES; nothing once it is removed. */
function readFrom(path: string, offset: number): Buffer {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (err) {
    if (errCode(err) === 'ENOENT') return Buffer.alloc(0);
    throw err;
  }
  try {
    const buf = Buffer.alloc(FOLLOW_READ_BYTES);
    return buf.subarray(0, readSync(fd, buf, 0, FOLLOW_READ_BYTES, offset));
  } finally {
    closeSync(fd);
  }
}
