// This node's ledgers as its manifest names them, read through its worker: the one read behind
// `gpures ledger`, `serves status` and the ledger page, so a missing worker is one line (no hang).
import { ServiceError } from '@temporalio/client';
import type { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import type { LedgerState } from '../domain/ledger';
import type { Manifest } from '../domain/types';
import { taskQueueFor } from '../shared/messages';
import { LedgerClient, LedgerUnanswered } from '../adapters/ledger/ledger-client';
import { notTemporalFrontend } from './not-frontend';
import { ledgerSnapshots } from './operations';

/** No worker of the node can answer (none polls, or none answered in time): the message says which, and what to start. */
export class NodeUnanswered extends Error {}

/**
 * How many workflow pollers the server saw on the node's task queue lately (its poller history
 * keeps a few minutes); undefined when it would not say. Zero means no worker can answer.
 */
export async function workflowPollers(client: Client, node: string): Promise<number | undefined> {
  try {
    const { pollers } = await client.workflowService.describeTaskQueue({
      namespace: client.options.namespace,
      taskQueue: { name: taskQueueFor(node) },
      taskQueueType: temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
    });
    return pollers?.length ?? 0;
  } catch {
    // Only advice: the call that matters reports for itself.
    return undefined;
  }
}

/** A worker that has only just started may not have polled yet: look again for about a second. */
const POLLER_CHECKS = 3;
const POLLER_CHECK_INTERVAL_MS = 500;

/**
 * With no poller on the node's task queue no worker can answer, and that is known at once; before
 * an operation the refusal says too that nothing was started.
 */
export async function requirePoller(client: Client, node: string, operation = false): Promise<void> {
  for (let check = 1; ; check++) {
    if ((await workflowPollers(client, node)) !== 0) return;
    if (check === POLLER_CHECKS) {
      throw new NodeUnanswered(
        `node '${node}': no worker polls task queue ${taskQueueFor(node)}, so nothing can answer its ledger; ` +
          `${operation ? 'nothing was started: ' : ''}start \`gpures worker\` for node '${node}'`,
      );
    }
    await new Promise((r) => setTimeout(r, POLLER_CHECK_INTERVAL_MS));
  }
}

/**
 * The ledger answers only through a running worker. With no poller on the task queue that is
 * known at once; a worker that died in the last few minutes still counts as a poller, and then
 * the query's own deadline tells.
 */
export async function readNodeLedgers(client: Client, manifest: Manifest): Promise<LedgerState[]> {
  await requirePoller(client, manifest.node);
  return ledgerOrUnanswered(manifest.node, ledgerSnapshots(client, manifest));
}

/**
 * The node's ledgers that run, each as its worker answers within `withinMs`, in the manifest's
 * order; a GPU whose ledger does not run is left out. Starts nothing, unlike readNodeLedgers: for
 * a read-only reader (the ledger page), which must not start a workflow on the box.
 */
export async function readRunningLedgers(client: Client, manifest: Manifest, withinMs: number): Promise<LedgerState[]> {
  await requirePoller(client, manifest.node);
  return readLedgersAsTheirWorker(client, manifest, withinMs);
}

/**
 * readRunningLedgers for the node's own worker (its /v1/ledger endpoint): one query per GPU and no
 * poller check first, which would ask Temporal whether a worker polls the queue the asker itself
 * polls. A worker that has stopped polling (shutting down) leaves the queries unanswered:
 * NodeUnanswered after `withinMs`, and the command reads for itself.
 */
export async function readLedgersAsTheirWorker(client: Client, manifest: Manifest, withinMs: number): Promise<LedgerState[]> {
  const { node } = manifest;
  const ledger = new LedgerClient(client);
  const read = await ledgerOrUnanswered(node, Promise.all(manifest.gpus.map((gpu) => ledger.running(node, gpu.role, withinMs))));
  return read.filter((l): l is LedgerState => l !== undefined);
}

/** A ledger no worker answered, or a refused call, is the node's NodeUnanswered. */
async function ledgerOrUnanswered<T>(node: string, read: Promise<T>): Promise<T> {
  try {
    return await read;
  } catch (err) {
    if (err instanceof LedgerUnanswered) throw new NodeUnanswered(err.message);
    // An address that is not Temporal's frontend is the command's to tell, not a missing worker.
    if (err instanceof ServiceError && !notTemporalFrontend(err)) {
      throw new NodeUnanswered(
        `node '${node}': the ledger did not answer (${err.message}); is \`gpures worker\` running for it (task queue ${taskQueueFor(node)})?`,
      );
    }
    throw err;
  }
}
