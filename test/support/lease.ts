// A lease's times from its history: when its last timer fired and when it started the bring-down,
// against the expiry it answered; what "fires on time" is measured by.
import type { Client } from '@temporalio/client';
import { tsToMs } from '@temporalio/common/lib/time';
import { leaseQuery, workflowIds } from '../../src/shared/messages';
import type { LeaseView } from '../../src/domain/lease';
import type { LeaseResult } from '../../src/shared/operations';

type Timestamp = Parameters<typeof tsToMs>[0];

export interface LeaseTimes {
  /** The last timer the lease's runs fired, server clock. */
  lastTimerFiredAtMs?: number;
  /** When the lease asked for its serves down (StartChildWorkflowExecutionInitiated), server clock. */
  downInitiatedAtMs?: number;
}

export async function leaseTimes(client: Client, node: string, serve: string): Promise<LeaseTimes> {
  // The latest run: an earlier lease of the same serve is a closed run under the same id.
  const events = (await client.workflow.getHandle(workflowIds.lease(node, serve)).fetchHistory()).events ?? [];
  const out: LeaseTimes = {};
  for (const e of events as { eventTime?: Timestamp; timerFiredEventAttributes?: unknown; startChildWorkflowExecutionInitiatedEventAttributes?: unknown }[]) {
    const at = tsToMs(e.eventTime);
    if (e.timerFiredEventAttributes) out.lastTimerFiredAtMs = Math.max(out.lastTimerFiredAtMs ?? 0, at);
    if (e.startChildWorkflowExecutionInitiatedEventAttributes) out.downInitiatedAtMs = at;
  }
  return out;
}

export function leaseHandle(client: Client, node: string, serve: string) {
  const handle = client.workflow.getHandle(workflowIds.lease(node, serve));
  return {
    handle,
    view: (): Promise<LeaseView> => handle.query(leaseQuery),
    result: () => handle.result() as Promise<LeaseResult>,
  };
}
