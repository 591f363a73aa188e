// gpures serves status: each declared serve with its ledger state, and the operation under way on it.
import type { Client } from '@temporalio/client';
import type { LedgerState } from '../../domain/ledger';
import type { Manifest } from '../../domain/types';
import { taskQueueFor } from '../../shared/messages';
import { runningLeases } from '../../client/lease';
import type { CommandContext, Rendered } from '../command';
import { EXIT } from '../exit-codes';
import { loadManifest, manifestPath } from '../manifest';
import { readLedgers, withClient } from '../temporal';
import { heldLeases } from '../leases';

/** Operations under way on the node, by serve: what `serves status` shows beside the ledger. */
async function runningOperations(client: Client, node: string): Promise<Map<string, { workflowId: string; since: string }>> {
  const out = new Map<string, { workflowId: string; since: string }>();
  try {
    const query = `TaskQueue = '${taskQueueFor(node)}' AND ExecutionStatus = 'Running' AND WorkflowType != 'ledgerWorkflow'`;
    for await (const wf of client.workflow.list({ query })) {
      const serve = /^(?:serves-up|serves-down|acquire)\/[^/]+\/(.+)$/.exec(wf.workflowId)?.[1];
      if (serve) out.set(serve, { workflowId: wf.workflowId, since: wf.startTime.toISOString() });
    }
  } catch {
    // Visibility is advice here; the ledger is the answer.
  }
  return out;
}

function statusLines(manifest: Manifest, ledgers: LedgerState[]): { serve: string; gpuRole: string; class: string; vramMib: number; state: string }[] {
  return manifest.serves.map((s) => {
    const r = ledgers.find((l) => l.gpuRole === s.gpuRole)?.reservations.find((x) => x.serve === s.name);
    return { serve: s.name, gpuRole: s.gpuRole, class: s.class, vramMib: s.vramMib, state: r ? (r.phase === 'admitted' ? 'starting' : r.phase) : 'stopped' };
  });
}

export async function servesStatus(input: { manifest?: string }, ctx: CommandContext): Promise<Rendered> {
  const { manifest } = await loadManifest(ctx, manifestPath(input.manifest, ctx.env));
  const [ledgers, running, leases] = await withClient((client) =>
    Promise.all([readLedgers(client, manifest), runningOperations(client, manifest.node), runningLeases(client, manifest.node)]),
  );
  const held = heldLeases(ledgers, leases, Date.now());
  const rows = statusLines(manifest, ledgers).map((r) => ({ ...r, operation: running.get(r.serve) ?? null, lease: held.get(r.serve) ?? null }));
  return {
    data: rows,
    text: rows.map(
      (r) =>
        `${r.serve.padEnd(16)} ${String(r.vramMib).padStart(6)} MiB  ${r.class.padEnd(9)}  ${r.gpuRole.padEnd(10)}  ${r.state}` +
        (r.lease ? `  ${r.lease.text}` : '') +
        (r.operation ? `  (${r.operation.workflowId} running since ${r.operation.since})` : ''),
    ),
    exitCode: EXIT.ok,
  };
}
