// A lease as the operator reaches it: the running lease workflows of a node and what each says
// (one list and one query per leased serve, so status and ledger stay quick), extend and release.
import type { Client } from '@temporalio/client';
import { WorkflowNotFoundError, WorkflowUpdateFailedError } from '@temporalio/client';
import { LedgerClient } from '../adapters/ledger/ledger-client';
import { holdingRun } from '../domain/fence';
import { findReservation } from '../domain/ledger';
import { inFluxBy, leaseStands } from '../domain/lease';
import { NODE_ANSWER_MS } from '../shared/node-answer';
import type { LeaseExtension, LeaseView } from '../domain/lease';
import { extendLeaseUpdate, leaseQuery, releaseLeaseUpdate, taskQueueFor, workflowIds } from '../shared/messages';
import type { LeaseResult } from '../shared/operations';
import { followDeadline, followRun } from './follow';
import type { FollowHandlers } from './follow';

/** No lease runs for the serve: the operator is told which id was looked for. */
export class NoLease extends Error {}

/** The node's running leases by serve, and whether any went unread (the list or a lease's query failed: past a deadline, say). */
export async function nodeLeases(client: Client, node: string): Promise<{ leases: Map<string, LeaseView>; partial: boolean }> {
  const out = new Map<string, LeaseView>();
  const query = `TaskQueue = '${taskQueueFor(node)}' AND ExecutionStatus = 'Running' AND WorkflowType = 'leaseWorkflow'`;
  const ids: string[] = [];
  try {
    for await (const wf of client.workflow.list({ query })) ids.push(wf.workflowId);
  } catch {
    return { leases: out, partial: true };
  }
  const views = await Promise.all(
    ids.map((id) =>
      client.workflow
        .getHandle(id)
        .query(leaseQuery)
        .catch(() => undefined),
    ),
  );
  for (const v of views) if (v) out.set(v.serve, v);
  return { leases: out, partial: views.includes(undefined) };
}

/** The node's running leases by serve; a serve whose lease does not answer its query is left out (visibility is advice). */
export async function runningLeases(client: Client, node: string): Promise<Map<string, LeaseView>> {
  return (await nodeLeases(client, node)).leases;
}

/** A leased serve as the operator names it: its node, and the GPU whose ledger holds it. */
export interface LeasedServe {
  node: string;
  serve: string;
  gpuRole: string;
}

/**
 * The serve's running lease, refused (NoLease) when it no longer stands (leaseStands: its serve
 * brought down by hand, evicted or asleep for another serve, or another run's). Such a lease ends
 * at its expiry without acting, so an extension would move nothing, and a release would not bring
 * the serve down as it says. A ledger that cannot be read within the node's answer bound, none
 * running, or one still reconciling (its figures not the truth yet) leaves the lease to be asked.
 */
async function runningLease(client: Client, { node, serve, gpuRole }: LeasedServe) {
  const workflowId = workflowIds.lease(node, serve);
  const handle = client.workflow.getHandle(workflowId);
  let running;
  try {
    const d = await handle.describe();
    if (d.status.name !== 'RUNNING')
      throw new NoLease(`no lease runs for ${serve}: ${workflowId} ${d.status.name.toLowerCase()} at ${d.closeTime?.toISOString() ?? '?'}`);
    running = client.workflow.getHandle(workflowId, d.runId);
  } catch (err) {
    if (err instanceof WorkflowNotFoundError)
      throw new NoLease(`no lease runs for ${serve} (no ${workflowId}); \`serves up ${serve} --lease DURATION\` starts one`);
    throw err;
  }
  const [view, ledger] = await Promise.all([running.query(leaseQuery), new LedgerClient(client).running(node, gpuRole, NODE_ANSWER_MS).catch(() => undefined)]);
  const settled = ledger && !ledger.reconciling ? ledger : undefined;
  if (settled && !leaseStands(view, settled)) {
    const r = findReservation(settled, serve);
    const by = r && holdingRun(settled, r);
    const now = r ? `${r.phase}${r.evictedFor ? ` for ${r.evictedFor}` : ''}${by !== view.holder ? `, held by ${by}` : ''}` : 'down (no reservation)';
    throw new NoLease(
      `the lease of ${serve} no longer stands: ${serve} is ${now}, no longer running for the run the lease was taken with (${view.holder}); ` +
        `the lease ends at its expiry leaving ${serve} as it is (\`temporal workflow cancel --workflow-id ${workflowId}\` ends it now); \`serves up ${serve} --lease DURATION\` leases it anew`,
    );
  }
  return { handle: running, inFluxBy: settled && inFluxBy(view, settled) };
}

/** The update's own refusal (expired, out of bounds) is the operator's message; anything else (Temporal unreachable) stays what it is. */
function refusal(err: unknown): Error {
  if (!(err instanceof WorkflowUpdateFailedError)) return err as Error;
  const cause = (err as { cause?: { message?: string } }).cause;
  return cause?.message ? new NoLease(cause.message) : err;
}

export async function extendLease(client: Client, leased: LeasedServe, ext: LeaseExtension): Promise<LeaseView> {
  const { handle } = await runningLease(client, leased);
  return handle.executeUpdate(extendLeaseUpdate, { args: [ext] }).catch((err: unknown) => {
    throw refusal(err);
  });
}

/** Expires the lease now and waits for its bring-down (and restore) to end, reporting their steps as they happen. */
export async function releaseLease(
  client: Client,
  leased: LeasedServe,
  handlers?: FollowHandlers,
  /**
   * Told once the lease has taken the release (not before: there may be no lease to release), with
   * the run that has the serve for now, if another has (inFluxBy).
   */
  released?: (inFluxBy: string | undefined) => void,
): Promise<{ view: LeaseView; result: LeaseResult }> {
  const { handle, inFluxBy: by } = await runningLease(client, leased);
  const view = await handle.executeUpdate(releaseLeaseUpdate).catch((err: unknown) => {
    throw refusal(err);
  });
  released?.(by);
  const result = handle.result() as Promise<LeaseResult>;
  if (handlers) {
    const follower = followRun(handle, handlers, {
      handleFor: (id, runId) => client.workflow.getHandle(id, runId),
      within: followDeadline(client),
      topStepsAreEvents: true,
    });
    await follower.until(result);
    const done = await result.catch(() => undefined);
    if (done) await follower.report(done.steps);
  }
  return { view, result: await result };
}
