// History → what it holds, event by event: the workflow's input and close, each activity with
// its input and result, the ledger's updates, child workflows and patch markers. Each section of
// the model (evidence.ts) reads from this.
import { decodePayloads, eventAttributes, eventTypeName, historyIdentity, localActivityOf } from '../events';
import type { HistoryEventJson, HistoryIdentity, HistoryJson } from '../events';
import { summarizeActivity, updateSummary } from './activities';
import { childRunId } from './caller';
import type { ActivityEvidence, ActivityInput, ActivityName, ActivityResult, ChildEvidence, FailureEvidence, UpdateEvidence, WorkflowStatus } from './model';
import { failureOf, isoMs, obj, path, rootOf, str, txt } from './read';
import type { Loose, Obj } from './read';
import type * as workflows from '../../workflows';

/** An activity of one known type, its input and result read with that activity's types. */
export interface DoneActivity<K extends ActivityName> {
  evidence: ActivityEvidence;
  input: Loose<ActivityInput<K>> | undefined;
  result: Loose<NonNullable<ActivityResult<K>>> | undefined;
}

export interface Collected {
  id: HistoryIdentity;
  events: HistoryEventJson[];
  startedAttrs: Obj;
  input: unknown;
  parent?: string;
  operation: string;
  serve?: string;
  activities: ActivityEvidence[];
  updates: UpdateEvidence[];
  children: ChildEvidence[];
  patches: string[];
  status: WorkflowStatus;
  closedAt?: string;
  /** The workflow's result, when it completed. */
  res?: Obj;
  failure?: FailureEvidence;
  /** The failure's first detail: the step log (failAndCompensate), a denial's decision, a promotion's report. */
  failureDetails?: Obj;
  /** The activities of one type, in order, however they ended. */
  ran: <K extends ActivityName>(type: K) => DoneActivity<K>[];
  /** The completed activities of one type, in order. */
  done: <K extends ActivityName>(type: K) => DoneActivity<K>[];
}

/** The activity is one of these types (names checked against `Activities`). */
export function isOf(x: ActivityEvidence, ...types: ActivityName[]): boolean {
  return (types as string[]).includes(x.type);
}

type Workflows = typeof workflows;
type WorkflowName = keyof Workflows;
type WorkflowInput<K extends WorkflowName> = Loose<Parameters<Workflows[K]>[0]>;

/**
 * Each workflow type the worker registers, read back as the operator's command. Keyed by the
 * workflows' own names, so a renamed or added workflow fails to compile until it has its line.
 * Inputs are read loosely: an old history may lack a field, and what is printed is checked first.
 */
const OPERATIONS: { [K in WorkflowName]: (i: WorkflowInput<K>) => { operation: string; serve?: string } } = {
  bringUpWorkflow: (i) => ({ operation: `serves up ${str(i.serve) ?? '?'}`, serve: str(i.serve) }),
  acquireWorkflow: (i) => ({
    operation:
      `serves up ${str(i.serve) ?? '?'}${i.evict ? ' --evict' : ''}${i.force ? ' --force' : ''}` +
      `${i.drainTimeoutS !== undefined ? ` --drain-timeout ${txt(i.drainTimeoutS)}` : ''}`,
    serve: str(i.serve),
  }),
  bringDownWorkflow: (i) => ({ operation: `serves down ${str(i.serve) ?? '?'}${i.restore ? ' --restore' : ''}`, serve: str(i.serve) }),
  promoteWorkflow: (i) => ({
    operation:
      `router promote --router ${str(i.router) ?? '?'} --image ${str(i.image) ?? '?'}` +
      `${i.profile ? ` --profile ${txt(i.profile)}` : ''}${i.validateOnly ? ' --validate-only' : ''}`,
  }),
  leaseWorkflow: (i) => ({ operation: `${i.kind === 'idle' ? 'idle lease' : 'lease'} of ${str(i.serve) ?? '?'} (${txt(i.seconds)} s)`, serve: str(i.serve) }),
  ledgerWorkflow: (i) => ({ operation: `ledger of gpu_role '${txt(path(i, 'gpu', 'role'))}' on node '${txt(i.node)}'` }),
};

function isWorkflowName(type: string): type is WorkflowName {
  return Object.hasOwn(OPERATIONS, type);
}

function operationOf(type: string, input: unknown): { operation: string; serve?: string } {
  const i = obj(input) ?? {};
  if (!isWorkflowName(type)) return { operation: type, serve: str(i['serve']) };
  return OPERATIONS[type](i);
}

const CHILD_CLOSE: Record<string, ChildEvidence['status']> = {
  ChildWorkflowExecutionFailed: 'failed',
  ChildWorkflowExecutionCanceled: 'canceled',
  ChildWorkflowExecutionTerminated: 'terminated',
  ChildWorkflowExecutionTimedOut: 'timed-out',
  StartChildWorkflowExecutionFailed: 'not started',
};

