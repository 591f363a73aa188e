// Replayer processes of one `gpures audit replay`: the SDK's replayer runs its JavaScript on one
// thread, so a process replays on about one core however many lanes it runs. A directory of many
// histories gets replayer processes (replay-child.ts), each taking histories from the same queue,
// which this process hands out, until none is left. A replayer process that fails to start or dies
// leaves its histories to the others, and what none finished this process replays (replay.ts).
import { fork } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { join } from 'node:path';
import type { ReplayQueue } from './replay-queue';

/**
 * Past this many, replayer processes gain nothing on the boxes this runs on and cost ~80 MiB each,
 * and 10-25 MB more while they replay with V8's own young generation (replayerFlags; docs/performance.md).
 */
export const MAX_REPLAY_PROCESSES = 8;
/**
 * A replayer process takes about 0.45 s to start and replays its first histories slower: on 2
 * cores, with this process replaying beside it, a second process gained nothing at 57-152
 * histories, 20 % at 380 and 40 % at 1,140; two replayers and this process handing out took 4 %
 * off that at 300 and 16 % at 660 (docs/performance.md).
 */
export const HISTORIES_PER_REPLAY_PROCESS = 150;
/**
 * One history replays in tens of ms and a replayer starts in about 0.45 s; one that owes an answer
 * this long (its first ask, a history's outcome, its next ask) is stuck: it is stopped, and a
 * history it held is failed rather than handed to another.
 */
export const REPLAY_PROCESS_STALL_MS = 60_000;
/** After the last outcome, how long a replayer process has to exit on its own before it is killed. */
const EXIT_GRACE_MS = 2_000;

/** What this process tells a replayer process. */
export type ToReplayer = { type: 'code'; code: string } | { type: 'history'; i: number; file: string } | { type: 'end' };
/** What a replayer process tells this one: `took` as a history reaches it. */
export type FromReplayer<T> = { type: 'take' } | { type: 'took'; i: number } | { type: 'outcome'; i: number; outcome: T };

/** Processes that replay `histories` (1: this one; more: replayer processes, this one handing out; never more than there are histories) unless told: one per core (at most 4), and one per HISTORIES_PER_REPLAY_PROCESS histories. */
export function replayProcessCount(histories: number, asked?: number): number {
  const wanted = asked ?? Math.min(availableParallelism(), 4, Math.floor(histories / HISTORIES_PER_REPLAY_PROCESS));
  return Math.max(1, Math.min(wanted, MAX_REPLAY_PROCESSES, histories));
}

/**
 * node's flags for a replayer process: this one's cap on the old generation, if any, and not a
 * test runner's or an inspector's flags. Not its cap on the young generation: bin/gpures gives
 * every command 1 MiB semi-spaces for the worker's RSS, and a replay at 1 MiB spends a fifth of its
 * main thread collecting. A replayer lives for one replay; V8's own size costs it 10-25 MB for that
 * while (docs/performance.md, Audit replay: The young generation, 2026-12-07 afternoon). NODE_OPTIONS
 * reaches it with the environment, as an operator set it.
 */
export const replayerFlags = (execArgv: readonly string[] = process.execArgv) => execArgv.filter((a) => /^--max[-_]old[-_]space[-_]size/.test(a));

export interface ReplayProcess {
  /** Resolves when the process has exited, whatever way; what it held is settled or back in the queue by then. */
  exited: Promise<void>;
  kill(): void;
}

/**
 * A replayer process taking history files from `queue` until it is settled, each settled as
 * `name`'s. What it holds when it dies goes back to the queue, once: a history that a second
 * replayer dies on, or one held REPLAY_PROCESS_STALL_MS, is settled as `failed`, not tried again.
 */
export function startReplayProcess<T>(
  queue: ReplayQueue<T>,
  files: readonly string[],
  code: string,
  name: string,
  failed: (i: number, error: Error) => T,
): ReplayProcess {
  // Its stderr is this one's: a replayer that crashes says why, though another replays what it held.
  // By way of dist/src: this code also runs from the CLI's bundle in dist/src/cli (src/cli/launch.ts).
  const child: ChildProcess = fork(join(__dirname, '..', 'audit', 'replay-child.js'), [], {
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    execArgv: replayerFlags(),
  });
  // Handed to it and not yet told as reached (`took`): one it never got is given back as it was.
  // Two replayers killed together: the history the first held may be handed to the second
  // before the second's death is seen, and that second death is not the history's.
  const sent = new Set<number>();
  const held = new Set<number>();
  let gone = false;
  let stalled = false;
  let stall: NodeJS.Timeout | undefined;
  // Armed while it owes this process a message: its first ask, a history's outcome, its next ask.
  // Not while its ask waits on the queue: that wait is the other replayers'.
  const owing = () => {
    clearTimeout(stall);
    stall = setTimeout(() => {
      stalled = true;
      child.kill('SIGKILL');
    }, REPLAY_PROCESS_STALL_MS);
  };
  owing();
  // A process gone while a message was on its way: its 'exit' settles or gives back what it held.
  const send = (m: ToReplayer) => void (!gone && child.connected && child.send(m, () => undefined));
  child.on('message', (m: FromReplayer<T>) => {
    if (m.type === 'took') {
      if (sent.delete(m.i)) held.add(m.i);
    } else if (m.type === 'outcome') {
      held.delete(m.i);
      owing();
      queue.settle(m.i, m.outcome, name);
    } else if (m.type === 'take') {
      clearTimeout(stall);
      void queue.take().then((i) => {
        if (i === undefined) return send({ type: 'end' });
        const file = files[i];
        if (gone || !child.connected || file === undefined) return queue.giveBack([i]);
        sent.add(i);
        owing();
        send({ type: 'history', i, file });
      });
    }
  });
  send({ type: 'code', code });
  const exited = new Promise<void>((resolve) => {
    const onExit = (why: string) => {
      if (gone) return;
      gone = true;
      clearTimeout(stall);
      queue.giveBack(sent);
      for (const i of held) {
        const error = new Error(
          stalled ? `a replayer process held it ${REPLAY_PROCESS_STALL_MS / 1000} s without an outcome` : `replayer processes died while replaying it (${why})`,
        );
        if (stalled) queue.settle(i, failed(i, error), name);
        else queue.giveBack([i], (j) => failed(j, error));
      }
      sent.clear();
      held.clear();
      resolve();
    };
    // Once its channel is read to the end too (a `took` sent before it died counts), within a second.
    child.once('exit', (code, signal) => {
      const why = signal ? `killed by ${signal}` : `exit ${code}`;
      if (!child.connected) return onExit(why);
      child.once('disconnect', () => onExit(why));
      setTimeout(() => onExit(why), 1000).unref();
    });
    // A process that could not be started emits 'error' and no 'exit'.
    child.on('error', (err) => (child.pid === undefined ? onExit(err.message) : undefined));
  });
  return { exited, kill: () => void child.kill('SIGKILL') };
}

/** Replayer processes told to end (`ended`) get EXIT_GRACE_MS to exit on their own; then, or at once when nobody told them, they are killed. */
export async function reapReplayProcesses(processes: ReplayProcess[], ended: boolean): Promise<void> {
  const all = Promise.all(processes.map((p) => p.exited));
  let timer: NodeJS.Timeout | undefined;
  if (ended) await Promise.race([all, new Promise<void>((resolve) => (timer = setTimeout(resolve, EXIT_GRACE_MS)))]);
  clearTimeout(timer);
  // The SDK's runtime in a replayer takes SIGTERM as the start of a graceful shutdown, not an exit.
  for (const p of processes) p.kill();
  await all;
}
