// Where a workflow run's wall time went, read from its history by the server's clock: each
// interval between two events is charged to what the later event ends. Ending an activity's
// first ActivityTaskStarted, it was the activity's dispatch (a retried one's earlier attempts and
// backoffs are the activity's own); ending its completion, the activity itself; ending a timer, a
// signal, a cancel request, a child's event, or a workflow task nothing in the run scheduled (an
// Update's), a wait for something outside the run; anything else, the workflow task under way
// (its local activities and ledger Updates run inside it), named by the local activities it
// recorded. So the orchestration's share of a bring-up is measured event by event instead of
// estimated from step timestamps.
import { eventAttributes, eventTypeName, localActivityOf } from '../src/audit/events';
import type { HistoryJson } from '../src/audit/events';
import { path, str } from '../src/audit/report/read';
import { median } from './target';

/**
 * One share of a run's time: a workflow task, an activity, the dispatches of all its activities,
 * a wait for something outside the run (a timer, a signal, a child), or the client's calls.
 */
export interface TimeShare {
  label: string;
  kind: 'task' | 'activity' | 'dispatch' | 'wait' | 'client';
  ms: number;
}

const ACTIVITY_ENDS = new Set(['ActivityTaskCompleted', 'ActivityTaskFailed', 'ActivityTaskTimedOut', 'ActivityTaskCanceled']);
const TASK_EVENTS = new Set(['WorkflowTaskScheduled', 'WorkflowTaskStarted', 'WorkflowTaskCompleted', 'WorkflowTaskFailed', 'WorkflowTaskTimedOut']);
const CHILD_EVENTS = new Set([
  'ChildWorkflowExecutionStarted',
  'ChildWorkflowExecutionCompleted',
  'ChildWorkflowExecutionFailed',
  'ChildWorkflowExecutionCanceled',
  'ChildWorkflowExecutionTimedOut',
  'ChildWorkflowExecutionTerminated',
]);
const WAITS: Record<string, string> = {
  TimerFired: 'wait for a timer',
  WorkflowExecutionSignaled: 'wait for a signal',
  WorkflowExecutionCancelRequested: 'wait for a cancel',
};
/** Events that schedule the workflow task after them at once: the interval to it is that task's. */
const TASK_CAUSES = new Set([
  'WorkflowExecutionStarted',
  'WorkflowTaskFailed',
  'WorkflowTaskTimedOut',
  ...ACTIVITY_ENDS,
  ...CHILD_EVENTS,
  ...Object.keys(WAITS),
]);

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
  /** Keyed like the task's share: `task k`. */
  const taskLocals = new Map<string, string[]>();
  let completedTasks = 0;

  const first = h.events[0];
  charge('client to start', 'client', epochMs(first?.eventTime) - clientStartEpochMs);
  let prev = epochMs(first?.eventTime);
  let prevType = first ? eventTypeName(first.eventType) : '';
  for (const e of h.events.slice(1)) {
    const type = eventTypeName(e.eventType);
    const a = eventAttributes(e);
    const at = epochMs(e.eventTime);
    const ms = at - prev;
    prev = at;
    if (type === 'ActivityTaskScheduled') activityNames.set(e.eventId, str(path(a, 'activityType', 'name')) ?? '?');
    const activity = () => activityNames.get(String(a['scheduledEventId'])) ?? '?';
    // A task scheduled with nothing before it to cause it: the run sat idle until something arrived (an Update).
    const wait = type === 'WorkflowTaskScheduled' && !TASK_CAUSES.has(prevType) ? 'waiting' : WAITS[type];
    prevType = type;
    if (type === 'ActivityTaskStarted') {
      // Recorded once, at the last attempt's start: before it, the earlier attempts and their backoffs.
      if (Number(a['attempt'] ?? 1) > 1) charge(activity(), 'activity', ms);
      else charge('dispatch', 'dispatch', ms);
    } else if (ACTIVITY_ENDS.has(type)) charge(activity(), 'activity', ms);
    else if (CHILD_EVENTS.has(type)) charge(`child ${str(path(a, 'workflowType', 'name')) ?? '?'}`, 'wait', ms);
    else if (wait) charge(wait, 'wait', ms);
    else {
      const task = `task ${Math.max(1, completedTasks + (TASK_EVENTS.has(type) ? 1 : 0))}`;
      charge(task, 'task', ms);
      if (type === 'WorkflowTaskCompleted') completedTasks += 1;
      const local = localActivityOf(e);
      if (local) taskLocals.set(task, [...(taskLocals.get(task) ?? []), local.type]);
    }
  }
  charge('close to client', 'client', clientEndEpochMs - prev);
  return [...shares.values()].map((s) => {
    const locals = taskLocals.get(s.label);
    return locals ? { ...s, label: `${s.label} [${locals.join(', ')}]` } : s;
  });
}

