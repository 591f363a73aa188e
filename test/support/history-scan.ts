// Where a secret could hide in a history file: every string in it, and every base64 string
// (payload data and metadata in proto JSON) decoded as text.
import type { Client, WorkflowHandle } from '@temporalio/client';
import { tsToMs } from '@temporalio/common/lib/time';
import type { HistoryJson } from '../../src/audit/events';
import type { LedgerTotals } from '../../src/domain/ledger';
import { waitUntil } from './wait';

export function historyTexts(h: HistoryJson): string[] {
  const out: string[] = [];
  const walk = (v: unknown): void => {
    if (typeof v === 'string') {
      out.push(v);
      if (/^[A-Za-z0-9+/]+={0,2}$/.test(v) && v.length >= 8) out.push(Buffer.from(v, 'base64').toString('utf8'));
    } else if (Array.isArray(v)) v.forEach(walk);
    else if (v && typeof v === 'object') Object.values(v).forEach(walk);
  };
  walk(h);
  return out;
}

type Payloads = { payloads?: { data?: Uint8Array | null }[] | null } | null;
type LocalActivityMarker = { markerRecordedEventAttributes?: { markerName?: string | null; details?: Record<string, Payloads> | null } | null };
type HistoryEvent = { activityTaskScheduledEventAttributes?: { activityType?: { name?: string | null } | null } | null } & LocalActivityMarker;

function firstPayload(p: Payloads | undefined): unknown {
  const data = p?.payloads?.[0]?.data;
  return data ? JSON.parse(Buffer.from(data).toString('utf8')) : undefined;
}

/** A local activity's marker (src/workflows/proxies.ts): its type, attempt and result. */
function localActivity(e: LocalActivityMarker): { type: string; attempt: number; result?: unknown } | undefined {
  const m = e.markerRecordedEventAttributes;
  if (m?.markerName !== 'core_local_activity') return undefined;
  const data = firstPayload(m.details?.['data']) as { activity_type?: string; attempt?: number } | undefined;
  return { type: data?.activity_type ?? '?', attempt: data?.attempt ?? 1, result: firstPayload(m.details?.['result']) };
}

/** The local activity a run tags itself with (src/workflows/run-tags.ts): the run's bookkeeping, not one of its steps. */
const RUN_TAGS_LOOKUP = 'registeredSearchAttributes';

/** The activity types the events schedule (or run as local activities, the run's tagging aside), in order. */
export function scheduledActivities(events: readonly HistoryEvent[]): string[] {
  return events.flatMap((e) => {
    const local = localActivity(e)?.type;
    const name = e.activityTaskScheduledEventAttributes?.activityType?.name ?? (local !== RUN_TAGS_LOOKUP ? local : undefined);
    return name ? [name] : [];
  });
}

type WakeEvent = LocalActivityMarker & {
  timerFiredEventAttributes?: unknown;
  workflowExecutionSignaledEventAttributes?: { signalName?: string | null } | null;
};

/**
 * Each take of the start slot a run asked (its ledgerStartSlot markers with take: true), whether it
 * was granted, and what the run woke to before it: the ledger's startSlotFreed signal, its poll's
 * timer, or neither (its first ask, or one right after another step); and whether the signal came
 * after its last take.
 */
export function slotTakes(events: readonly WakeEvent[]): { takes: SlotTake[]; toldAfterLast: boolean } {
  const out: SlotTake[] = [];
  let after: SlotTake['after'] = 'none';
  for (const e of events) {
    if (e.workflowExecutionSignaledEventAttributes?.signalName === 'startSlotFreed') after = 'signal';
    else if (e.timerFiredEventAttributes) after = after === 'signal' ? after : 'timer';
    const la = localActivity(e);
    if (la?.type !== 'ledgerStartSlot') continue;
    const result = la.result as { taken?: boolean } | undefined;
    // A give answers taken: false too; only takes are asked after a wait.
    if (result && 'heldBy' in result) out.push({ taken: false, after });
    else if (result?.taken) out.push({ taken: true, after });
    after = 'none';
  }
  // A signal after the last take: the ledger told the run after it had taken the slot (its poll's
  // ask reached the ledger just after the give, and was granted before the signal went out).
  return { takes: out, toldAfterLast: after === 'signal' };
}

export interface SlotTake {
  taken: boolean;
  after: 'signal' | 'timer' | 'none';
}

/** The activity types a workflow's latest run scheduled, in order. */
export async function activitiesInOrder(client: Client, workflowId: string): Promise<string[]> {
  return scheduledActivities((await client.workflow.getHandle(workflowId).fetchHistory()).events ?? []);
}

/**
 * The ledger's totals after each of its update decisions, read from its history (every run of
 * it, should it have continued as new): each update answers them (LedgerAnswer).
 */
export async function ledgerTotalsAfterEachUpdate(client: Client, workflowId: string): Promise<LedgerTotals[]> {
  const out: LedgerTotals[] = [];
  for await (const run of client.workflow.list({ query: `WorkflowId = '${workflowId}'` })) {
    const history = await client.workflow.getHandle(workflowId, run.runId).fetchHistory();
    for (const e of history.events ?? []) {
      const data = e.workflowExecutionUpdateCompletedEventAttributes?.outcome?.success?.payloads?.[0]?.data;
      if (!data) continue;
      const answer = JSON.parse(Buffer.from(data).toString('utf8')) as { totals?: LedgerTotals };
      if (answer.totals) out.push(answer.totals);
    }
  }
  return out;
}