const ACTIVITY_CLOSE: Record<string, ActivityEvidence['status']> = {
  ActivityTaskFailed: 'failed',
  ActivityTaskTimedOut: 'timed-out',
  ActivityTaskCanceled: 'canceled',
};

/** What a history's last events say about how the workflow closed. */
interface Close {
  status: WorkflowStatus;
  closedAt?: string;
  result?: unknown;
  failure?: FailureEvidence;
}

function closeOf(t: string, a: Obj, at: string | undefined): Close | undefined {
  switch (t) {
    case 'WorkflowExecutionCompleted':
      return { status: 'completed', closedAt: at, result: decodePayloads(a['result'])[0] };
    case 'WorkflowExecutionFailed':
      return { status: 'failed', closedAt: at, failure: failureOf(a['failure']) };
    case 'WorkflowExecutionCanceled':
      return { status: 'canceled', closedAt: at };
    case 'WorkflowExecutionTerminated':
      return {
        status: 'terminated',
        closedAt: at,
        failure: { type: 'Terminated', message: str(a['reason']) ?? 'terminated', details: decodePayloads(a['details']) },
      };
    case 'WorkflowExecutionTimedOut':
      return { status: 'timed-out', closedAt: at };
    case 'WorkflowExecutionContinuedAsNew':
      return { status: 'continued-as-new', closedAt: at };
    default:
      return undefined;
  }
}

/** The patch ids a marker that is not a local activity's records (a core_patch marker, or an older form). */
function patchesOf(a: Obj): string[] {
  const details = obj(a['details']) ?? {};
  const ids = Object.values(details)
    .flatMap((p) => decodePayloads(p))
    .flatMap((d) => {
      const pid = str(obj(d)?.['patchId']) ?? str(obj(d)?.['id']) ?? str(obj(d)?.['patch_id']);
      return pid ? [`${pid}${obj(d)?.['deprecated'] ? ' (deprecated)' : ''}`] : [];
    });
  return !Object.keys(details).length && str(a['markerName']) ? [...ids, txt(a['markerName'])] : ids;
}

