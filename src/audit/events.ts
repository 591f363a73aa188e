// A history in its proto-JSON form, read without a server and without I/O: event kinds, their
// attributes, and payloads decoded with the default payload converter (what the workflows and
// activities wrote: JSON).
import { defaultPayloadConverter } from '@temporalio/common';

/** One event of a history in its proto-JSON form: `eventId`, `eventTime`, `eventType` and one `…EventAttributes`. */
export interface HistoryEventJson {
  eventId: string;
  eventTime?: string;
  eventType: string;
  [attributes: string]: unknown;
}

export interface HistoryJson {
  events: HistoryEventJson[];
}

export function isHistoryJson(value: unknown): value is HistoryJson {
  if (typeof value !== 'object' || value === null) return false;
  const events = (value as { events?: unknown }).events;
  return Array.isArray(events) && events.every((e) => typeof e === 'object' && e !== null && typeof (e as { eventType?: unknown }).eventType === 'string');
}

/** What a history says about itself (a history file holds no workflow id of its own but the started event's). */
export interface HistoryIdentity {
  workflowId: string;
  runId?: string;
  workflowType: string;
  events: number;
}

/** Short event type: EVENT_TYPE_ACTIVITY_TASK_SCHEDULED → ActivityTaskScheduled. */
export function eventTypeName(eventType: string): string {
  if (!eventType.startsWith('EVENT_TYPE_')) return eventType;
  return eventType
    .slice('EVENT_TYPE_'.length)
    .toLowerCase()
    .split('_')
    .map((w) => (w ? w[0]?.toUpperCase() + w.slice(1) : ''))
    .join('');
}

/** The event's `…EventAttributes` object, whatever its kind. */
export function eventAttributes(e: HistoryEventJson): Record<string, unknown> {
  const key = Object.keys(e).find((k) => k.endsWith('EventAttributes'));
  const value = key ? e[key] : undefined;
  return typeof value === 'object' && value !== null ? (value as Record<string, unknown>) : {};
}

function str(v: unknown): string | undefined {
  return typeof v === 'string' && v ? v : undefined;
}

/**
 * Workflow id, run id and type from the started event. `fallbackId` (e.g. from the file name)
 * stands in on servers too old to record the workflow id in the started event.
 */
export function historyIdentity(h: HistoryJson, fallbackId = 'unknown'): HistoryIdentity {
  const first = h.events[0];
  const a = first ? eventAttributes(first) : {};
  const type = (a['workflowType'] as { name?: unknown } | undefined)?.name;
  const runId = str(a['originalExecutionRunId']) ?? str(a['firstExecutionRunId']);
  return { workflowId: str(a['workflowId']) ?? fallbackId, runId, workflowType: str(type) ?? 'unknown', events: h.events.length };
}

/** Decodes one proto-JSON payload with the default payload converter (JSON, binary, null). */
export function decodePayload(p: unknown): unknown {
  if (typeof p !== 'object' || p === null) return undefined;
  // Proto JSON carries bytes as base64: the metadata values and the data.
  const { metadata, data } = p as { metadata?: Record<string, string> | null; data?: string | null };
  const bytes = (b64: string | null | undefined) => new Uint8Array(Buffer.from(b64 ?? '', 'base64'));
  try {
    return defaultPayloadConverter.fromPayload({
      metadata: Object.fromEntries(Object.entries(metadata ?? {}).map(([k, v]) => [k, bytes(v)])),
      data: bytes(data),
    });
  } catch (err) {
    return { undecodable: (err as Error).message };
  }
}

/** Decodes `{ payloads: [...] }`: every value, in order. */
export function decodePayloads(ps: unknown): unknown[] {
  const list = (ps as { payloads?: unknown } | undefined)?.payloads;
  return Array.isArray(list) ? list.map(decodePayload) : [];
}

/** The marker the SDK's core records for a local activity: the history's only record of one. */
export const LOCAL_ACTIVITY_MARKER = 'core_local_activity';

/**
 * A local activity's marker: its type, id, attempt, and result or failure. Its input is not in
 * history (the workflow's code computed it, and computes it again on replay).
 */
export function localActivityOf(
  e: HistoryEventJson,
): { type: string; activityId: string; attempt: number; completedEpochMs?: number; result?: unknown; failure?: unknown } | undefined {
  const a = eventAttributes(e);
  if (a['markerName'] !== LOCAL_ACTIVITY_MARKER) return undefined;
  const details = (a['details'] ?? {}) as Record<string, unknown>;
  const data = decodePayloads(details['data'])[0] as { activity_type?: unknown; activity_id?: unknown; attempt?: unknown; complete_time?: unknown } | undefined;
  const result = decodePayloads(details['result']);
  const completedEpochMs = epochMsOf(data?.complete_time);
  return {
    type: str(data?.activity_type) ?? '?',
    activityId: str(data?.activity_id) ?? '?',
    attempt: typeof data?.attempt === 'number' ? data.attempt : 1,
    ...(completedEpochMs !== undefined ? { completedEpochMs } : {}),
    ...(result.length ? { result: result[0] } : {}),
    ...(a['failure'] ? { failure: a['failure'] } : {}),
  };
}

/**
 * The marker's `complete_time` (`{ seconds, nanos }`): the history's only time of a local step,
 * whose marker is written with its task's completion. Not a clock reading: the SDK core (1.24,
 * local_activity_state_machine.rs) writes the workflow time when the step was scheduled plus its
 * run time (from its dispatch to the worker to its result), and moves the workflow time to it. In a
 * task that runs steps in a row, a step's time is the task's start plus the run times of the steps so
 * far; the activations and dispatches between them are in no step's time.
 */
function epochMsOf(t: unknown): number | undefined {
  if (typeof t !== 'object' || t === null) return undefined;
  const { seconds, nanos } = t as { seconds?: unknown; nanos?: unknown };
  const s = typeof seconds === 'number' ? seconds : typeof seconds === 'string' ? Number(seconds) : NaN;
  const n = typeof nanos === 'number' ? nanos : 0;
  return Number.isFinite(s) ? s * 1000 + n / 1e6 : undefined;
}
