// `gpures audit report`: the evidence of one operation rendered from its workflow history ALONE
// (no server, no Docker, no router): the workflow input, every activity's input and result, the
// ledger's update requests and results, child workflows, and the workflow's result or failure,
// decoded with the default payload converter. History JSON → AuditReport → text or markdown.
// Pure: no I/O here.
import type { DrainResult, VramReleaseResult } from '../shared/contracts';
import type { GpuReading } from '../shared/contracts';
import { emptyLedger, formatLedger, totals, withoutReservation } from '../domain/ledger';
import type { LedgerState } from '../domain/ledger';
import { decodePayloads, eventAttributes, eventTypeName, historyIdentity } from './events';
import type { HistoryEventJson, HistoryIdentity, HistoryJson } from './events';

type Obj = Record<string, unknown>;

export interface StepEvidence {
  step: string;
  at?: string;
  outcome: string;
}

export interface FailureEvidence {
  type?: string;
  message: string;
  details: unknown[];
  cause?: FailureEvidence;
}

export interface ActivityEvidence {
  /** The ActivityTaskScheduled event's id. */
  eventId: number;
  activityId: string;
  type: string;
  scheduledAt?: string;
  closedAt?: string;
  attempts: number;
  status: 'completed' | 'failed' | 'timed-out' | 'canceled' | 'pending';
  input: unknown;
  result?: unknown;
  failure?: FailureEvidence;
  /** One line, as an operator reads it. */
  summary: string;
}

export interface UpdateEvidence {
  eventId: number;
  updateId: string;
  name: string;
  acceptedAt?: string;
  completedAt?: string;
  request: unknown;
  result?: unknown;
  failure?: FailureEvidence;
  summary: string;
}

export interface ChildEvidence {
  workflowId: string;
  workflowType: string;
  initiatedAt?: string;
  closedAt?: string;
  status: 'completed' | 'failed' | 'running' | 'canceled' | 'terminated' | 'timed-out' | 'not started';
  input: unknown;
  result?: unknown;
  failure?: FailureEvidence;
  summary: string;
}

export interface VictimEvidence {
  serve: string;
  vramMib?: number;
  tier?: string;
  inFlightAtQuiesce?: number;
  drain?: DrainResult;
  /** Requests still in flight at the router when the stop was issued (absent: never stopped). */
  inFlightAtStop?: number;
  stopped: boolean;
  stop?: string;
  stopIssuedAt?: string;
  vram?: VramReleaseResult;
  /** The compensation put its tier back into rotation (the eviction was abandoned). */
  readmitted?: { ok: boolean; observedModel?: string; reason?: string };
}

export interface IdentityEvidence {
  serve?: string;
  tier?: string;
  /** `GET /v1/models` by the workflow, or the router's guarded readmit. */
  by: 'v1/models' | 'router readmit';
  expected?: string;
  observed: string[];
  ok: boolean;
  at?: string;
}

export interface PromotionEvidence {
  router?: string;
  image?: string;
  previousImage?: string;
  imageChanged?: boolean;
  mappingVersion?: string | null;
  previousMappingVersion?: string | null;
  profile?: string;
  candidateSha256?: string;
  validation?: { passed: boolean; exitCode: number | null; durationMs: number; output: string; timedOut: boolean };
  backupPath?: string | null;
  write?: string;
  reload?: string;
  verify?: Obj;
  /** What the failed verification saw (restart counts of a crash loop, a healthz mismatch). */
  observed?: unknown;
  rollback?: Obj;
  outcome: string;
}

export interface AuditReport {
  workflow: {
    workflowId: string;
    runId?: string;
    type: string;
    taskQueue?: string;
    startedAt?: string;
    closedAt?: string;
    status: 'completed' | 'failed' | 'running' | 'canceled' | 'terminated' | 'timed-out' | 'continued-as-new';
    events: number;
    parent?: string;
  };
  /** The operator's verb, as the CLI spells it. */
  operation: string;
  serve?: string;
  input: unknown;
  outcome: { message: string; failureType?: string; failedStep?: string; cause?: { type?: string; message: string } };
  steps: StepEvidence[];
  ledger: { gpuRole?: string; before?: string[]; after?: string[] };
  eviction?: { reason?: string; shortfallMib?: number; victims: VictimEvidence[] };
  identity: IdentityEvidence[];
  nvidiaSmi: {
    readings: { at?: string; activity: string; uuid: string; usedMib: number; freeMib: number; totalMib: number }[];
    releases: (VramReleaseResult & { victim?: string })[];
    measuredDelta?: { serve?: string; deltaMib: number; declaredMib?: number };
  };
  promotion?: PromotionEvidence;
  restored: { serve: string; workflowId: string; ok: boolean; message: string; observedModels?: string[] }[];
  children: ChildEvidence[];
  updates: UpdateEvidence[];
  activities: ActivityEvidence[];
  patches: string[];
}

// ---- small readers over decoded, untyped values ------------------------------------------------

function obj(v: unknown): Obj | undefined {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Obj) : undefined;
}
function str(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}
function num(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
}
function strs(v: unknown): string[] | undefined {
  return Array.isArray(v) && v.every((x) => typeof x === 'string') ? v : undefined;
}
/** Any decoded value as text: strings as they are, anything else as JSON. */
function txt(v: unknown): string {
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean' || v === null) return `${v}`;
  return v === undefined ? '?' : JSON.stringify(v);
}
function path(v: unknown, ...keys: string[]): unknown {
  let cur: unknown = v;
  for (const k of keys) cur = obj(cur)?.[k];
  return cur;
}

/** Event times carry nanoseconds; milliseconds are plenty for evidence. */
export function isoMs(t: string | undefined): string | undefined {
  if (!t) return undefined;
  return t.replace(/(\.\d{3})\d*Z$/, '$1Z');
}

function isLedgerState(v: unknown): v is LedgerState {
  const o = obj(v);
  return Boolean(o && typeof o['gpuRole'] === 'string' && typeof o['capacityMib'] === 'number' && Array.isArray(o['reservations']));
}

/** The ledger state a result carries: itself, or its `ledger`. */
function ledgerIn(v: unknown): LedgerState | undefined {
  if (isLedgerState(v)) return v;
  const l = obj(v)?.['ledger'];
  return isLedgerState(l) ? l : undefined;
}

