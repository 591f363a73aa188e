// gpures ledger: the per-GPU ledger, and beside it what nvidia-smi sees on this box, if it has one;
// with --all every node's ledgers, with --node one node's, found from Temporal.
import { formatPhysical } from '../../domain/physical';
import type { CommandContext, Rendered } from '../command';
import { EXIT } from '../exit-codes';
import { loadManifest, manifestPath } from '../manifest';
import { readLedgers, withClient } from '../temporal';
import { ledgerJson } from '../../client/node-ledgers';
import { heldLeases, leasesOn, ledgerRowJson, readLocalLedger } from '../../client/ledger-view';
import { withLeaseLines } from '../leases';
import { answeredText, fleetExit, fleetTarget, readFleet, unansweredRow } from '../fleet';
import type { FleetOpts } from '../fleet';

/** Every node's ledgers (--all) or one node's (--node), found from Temporal: no nvidia-smi, which only this box has. */
async function fleetLedger(node: string | null, ctx: CommandContext): Promise<Rendered> {
  const nodes = await withClient((client) => readFleet(client, node, (line) => ctx.note(line)));
  const now = Date.now();
  const rows = nodes.map((n) => {
    if (!n.answered) return unansweredRow(n);
    const held = heldLeases(n.ledgers, n.leases, now);
    return {
      data: {
        node: n.node,
        taskQueue: n.taskQueue,
        answered: true,
        leasesPartial: n.leasesPartial,
        ledgers: n.ledgers.map((l) => ({ ...ledgerJson(l), leases: leasesOn(l, held) })),
      },
      text: answeredText(
        n,
        n.ledgers.flatMap((l) => withLeaseLines(l, held)),
      ),
    };
  });
  return { data: { nodes: rows.map((r) => r.data) }, text: rows.flatMap((r) => r.text), exitCode: fleetExit(nodes) };
}

export async function ledger(input: FleetOpts, ctx: CommandContext): Promise<Rendered> {
  const target = fleetTarget(input);
  if (target !== undefined) return fleetLedger(target, ctx);
  const { manifest } = await loadManifest(ctx, manifestPath(input.manifest, ctx.env));
  const { rows, nvidiaSmiError } = await withClient((client) => readLocalLedger(client, manifest, ctx.env.nvidiaSmi, readLedgers));
  // The ledger's own lines stay exactly the field report's shape; a missing probe is a note.
  if (nvidiaSmiError) ctx.note(`nvidia-smi: ${nvidiaSmiError}`);
  return {
    data: rows.map(ledgerRowJson),
    text: rows.flatMap((r) => [...withLeaseLines(r.ledger, r.held), ...(r.physical ? formatPhysical(r.physical) : [])]),
    exitCode: EXIT.ok,
  };
}
