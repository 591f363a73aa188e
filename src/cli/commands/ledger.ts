// gpures ledger: the per-GPU ledger, and beside it what nvidia-smi sees on this box, if it has one;
// with --all every node's ledgers, with --node one node's, found from Temporal. This node's is
// asked of its worker first (src/client/worker-ledger.ts): the Temporal client is loaded only
// when the command reads for itself.
import { formatPhysical } from '../../domain/physical';
import type { Manifest } from '../../domain/types';
import type { CommandContext, Rendered } from '../command';
import { EXIT } from '../exit-codes';
import { loadManifest, manifestPath } from '../manifest';
import { heldLeases, leasesOn, ledgerJson, ledgerRowJson, localLedger, readDevices } from '../../client/ledger-view';
import type { LocalLedger } from '../../client/ledger-view';
import { TemporalConfigError, temporalConfig, temporalTarget } from '../../client/temporal-config';
import { askWorkerLedger, workerLedgerRead } from '../../client/worker-ledger';
import type { WorkerAsk, WorkerReply } from '../../client/worker-ledger';
import { withLeaseLines } from '../leases';
import { fleetTarget } from '../fleet-target';
import type { FleetOpts } from '../fleet-target';

/** Every node's ledgers (--all) or one node's (--node), found from Temporal: no nvidia-smi, which only this box has. */
async function fleetLedger(node: string | null, ctx: CommandContext): Promise<Rendered> {
  const [{ withClient }, { answeredText, fleetExit, readFleet, unansweredRow }] = await Promise.all([import('../temporal'), import('../fleet')]);
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

/** The node's worker's read, when it answers for this manifest and this Temporal; undefined otherwise. */
async function fromWorker(reply: Promise<WorkerReply | undefined>, manifest: Manifest, ctx: CommandContext): Promise<LocalLedger | undefined> {
  let temporal: { address: string; namespace: string };
  try {
    temporal = temporalTarget(temporalConfig());
  } catch (err) {
    // The command's own read says what is wrong with the configuration.
    if (err instanceof TemporalConfigError) return undefined;
    throw err;
  }
  const read = workerLedgerRead(await reply, { manifest, temporal });
  if (!read.ok) {
    if (read.note) ctx.note(read.note);
    return undefined;
  }
  const { ledgers, leases, devices } = read.answer;
  return localLedger(ledgers, new Map(leases.map((l) => [l.serve, l])), devices, Date.now());
}

/** GET /v1/ledger of the node's worker, sent before the manifest is read; undefined when the command asks Temporal only. */
function askWorker(ctx: CommandContext): WorkerAsk | undefined {
  const endpoint = ctx.env.workerEndpoint;
  // Port 0: the worker picked one, which only its start line says.
  if (endpoint === 'off' || endpoint.port === 0) return undefined;
  return askWorkerLedger(endpoint);
}

/** The command's own read, through Temporal and a spawn of nvidia-smi. */
async function readForItself(manifest: Manifest, ctx: CommandContext): Promise<LocalLedger> {
  const [{ readLedgers, withClient }, { readLocalLedger }] = await Promise.all([import('../temporal'), import('../../client/local-ledger')]);
  const r = await withClient((client) => readLocalLedger(client, manifest, () => readDevices(ctx.env.nvidiaSmi), readLedgers));
  return localLedger(r.ledgers, r.leases, r.devices, Date.now());
}

export async function ledger(input: FleetOpts, ctx: CommandContext): Promise<Rendered> {
  const target = fleetTarget(input);
  if (target !== undefined) return fleetLedger(target, ctx);
  // The worker reads while this command reads its manifest and Temporal's configuration (issue 15:
  // its answer, its Temporal query above all, was waited for after them). Those reads block the
  // event loop (the manifest is read synchronously), so the request is written out first.
  const ask = askWorker(ctx);
  await ask?.sent;
  const { manifest } = await loadManifest(ctx, manifestPath(input.manifest, ctx.env));
  const fromItsWorker = ask ? await fromWorker(ask.reply, manifest, ctx) : undefined;
  const { rows, nvidiaSmiError } = fromItsWorker ?? (await readForItself(manifest, ctx));
  // The ledger's own lines stay exactly the field report's shape; a missing probe is a note.
  if (nvidiaSmiError) ctx.note(`nvidia-smi: ${nvidiaSmiError}`);
  return {
    data: rows.map(ledgerRowJson),
    text: rows.flatMap((r) => [...withLeaseLines(r.ledger, r.held), ...(r.physical ? formatPhysical(r.physical) : [])]),
    exitCode: EXIT.ok,
  };
}
