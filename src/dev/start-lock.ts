// One `start` at a time on a state directory: two at once would both initdb, both apply the schemas
// and both spawn a temporal-server on the same ports. The lock is a file created with O_EXCL that
// holds the starter's pid; a file whose pid is gone (a start killed mid-way) is stale and taken over
// (two waiters taking over the same stale file in the same instant could both proceed: that needs a
// killed start and two more within milliseconds of each other, which we accept).
import { closeSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { processAlive } from '../adapters/host-process';

/** A first start (initdb, schemas, the server's boot) takes under two minutes; its every step has its own bound. */
const START_LOCK_WAIT_MS = 15 * 60_000;

function holder(lock: string): number | undefined {
  let pid: number;
  try {
    pid = Number(readFileSync(lock, 'utf8').trim());
  } catch {
    return undefined;
  }
  if (!(pid > 0) || !processAlive(pid)) return undefined;
  // A pid reused since by something other than a node process is not a start.
  try {
    return /(^|\/)node[^/]*$/.test(readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0] ?? '') ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** Runs `fn` holding stateDir/start.lock; while another start holds it, says so once (`waiting`) and waits. */
export async function withStartLock<T>(stateDir: string, fn: () => Promise<T>, waiting: (note: string) => void = () => undefined): Promise<T> {
  const lock = join(stateDir, 'start.lock');
  const deadline = Date.now() + START_LOCK_WAIT_MS;
  let told = false;
  for (;;) {
    try {
      const fd = openSync(lock, 'wx', 0o600);
      writeSync(fd, `${process.pid}\n`);
      closeSync(fd);
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const pid = holder(lock);
    if (pid === undefined) {
      rmSync(lock, { force: true });
      continue;
    }
    if (Date.now() > deadline) throw new Error(`another start (pid ${pid}) still holds ${lock} after ${START_LOCK_WAIT_MS / 60_000} min`);
    if (!told) waiting(`another start (pid ${pid}) is under way on ${stateDir}; waiting for it`);
    told = true;
    await new Promise((r) => setTimeout(r, 250));
  }
  try {
    return await fn();
  } finally {
    rmSync(lock, { force: true });
  }
}
