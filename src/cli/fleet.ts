// `--all` and `--node NAME` on ledger and serves status: nodes found from Temporal rather than a
// local manifest (any node's ledgers read from any machine that reaches Temporal), each node under
// a heading of its own, and a node whose worker does not answer printed as unanswered after the
// others, within NODE_ANSWER_MS, the command then exiting 4.
import type { Client } from '@temporalio/client';
import type { LeaseView } from '../domain/lease';
import { NODE_ANSWER_MS, taskQueueFor } from '../shared/messages';
import { ledgerNodes, readNodeLedgers } from '../client/fleet';
import type { NodeLedgers } from '../client/fleet';
import { nodeLeases } from '../client/lease';
import { workflowPollers } from '../client/node-ledgers';
import { CliError, EXIT } from './exit-codes';

/** leasesPartial: a lease query (or their list) did not answer within NODE_ANSWER_MS, so a serve's lease may be missing. */
export type FleetNode = NodeLedgers & { taskQueue: string; leases: Map<string, LeaseView>; leasesPartial: boolean };

/**
 * The nodes' ledgers (and leases of the nodes that answered). `--node` of a node Temporal knows
 * nothing of is bad input; one whose worker polls but that has no ledger yet is an empty answer.
 */
export async function readFleet(client: Client, node: string | null, note: (line: string) => void): Promise<FleetNode[]> {
  const found = await ledgerNodes(client, node ?? undefined);
  if (node !== null && !found.has(node)) {
    if (!(await workflowPollers(client, node))) {
      const known = [...(await ledgerNodes(client)).keys()];
      throw new CliError(
        `--node ${node}: no ledger of node '${node}' runs in Temporal and no worker polls ${taskQueueFor(node)} ` +
          `(nodes with a ledger: ${known.join(', ') || 'none'})`,
        EXIT.badInput,
      );
    }
    note(`node '${node}': its worker polls ${taskQueueFor(node)} but no ledger of it runs yet: a GPU's ledger starts with its first serve`);
  }
  if (found.size === 0 && node === null) note('no ledger runs in Temporal: no serve was brought up on any node yet');
  const nodes = await Promise.all(
    [...found].map(async ([n, roles]) => {
      const read = await readNodeLedgers(client, n, roles);
      if (!read) return undefined;
      // Lease queries too are answered by the node's worker: bounded like its ledgers.
      const { leases, partial } = read.answered
        ? await client.withDeadline(Date.now() + NODE_ANSWER_MS, () => nodeLeases(client, n))
        : { leases: new Map<string, LeaseView>(), partial: false };
      return { ...read, taskQueue: taskQueueFor(n), leases, leasesPartial: partial };
    }),
  );
  // A node none of whose ledgers runs any more (terminated a moment ago) is not listed; an
  // unanswered one comes after the others (a stable sort keeps each group's order).
  return nodes.filter((n) => n !== undefined).sort((a, b) => Number(!a.answered) - Number(!b.answered));
}

/** A node's heading line: its name, or that it did not answer and why. */
export function nodeHeading(n: FleetNode): string {
  return n.answered ? `node '${n.node}' (task queue ${n.taskQueue}):` : `node '${n.node}': unanswered: ${n.error}`;
}

/** An answered node's lines under its heading: a note first when some of its leases went unread. */
export function answeredText(n: FleetNode, lines: string[]): string[] {
  const partial = `  (leases partial: a lease query did not answer within ${NODE_ANSWER_MS / 1000} s; a serve's lease may be missing below)`;
  return [nodeHeading(n), ...(n.leasesPartial ? [partial] : []), ...lines];
}

/** The row of a node that did not answer, the same in `ledger` and `serves status`: its JSON and its one line. */
export function unansweredRow(n: FleetNode & { answered: false }) {
  return { data: { node: n.node, taskQueue: n.taskQueue, answered: false as const, error: n.error }, text: [nodeHeading(n)] };
}

export function fleetExit(nodes: readonly FleetNode[]): number {
  return nodes.every((n) => n.answered) ? EXIT.ok : EXIT.unreachable;
}
