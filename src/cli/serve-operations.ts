// serves up and serves down of one or more serves: each an operation followed to its end, its
// steps printed as they complete, then the ledgers as they stand after all of them.
import type { Client } from '@temporalio/client';
import { formatLedger } from '../domain/ledger';
import { workflowIds } from '../shared/messages';
import { serveAcquire, serveDown, serveUp } from '../client/operations';
import type { OperationOutcome, OperationWatch } from '../client/operations';
import type { CommandContext, Rendered } from './command';
import { CliError, EXIT, operationsExit } from './exit-codes';
import { checkServes, gpuRolesOf, loadManifest, manifestPath } from './manifest';
import { readLedgers, requireWorker, withClient } from './temporal';
import { ledgerJson } from '../client/ledger-view';
import { watchFor } from './progress-lines';
import type { LeaseTermsNotApplied } from '../shared/operations';
import type { Manifest } from '../domain/types';
import { findServe } from '../domain/manifest';
import { LedgerClient } from '../adapters/ledger/ledger-client';
import { Transient } from '../shared/failures';

export interface ServeOpts {
  manifest?: string;
  evict?: boolean;
  force?: boolean;
  drainTimeout?: string;
  restore?: boolean;
  /** serves up --lease: seconds, parsed by the command. */
  leaseS?: number;
}

export type ServeOutcome = OperationOutcome<{ message: string; ledgerAfter: string[]; leaseTermsNotApplied?: LeaseTermsNotApplied[] }>;

/** The terms of this command's --lease that its acquisition could not apply (another caller's that joined it are theirs to hear). */
function leaseNotAppliedOf(o: ServeOutcome, leaseS: number | undefined): LeaseTermsNotApplied[] {
  if (!o.ok || leaseS === undefined) return [];
  return (o.result.leaseTermsNotApplied ?? []).filter((t) => t.asked.kind === 'fixed' && t.asked.seconds === leaseS);
}

/**
 * A step whose attempts ran out, the last timing out, gives the operator only 'Local Activity timed
 * out' (a timed-out attempt carries no failure of its own), though each attempt waited for a
 * ledger still reconciling with the box (LedgerClient's 20 s) and was refused: the ledger's own
 * word, asked now, is the cause the operator reads. Only a step of the ledger's that timed out:
 * another step's timeout (a start, a drain) is its own failure, whatever the ledger is doing.
 */
export async function withReconcileCause(
  stillReconciling: (gpuRole: string) => Promise<string | undefined>,
  manifest: Manifest,
  verb: 'up' | 'down',
  name: string,
  o: ServeOutcome,
): Promise<ServeOutcome> {
  if (o.ok || !o.activity?.timedOut || !LEDGER_STEPS.includes(o.activity.type)) return o;
  const role = findServe(manifest, name)?.gpuRole;
  const why = role ? await stillReconciling(role) : undefined;
  if (!role || !why) return o;
  return {
    ...o,
    failureType: Transient.LedgerReconciling,
    message:
      `serves ${verb} ${name} failed: the ledger of gpu_role '${role}' on ${manifest.node} is still reconciling with the box and decided nothing ` +
      `(${why}); each attempt of the step waited for it, and the last timed out (${o.message})`,
  };
}

/** The steps that wait for a ledger still reconciling (LedgerClient), as the workflows' ledgerUpdates() and reads() name them. */
const LEDGER_STEPS = [
  'ledgerAdmit',
  'ledgerAcquire',
  'ledgerSetPhase',
  'ledgerVictimReleased',
  'ledgerRelease',
  'ledgerBeginStop',
  'ledgerSnapshot',
  'ledgerStartSlot',
];

function renderOutcome(o: ServeOutcome, leaseS: number | undefined): string[] {
  if (!o.ok) return [`${o.message} [${o.failureType}; workflow ${o.workflowId}]`];
  // Said apart from the message, which runs on: a script's reader must not take the serve as leased.
  const notLeased = leaseNotAppliedOf(o, leaseS).map((t) =>
    t.serveStays
      ? `${o.serve} is up but not leased: ${t.why}; it stays up, nothing undone, until serves down`
      : `${o.serve} is up but not leased, and is going down: ${t.why}`,
  );
  return [o.result.message, ...notLeased];
}

