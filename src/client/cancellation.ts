// What a cancelled run's history says of its cancellation: who asked for it (the reason a
// bring-down records, "serves down vision", or else the requester's identity), and the
// activities the run ran after the request (its compensations), for a run whose step log cannot
// be read. Read from the history's end backwards: the request is among its last events, so a
// long run's whole history is not fetched for it.
import type { Client } from '@temporalio/client';
import type { temporal } from '@temporalio/proto';

export interface CancellationRecord {
  /** Who asked: the request's reason where it gave one (a bring-down's "serves down vision"), else its identity (a client's pid@host). */
  by?: string;
  /** The activity types scheduled after the request, in order. */
  ranAfter: string[];
}

/** Pages of the history read back from its end before giving up on finding the request. */
const MAX_PAGES = 5;
const PAGE_SIZE = 100;

type HistoryEvent = temporal.api.history.v1.IHistoryEvent;

export async function cancellationOf(client: Client, workflowId: string, runId: string): Promise<CancellationRecord | undefined> {
  // Newest first: everything after the request, then the request.
  const after: HistoryEvent[] = [];
  let nextPageToken: Uint8Array | undefined;
  for (let page = 0; page < MAX_PAGES; page++) {
    const res = await client.workflowService.getWorkflowExecutionHistoryReverse({
      namespace: client.options.namespace,
      execution: { workflowId, runId },
      maximumPageSize: PAGE_SIZE,
      ...(nextPageToken ? { nextPageToken } : {}),
    });
    for (const e of res.history?.events ?? []) {
      const asked = e.workflowExecutionCancelRequestedEventAttributes;
      if (asked) {
        const ranAfter = after.reverse().flatMap((a) => {
          const name = a.activityTaskScheduledEventAttributes?.activityType?.name;
          return name ? [name] : [];
        });
        return { by: asked.cause || asked.identity || undefined, ranAfter };
      }
      after.push(e);
    }
    if (!res.nextPageToken?.length) return undefined;
    nextPageToken = res.nextPageToken;
  }
  return undefined;
}