function failureOf(f: unknown): FailureEvidence | undefined {
  const o = obj(f);
  if (!o) return undefined;
  const info = obj(o['applicationFailureInfo']);
  const activityInfo = obj(o['activityFailureInfo']);
  const childInfo = obj(o['childWorkflowExecutionFailureInfo']);
  const timeoutInfo = obj(o['timeoutFailureInfo']);
  const type =
    str(info?.['type']) ??
    (activityInfo ? 'ActivityFailure' : undefined) ??
    (childInfo ? 'ChildWorkflowFailure' : undefined) ??
    (timeoutInfo ? `Timeout(${str(timeoutInfo['timeoutType']) ?? '?'})` : undefined) ??
    (obj(o['canceledFailureInfo']) ? 'Cancelled' : undefined) ??
    (obj(o['terminatedFailureInfo']) ? 'Terminated' : undefined);
  const cause = failureOf(o['cause']);
  return { ...(type ? { type } : {}), message: str(o['message']) ?? '', details: decodePayloads(info?.['details']), ...(cause ? { cause } : {}) };
}

/** The business failure under activity/child wrappers: its type and message. */
function rootOf(f: FailureEvidence): FailureEvidence {
  let cur = f;
  while ((cur.type === 'ActivityFailure' || cur.type === 'ChildWorkflowFailure') && cur.cause) cur = cur.cause;
  return cur;
}

function compact(v: unknown, max = 160): string {
  const s = JSON.stringify(v) ?? 'undefined';
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}

function ledgerTotalsLine(l: LedgerState): string {
  const t = totals(l);
  return `committed ${t.committedMib} MiB, free ${t.freeMib} MiB${t.heldMib ? `, held ${t.heldMib} MiB` : ''}`;
}

function decisionLine(d: unknown): string {
  const o = obj(d);
  if (!o) return compact(d);
  switch (o['decision']) {
    case 'admitted':
      return `admitted ${txt(o['serve'])} ${txt(o['vramMib'])} MiB, free after ${txt(o['freeAfterMib'])} MiB`;
    case 'denied':
      return `denied ${txt(o['serve'])}: asked ${txt(o['vramMib'])} MiB, free ${txt(o['freeMib'])} MiB, over budget by ${txt(o['shortfallMib'])} MiB${
        o['evictableMib'] !== undefined ? `; evictable only ${txt(o['evictableMib'])} MiB` : ''
      }`;
    case 'evicting': {
      const victims = Array.isArray(o['victims']) ? (o['victims'] as unknown[]).map((v) => `${txt(obj(v)?.['serve'])} (${txt(obj(v)?.['vramMib'])} MiB)`).join(', ') : '?';
      return `evicting ${victims} for ${txt(o['serve'])}: ${txt(o['reason'])}`;
    }
    case 'already-held':
      return `${txt(o['serve'])} already held by ${txt(o['holder'])} (${txt(o['phase'])})`;
    default:
      return compact(d);
  }
}

function gpuLine(g: unknown): string {
  const r = obj(g);
  if (!r) return 'no reading (no nvidia-smi on the worker)';
  return `${txt(r['uuid'])}: used ${txt(r['usedMib'])} MiB, free ${txt(r['freeMib'])} of ${txt(r['totalMib'])} MiB`;
}

/** One line per activity, as an operator reads it; anything unknown is compact JSON. */
export function summarizeActivity(type: string, input: unknown, result: unknown): string {
  const r = obj(result);
  switch (type) {
    case 'resolveServe': {
      const s = obj(r?.['serve']);
      const g = obj(r?.['gpu']);
      return s ? `${txt(s['name'])}: ${txt(s['class'])}, ${txt(s['vramMib'])} MiB on '${txt(g?.['role'])}' (${txt(g?.['uuid'])})${s['routerTier'] ? `, router tier ${txt(s['routerTier'])}` : ''}` : compact(result);
    }
    case 'ledgerSnapshot':
    case 'ledgerSetPhase':
    case 'ledgerVictimReleased':
    case 'ledgerAbortEviction': {
      const l = ledgerIn(result);
      const args = obj(path(input, 'args'));
      const what =
        type === 'ledgerSetPhase'
          ? `${txt(args?.['serve'])} → ${txt(args?.['phase'])}; `
          : type === 'ledgerVictimReleased'
            ? `${txt(args?.['victim'])}'s MiB handed to ${txt(args?.['acquirer'])}; `
            : type === 'ledgerAbortEviction'
              ? `eviction for ${txt(args?.['acquirer'])} abandoned${strs(args?.['stopped'])?.length ? ` (stayed evicted: ${strs(args?.['stopped'])?.join(', ')})` : ''}; `
              : '';
      return l ? `${what}${ledgerTotalsLine(l)}` : compact(result);
    }
    case 'ledgerAdmit':
    case 'ledgerAcquire':
      return r ? `${decisionLine(r['decision'])}${r['wasEvicted'] ? ' (restoring an evicted serve)' : ''}` : compact(result);
    case 'ledgerRelease':
      return r ? (r['released'] ? `released ${txt(r['vramMib'])} MiB` : 'held no reservation') : compact(result);
    case 'preflightEviction': {
      const tiers = Array.isArray(r?.['tiers']) ? (r['tiers'] as unknown[]).map((t) => `, tier ${txt(path(t, 'tier'))} can readmit ${txt(path(t, 'serve'))}`).join('') : '';
      return r ? `image ${txt(r['image'])} present, ${r['gpu'] ? `nvidia-smi ${gpuLine(r['gpu'])}` : 'no victim running (no VRAM to confirm)'}${tiers}` : compact(result);
    }
    case 'quiesceTier':
      return r ? `tier ${txt(r['tier'])} ${txt(r['state'])} with ${txt(r['inFlight'])} in flight` : compact(result);
    case 'drainServe':
      return r
        ? `${r['drained'] ? `drained after ${txt(r['waitedMs'])} ms` : `NOT drained after ${txt(r['waitedMs'])} ms`}: router in flight ${txt(r['routerInFlightAtStart'])} → ${txt(r['routerInFlightAtEnd'])}, vLLM running ${txt(r['vllmRunningAtStart'])} → ${txt(r['vllmRunningAtEnd'])}`
        : compact(result);
    case 'inspectServe':
      return r ? `container ${txt(r['name'])} ${txt(r['status'])}` : 'no container';
    case 'readGpu':
    case 'measureGpu':
      return `nvidia-smi ${gpuLine(result)}`;
    case 'stopServeContainer':
      return r ? `container ${txt(r['containerName'])}: ${txt(r['stop'])}, ${txt(r['remove'])}` : compact(result);
    case 'confirmVramReleased':
      return r
        ? `nvidia-smi: ${txt(r['releasedMib'])} MiB back on ${txt(r['gpuUuid'])} (used ${txt(r['usedBeforeMib'])} → ${txt(r['usedAfterMib'])} MiB, expected ${txt(r['expectedMib'])}) after ${txt(r['waitedMs'])} ms`
        : compact(result);
    case 'startServeContainer':
      return r ? `container ${txt(r['containerName'])} ${r['created'] ? 'created' : 'already running'}${r['gpuPinned'] ? ', GPU pinned' : ''}` : compact(result);
    case 'waitHealthy':
      return r ? `200 from ${txt(r['url'])} after ${txt(r['probes'])} probes (${txt(r['waitedMs'])} ms)` : compact(result);
    case 'verifyIdentity':
      return r ? `/v1/models at ${txt(r['url'])}: observed ${(strs(r['observed']) ?? []).map((m) => `'${m}'`).join(', ')}, expected '${txt(r['expected'])}'` : compact(result);
    case 'readmitIfQuiesced':
      return r ? (r['action'] === 'readmitted' ? `router readmitted tier ${txt(path(input, 'tier'))} (observed '${txt(r['observedModel'])}')` : txt(r['action'])) : compact(result);
    case 'readmitTier':
      return r ? (r['ok'] ? `router readmitted tier ${txt(r['tier'])} (observed '${txt(r['observedModel'])}')` : `readmit refused: ${compact(r)}`) : compact(result);
    case 'promoteDescribe': {
      const c = obj(r?.['container']);
      return c ? `container ${txt(c['name'])} runs ${txt(c['image'])} (restart count ${txt(c['restartCount'])}); live mapping_version '${txt(path(r, 'live', 'mappingVersion'))}'${r?.['imageChanged'] ? '; target image differs' : ''}` : compact(result);
    }
    case 'promoteCandidate':
      return r ? `candidate ${txt(r['bytes'])} bytes, sha256 ${txt(r['sha256']).slice(0, 12)}…, mapping_version '${txt(r['mappingVersion'])}'` : compact(result);
    case 'promoteValidate':
      return r ? `${r['passed'] ? 'passed' : 'FAILED'}: exit ${txt(r['exitCode'])} in ${txt(r['durationMs'])} ms` : compact(result);
    case 'promoteBackup':
      return r ? (r['path'] ? `backup ${txt(r['path'])}${r['created'] ? '' : ' (already made by this run)'}` : 'no live config: nothing to back up') : compact(result);
    case 'promoteWrite':
    case 'promoteRestore':
      return r ? txt(r['outcome']) : compact(result);
    case 'promoteRecreate':
      return r ? `recreated from ${txt(r['image'])} (id ${txt(r['id']).slice(0, 12)})` : compact(result);
    case 'promoteReload':
      return r ? `reloaded: mapping_version '${txt(r['mappingVersion'])}'` : compact(result);
    case 'promoteVerify':
      return r ? `mapping_version '${txt(r['mappingVersion'])}' ${txt(r['streak'])}× in a row, restart count ${txt(r['restartCount'])} (${txt(r['polls'])} polls, ${txt(r['waitedMs'])} ms)` : compact(result);
    case 'promoteInspect':
      return r ? `container ${txt(r['name'])} ${txt(r['status'])}, restart count ${txt(r['restartCount'])}` : 'no container';
    default:
      return compact(result);
  }
}