/** The workflow that does `serves <verb> <name>` with these options, and how to run it. */
function operationFor(client: Client, node: string, verb: 'up' | 'down', name: string, opts: ServeOpts, watch: OperationWatch) {
  if (verb === 'down') {
    return { workflowId: workflowIds.bringDown(node, name), operate: () => serveDown(client, node, name, { restore: opts.restore, watch }) };
  }
  // A lease is the acquisition's to start: a leased serve goes up as one, evicting only with --evict.
  if (!opts.evict && opts.leaseS === undefined) return { workflowId: workflowIds.bringUp(node, name), operate: () => serveUp(client, node, name, watch) };
  const input = {
    serve: name,
    evict: Boolean(opts.evict),
    force: Boolean(opts.force),
    drainTimeoutS: opts.drainTimeout ? Number(opts.drainTimeout) : undefined,
    ...(opts.leaseS !== undefined ? { lease: { kind: 'fixed' as const, seconds: opts.leaseS } } : {}),
  };
  return { workflowId: workflowIds.acquire(node, name), operate: () => serveAcquire(client, node, input, watch) };
}

export async function serveOperation(ctx: CommandContext, verb: 'up' | 'down', names: string[], opts: ServeOpts): Promise<Rendered> {
  // One operation a serve: `serves up vision vision` would run the second after the first for nothing.
  const twice = names.filter((n, i) => names.indexOf(n) !== i);
  if (twice.length) throw new CliError(`NAME: ${[...new Set(twice)].map((n) => `'${n}'`).join(', ')} given more than once`, EXIT.badInput);
  const file = manifestPath(opts.manifest, ctx.env);
  const { manifest } = await loadManifest(ctx, file);
  checkServes(manifest, file, names);
  return withClient(async (client) => {
    // Ctrl-C stops following, not the operation: it is a workflow, and goes on without this process.
    // Before the first is started (the worker's check), it says that nothing was.
    let current: { name: string; workflowId: string } | undefined;
    // A bring-up is the operator's to stop with the command they know: serves down cancels it, and it gives back what it took.
    const cancelIt = (name: string) =>
      verb === 'up' ? `\`gpures serves down ${name}\` cancels it (it gives back what it took), as does the UI or ` : 'cancel it from the UI or with ';
    const interrupted = () =>
      current
        ? `\ninterrupted: serves ${verb} ${current.name} goes on in Temporal (workflow ${current.workflowId}); ` +
          `\`gpures serves status\` shows it; ${cancelIt(current.name)}\`temporal workflow cancel --workflow-id ${current.workflowId}\`` +
          `${names.length > 1 ? `; not started: ${names.slice(names.indexOf(current.name) + 1).join(', ') || 'none'}` : ''}`
        : `\ninterrupted before serves ${verb} ${names.join(' ')} was asked of Temporal: nothing was started`;
    const releaseInterrupt = ctx.onInterrupt(interrupted);
    const outcomes: ServeOutcome[] = [];
    // Released however the loop ends: after it, a Ctrl-C is node's own (the process ends, 130,
    // saying nothing), as it always was once the operations had run.
    try {
      await requireWorker(client, manifest, gpuRolesOf(manifest, names), (line) => ctx.note(line));
      // Progress is noted as each step completes, the step under way as a status line: the result is what the command returns.
      const watch = watchFor(ctx);
      // In the order given, as an operator reads the command line; one failure does not stop the rest.
      for (const name of names) {
        const { workflowId, operate } = operationFor(client, manifest.node, verb, name, opts, watch);
        current = { name, workflowId };
        const o = await withReconcileCause((role) => new LedgerClient(client).stillReconciling(manifest.node, role), manifest, verb, name, await operate());
        outcomes.push(o);
        ctx.note(renderOutcome(o, opts.leaseS).join('\n'));
      }
    } finally {
      releaseInterrupt();
    }
    const ledgers = await readLedgers(client, manifest);
    return {
      data: { outcomes, ledgers: ledgers.map(ledgerJson) },
      text: ledgers.flatMap(formatLedger),
      exitCode: operationsExit(outcomes, (o) => leaseNotAppliedOf(o as ServeOutcome, opts.leaseS).length > 0),
    };
  });
}
