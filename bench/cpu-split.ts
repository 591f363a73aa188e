// Where a benchmark's CPU goes, read from /proc: the dev server (this process's child processes,
// the temporal CLI) and this process's threads. Node names its threads alike, so they are told
// apart by when they appeared: the main thread (the callers, the client's calls and the worker's
// JavaScript side), the SDK core's (tokio: the worker's polls and completions), the threads that
// started with the worker (its workflow thread, where the ledger's code runs), and the rest (V8's
// collector, libuv). CPU time, not wall time: on a host whose load moves, it is the figure that
// compares one build with another.
import { readdirSync, readFileSync } from 'node:fs';

/** /proc's utime and stime are in clock ticks (USER_HZ, 100 on Linux). */
const MS_PER_TICK = 10;

export type CpuGroup = 'server' | 'main' | 'core' | 'workflow' | 'other';
export const CPU_GROUPS: readonly CpuGroup[] = ['server', 'main', 'workflow', 'core', 'other'];
export type CpuMs = Record<CpuGroup, number>;

interface Stat {
  comm: string;
  ppid: number;
  ms: number;
}

/** A /proc stat line: the comm field may hold spaces and parentheses, so fields are counted after its last ')'. */
function parseStat(line: string): Stat {
  const close = line.lastIndexOf(')');
  const rest = line.slice(close + 2).split(' ');
  // rest[0] is field 3 (state): ppid is field 4, utime 14, stime 15.
  const field = (n: number) => Number(rest[n - 3]);
  return { comm: line.slice(line.indexOf('(') + 1, close), ppid: field(4), ms: (field(14) + field(15)) * MS_PER_TICK };
}

function stat(path: string): Stat | undefined {
  try {
    return parseStat(readFileSync(path, 'utf8'));
  } catch {
    return undefined; // ended between the listing and the read
  }
}

/** This process's thread ids now: taken before the worker starts, they tell its threads from the others. */
export function threadIds(): Set<string> {
  return new Set(readdirSync('/proc/self/task'));
}

/** CPU ms so far by group; `before` is the thread ids from before the worker started. */
export function cpuMs(before: Set<string>): CpuMs {
  const ms: CpuMs = { server: 0, main: 0, core: 0, workflow: 0, other: 0 };
  for (const tid of readdirSync('/proc/self/task')) {
    const s = stat(`/proc/self/task/${tid}/stat`);
    if (!s) continue;
    const group: CpuGroup = Number(tid) === process.pid ? 'main' : s.comm.startsWith('tokio') ? 'core' : before.has(tid) ? 'other' : 'workflow';
    ms[group] += s.ms;
  }
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    const s = stat(`/proc/${pid}/stat`);
    if (s?.ppid === process.pid) ms.server += s.ms;
  }
  return ms;
}

/** The CPU between two readings, in µs a decision, by group and in all. */
export function perDecisionUs(from: CpuMs, to: CpuMs, decisions: number): CpuMs & { total: number } {
  const per = Object.fromEntries(CPU_GROUPS.map((g) => [g, ((to[g] - from[g]) * 1000) / decisions])) as CpuMs;
  return { ...per, total: CPU_GROUPS.reduce((t, g) => t + per[g], 0) };
}