function updateSummary(name: string, request: unknown, result: unknown, failure: FailureEvidence | undefined): string {
  if (failure) return `rejected: ${failure.message}`;
  const req = obj(request);
  const l = ledgerIn(result);
  const tail = l ? `; ${ledgerTotalsLine(l)}` : '';
  switch (name) {
    case 'admit':
    case 'acquire':
      return `${decisionLine(obj(result)?.['decision'])}${tail}`;
    case 'setPhase':
      return `${txt(req?.['serve'])} → ${txt(req?.['phase'])}${tail}`;
    case 'release':
      return `${txt(req?.['serve'])}: ${obj(result)?.['released'] ? `released ${txt(obj(result)?.['vramMib'])} MiB` : 'held no reservation'}${tail}`;
    case 'victimReleased':
      return `${txt(req?.['victim'])}'s MiB handed to ${txt(req?.['acquirer'])}${tail}`;
    case 'abortEviction':
      return `eviction for ${txt(req?.['acquirer'])} abandoned${tail}`;
    default:
      return compact(result);
  }
}

function operationOf(type: string, input: unknown): { operation: string; serve?: string } {
  const i = obj(input) ?? {};
  const serve = str(i['serve']);
  switch (type) {
    case 'bringUpWorkflow':
      return { operation: `serves up ${serve ?? '?'}`, serve };
    case 'acquireWorkflow':
      return {
        operation: `serves up ${serve ?? '?'}${i['evict'] ? ' --evict' : ''}${i['force'] ? ' --force' : ''}${i['drainTimeoutS'] !== undefined ? ` --drain-timeout ${txt(i['drainTimeoutS'])}` : ''}`,
        serve,
      };
    case 'bringDownWorkflow':
      return { operation: `serves down ${serve ?? '?'}${i['restore'] ? ' --restore' : ''}`, serve };
    case 'promoteWorkflow':
      return { operation: `router promote --router ${str(i['router']) ?? '?'} --image ${str(i['image']) ?? '?'}${i['profile'] ? ` --profile ${txt(i['profile'])}` : ''}${i['validateOnly'] ? ' --validate-only' : ''}` };
    case 'ledgerWorkflow':
      return { operation: `ledger of gpu_role '${txt(path(i, 'gpu', 'role'))}' on node '${txt(i['node'])}'` };
    default:
      return { operation: type, serve };
  }
}

// ---- history → report ------------------------------------------------------------------------

/** What the history holds, event by event; each section of the report reads from it. */
interface Collected {
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
  status: AuditReport['workflow']['status'];
  closedAt?: string;
  /** The workflow's result, when it completed. */
  res?: Obj;
  failure?: FailureEvidence;
  /** The failure's first detail: the step log (failAndCompensate), a denial's decision, a promotion's report. */
  failureDetails?: Obj;
  /** The completed activities of one type, in order. */
  done: (type: string) => ActivityEvidence[];
}

