// What a cancelled run's history says of its cancellation: who asked for it, and the activities
// the run ran after the request (its compensations), for a run whose step log cannot be read.
import type { Client } from '@temporalio/client';

export interface CancellationRecord {
  /** The identity that requested the cancellation (a client's pid@host, a worker's when a serves down cancelled it). */
  by?: string;
  /** The activity types scheduled after the request, in order. */
  ranAfter: string[];
}

export async function cancellationOf(client: Client, workflowId: string, runId: string): Promise<CancellationRecord | undefined> {
  const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
  const events = history.events ?? [];
  const at = events.findIndex((e) => e.workflowExecutionCancelRequestedEventAttributes);
  if (at < 0) return undefined;
  const by = events[at]?.workflowExecutionCancelRequestedEventAttributes?.identity || undefined;
  const ranAfter = events.slice(at).flatMap((e) => {
    const name = e.activityTaskScheduledEventAttributes?.activityType?.name;
    return name ? [name] : [];
  });
  return { by, ranAfter };
}
