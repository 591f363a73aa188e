// The state directory of the simulated box (runtime.ts): one JSON record per container name and a
// lock per name, read by every process that looks at the box (a worker, the CLI, the fake
// nvidia-smi) without a runtime of its own. A record's process is alive only if its pid is still
// the process that was started: /proc's start time tells a reused pid apart.
import { randomBytes } from 'node:crypto';
import { closeSync, openSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync, writeSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { HAS_PROC, processAlive, procStat } from '../adapters/host-process';

const LOCK_TIMEOUT_MS = 30_000;

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** What the state file of one simulated container holds. */
export interface SimContainerRecord {
  id: string;
  name: string;
  pid: number;
  labels: Record<string, string>;
  image: string;
  /** The arguments the server process got (the spec's cmd with --host/--port rewritten). */
  cmd: string[];
  env: Record<string, string>;
  hostPort: number;
  bind: string;
  containerPort: number;
  /** The spec's GPU: not pinned (there is none), recorded for the fake nvidia-smi. */
  gpuUuid?: string;
  startedAt: string;
  /** Start time of the process in clock ticks since boot (Linux), to tell a reused pid apart. */
  procStart?: string;
  exitCode?: number;
}

export interface SimContainer {
  record: SimContainerRecord;
  running: boolean;
}

export function errCode(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err ? String(err.code) : undefined;
}

/** The pid and every descendant of it, from /proc's parent links (the pid alone without /proc). */
export function processTree(root: number): number[] {
  if (!HAS_PROC) return [root];
  const children = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    // Field [1] after the command name is the parent's pid.
    const parent = Number(procStat(Number(entry))?.[1]);
    if (parent > 0) children.set(parent, [...(children.get(parent) ?? []), Number(entry)]);
  }
  const tree: number[] = [];
  for (const queue = [root]; queue.length > 0;) {
    const pid = queue.shift() as number;
    tree.push(pid);
    queue.push(...(children.get(pid) ?? []));
  }
  return tree;
}

function isRecord(v: unknown): v is SimContainerRecord {
  if (typeof v !== 'object' || v === null) return false;
  const r = v as Partial<SimContainerRecord>;
  return typeof r.id === 'string' && typeof r.name === 'string' && typeof r.pid === 'number' && typeof r.labels === 'object' && r.labels !== null;
}

export function readRecordFile(file: string): SimContainerRecord | undefined {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    if (errCode(err) === 'ENOENT') return undefined;
    throw err;
  }
  try {
    const parsed: unknown = JSON.parse(text);
    return isRecord(parsed) ? parsed : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Where a simulated serve writes what it draws as it sleeps and wakes (src/sim/sleep-mode.ts); not
 * a .json, so listSimContainers never takes it for a record.
 */
export function simDrawFile(stateDir: string, name: string): string {
  return join(stateDir, `${name}.draw`);
}

/** A serve's draw file, when it has written one: its MiB on the GPU now. */
export function readSimDrawMib(stateDir: string, name: string): number | undefined {
  try {
    const draw = JSON.parse(readFileSync(simDrawFile(stateDir, name), 'utf8')) as { gpuMib?: unknown };
    return typeof draw.gpuMib === 'number' && Number.isFinite(draw.gpuMib) ? draw.gpuMib : undefined;
  } catch (err) {
    if (errCode(err) === 'ENOENT') return undefined;
    throw err;
  }
}

/** Every simulated container in a state directory, with whether its process is running. */
export function listSimContainers(stateDir: string): SimContainer[] {
  let entries: string[];
  try {
    entries = readdirSync(stateDir);
  } catch (err) {
    if (errCode(err) === 'ENOENT') return [];
    throw err;
  }
  const out: SimContainer[] = [];
  for (const entry of entries.sort()) {
    if (!entry.endsWith('.json') || entry.startsWith('.')) continue;
    const record = readRecordFile(join(stateDir, entry));
    if (record) out.push({ record, running: processAlive(record.pid, record.procStart) });
  }
  return out;
}

/** Atomically, through a temporary dot-file in the same directory, so a reader never sees half a file. */
export function writeFileAtomic(target: string, text: string): void {
  const tmp = join(dirname(target), `.${basename(target)}.${process.pid}.${randomBytes(4).toString('hex')}`);
  writeFileSync(tmp, text);
  renameSync(tmp, target);
}

export function writeRecordFile(stateDir: string, record: SimContainerRecord): void {
  writeFileAtomic(join(stateDir, `${record.name}.json`), `${JSON.stringify(record, null, 2)}\n`);
}

/** A lock file holding the holder's pid; one its holder left behind by dying is taken over. */
export async function withFileLock<T>(lock: string, fn: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + LOCK_TIMEOUT_MS;
  for (;;) {
    try {
      const fd = openSync(lock, 'wx');
      try {
        writeSync(fd, String(process.pid));
      } finally {
        closeSync(fd);
      }
      break;
    } catch (err) {
      if (errCode(err) !== 'EEXIST') throw err;
    }
    let stale = false;
    try {
      const holder = Number(readFileSync(lock, 'utf8'));
      stale = holder > 0 ? !processAlive(holder) : Date.now() - statSync(lock).mtimeMs > 5_000;
    } catch {
      // Released meanwhile: try again.
    }
    if (stale) rmSync(lock, { force: true });
    else if (Date.now() > deadline) throw new Error(`sim runtime: ${lock} held for over ${LOCK_TIMEOUT_MS} ms`);
    else await sleep(20);
  }
  try {
    return await fn();
  } finally {
    rmSync(lock, { force: true });
  }
}
