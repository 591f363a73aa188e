// Whether a serve that a completed acquisition found already running is going down now: the
// acquisition API's serve_going_down (docs/acquisition-api.md), read from the serve's lease when
// the status GET asks, not recorded in the acquisition.
import type { Client } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { leaseQuery, NODE_ANSWER_MS, workflowIds } from '../shared/messages';
import { leaseExpiring } from '../shared/wording';

/**
 * A lease's end since the acquisition began: it found the serve up under the lease that then took
 * it down. A lease that ended without taking it (no longer its own) costs the caller one more
 * acquisition, which finds it ended before it began.
 */
const endedSince = (leaseWorkflowId: string, endedAt: Date, how: string, serve: string) =>
  `${leaseWorkflowId} ended at ${endedAt.toISOString()}${how}, after this acquisition began: its end brings ${serve} down, so ${serve} may be down already; ask again`;

/**
 * Whether the run is a lease's renewal that waited for the last lease's end (its input's
 * `renewal: true`), not a continuation of its own past its history's bound, which ended nothing.
 * Read from its first event: the input is there whichever worker runs it, or none.
 */
async function isRenewal(client: Client, workflowId: string, runId: string): Promise<boolean> {
  const res = await client.workflowService.getWorkflowExecutionHistory({
    namespace: client.options.namespace,
    execution: { workflowId, runId },
    maximumPageSize: 1,
  });
  const payload = res.history?.events?.[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0];
  if (!payload) return false;
  const input = defaultPayloadConverter.fromPayload<{ renewal?: unknown } | undefined>(payload);
  return input?.renewal === true;
}

/**
 * Whether a serve that a completed acquisition found already running is going down now, whatever
 * terms it asked: its lease is running and expiring (its bring-down about to quiesce, drain and
 * stop the serve), or has ended since the acquisition began: closed, or run on as a renewal for
 * another caller (a continue-as-new whose input says `renewal: true`), which a running lease does
 * not tell from its own state. A caller whose acquisition asked no lease terms (the router's, for
 * a serve without idle_ttl_s) is told nothing of the lease by the result, and would route to the
 * serve. A lease that ended before the acquisition began says nothing: its last state is not the
 * serve's now. Nothing when the lease does not answer within NODE_ANSWER_MS.
 */
export async function serveGoingDown(client: Client, node: string, serve: string, result: unknown, runStart: Date): Promise<string | undefined> {
  const r = result as { outcome?: unknown; leaseTermsNotApplied?: { serveStays?: unknown }[] } | undefined;
  if (r?.outcome !== 'already-running' || r.leaseTermsNotApplied?.some((t) => t?.serveStays === false)) return undefined;
  const workflowId = workflowIds.lease(node, serve);
  try {
    const lease = client.workflow.getHandle(workflowId);
    return await client.withDeadline(Date.now() + NODE_ANSWER_MS, async () => {
      const d = await lease.describe();
      if (d.status.name !== 'RUNNING') return d.closeTime && d.closeTime >= runStart ? endedSince(workflowId, d.closeTime, '', serve) : undefined;
      // A renewal starts as the run before it ends: that run's end is this one's start.
      if (d.startTime >= runStart && (await isRenewal(client, workflowId, d.runId))) {
        return endedSince(workflowId, d.startTime, ` and runs on as a renewal for another caller (run ${d.runId})`, serve);
      }
      const view = await lease.query(leaseQuery);
      if (view.state !== 'expiring') return undefined;
      return leaseExpiring(workflowId, `expired at ${new Date(view.expiresAtEpochMs).toISOString()}`, serve);
    });
  } catch {
    return undefined;
  }
}
