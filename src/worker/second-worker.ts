// Two workers for one node both poll its task queue, and each operation lands on either: with the
// simulated box behind one and Docker behind the other, a serve is started on one box and stopped
// on the other. A worker refuses to start beside another one still polling, unless told that the
// pair is deliberate (--allow-second-worker).
import { hostname } from 'node:os';
import type { Client } from '@temporalio/client';
import { optionalTsToMs } from '@temporalio/common/lib/time';
import { temporal } from '@temporalio/proto';
import { processAlive } from '../adapters/host-process';
import { taskQueueFor } from '../shared/messages';

/**
 * How recent a poll must be to count as a worker still there. The server keeps a poller for
 * minutes after its last poll; a live worker's long poll is renewed within about 70 s.
 */
export const LIVE_POLL_MS = 90_000;

export interface SeenPoller {
  identity: string;
  lastAccessMs: number | undefined;
}

/**
 * The pollers that may be another worker still running: polled within LIVE_POLL_MS, and not a
 * process of this host that is gone (the SDK's identity is pid@host: a worker restarted after a
 * crash or a Ctrl-C is not refused for its own predecessor, nor for one that has exited and is a
 * zombie its parent has not reaped yet, as under a supervisor that has not waited for it).
 */
export function livePollers(pollers: readonly SeenPoller[], nowMs: number, host: string, pidAlive: (pid: number) => boolean = processAlive): string[] {
  return pollers
    .filter((p) => p.lastAccessMs === undefined || nowMs - p.lastAccessMs <= LIVE_POLL_MS)
    .filter((p) => {
      const m = /^(\d+)@(.+)$/.exec(p.identity);
      // This process has not polled yet: its own identity is a predecessor's (a container restarted
      // keeps its hostname and, as pid 1, its pid).
      return !(m && m[2] === host && (Number(m[1]) === process.pid || !pidAlive(Number(m[1]))));
    })
    .map((p) => p.identity);
}

/** Another worker polling the node's workflow task queue, refused unless allowed. */
export class SecondWorker extends Error {
  override readonly name = 'SecondWorker';
}

/** Throws SecondWorker when another worker polls the node's task queue; a server that will not say lets the worker start. */
export async function refuseSecondWorker(client: Client, node: string): Promise<void> {
  const taskQueue = taskQueueFor(node);
  let pollers: SeenPoller[];
  try {
    const answer = await client.workflowService.describeTaskQueue({
      namespace: client.options.namespace,
      taskQueue: { name: taskQueue },
      taskQueueType: temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
    });
    pollers = (answer.pollers ?? []).map((p) => ({ identity: p.identity ?? '', lastAccessMs: optionalTsToMs(p.lastAccessTime) }));
  } catch (err) {
    process.stderr.write(`worker: warning: could not ask Temporal for other workers on ${taskQueue}: ${(err as Error).message}\n`);
    return;
  }
  const others = livePollers(pollers, Date.now(), hostname());
  if (others.length === 0) return;
  throw new SecondWorker(
    `another worker polls ${taskQueue} (${others.join(', ')}): a second one for node '${node}' would take half its operations; ` +
      `stop it first, or start this one with --allow-second-worker for a deliberate pair on the same box`,
  );
}
