// The demo on somebody's existing server (`gpures demo --temporal-address`): it must leave that
// server as it found it, but for the runs it made. So its simulated box is a node of this run
// alone, and what the demo started on that node is ended with it.
import { randomBytes } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { registerSearchAttributes } from '../client/search-attributes';
import type { Manifest } from '../domain/types';
import { taskQueueFor, workflowIds } from '../shared/messages';

/** A ledger left by an earlier demo, or a real node of the example's name, is then never touched. */
export function demoNodeSuffix(): string {
  return `demo-${randomBytes(3).toString('hex')}`;
}

/**
 * Its namespace must exist (the demo does not create one on somebody's server), and the search
 * attributes the operations carry are registered when missing.
 */
export async function prepareExistingServer(client: Client, out: (line: string) => void): Promise<void> {
  const namespace = client.options.namespace;
  try {
    await client.workflowService.describeNamespace({ namespace });
  } catch (err) {
    throw new Error(
      `namespace '${namespace}' cannot be used on this server (${(err as Error).message}); ` +
        `create it with \`temporal operator namespace create --namespace ${namespace}\` or pick another with TEMPORAL_NAMESPACE`,
    );
  }
  try {
    const added = await registerSearchAttributes(client);
    out(added.length ? `registered search attributes ${added.join(', ')} in namespace ${namespace}` : `search attributes present in namespace ${namespace}`);
  } catch (err) {
    out(`warning: search attributes not registered (${(err as Error).message}); the operations run without them`);
  }
}

const NOT_FOUND = 5;

/**
 * The simulated box is gone after the demo, and nothing will poll its task queue again: its
 * ledgers (by id, whatever visibility says yet) and whatever else still runs on the node (a lease
 * or an operation left by a demo that failed midway) are terminated rather than left running.
 */
export async function endDemoNode(client: Client, manifest: Manifest): Promise<void> {
  const reason = 'gpures demo finished: its simulated box is gone';
  const ids = new Set(manifest.gpus.map((g) => workflowIds.ledger(manifest.node, g.role)));
  for await (const wf of client.workflow.list({ query: `TaskQueue = '${taskQueueFor(manifest.node)}' AND ExecutionStatus = 'Running'` })) {
    ids.add(wf.workflowId);
  }
  const failures: string[] = [];
  for (const id of ids) {
    try {
      await client.workflow.getHandle(id).terminate(reason);
    } catch (err) {
      // Already closed (a ledger that never ran, a lease that expired): nothing to end.
      if ((err as { code?: unknown }).code === NOT_FOUND || (err as Error).name === 'WorkflowNotFoundError') continue;
      failures.push(`${id}: ${(err as Error).message}`);
    }
  }
  if (failures.length) throw new Error(`could not terminate the demo node's runs: ${failures.join('; ')}`);
}
