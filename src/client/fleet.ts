// The fleet as Temporal knows it: every node's ledgers found from visibility (the running
// `ledger/<node>/<gpuRole>` workflows), each read by its snapshot query within a bound, so a node
// whose worker is dead is reported as unanswered instead of holding up the others.
import type { Client } from '@temporalio/client';
import { WorkflowNotFoundError } from '@temporalio/client';
import { NAME_PATTERN } from '../domain/bounds';
import type { LedgerState } from '../domain/ledger';
import { NODE_ANSWER_MS, workflowIds } from '../shared/messages';
import { LedgerUnanswered, LedgerClient } from '../adapters/ledger/ledger-client';

export type NodeLedgers = { node: string; answered: true; ledgers: LedgerState[] } | { node: string; answered: false; error: string };

const LEDGER_ID = /^ledger\/([^/]+)\/([^/]+)$/;

/**
 * The GPU roles of each node with a running ledger, nodes and roles in name order. A ledger that
 * never ran (no serve was ever admitted on that GPU) holds no reservation and is not listed; one
 * started a moment ago may not be listed yet, as visibility on a SQL store trails a start.
 */
export async function ledgerNodes(client: Client, node?: string): Promise<Map<string, string[]>> {
  // node is a checked name (NAME_PATTERN): it cannot close the quote.
  const query = `WorkflowType = 'ledgerWorkflow' AND ExecutionStatus = 'Running'${node ? ` AND WorkflowId STARTS_WITH 'ledger/${node}/'` : ''}`;
  const found = new Map<string, Set<string>>();
  for await (const wf of client.workflow.list({ query })) {
    const [, n, role] = LEDGER_ID.exec(wf.workflowId) ?? [];
    // Someone else's workflow of that type name, or a hand-made id: not a ledger of ours.
    if (!n || !role || !NAME_PATTERN.test(n) || !NAME_PATTERN.test(role)) continue;
    found.set(n, (found.get(n) ?? new Set()).add(role));
  }
  return new Map([...found.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([n, roles]) => [n, [...roles].sort()]));
}

/** Whether the ledger's latest run is still running; a describe Temporal refuses keeps it (the query's failure stands). */
async function stillRunning(client: Client, node: string, role: string): Promise<boolean> {
  try {
    return (await client.workflow.getHandle(workflowIds.ledger(node, role)).describe()).status.name === 'RUNNING';
  } catch (err) {
    return !(err instanceof WorkflowNotFoundError);
  }
}

/**
 * One node's ledgers, each asked at once; any left unanswered within `withinMs` makes the node
 * unanswered. Undefined when none of them runs any more (the node is then not listed).
 */
export async function readNodeLedgers(client: Client, node: string, roles: readonly string[], withinMs = NODE_ANSWER_MS): Promise<NodeLedgers | undefined> {
  const ledger = new LedgerClient(client);
  const asked = await Promise.allSettled(roles.map((role) => ledger.answer(node, role, withinMs)));
  const ledgers = asked.flatMap((a) => (a.status === 'fulfilled' ? [a.value] : []));
  const failed = roles.flatMap((role, i) => {
    const a = asked[i];
    return a?.status === 'rejected' ? [{ role, err: a.reason as unknown }] : [];
  });
  if (failed.length === 0) return { node, answered: true, ledgers };
  // Visibility trails a terminate: a ledger terminated a moment ago may still be listed as
  // Running, and with its node's worker gone its query goes unanswered. Each unanswered one is
  // described, and those no longer running are dropped, so a node whose ledgers were just
  // terminated (taken out of the fleet) is not reported as unanswered.
  const stuck = (await Promise.all(failed.map(async (f) => ((await stillRunning(client, node, f.role)) ? [f] : [])))).flat();
  const first = stuck[0];
  if (!first) return ledgers.length > 0 ? { node, answered: true, ledgers } : undefined;
  // Anything else (Temporal refusing the call) is this node's answer too: the other nodes are still printed.
  const error = first.err instanceof LedgerUnanswered ? first.err.message : `the ledgers of ${node} did not answer: ${(first.err as Error).message}`;
  return { node, answered: false, error };
}
