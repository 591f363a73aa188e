// gpures ledger: the per-GPU ledger, and beside it what nvidia-smi sees on this box, if it has one;
// with --all every node's ledgers, with --node one node's, found from Temporal.
import { formatPhysical, physicalTruth } from '../../domain/physical';
import type { GpuReading } from '../../shared/contracts';
import type { CommandContext, Rendered } from '../command';
import { EXIT } from '../exit-codes';
import { loadManifest, manifestPath } from '../manifest';
import { ledgerJson, readLedgers, withClient } from '../temporal';
import { runningLeases } from '../../client/lease';
import { heldLeases, leasesOn, withLeaseLines } from '../leases';
import { answeredText, fleetExit, fleetTarget, readFleet, unansweredRow } from '../fleet';
import type { FleetOpts } from '../fleet';

/** nvidia-smi on this box, if it has one: the ledger is printed either way. */
async function readDevices(binary: string): Promise<{ ok: true; gpus: GpuReading[] } | { ok: false; error: string }> {
  const { NvidiaSmi } = await import('../../adapters/gpu/nvidia-smi');
  try {
    return { ok: true, gpus: await new NvidiaSmi({ binary }).readGpus() };
  } catch (err) {
    return { ok: false, error: `not available (${(err as Error).message})` };
  }
}

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
  const [ledgers, leases] = await withClient((client) => Promise.all([readLedgers(client, manifest), runningLeases(client, manifest.node)]));
  const held = heldLeases(ledgers, leases, Date.now());
  const readings = await readDevices(ctx.env.nvidiaSmi);
  // The ledger's own lines stay exactly the field report's shape; a missing probe is a note.
  if (!readings.ok) ctx.note(`nvidia-smi: ${readings.error}`);
  const rows = ledgers.map((l) => {
    const reading = readings.ok ? readings.gpus.find((g) => g.uuid === l.gpuUuid) : undefined;
    return { ledger: l, physical: reading ? physicalTruth(l, reading) : undefined };
  });
  return {
    data: rows.map((r) => ({ ...ledgerJson(r.ledger), leases: leasesOn(r.ledger, held), physical: r.physical ?? null })),
    text: rows.flatMap((r) => [...withLeaseLines(r.ledger, held), ...(r.physical ? formatPhysical(r.physical) : [])]),
    exitCode: EXIT.ok,
  };
}