/**
 * Per label, the median over the runs (labels of the first run; a label a run lacks counts as 0
 * there), and how many runs had another shape (other labels): their medians mix unlike runs.
 */
export function medianShares(runs: TimeShare[][]): { shares: TimeShare[]; otherShapes: number } {
  const labels = runs[0] ?? [];
  const shape = (r: TimeShare[]) => r.map((s) => s.label).join('|');
  const otherShapes = runs.filter((r) => shape(r) !== shape(labels)).length;
  return { shares: labels.map((s) => ({ ...s, ms: median(runs.map((r) => r.find((x) => x.label === s.label)?.ms ?? 0)) })), otherShapes };
}

/** A run's time outside its activities and its waits (workflow tasks, dispatch, the client's calls), in its activities, and waiting. */
export function runTotals(shares: TimeShare[]): { temporalMs: number; activitiesMs: number; waitMs: number } {
  const sum = (kinds: TimeShare['kind'][]) => shares.filter((s) => kinds.includes(s.kind)).reduce((n, s) => n + s.ms, 0);
  return { temporalMs: sum(['task', 'dispatch', 'client']), activitiesMs: sum(['activity']), waitMs: sum(['wait']) };
}

/** `task 1 [resolveServe, ledgerAdmit] 33, dispatch 8, startServeContainer 264, …`. */
export function formatShares(shares: TimeShare[]): string {
  return shares.map((s) => `${s.label} ${Math.round(s.ms)}`).join(', ');
}

/** One workflow task from the inside: each local step by when it ended, and the task's completion, in ms from the task's start. */
export interface TaskInside {
  task: string;
  steps: { label: string; atMs: number }[];
  completedAtMs: number;
}

/**
 * Inside each workflow task that ran local steps: each step's end in workflow time (its marker's
 * complete_time: the task's start plus the run times of the steps before it in a row and its own,
 * src/audit/events.ts) from the task's WorkflowTaskStarted, and the task's WorkflowTaskCompleted
 * (the server's clock). So `completed` less the last step is not what came after the last step: it
 * is every activation of the task in the workflow thread, the steps' dispatches, and the task's
 * completion to the server, wherever they fell. Steps run side by side end in any order. Tasks
 * numbered as historyTime numbers them.
 */
export function tasksInside(h: HistoryJson): TaskInside[] {
  const out: TaskInside[] = [];
  let startedAt = NaN;
  let current: TaskInside | undefined;
  let completed = 0;
  for (const e of h.events) {
    const type = eventTypeName(e.eventType);
    const at = epochMs(e.eventTime);
    if (type === 'WorkflowTaskStarted') startedAt = at;
    else if (type === 'WorkflowTaskCompleted') {
      completed += 1;
      current = { task: `task ${completed}`, steps: [], completedAtMs: at - startedAt };
      out.push(current);
    } else if (current && type !== 'MarkerRecorded' && type !== 'UpsertWorkflowSearchAttributes') current = undefined;
    const local = current ? localActivityOf(e) : undefined;
    if (current && local?.completedEpochMs !== undefined) current.steps.push({ label: local.type, atMs: local.completedEpochMs - startedAt });
  }
  return out.filter((t) => t.steps.length > 0);
}

/** Per task and step, the median over the runs whose task has the first run's steps in the same order; `task 1: resolveServe 4, …, completed 318`. */
export function formatTasksInside(runs: TaskInside[][]): string {
  const first = runs[0] ?? [];
  const shape = (t: TaskInside | undefined) => t?.steps.map((s) => s.label).join('|');
  return first
    .map((t, i) => {
      const alike = runs.map((r) => r[i]).filter((x): x is TaskInside => x !== undefined && x.task === t.task && shape(x) === shape(t));
      const steps = t.steps.map((s, j) => `${s.label} ${Math.round(median(alike.map((x) => x.steps[j]?.atMs ?? NaN)))}`);
      return `${t.task}: ${[...steps, `completed ${Math.round(median(alike.map((x) => x.completedAtMs)))}`].join(', ')}${alike.length < runs.length ? ` (${alike.length} of ${runs.length} runs)` : ''}`;
    })
    .join('; ');
}
