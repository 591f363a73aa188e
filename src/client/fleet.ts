// The fleet as Temporal knows it: every node's ledgers found from visibility (the running
// `ledger/<node>/<gpuRole>` workflows), each read by its snapshot query within a bound, so a node
// whose worker is dead is reported as unanswered instead of holding up the others.
import type { Client } from '@temporalio/client';
import { NAME_PATTERN } from '../domain/bounds';
import type { LedgerState } from '../domain/ledger';
import { NODE_ANSWER_MS } from '../shared/messages';
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

/** One node's ledgers, each asked at once; any left unanswered within `withinMs` makes the node unanswered. */
export async function readNodeLedgers(client: Client, node: string, roles: readonly string[], withinMs = NODE_ANSWER_MS): Promise<NodeLedgers> {
  const ledger = new LedgerClient(client);
  try {
    return { node, answered: true, ledgers: await Promise.all(roles.map((role) => ledger.answer(node, role, withinMs))) };
  } catch (err) {
    // Anything else (a ledger closed between the list and its query, Temporal refusing the call)
    // is this node's answer too: the other nodes are still printed.
    const error = err instanceof LedgerUnanswered ? err.message : `the ledgers of ${node} did not answer: ${(err as Error).message}`;
    return { node, answered: false, error };
  }
}
