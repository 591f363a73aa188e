// Two workers for one node both poll its task queue, and each operation lands on either: with the
// simulated box behind one and Docker behind the other, a serve is started on one box and stopped
// on the other. A worker refuses to start beside another one still polling, unless told that the
// pair is deliberate (--allow-second-worker).
import type { Client } from '@temporalio/client';
import { otherWorkers } from '../adapters/node-workers';
import { taskQueueFor } from '../shared/messages';

/** Another worker polling the node's workflow task queue, refused unless allowed. */
export class SecondWorker extends Error {
  override readonly name = 'SecondWorker';
}

/** Throws SecondWorker when another worker polls the node's task queue; a server that will not say lets the worker start. */
export async function refuseSecondWorker(client: Client, node: string): Promise<void> {
  let others: string[];
  try {
    others = await otherWorkers(client, node);
  } catch (err) {
    process.stderr.write(`worker: warning: could not ask Temporal for other workers on ${taskQueueFor(node)}: ${(err as Error).message}\n`);
    return;
  }
  if (others.length === 0) return;
  throw new SecondWorker(
    `another worker polls ${taskQueueFor(node)} (${others.join(', ')}): a second one for node '${node}' would take half its operations; ` +
      `stop it first, or start this one with --allow-second-worker for a deliberate pair on the same box`,
  );
}
