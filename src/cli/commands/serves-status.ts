// gpures serves status: each declared serve with its ledger state, and the operation under way on it;
// with --all or --node, what Temporal alone knows of every node's (or one node's) serves.
import type { Client } from '@temporalio/client';
import { phaseLabel } from '../../domain/ledger';
import type { LedgerState } from '../../domain/ledger';
import type { Manifest } from '../../domain/types';
import { runningLeases } from '../../client/lease';
import { serveOperationsRunning } from '../../client/operations';
import type { CommandContext, Rendered } from '../command';
import { EXIT } from '../exit-codes';
import { loadManifest, manifestPath } from '../manifest';
import { readLedgers, withClient } from '../temporal';
import { heldLeases } from '../../client/ledger-view';
import type { HeldLease } from '../../client/ledger-view';
import { answeredText, fleetExit, readFleet, unansweredRow } from '../fleet';
import { fleetTarget } from '../fleet-target';
import type { FleetOpts } from '../fleet-target';

/** Operations under way on the node, by serve: what `serves status` shows beside the ledger. */
async function runningOperations(client: Client, node: string): Promise<Map<string, { workflowId: string; since: string }>> {
  return new Map((await serveOperationsRunning(client, node)).map((o) => [o.serve, { workflowId: o.workflowId, since: o.since }]));
}

export function statusLines(
  manifest: Manifest,
  ledgers: LedgerState[],
): { serve: string; gpuRole: string; class: string; vramMib: number; state: string; stateText: string }[] {
  return manifest.serves.map((s) => {
    const l = ledgers.find((x) => x.gpuRole === s.gpuRole);
    const r = l?.reservations.find((x) => x.serve === s.name);
    return {
      serve: s.name,
      gpuRole: s.gpuRole,
      class: s.class,
      vramMib: s.vramMib,
      ...(l && r ? reservationState(l, r) : { state: 'stopped', stateText: 'stopped' }),
    };
  });
}

interface StatusRow {
  serve: string;
  gpuRole: string;
  class: string;
  vramMib: number | null;
  state: string;
  /** The state as `gpures ledger` words it: whom an evicted or sleeping serve was set aside for. */
  stateText: string;
  operation: { workflowId: string; since: string } | null;
  lease: HeldLease | null;
}

export function statusText(r: StatusRow): string {
  return (
    `${r.serve.padEnd(16)} ${String(r.vramMib ?? '?').padStart(6)} MiB  ${r.class.padEnd(9)}  ${r.gpuRole.padEnd(10)}  ${r.stateText}` +
    (r.lease ? `  ${r.lease.text}` : '') +
    (r.operation ? `  (${r.operation.workflowId} running since ${r.operation.since})` : '')
  );
}

/**
 * A ledger's reservation as a status row: `state` the ledger's phase (`admitted` read as starting),
 * `stateText` the ledger's own words for it, so `serves status` never says less than `gpures ledger`.
 */
function reservationState(l: LedgerState, r: LedgerState['reservations'][number]): { state: string; stateText: string } {
  return { state: r.phase === 'admitted' ? 'starting' : r.phase, stateText: phaseLabel(l, r) };
}

export const FLEET_STATUS_HEADER =
  "from Temporal, without the nodes' manifests: each node's reservations (class, phase, lease) and operations under way; " +
  'a declared serve that is stopped is not listed';

/**
 * Every node's serves (--all) or one node's (--node) with no manifest: what its ledgers and
 * running operations know, under a header that says so.
 */
async function fleetStatus(node: string | null, ctx: CommandContext): Promise<Rendered> {
  const [nodes, operations] = await withClient(async (client) => {
    const read = await readFleet(client, node, (line) => ctx.note(line));
    return [read, await Promise.all(read.map((n) => runningOperations(client, n.node)))] as const;
  });
  const now = Date.now();
  const rows = nodes.map((n, i) => {
    if (!n.answered) return unansweredRow(n);
    const running = operations[i] ?? new Map<string, { workflowId: string; since: string }>();
    const held = heldLeases(n.ledgers, n.leases, now);
    const serves: StatusRow[] = n.ledgers.flatMap((l) =>
      l.reservations.map((r) => ({
        serve: r.serve,
        gpuRole: l.gpuRole,
        class: r.class,
        vramMib: r.vramMib,
        ...reservationState(l, r),
        operation: running.get(r.serve) ?? null,
        lease: held.get(r.serve) ?? null,
      })),
    );
    // An operation on a serve the ledgers hold nothing of (a bring-up not admitted yet, say).
    for (const [serve, operation] of running) {
      if (!serves.some((s) => s.serve === serve))
        serves.push({ serve, gpuRole: '?', class: '?', vramMib: null, state: 'no reservation', stateText: 'no reservation', operation, lease: null });
    }
    return {
      data: { node: n.node, taskQueue: n.taskQueue, answered: true, leasesPartial: n.leasesPartial, serves },
      text: answeredText(
        n,
        serves.map((s) => `  ${statusText(s)}`),
      ),
    };
  });
  return { data: { nodes: rows.map((r) => r.data) }, text: [FLEET_STATUS_HEADER, ...rows.flatMap((r) => r.text)], exitCode: fleetExit(nodes) };
}

export async function servesStatus(input: FleetOpts, ctx: CommandContext): Promise<Rendered> {
  const target = fleetTarget(input);
  if (target !== undefined) return fleetStatus(target, ctx);
  const { manifest } = await loadManifest(ctx, manifestPath(input.manifest, ctx.env));
  const [ledgers, running, leases] = await withClient((client) =>
    Promise.all([readLedgers(client, manifest), runningOperations(client, manifest.node), runningLeases(client, manifest.node)]),
  );
  const held = heldLeases(ledgers, leases, Date.now());
  const rows = statusLines(manifest, ledgers).map((r) => ({ ...r, operation: running.get(r.serve) ?? null, lease: held.get(r.serve) ?? null }));
  return { data: rows, text: rows.map(statusText), exitCode: EXIT.ok };
}
