// The other workers of a node: who polls its workflow task queue, as Temporal saw them, without
// this process and without a process of this host that is gone. A worker refuses to start beside
// one (src/worker/second-worker.ts); a start step cut by its worker's stop asks the ledger only
// when one is there to answer (src/adapters/ledger/ledger-client.ts).
import { hostname } from 'node:os';
import type { Client } from '@temporalio/client';
import { optionalTsToMs } from '@temporalio/common/lib/time';
import { temporal } from '@temporalio/proto';
import { processAlive } from './host-process';
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
      // This process's own identity: a predecessor's when it has not polled yet (a container
      // restarted keeps its hostname and, as pid 1, its pid), or its own as it stops. Two workers
      // in containers on the host's network, both pid 1, share one identity: neither sees the other.
      // Telling them apart by their container (its id) would refuse a recreated container's worker
      // for up to LIVE_POLL_MS: Temporal lists a worker's poller after even a graceful stop.
      return !(m && m[2] === host && (Number(m[1]) === process.pid || !pidAlive(Number(m[1]))));
    })
    .map((p) => p.identity);
}

/** The identities of the node's other live workers, as Temporal lists its task queue's pollers; throws when the server will not say. */
export async function otherWorkers(client: Client, node: string): Promise<string[]> {
  const answer = await client.workflowService.describeTaskQueue({
    namespace: client.options.namespace,
    taskQueue: { name: taskQueueFor(node) },
    taskQueueType: temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
  });
  const pollers = (answer.pollers ?? []).map((p) => ({ identity: p.identity ?? '', lastAccessMs: optionalTsToMs(p.lastAccessTime) }));
  return livePollers(pollers, Date.now(), hostname());
}
