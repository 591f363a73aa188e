// Whether a process of this host still runs, for every check that goes by a pid written down
// earlier: a poller's identity (the second-worker check), a simulated container's record, a lock
// file's holder, a postgres pid file, a network namespace's owner. `kill(pid, 0)` alone is not
// enough: a zombie (exited, not yet reaped by its parent) still answers it, and a pid may have been
// reused by another process since; /proc's state and start time tell both apart.
import { existsSync, readFileSync } from 'node:fs';

/** Whether this host has /proc (Linux): without it, a pid that answers `kill(pid, 0)` is taken as alive. */
export const HAS_PROC = existsSync('/proc/self/stat');

/** Fields of /proc/PID/stat after the command name: [0] is the state, [1] the parent's pid, [19] the start time. */
export function procStat(pid: number): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name is in parentheses and may hold any character, ')' and spaces included.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  } catch {
    return undefined;
  }
}

/**
 * A process exists (EPERM: under another user), is not a zombie (it has exited; only its parent has
 * not reaped it), and, when `procStart` is given (/proc/PID/stat's start time, in clock ticks since
 * boot, taken when it was started), is the one that was started, not a later one under its pid.
 */
export function processAlive(pid: number, procStart?: string): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  if (!HAS_PROC) return true;
  const stat = procStat(pid);
  if (!stat) return false;
  if (stat[0] === 'Z' || stat[0] === 'X') return false;
  return procStart === undefined || stat[19] === procStart;
}