function collect(h: HistoryJson, fallbackId?: string): Collected {
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
  const patches: string[] = [];
  let status: AuditReport['workflow']['status'] = 'running';
  let closedAt: string | undefined;
  let result: unknown;
  let failure: FailureEvidence | undefined;

  for (const e of events) {
    const t = eventTypeName(e.eventType);
    const a = eventAttributes(e);
    const at = isoMs(e.eventTime);
    const scheduledId = Number(a['scheduledEventId'] ?? 0);
    const act = byScheduled.get(scheduledId);
    switch (t) {
      case 'ActivityTaskScheduled': {
        const type = str(path(a, 'activityType', 'name')) ?? '?';
        const ev: ActivityEvidence = {
          eventId: Number(e.eventId),
          activityId: str(a['activityId']) ?? '?',
          type,
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
          act.status = t === 'ActivityTaskFailed' ? 'failed' : t === 'ActivityTaskTimedOut' ? 'timed-out' : 'canceled';
          act.closedAt = at;
          act.failure = failureOf(a['failure']);
          act.summary = act.failure ? `${act.failure.type ?? 'failed'}: ${act.failure.message}` : act.status;
        }
        break;
      case 'WorkflowExecutionUpdateAccepted': {
        const req = obj(a['acceptedRequest']);
        const name = str(path(req, 'input', 'name')) ?? '?';
        const u: UpdateEvidence = {
          eventId: Number(e.eventId),
          updateId: str(path(req, 'meta', 'updateId')) ?? str(a['protocolInstanceId']) ?? '?',
          name,
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
        break;
      }
      case 'ChildWorkflowExecutionStarted':
      case 'ChildWorkflowExecutionCompleted':
      case 'ChildWorkflowExecutionFailed':
      case 'ChildWorkflowExecutionCanceled':
      case 'ChildWorkflowExecutionTerminated':
      case 'ChildWorkflowExecutionTimedOut':
      case 'StartChildWorkflowExecutionFailed': {
        const c = childByInitiated.get(Number(a['initiatedEventId'] ?? 0));
        if (!c) break;
        if (t === 'ChildWorkflowExecutionStarted') {
          c.status = 'running';
          c.summary = 'running';
        } else if (t === 'ChildWorkflowExecutionCompleted') {
          c.status = 'completed';
          c.closedAt = at;
          c.result = decodePayloads(a['result'])[0];
          c.summary = str(obj(c.result)?.['message']) ?? 'completed';
        } else {
          c.status = t === 'ChildWorkflowExecutionFailed' ? 'failed' : t === 'ChildWorkflowExecutionCanceled' ? 'canceled' : t === 'ChildWorkflowExecutionTerminated' ? 'terminated' : t === 'ChildWorkflowExecutionTimedOut' ? 'timed-out' : 'not started';
          c.closedAt = at;
          c.failure = failureOf(a['failure']);
          c.summary = c.failure ? `${rootOf(c.failure).type ?? 'failed'}: ${rootOf(c.failure).message}` : c.status;
        }
        break;
      }
      case 'MarkerRecorded': {
        const details = obj(a['details']) ?? {};
        for (const d of Object.values(details).flatMap((p) => decodePayloads(p))) {
          const pid = str(obj(d)?.['patchId']) ?? str(obj(d)?.['id']) ?? str(obj(d)?.['patch_id']);
          if (pid) patches.push(`${pid}${obj(d)?.['deprecated'] ? ' (deprecated)' : ''}`);
        }
        if (!Object.keys(details).length && str(a['markerName'])) patches.push(txt(a['markerName']));
        break;
      }
      case 'WorkflowExecutionCompleted':
        status = 'completed';
        closedAt = at;
        result = decodePayloads(a['result'])[0];
        break;
      case 'WorkflowExecutionFailed':
        status = 'failed';
        closedAt = at;
        failure = failureOf(a['failure']);
        break;
      case 'WorkflowExecutionCanceled':
        status = 'canceled';
        closedAt = at;
        break;
      case 'WorkflowExecutionTerminated':
        status = 'terminated';
        closedAt = at;
        failure = { type: 'Terminated', message: str(a['reason']) ?? 'terminated', details: decodePayloads(a['details']) };
        break;
      case 'WorkflowExecutionTimedOut':
        status = 'timed-out';
        closedAt = at;
        break;
      case 'WorkflowExecutionContinuedAsNew':
        status = 'continued-as-new';
        closedAt = at;
        break;
      default:
        break;
    }
  }

  const res = obj(result);
  const failureDetails = obj(failure?.details[0]);
  const done = (type: string) => activities.filter((x) => x.type === type && x.status === 'completed');
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
    done,
  };
}

/** The outcome as the operator read it, and the workflow's own step log (a denial's admission when it has none). */
function outcomeAndSteps(c: Collected): { outcome: AuditReport['outcome']; steps: StepEvidence[] } {
  const { status, failure, res, failureDetails, events, activities } = c;
  const root = failure ? rootOf(failure) : undefined;
  const outcome: AuditReport['outcome'] =
    status === 'completed'
      ? { message: str(res?.['message']) ?? 'completed' }
      : failure
        ? {
            message: failure.message,
            ...(failure.type ? { failureType: failure.type } : {}),
            ...(str(failureDetails?.['step']) ? { failedStep: str(failureDetails?.['step']) } : {}),
            ...(failure.cause ? { cause: { type: rootOf(failure.cause).type, message: rootOf(failure.cause).message } } : {}),
          }
        : { message: status === 'running' ? `still running: the history ends at event ${events.length}` : status };
  if (root && root !== failure && !outcome.cause) outcome.cause = { type: root.type, message: root.message };

  let steps: StepEvidence[] = [];
  const stepList = res?.['steps'] ?? failureDetails?.['steps'];
  if (Array.isArray(stepList)) {
    steps = stepList.flatMap((s) => {
      const o = obj(s);
      return o && typeof o['step'] === 'string' ? [{ step: o['step'], at: str(o['at']), outcome: str(o['outcome']) ?? '' }] : [];
    });
  }
  if (!steps.length && failure?.type === 'AdmissionDenied') {
    // A denial throws before the step log is returned: the admission itself is the step.
    const admit = activities.find((x) => (x.type === 'ledgerAdmit' || x.type === 'ledgerAcquire') && x.status === 'completed');
    if (admit) steps.push({ step: 'admit', at: admit.closedAt, outcome: admit.summary });
  }
  return { outcome, steps };
}

/** Ledger lines before and after: from the result, else from the ledger states the activities (or, for the ledger itself, its updates) returned. */
function ledgerEvidence(c: Collected): AuditReport['ledger'] {
  const { id, input, serve, activities, updates, res, failureDetails } = c;
  const ledgerStates = activities.flatMap((x) => {
    const l = x.status === 'completed' ? ledgerIn(x.result) : undefined;
    return l ? [{ type: x.type, state: l, result: x.result }] : [];
  });
  const updateStates = updates.flatMap((u) => {
    const l = ledgerIn(u.result);
    return l ? [l] : [];
  });
  let before = strs(res?.['ledgerBefore']) ?? strs(failureDetails?.['ledger']);
  let after = strs(res?.['ledgerAfter']);
  let gpuRole = str(res?.['gpuRole']);
  if (id.workflowType === 'ledgerWorkflow') {
    const li = obj(input);
    const start = isLedgerState(li?.['state']) ? li['state'] : li && obj(li['gpu']) ? emptyLedger(txt(li['node']), li['gpu'] as Parameters<typeof emptyLedger>[1]) : undefined;
    if (start) before = formatLedger(start);
    const last = updateStates[updateStates.length - 1];
    if (last) after = formatLedger(last);
    gpuRole = str(path(li, 'gpu', 'role'));
  } else {
    const firstState = ledgerStates[0];
    if (!before && firstState) {
      // An admission's answer already holds the serve: before is that minus the serve.
      const admitted = (firstState.type === 'ledgerAdmit' || firstState.type === 'ledgerAcquire') && path(firstState.result, 'decision', 'decision') === 'admitted';
      before = formatLedger(admitted && serve ? withoutReservation(firstState.state, serve) : firstState.state);
    }
    const lastState = ledgerStates[ledgerStates.length - 1];
    if (!after && lastState) after = formatLedger(lastState.state);
    gpuRole ??= lastState?.state.gpuRole;
  }
  return { ...(gpuRole ? { gpuRole } : {}), ...(before ? { before } : {}), ...(after ? { after } : {}) };
}

/** Victims and why: the ledger's plan, then each victim's quiesce, drain, stop and VRAM release; the result's own records win. */
function evictionEvidence(c: Collected): AuditReport['eviction'] {
  const { res, done } = c;
  let eviction: AuditReport['eviction'];
  const acquire = done('ledgerAcquire')[0];
  const decision = obj(obj(acquire?.result)?.['decision']);
  if (decision?.['decision'] === 'evicting' || res?.['evictionReason'] !== undefined) {
    const planned = Array.isArray(decision?.['victims']) ? (decision['victims'] as unknown[]).map((v) => obj(v) ?? {}) : [];
    const recorded = Array.isArray(res?.['victims']) ? (res['victims'] as unknown[]).map((v) => obj(v) ?? {}) : [];
    const names = [...new Set([...planned.map((v) => str(v['serve'])), ...recorded.map((v) => str(v['serve']))].filter((n): n is string => Boolean(n)))];
    const victims = names.map((name): VictimEvidence => {
      const rec = recorded.find((v) => v['serve'] === name);
      const plan = planned.find((v) => v['serve'] === name);
      const resolved = done('resolveServe').find((x) => path(x.result, 'serve', 'name') === name);
      const tier = str(rec?.['tier']) ?? str(path(resolved?.result, 'serve', 'routerTier'));
      const quiesce = tier ? done('quiesceTier').find((x) => path(x.input, 'tier') === tier) : undefined;
      const drainAct = done('drainServe').find((x) => path(x.input, 'serve', 'name') === name);
      const stopAct = done('stopServeContainer').find((x) => path(x.input, 'serve') === name);
      const vramAct = done('confirmVramReleased').find((x) => path(x.input, 'victim') === name);
      const readmit = tier ? done('readmitTier').find((x) => path(x.input, 'tier') === tier) : undefined;
      const drain = (obj(rec?.['drain']) ?? obj(drainAct?.result)) as DrainResult | undefined;
      const stopped = Boolean(stopAct);
      const stopIssued = num(rec?.['stopIssuedAtEpochMs']) ?? num(path(stopAct?.result, 'issuedAtEpochMs'));
      const vram = (obj(rec?.['vram']) ?? obj(vramAct?.result)) as VramReleaseResult | undefined;
      const readmitted = readmit
        ? { ok: Boolean(path(readmit.result, 'ok')), ...(str(path(readmit.result, 'observedModel')) ? { observedModel: str(path(readmit.result, 'observedModel')) } : {}), ...(str(path(readmit.result, 'reason')) ? { reason: str(path(readmit.result, 'reason')) } : {}) }
        : undefined;
      return {
        serve: name,
        ...(num(rec?.['vramMib'] ?? plan?.['vramMib']) !== undefined ? { vramMib: num(rec?.['vramMib'] ?? plan?.['vramMib']) } : {}),
        ...(tier ? { tier } : {}),
        ...(num(rec?.['inFlightAtQuiesce'] ?? path(quiesce?.result, 'inFlight')) !== undefined ? { inFlightAtQuiesce: num(rec?.['inFlightAtQuiesce'] ?? path(quiesce?.result, 'inFlight')) } : {}),
        ...(drain ? { drain } : {}),
        ...(stopped ? { inFlightAtStop: num(rec?.['inFlightAtStop']) ?? drain?.routerInFlightAtEnd } : {}),
        stopped,
        ...(stopAct ? { stop: summarizeActivity('stopServeContainer', stopAct.input, stopAct.result) } : {}),
        ...(stopIssued !== undefined ? { stopIssuedAt: new Date(stopIssued).toISOString() } : {}),
        ...(vram ? { vram } : {}),
        ...(readmitted ? { readmitted } : {}),
      };
    });
    eviction = {
      reason: str(res?.['evictionReason']) ?? str(decision?.['reason']),
      ...(num(decision?.['shortfallMib']) !== undefined ? { shortfallMib: num(decision?.['shortfallMib']) } : {}),
      victims,
    };
  }
  return eviction;
}

/** Every model identity observed: GET /v1/models by the workflow, the router's guarded readmits, restored children. */
function identityEvidence(c: Collected): IdentityEvidence[] {
  const { activities, children, done } = c;
  const identity: IdentityEvidence[] = [];
  for (const x of activities.filter((a) => a.type === 'verifyIdentity')) {
    const r = obj(x.result) ?? obj(x.failure ? rootOf(x.failure).details[0] : undefined);
    if (!r) continue;
    const expected = str(r['expected']) ?? str(path(x.input, 'serve', 'servedModelName'));
    const observed = strs(r['observed']) ?? [];
    identity.push({ serve: str(path(x.input, 'serve', 'name')), by: 'v1/models', ...(expected ? { expected } : {}), observed, ok: x.status === 'completed', at: x.closedAt });
  }
  for (const x of done('readmitIfQuiesced')) {
    if (path(x.result, 'action') !== 'readmitted') continue;
    const m = str(path(x.result, 'observedModel'));
    identity.push({ tier: str(path(x.input, 'tier')), by: 'router readmit', observed: m ? [m] : [], ok: true, at: x.closedAt });
  }
  for (const x of done('readmitTier')) {
    const m = str(path(x.result, 'observedModel'));
    identity.push({ tier: str(path(x.input, 'tier')), by: 'router readmit', observed: m ? [m] : [], ok: Boolean(path(x.result, 'ok')), at: x.closedAt });
  }
  for (const c of children) {
    const cr = obj(c.result);
    const observed = strs(cr?.['observedModels']);
    if (observed) identity.push({ serve: str(cr?.['serve']), tier: str(cr?.['readmittedTier']), by: cr?.['readmittedTier'] ? 'router readmit' : 'v1/models', observed, ok: true, at: c.closedAt });
  }
  return identity;
}

/** nvidia-smi readings, victims' VRAM release records, and the measured delta of a started serve. */
function nvidiaSmiEvidence(c: Collected): AuditReport['nvidiaSmi'] {
  const { activities, res, done } = c;
  const readings = activities
    .filter((x) => (x.type === 'readGpu' || x.type === 'measureGpu') && x.status === 'completed' && obj(x.result))
    .map((x) => {
      const g = obj(x.result) as unknown as GpuReading;
      return { at: x.closedAt, activity: x.type, uuid: g.uuid, usedMib: g.usedMib, freeMib: g.freeMib, totalMib: g.totalMib };
    });
  const releases = done('confirmVramReleased').map((x) => ({ ...(obj(x.result) as unknown as VramReleaseResult), victim: str(path(x.input, 'victim')) }));
  const delta = num(res?.['measuredDeltaMib']);
  const nvidiaSmi: AuditReport['nvidiaSmi'] = { readings, releases, ...(delta !== undefined ? { measuredDelta: { serve: str(res?.['serve']), deltaMib: delta, declaredMib: num(res?.['vramMib']) } } : {}) };
  return nvidiaSmi;
}

/** A promotion's steps and backup: its result, or its failure's details, filled in from the activities. */
function promotionEvidence(c: Collected): PromotionEvidence | undefined {
  const { id, input, activities, status, res, failureDetails, done } = c;
  let promotion: PromotionEvidence | undefined;
  if (id.workflowType === 'promoteWorkflow') {
    const src = res ?? failureDetails ?? {};
    const describe = obj(done('promoteDescribe')[0]?.result);
    const candidate = obj(done('promoteCandidate')[0]?.result);
    const validation = obj(src['validation']) ?? obj(done('promoteValidate')[0]?.result);
    const backupAct = obj(done('promoteBackup')[0]?.result);
    const i = obj(input) ?? {};
    // The first reload or recreate is the promotion's own; a rollback's come after the failure.
    const firstReload = activities.find((x) => x.type === 'promoteRecreate' || x.type === 'promoteReload');
    const reloadHow = str(src['reload']) ?? (firstReload ? (firstReload.type === 'promoteRecreate' ? 'recreated' : 'reloaded') : undefined);
    promotion = {
      router: str(src['router']) ?? str(i['router']),
      image: str(src['image']) ?? str(i['image']),
      previousImage: str(src['previousImage']) ?? str(path(describe, 'container', 'image')),
      ...(typeof (src['imageChanged'] ?? describe?.['imageChanged']) === 'boolean' ? { imageChanged: Boolean(src['imageChanged'] ?? describe?.['imageChanged']) } : {}),
      mappingVersion: str(src['mappingVersion']) ?? str(candidate?.['mappingVersion']) ?? null,
      previousMappingVersion: str(src['previousMappingVersion']) ?? str(path(describe, 'live', 'mappingVersion')) ?? null,
      ...(str(src['profile'] ?? i['profile']) ? { profile: str(src['profile'] ?? i['profile']) } : {}),
      ...(str(src['candidateSha256'] ?? candidate?.['sha256']) ? { candidateSha256: str(src['candidateSha256'] ?? candidate?.['sha256']) } : {}),
      ...(validation
        ? {
            validation: {
              passed: Boolean(validation['passed']),
              exitCode: num(validation['exitCode']) ?? null,
              durationMs: num(validation['durationMs']) ?? 0,
              output: str(validation['output']) ?? '',
              timedOut: Boolean(validation['timedOut']),
            },
          }
        : {}),
      ...('backupPath' in src ? { backupPath: (src['backupPath'] as string | null) ?? null } : backupAct ? { backupPath: (backupAct['path'] as string | null) ?? null } : {}),
      ...(str(src['write'] ?? path(done('promoteWrite')[0]?.result, 'outcome')) ? { write: str(src['write'] ?? path(done('promoteWrite')[0]?.result, 'outcome')) } : {}),
      ...(reloadHow ? { reload: reloadHow } : {}),
      ...(src['observed'] !== undefined ? { observed: src['observed'] } : {}),
      ...(obj(src['verify']) ? { verify: obj(src['verify']) } : {}),
      ...(obj(src['rollback']) ? { rollback: obj(src['rollback']) } : {}),
      outcome: status === 'completed' ? (str(src['outcome']) ?? 'completed') : obj(src['rollback']) ? (path(src, 'rollback', 'ok') ? 'failed, rolled back' : 'failed, ROLLBACK FAILED') : status,
    };
  }
  return promotion;
}

/** Serves a bring-down --restore brought back. */
function restoredOf(c: Collected): AuditReport['restored'] {
  const { res } = c;
  const restored = Array.isArray(res?.['restored'])
    ? (res['restored'] as unknown[]).flatMap((r) => {
        const o = obj(r);
        return o ? [{ serve: txt(o['serve']), workflowId: txt(o['workflowId']), ok: Boolean(o['ok']), message: txt(o['message']), ...(strs(o['observedModels']) ? { observedModels: strs(o['observedModels']) } : {}) }] : [];
      })
    : [];
  return restored;
}

export function buildReport(h: HistoryJson, fallbackId?: string): AuditReport {
  const c = collect(h, fallbackId);
  const { id, events, startedAttrs, input, parent, operation, serve, status, closedAt, children, updates, activities, patches } = c;
  const first = events[0];
  const { outcome, steps } = outcomeAndSteps(c);
  const eviction = evictionEvidence(c);
  const promotion = promotionEvidence(c);
  return {
    workflow: {
      workflowId: id.workflowId,
      ...(id.runId ? { runId: id.runId } : {}),
      type: id.workflowType,
      taskQueue: str(path(startedAttrs, 'taskQueue', 'name')),
      startedAt: isoMs(first?.eventTime),
      ...(closedAt ? { closedAt } : {}),
      status,
      events: events.length,
      ...(parent ? { parent } : {}),
    },
    operation,
    ...(serve ? { serve } : {}),
    input,
    outcome,
    steps,
    ledger: ledgerEvidence(c),
    ...(eviction ? { eviction } : {}),
    identity: identityEvidence(c),
    nvidiaSmi: nvidiaSmiEvidence(c),
    ...(promotion ? { promotion } : {}),
    restored: restoredOf(c),
    children,
    updates,
    activities,
    patches,
  };
}


// ---- report → text ---------------------------------------------------------------------------

function time(at: string | undefined): string {
  return at ? at.replace(/^\d{4}-\d{2}-\d{2}T/, '').replace(/Z$/, '') : '?';
}

function drainLine(d: DrainResult): string {
  return `${d.drained ? `drained after ${d.waitedMs} ms` : `NOT drained after ${d.waitedMs} ms`} (router in flight ${d.routerInFlightAtStart} → ${d.routerInFlightAtEnd}${
    d.vllmRunningAtStart !== null ? `, vLLM running ${d.vllmRunningAtStart} → ${txt(d.vllmRunningAtEnd)}` : ''
  }; ${d.polls} polls)`;
}

function vramLine(v: VramReleaseResult): string {
  return `nvidia-smi: ${v.releasedMib} MiB back on ${v.gpuUuid} (used ${v.usedBeforeMib} → ${v.usedAfterMib} MiB, expected ${v.expectedMib} MiB) within ${v.waitedMs} ms`;
}

function identityLine(i: IdentityEvidence): string {
  const who = i.serve ?? (i.tier ? `tier ${i.tier}` : '?');
  const seen = i.observed.length ? i.observed.map((m) => `'${m}'`).join(', ') : 'nothing';
  return `${who}: ${i.by === 'v1/models' ? 'GET /v1/models' : `router readmit${i.tier && i.serve ? ` of ${i.tier}` : ''}`} observed ${seen}${i.expected ? `, expected '${i.expected}'` : ''}: ${i.ok ? 'ok' : 'MISMATCH'}`;
}

function victimLines(v: VictimEvidence): string[] {
  const out = [`victim ${v.serve}${v.vramMib !== undefined ? ` (${v.vramMib} MiB` : ' ('}${v.tier ? `, tier ${v.tier}` : ', no router tier'})`];
  if (v.inFlightAtQuiesce !== undefined) out.push(`  quiesce: ${v.inFlightAtQuiesce} in flight at quiesce`);
  if (v.drain) out.push(`  drain: ${drainLine(v.drain)}`);
  if (v.stopped) out.push(`  stop: ${v.inFlightAtStop ?? '?'} in flight at stop${v.stopIssuedAt ? `, issued ${v.stopIssuedAt}` : ''}; ${v.stop ?? ''}`);
  else out.push('  stop: never stopped');
  if (v.vram) out.push(`  release: ${vramLine(v.vram)}`);
  if (v.readmitted) out.push(`  compensation: tier ${v.tier ?? '?'} ${v.readmitted.ok ? `readmitted (observed '${v.readmitted.observedModel ?? '?'}')` : `readmit refused${v.readmitted.reason ? ` (${v.readmitted.reason})` : ''}`}`);
  return out;
}

function promotionLines(p: PromotionEvidence): string[] {
  const out = [
    `router ${p.router ?? '?'}: ${p.previousImage ?? '?'} → ${p.image ?? '?'}${p.imageChanged === undefined ? '' : p.imageChanged ? ' (new image: recreate)' : ' (same image: reload)'}`,
    `mapping_version '${p.previousMappingVersion ?? '?'}' → '${p.mappingVersion ?? '?'}'${p.candidateSha256 ? ` (candidate sha256 ${p.candidateSha256})` : ''}`,
  ];
  if (p.profile) out.push(`profile ${p.profile}`);
  if (p.validation) out.push(`validate-only: ${p.validation.passed ? 'passed' : 'FAILED'}, ${p.validation.timedOut ? 'timed out' : `exit ${txt(p.validation.exitCode)}`} in ${p.validation.durationMs} ms: ${p.validation.output.split('\n').pop() ?? ''}`);
  if (p.backupPath !== undefined) out.push(`backup: ${p.backupPath ?? 'none (no live config)'}`);
  if (p.write) out.push(`write: ${p.write}`);
  if (p.reload) out.push(`reload: ${p.reload}`);
  if (p.verify) out.push(`verify: ${summarizeActivity('promoteVerify', undefined, p.verify)}`);
  if (p.observed !== undefined) out.push(`verification observed: ${compact(p.observed, 300)}`);
  if (p.rollback) {
    const r = p.rollback;
    out.push(
      `rollback: ${r['ok'] ? 'ok' : 'FAILED'}; config ${txt(r['restored'] ?? '?')}, ${txt(r['reload'] ?? '?')}${r['image'] ? ` ${txt(r['image'])}` : ''}${
        obj(r['verify']) ? `; verified: ${summarizeActivity('promoteVerify', undefined, r['verify'])}` : ''
      }${r['error'] ? `; error: ${txt(r['error'])}` : ''}`,
    );
  }
  out.push(`outcome: ${p.outcome}`);
  return out;
}

export function renderText(r: AuditReport): string[] {
  const w = r.workflow;
  const out: string[] = [
    `${r.operation}`,
    `  workflow ${w.workflowId} (${w.type})${w.runId ? `, run ${w.runId}` : ''}${w.parent ? `, child of ${w.parent}` : ''}`,
    `  task queue ${w.taskQueue ?? '?'}; started ${w.startedAt ?? '?'}${w.closedAt ? `, closed ${w.closedAt}` : ''}; ${w.status}; ${w.events} events`,
    `  outcome: ${r.outcome.failureType ? `${r.outcome.failureType}: ` : ''}${r.outcome.message}`,
  ];
  if (r.steps.length) {
    out.push('', 'Steps');
    const width = Math.max(...r.steps.map((s) => s.step.length));
    for (const s of r.steps) out.push(`  ${time(s.at)}  ${s.step.padEnd(width)}  ${s.outcome}`);
  }
  if (r.ledger.before) out.push('', 'Ledger before', ...r.ledger.before.map((l) => `  ${l}`));
  if (r.ledger.after) out.push('', 'Ledger after', ...r.ledger.after.map((l) => `  ${l}`));
  if (r.eviction) {
    out.push('', 'Eviction', `  why: ${r.eviction.reason ?? '?'}`);
    for (const v of r.eviction.victims) out.push(...victimLines(v).map((l) => `  ${l}`));
  }
  if (r.identity.length) out.push('', 'Observed identity', ...r.identity.map((i) => `  ${identityLine(i)}`));
  if (r.nvidiaSmi.readings.length || r.nvidiaSmi.releases.length || r.nvidiaSmi.measuredDelta) {
    out.push('', 'nvidia-smi');
    for (const g of r.nvidiaSmi.readings) out.push(`  ${time(g.at)}  ${g.activity.padEnd(10)} ${g.uuid}: used ${g.usedMib} MiB, free ${g.freeMib} of ${g.totalMib} MiB`);
    for (const v of r.nvidiaSmi.releases) out.push(`  release of ${v.victim ?? '?'}: ${vramLine(v)}`);
    const d = r.nvidiaSmi.measuredDelta;
    if (d) out.push(`  measured delta: ${d.serve ?? '?'} ${d.deltaMib >= 0 ? '+' : ''}${d.deltaMib} MiB device used (declared ${d.declaredMib ?? '?'} MiB)`);
  }
  if (r.promotion) out.push('', 'Promotion', ...promotionLines(r.promotion).map((l) => `  ${l}`));
  if (r.restored.length) out.push('', 'Restored', ...r.restored.map((x) => `  ${x.serve}: ${x.ok ? 'ok' : 'FAILED'}: ${x.message} [${x.workflowId}]`));
  if (r.children.length) out.push('', 'Child workflows', ...r.children.map((c) => `  ${c.workflowId} (${c.workflowType}): ${c.status}: ${c.summary}`));
  if (r.updates.length) {
    out.push('', `Updates (${r.updates.length})`);
    for (const u of r.updates) out.push(`  #${txt(u.eventId).padEnd(4)} ${time(u.acceptedAt)}  ${u.name.padEnd(14)} ${u.summary}`);
  }
  if (r.patches.length) out.push('', `Patches: ${r.patches.join(', ')}`);
  if (r.activities.length) {
    out.push('', 'Activities');
    const width = Math.max(...r.activities.map((a) => a.type.length));
    for (const a of r.activities) {
      out.push(`  #${txt(a.eventId).padEnd(4)} ${time(a.scheduledAt)}  ${a.type.padEnd(width)}  ${a.status}${a.attempts > 1 ? ` (attempt ${a.attempts})` : ''}: ${a.summary}`);
    }
  }
  return out;
}

// ---- report → markdown (an evidence file) ----------------------------------------------------

function cell(s: string): string {
  return s.replace(/\|/g, '\\|').replace(/\n/g, ' ');
}

function code(lines: string[], lang = ''): string[] {
  return [`\`\`\`${lang}`, ...lines, '```'];
}

export function renderMarkdown(r: AuditReport): string[] {
  const w = r.workflow;
  const out: string[] = [
    `# Evidence: ${r.operation}`,
    '',
    `Rendered by \`gpures audit report\` from the workflow history alone (${w.events} events).`,
    '',
    '| | |',
    '|---|---|',
    `| workflow | \`${cell(w.workflowId)}\` (${w.type}) |`,
    ...(w.runId ? [`| run | \`${w.runId}\` |`] : []),
    ...(w.parent ? [`| started by | \`${cell(w.parent)}\` |`] : []),
    `| task queue | \`${cell(w.taskQueue ?? '?')}\` |`,
    `| started | ${w.startedAt ?? '?'} |`,
    `| closed | ${w.closedAt ?? '(still running)'} |`,
    `| status | **${w.status}** |`,
    `| outcome | ${cell(`${r.outcome.failureType ? `${r.outcome.failureType}: ` : ''}${r.outcome.message}`)} |`,
    '',
    '## Input',
    '',
    ...code([JSON.stringify(r.input, null, 2)], 'json'),
  ];
  if (r.steps.length) {
    out.push('', '## Steps', '', '| time | step | outcome |', '|---|---|---|', ...r.steps.map((s) => `| ${s.at ?? '?'} | ${cell(s.step)} | ${cell(s.outcome)} |`));
  }
  if (r.ledger.before || r.ledger.after) {
    out.push('', '## Ledger');
    if (r.ledger.before) out.push('', 'Before:', '', ...code(r.ledger.before));
    if (r.ledger.after) out.push('', 'After:', '', ...code(r.ledger.after));
  }
  if (r.eviction) {
    out.push('', '## Eviction', '', `Why: ${r.eviction.reason ?? '?'}`, '');
    out.push('| victim | MiB | tier | in flight at quiesce | drain | in flight at stop | VRAM released (nvidia-smi) |', '|---|---|---|---|---|---|---|');
    for (const v of r.eviction.victims) {
      out.push(
        `| ${v.serve} | ${v.vramMib ?? '?'} | ${v.tier ?? '—'} | ${v.inFlightAtQuiesce ?? '—'} | ${v.drain ? cell(drainLine(v.drain)) : '—'} | ${v.stopped ? txt(v.inFlightAtStop ?? '?') : 'not stopped'} | ${
          v.vram ? `${v.vram.releasedMib} MiB (used ${v.vram.usedBeforeMib} → ${v.vram.usedAfterMib})` : '—'
        } |`,
      );
    }
    for (const v of r.eviction.victims) if (v.readmitted) out.push('', `Compensation: tier ${v.tier ?? '?'} ${v.readmitted.ok ? `readmitted (observed '${v.readmitted.observedModel ?? '?'}')` : 'readmit refused'}.`);
  }
  if (r.identity.length) out.push('', '## Observed identity', '', ...r.identity.map((i) => `- ${identityLine(i)}`));
  if (r.nvidiaSmi.readings.length || r.nvidiaSmi.releases.length || r.nvidiaSmi.measuredDelta) {
    out.push('', '## nvidia-smi');
    if (r.nvidiaSmi.readings.length) {
      out.push('', '| time | activity | GPU | used MiB | free MiB | total MiB |', '|---|---|---|---|---|---|');
      for (const g of r.nvidiaSmi.readings) out.push(`| ${g.at ?? '?'} | ${g.activity} | ${g.uuid} | ${g.usedMib} | ${g.freeMib} | ${g.totalMib} |`);
    }
    for (const v of r.nvidiaSmi.releases) out.push('', `- release of ${v.victim ?? '?'}: ${vramLine(v)}`);
    const d = r.nvidiaSmi.measuredDelta;
    if (d) out.push('', `- measured delta: ${d.serve ?? '?'} ${d.deltaMib} MiB device used (declared ${d.declaredMib ?? '?'} MiB)`);
  }
  if (r.promotion) out.push('', '## Promotion', '', ...promotionLines(r.promotion).map((l) => `- ${l}`));
  if (r.restored.length) out.push('', '## Restored', '', ...r.restored.map((x) => `- ${x.serve}: ${x.ok ? 'ok' : 'FAILED'}: ${x.message} (\`${x.workflowId}\`)`));
  if (r.children.length) out.push('', '## Child workflows', '', ...r.children.map((c) => `- \`${c.workflowId}\` (${c.workflowType}): ${c.status}: ${c.summary}`));
  if (r.updates.length) {
    out.push('', '## Updates', '', '| event | accepted | update | request → result |', '|---|---|---|---|');
    for (const u of r.updates) out.push(`| ${u.eventId} | ${u.acceptedAt ?? '?'} | ${u.name} | ${cell(u.summary)} |`);
  }
  if (r.patches.length) out.push('', '## Patches', '', ...r.patches.map((p) => `- ${p}`));
  if (r.activities.length) {
    out.push('', '## Activities', '', '| event | scheduled | closed | activity | status | result |', '|---|---|---|---|---|---|');
    for (const a of r.activities) out.push(`| ${a.eventId} | ${a.scheduledAt ?? '?'} | ${a.closedAt ?? '—'} | ${a.type} | ${a.status}${a.attempts > 1 ? ` (attempt ${a.attempts})` : ''} | ${cell(a.summary)} |`);
  }
  out.push('');
  return out;
}