export function collect(h: HistoryJson, fallbackId?: string): Collected {
  const id = historyIdentity(h, fallbackId);
  const events = h.events;
  const first = events[0];
  const startedAttrs = first ? eventAttributes(first) : {};
  const input = decodePayloads(startedAttrs['input'])[0];
  const parent = str(path(startedAttrs, 'parentWorkflowExecution', 'workflowId'));
  const { operation, serve } = operationOf(id.workflowType, input);

  const activities: ActivityEvidence[] = [];
  const byScheduled = new Map<number, ActivityEvidence>();
  const updates: UpdateEvidence[] = [];
  const updatesById = new Map<string, UpdateEvidence>();
  const children: ChildEvidence[] = [];
  const childByInitiated = new Map<number, ChildEvidence>();
  /** Children started to outlive this run (a lease): still running is their nature, not a history cut short. */
  const abandoned = new Set<ChildEvidence>();
  const patches: string[] = [];
  let close: Close = { status: 'running' };

  for (const e of events) {
    const t = eventTypeName(e.eventType);
    const a = eventAttributes(e);
    const at = isoMs(e.eventTime);
    const act = byScheduled.get(Number(a['scheduledEventId'] ?? 0));
    const child = childByInitiated.get(Number(a['initiatedEventId'] ?? 0));
    switch (t) {
      case 'ActivityTaskScheduled': {
        const ev: ActivityEvidence = {
          eventId: Number(e.eventId),
          activityId: str(a['activityId']) ?? '?',
          type: str(path(a, 'activityType', 'name')) ?? '?',
          scheduledAt: at,
          attempts: 0,
          status: 'pending',
          input: decodePayloads(a['input'])[0],
          summary: 'no result in this history',
        };
        activities.push(ev);
        byScheduled.set(ev.eventId, ev);
        break;
      }
      case 'ActivityTaskStarted':
        if (act) act.attempts = Number(a['attempt'] ?? 1);
        break;
      case 'ActivityTaskCompleted':
        if (act) {
          act.status = 'completed';
          act.closedAt = at;
          act.result = decodePayloads(a['result'])[0];
          act.summary = summarizeActivity(act.type, act.input, act.result);
        }
        break;
      case 'ActivityTaskFailed':
      case 'ActivityTaskTimedOut':
      case 'ActivityTaskCanceled':
        if (act) {
          act.status = ACTIVITY_CLOSE[t] ?? 'failed';
          act.closedAt = at;
          act.failure = failureOf(a['failure']);
          act.summary = act.failure ? `${act.failure.type ?? 'failed'}: ${act.failure.message}` : act.status;
        }
        break;
      case 'MarkerRecorded': {
        // A local activity (src/workflows/proxies.ts): scheduled, run and closed within one workflow task.
        const local = localActivityOf(e);
        if (!local) {
          patches.push(...patchesOf(a));
          break;
        }
        const failure = local.failure ? failureOf(local.failure) : undefined;
        activities.push({
          eventId: Number(e.eventId),
          activityId: local.activityId,
          type: local.type,
          scheduledAt: at,
          closedAt: at,
          attempts: local.attempt,
          status: failure ? 'failed' : 'completed',
          input: undefined,
          ...(failure ? { failure } : { result: local.result }),
          summary: failure ? `${failure.type ?? 'failed'}: ${failure.message}` : summarizeActivity(local.type, undefined, local.result),
        });
        break;
      }
      case 'WorkflowExecutionUpdateAccepted': {
        const req = obj(a['acceptedRequest']);
        const u: UpdateEvidence = {
          eventId: Number(e.eventId),
          updateId: str(path(req, 'meta', 'updateId')) ?? str(a['protocolInstanceId']) ?? '?',
          name: str(path(req, 'input', 'name')) ?? '?',
          acceptedAt: at,
          request: decodePayloads(path(req, 'input', 'args'))[0],
          summary: 'accepted, not completed in this history',
        };
        updates.push(u);
        updatesById.set(u.updateId, u);
        break;
      }
      case 'WorkflowExecutionUpdateCompleted': {
        const u = updatesById.get(str(path(a, 'meta', 'updateId')) ?? '');
        if (u) {
          u.completedAt = at;
          const outcome = obj(a['outcome']);
          if (outcome?.['failure']) u.failure = failureOf(outcome['failure']);
          else u.result = decodePayloads(outcome?.['success'])[0];
          u.summary = updateSummary(u.name, u.request, u.result, u.failure);
        }
        break;
      }
      case 'StartChildWorkflowExecutionInitiated': {
        const c: ChildEvidence = {
          workflowId: str(a['workflowId']) ?? '?',
          workflowType: str(path(a, 'workflowType', 'name')) ?? '?',
          initiatedAt: at,
          status: 'not started',
          input: decodePayloads(a['input'])[0],
          summary: 'initiated',
        };
        children.push(c);
        childByInitiated.set(Number(e.eventId), c);
        if (str(a['parentClosePolicy']) === 'PARENT_CLOSE_POLICY_ABANDON') abandoned.add(c);
        break;
      }
      case 'ChildWorkflowExecutionStarted':
        if (child) {
          const runId = childRunId(a);
          if (runId) child.runId = runId;
          child.status = 'running';
          child.summary = abandoned.has(child)
            ? 'started to outlive this run (parent close policy abandon): its own history has the rest'
            : 'started; not closed in this history';
        }
        break;
      case 'ChildWorkflowExecutionCompleted':
        if (child) {
          child.status = 'completed';
          child.closedAt = at;
          child.result = decodePayloads(a['result'])[0];
          child.summary = str(obj(child.result)?.['message']) ?? 'completed';
        }
        break;
      case 'ChildWorkflowExecutionFailed':
      case 'ChildWorkflowExecutionCanceled':
      case 'ChildWorkflowExecutionTerminated':
      case 'ChildWorkflowExecutionTimedOut':
      case 'StartChildWorkflowExecutionFailed':
        if (child) {
          child.status = CHILD_CLOSE[t] ?? 'not started';
          child.closedAt = at;
          child.failure = failureOf(a['failure']);
          child.summary = child.failure ? `${rootOf(child.failure).type ?? 'failed'}: ${rootOf(child.failure).message}` : child.status;
        }
        break;
      default:
        close = closeOf(t, a, at) ?? close;
        break;
    }
  }

  const { status, closedAt, result, failure } = close;
  const res = obj(result);
  const failureDetails = obj(failure?.details[0]);
  // Read with the types the activity declares now: its fields are read as possibly missing.
  const ran = <K extends ActivityName>(type: K): DoneActivity<K>[] =>
    activities
      .filter((x) => x.type === type)
      .map((x) => ({ evidence: x, input: obj(x.input) as DoneActivity<K>['input'], result: obj(x.result) as DoneActivity<K>['result'] }));
  const done = <K extends ActivityName>(type: K): DoneActivity<K>[] => ran(type).filter((x) => x.evidence.status === 'completed');
  return {
    id,
    events,
    startedAttrs,
    input,
    ...(parent ? { parent } : {}),
    operation,
    ...(serve ? { serve } : {}),
    activities,
    updates,
    children,
    patches,
    status,
    ...(closedAt ? { closedAt } : {}),
    ...(res ? { res } : {}),
    ...(failure ? { failure } : {}),
    ...(failureDetails ? { failureDetails } : {}),
    ran,
    done,
  };
}
