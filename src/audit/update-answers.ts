// Holds each Update's answer as a replay gave it again against the answer its history recorded.
// Core's replay checks commands only; an Update handler issues none, so a ledger whose decisions
// changed would replay "ok" while the state it carries on is not what its callers were told.
import { decodePayloads, eventAttributes } from './events';
import type { HistoryJson } from './events';
import type { UpdateAnswer } from '../shared/update-answers';

/** A replay's answer to an Update differs from the one in history. */
export class UpdateAnswerChanged extends Error {
  override readonly name = 'UpdateAnswerChanged';
  constructor(
    message: string,
    /** The WorkflowExecutionUpdateCompleted event recorded. */
    readonly eventId: number,
  ) {
    super(message);
  }
}

type Recorded = { success: unknown } | { failure: string };

function recordedOutcome(outcome: unknown): Recorded | undefined {
  const o = (outcome ?? {}) as { success?: unknown; failure?: { message?: unknown } };
  if (o.success !== undefined) return { success: decodePayloads(o.success)[0] };
  if (o.failure !== undefined) return { failure: typeof o.failure.message === 'string' ? o.failure.message : '' };
  return undefined;
}

/** A value as the payload converter writes it: what history holds of the same answer. */
const asWritten = (v: unknown): unknown => (v === undefined ? undefined : JSON.parse(JSON.stringify(v)));

const show = (v: unknown): string => {
  const s = v === undefined ? 'nothing' : JSON.stringify(v);
  return s.length > 120 ? `${s.slice(0, 117)}...` : s;
};

/**
 * Where an answer given again first departs from the recorded one: a path and both sides, or
 * undefined when it says everything the recorded one said. A field (or an answer) the recorded
 * one lacks is not held against it: answers grow (the ledger's came to carry the ledger itself), and what a
 * caller was told is what the recorded fields say. Arrays must match item for item.
 */
export function firstDifference(recorded: unknown, now: unknown, path = ''): string | undefined {
  // Nothing recorded (a handler that returned nothing, a field absent): nothing to hold it to.
  if (recorded === undefined) return undefined;
  const at = path || 'the answer';
  const differ = `${at}: recorded ${show(recorded)}, now ${show(now)}`;
  if (typeof recorded !== 'object' || recorded === null || typeof now !== 'object' || now === null || Array.isArray(recorded) !== Array.isArray(now)) {
    return JSON.stringify(recorded) === JSON.stringify(now) ? undefined : differ;
  }
  if (Array.isArray(recorded) && recorded.length !== (now as unknown[]).length) return differ;
  const r = recorded as Record<string, unknown>;
  const n = now as Record<string, unknown>;
  for (const k of Object.keys(r)) {
    const d = firstDifference(r[k], n[k], Array.isArray(recorded) ? `${path}[${k}]` : path ? `${path}.${k}` : k);
    if (d) return d;
  }
  return undefined;
}

/**
 * The first Update (in history's order) whose answer on replay differs from the recorded one, as
 * an error naming it and where the answers part; undefined when every answer given again matches.
 * An Update the replay did not answer (one accepted in a workflow task the history does not
 * complete) is not held against it.
 */
export function updateAnswersChanged(history: HistoryJson, answers: readonly UpdateAnswer[]): UpdateAnswerChanged | undefined {
  const given = new Map(answers.map((a) => [a.updateId, a]));
  for (const e of history.events) {
    if (!e['workflowExecutionUpdateCompletedEventAttributes']) continue;
    const a = eventAttributes(e);
    const updateId = (a['meta'] as { updateId?: unknown } | undefined)?.updateId;
    const answer = typeof updateId === 'string' ? given.get(updateId) : undefined;
    const recorded = recordedOutcome(a['outcome']);
    if (!answer || !recorded) continue;
    const now = answer.outcome;
    const difference =
      'success' in recorded && 'success' in now
        ? firstDifference(recorded.success, asWritten(now.success))
        : 'failure' in recorded && 'failure' in now
          ? recorded.failure === now.failure
            ? undefined
            : `its failure: recorded ${show(recorded.failure)}, now ${show(now.failure)}`
          : 'success' in recorded
            ? `it succeeded when recorded, and now fails: ${show((now as { failure: string }).failure)}`
            : `it failed when recorded (${show(recorded.failure)}), and now succeeds`;
    if (difference) {
      return new UpdateAnswerChanged(
        `Update ${answer.name} ${answer.updateId} (event ${e.eventId}) answers differently on replay, at ${difference}: ` +
          'a decision changed without patched(), and runs that recorded it would carry on a state their callers were not told',
        Number(e.eventId),
      );
    }
  }
  return undefined;
}