/** What a workflow's runs (every run of it, should it have continued as new) hold: events, Updates completed, signals it sent. */
export interface WorkflowTraffic {
  runs: number;
  events: number;
  updates: number;
  signalsSent: number;
}

export async function workflowTraffic(client: Client, workflowId: string): Promise<WorkflowTraffic> {
  const t: WorkflowTraffic = { runs: 0, events: 0, updates: 0, signalsSent: 0 };
  for await (const run of client.workflow.list({ query: `WorkflowId = '${workflowId}'` })) {
    const events = (await client.workflow.getHandle(workflowId, run.runId).fetchHistory()).events ?? [];
    t.runs += 1;
    t.events += events.length;
    t.updates += events.filter((e) => e.workflowExecutionUpdateCompletedEventAttributes).length;
    t.signalsSent += events.filter((e) => e.signalExternalWorkflowExecutionInitiatedEventAttributes).length;
  }
  return t;
}

type Timestamp = Parameters<typeof tsToMs>[0];
interface ActivityEvents extends LocalActivityMarker {
  eventId?: unknown;
  eventTime?: Timestamp;
  activityTaskScheduledEventAttributes?: { activityType?: { name?: string | null } | null } | null;
  activityTaskStartedEventAttributes?: { scheduledEventId?: unknown; attempt?: number | null } | null;
  activityTaskCompletedEventAttributes?: { scheduledEventId?: unknown; result?: { payloads?: { data?: Uint8Array | null }[] | null } | null } | null;
}

export interface ActivityRun {
  /** The attempt that ran last: ActivityTaskStarted is recorded once, when the activity closes. */
  attempt: number;
  /** When that attempt started (the server's clock, epoch ms). */
  startedAtMs: number;
  result?: unknown;
}

/** Each execution of an activity type in a history, with the attempt that finished it and its result. */
export function activityRuns(events: readonly ActivityEvents[], type: string): ActivityRun[] {
  const runs = new Map<string, ActivityRun>();
  for (const e of events) {
    const local = localActivity(e);
    // A local activity's marker is written when it closes: the time it started is not in history.
    if (local?.type === type) runs.set(String(e.eventId), { attempt: local.attempt, startedAtMs: NaN, result: local.result });
    if (e.activityTaskScheduledEventAttributes?.activityType?.name === type) runs.set(String(e.eventId), { attempt: 0, startedAtMs: NaN });
    const started = e.activityTaskStartedEventAttributes;
    const run = started ? runs.get(String(started.scheduledEventId)) : undefined;
    if (started && run) Object.assign(run, { attempt: started.attempt ?? 1, startedAtMs: tsToMs(e.eventTime) });
    const completed = e.activityTaskCompletedEventAttributes;
    const done = completed ? runs.get(String(completed.scheduledEventId)) : undefined;
    const data = completed?.result?.payloads?.[0]?.data;
    if (done && data) done.result = JSON.parse(Buffer.from(data).toString('utf8'));
  }
  return [...runs.values()];
}

/** Waits until the workflow has an activity of `type` pending; with `heartbeated`, one whose heartbeat the server holds. */
export async function waitForPendingActivity(handle: WorkflowHandle, type: string, opts: { heartbeated?: boolean } = {}): Promise<void> {
  await waitUntil(
    `${type} pending in ${handle.workflowId}${opts.heartbeated ? ', heartbeating' : ''}`,
    async () =>
      (await handle.describe()).raw.pendingActivities?.some(
        (a) => a.activityType?.name === type && (!opts.heartbeated || (a.heartbeatDetails?.payloads?.length ?? 0) > 0),
      ) ?? false,
    30_000,
    50,
  );
}

interface ScheduledEvents {
  eventId?: unknown;
  eventTime?: Timestamp;
  activityTaskScheduledEventAttributes?: { activityType?: { name?: string | null } | null; input?: Payloads } | null;
  activityTaskCompletedEventAttributes?: { scheduledEventId?: unknown; result?: Payloads } | null;
}

/** Each activity of `type` a history scheduled (not local steps): its input, result, and when it was scheduled and completed (the server's clock). */
export function scheduledRuns(
  events: readonly ScheduledEvents[],
  type: string,
): { input: unknown; result?: unknown; scheduledAtMs: number; completedAtMs?: number }[] {
  const runs = new Map<string, { input: unknown; result?: unknown; scheduledAtMs: number; completedAtMs?: number }>();
  for (const e of events) {
    const s = e.activityTaskScheduledEventAttributes;
    if (s?.activityType?.name === type) runs.set(String(e.eventId), { input: firstPayload(s.input), scheduledAtMs: tsToMs(e.eventTime) });
    const c = e.activityTaskCompletedEventAttributes;
    const run = c ? runs.get(String(c.scheduledEventId)) : undefined;
    if (c && run) Object.assign(run, { result: firstPayload(c.result), completedAtMs: tsToMs(e.eventTime) });
  }
  return [...runs.values()];
}
