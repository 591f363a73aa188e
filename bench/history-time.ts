// Where a workflow run's wall time went, read from its history by the server's clock: each
// interval between two events is charged to what the later event ends. Ending an activity's
// ActivityTaskStarted, it was the activity's dispatch; ending its completion, the activity itself;
// anything else, the workflow task under way (its local activities and ledger Updates run inside
// it), named by the local activities it recorded. So the orchestration's share of a bring-up is
// measured event by event instead of estimated from step timestamps.
import { eventAttributes, eventTypeName, localActivityOf } from '../src/audit/events';
import type { HistoryJson } from '../src/audit/events';

/** One share of a run's time: a workflow task, an activity, or the dispatches of all its activities. */
export interface TimeShare {
  label: string;
  kind: 'task' | 'activity' | 'dispatch' | 'client';
  ms: number;
}

const ACTIVITY_ENDS = new Set(['ActivityTaskCompleted', 'ActivityTaskFailed', 'ActivityTaskTimedOut', 'ActivityTaskCanceled']);
const TASK_EVENTS = new Set(['WorkflowTaskScheduled', 'WorkflowTaskStarted', 'WorkflowTaskCompleted']);

const epochMs = (iso: string | undefined): number => (iso ? Date.parse(iso) : NaN);

/**
 * The run's shares in order of first appearance, with the client's: from its start call to the
 * started event, and from the closing event to its result (`clientStartEpochMs`,
 * `clientEndEpochMs`, this machine's clock, which the dev server shares).
 */
export function historyTime(h: HistoryJson, clientStartEpochMs: number, clientEndEpochMs: number): TimeShare[] {
  // Keyed in order of first appearance; a task's label waits for its local activities, whose markers follow its completion.
  const shares = new Map<string, TimeShare>();
  const charge = (key: string, kind: TimeShare['kind'], ms: number) => {
    const s = shares.get(key) ?? { label: key, kind, ms: 0 };
    s.ms += ms;
    shares.set(key, s);
  };
  const activityNames = new Map<string, string>();
  const taskLocals = new Map<number, string[]>();
  let completedTasks = 0;

  const first = h.events[0];
  charge('client to start', 'client', epochMs(first?.eventTime) - clientStartEpochMs);
  let prev = epochMs(first?.eventTime);
  for (const e of h.events.slice(1)) {
    const type = eventTypeName(e.eventType);
    const a = eventAttributes(e);
    const at = epochMs(e.eventTime);
    const ms = at - prev;
    prev = at;
    if (type === 'ActivityTaskScheduled') {
      const name = (a['activityType'] as { name?: unknown } | undefined)?.name;
      activityNames.set(e.eventId, typeof name === 'string' ? name : '?');
    }
    if (type === 'ActivityTaskStarted') charge('dispatch', 'dispatch', ms);
    else if (ACTIVITY_ENDS.has(type)) charge(activityNames.get(String(a['scheduledEventId'])) ?? '?', 'activity', ms);
    else {
      const k = Math.max(1, completedTasks + (TASK_EVENTS.has(type) ? 1 : 0));
      charge(`task ${k}`, 'task', ms);
      if (type === 'WorkflowTaskCompleted') completedTasks += 1;
      const local = localActivityOf(e);
      if (local) taskLocals.set(k, [...(taskLocals.get(k) ?? []), local.type]);
    }
  }
  charge('close to client', 'client', clientEndEpochMs - prev);
  return [...shares.values()].map((s) => {
    const locals = s.kind === 'task' ? taskLocals.get(Number(s.label.slice('task '.length))) : undefined;
    return locals ? { ...s, label: `${s.label} [${locals.join(', ')}]` } : s;
  });
}

/** Per label, the median over runs of the same shape (labels of the first run; a label a run lacks counts as 0 there). */
export function medianShares(runs: TimeShare[][], median: (xs: number[]) => number): TimeShare[] {
  const labels = runs[0] ?? [];
  return labels.map((s) => ({ ...s, ms: median(runs.map((r) => r.find((x) => x.label === s.label)?.ms ?? 0)) }));
}

/** `task 1 [resolveServe, ledgerAdmit] 33, dispatch 8, startServeContainer 264, …` and the orchestration's total. */
export function formatShares(shares: TimeShare[]): { line: string; temporalMs: number; activitiesMs: number } {
  const line = shares.map((s) => `${s.label} ${Math.round(s.ms)}`).join(', ');
  const temporalMs = shares.filter((s) => s.kind !== 'activity').reduce((n, s) => n + s.ms, 0);
  const activitiesMs = shares.filter((s) => s.kind === 'activity').reduce((n, s) => n + s.ms, 0);
  return { line, temporalMs, activitiesMs };
}
