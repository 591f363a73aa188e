// Workflow inputs arrive as JSON from the CLI, the API or the Temporal UI's start form: checked
// before anything runs, so a typo there is a clear failure rather than a stuck workflow task.
import type { BoundName } from './bounds';
import { BOUNDS, boundRule, NAME_PATTERN, NAME_RULE, withinBound } from './bounds';
import { MAX_SLOT_WAITERS, toldAskMsProblem, workflowIdProblem } from './slot-waiters';

export interface InputSpec {
  booleans?: readonly string[];
  /** Durations, each within its bound in BOUNDS. */
  seconds?: readonly BoundName[];
  /** Fields of their own shape, each with the problem it finds (undefined: fine). */
  other?: Readonly<Record<string, (v: unknown) => string | undefined>>;
}

/** The problem with a duration the operator gave, as "must be …"; undefined when it is fine. */
export function boundProblem(name: BoundName, v: unknown): string | undefined {
  return withinBound(BOUNDS[name], v) ? undefined : `must be ${boundRule(BOUNDS[name])}`;
}

export const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
/** A command-line count or duration as typed: digits only, else NaN (for the bound check to refuse by name). */
export const wholeNumber = (text: string): number => (/^\d+$/.test(text) ? Number(text) : NaN);
export const show = (v: unknown): string => (v === undefined ? 'nothing' : (JSON.stringify(v) ?? typeof v));

/**
 * The check of a field that takes one of a few values, its problem worded alike wherever one is
 * refused (a ledger update's field, a workflow's input, a quiesce's reason): `one of "a", "b"`.
 */
export const oneOf =
  (values: readonly (string | number)[]) =>
  (v: unknown): string | undefined =>
    values.includes(v as string | number) ? undefined : `one of ${values.map((x) => JSON.stringify(x)).join(', ')}`;

export function operationInputProblems(input: unknown, spec: InputSpec = {}): string[] {
  if (!isRecord(input)) return ['the input must be one JSON object, e.g. { "serve": "vision" }'];
  const o = input;
  const problems: string[] = [];
  if (typeof o['serve'] !== 'string' || !NAME_PATTERN.test(o['serve'])) problems.push(`serve: a serve name from the manifest (got ${show(o['serve'])})`);
  for (const k of spec.booleans ?? []) {
    if (o[k] !== undefined && typeof o[k] !== 'boolean') problems.push(`${k}: true or false (got ${show(o[k])})`);
  }
  for (const k of spec.seconds ?? []) {
    const problem = o[k] === undefined ? undefined : boundProblem(k, o[k]);
    if (problem) problems.push(`${k}: ${problem} (got ${show(o[k])})`);
  }
  for (const [k, check] of Object.entries(spec.other ?? {})) {
    const problem = o[k] === undefined ? undefined : check(o[k]);
    if (problem) problems.push(`${k}: ${problem} (got ${show(o[k])})`);
  }
  const known = new Set<string>(['serve', ...(spec.booleans ?? []), ...(spec.seconds ?? []), ...Object.keys(spec.other ?? {})]);
  for (const k of Object.keys(o)) if (!known.has(k)) problems.push(`${k}: unknown field (known: ${[...known].join(', ')})`);
  return problems;
}

/**
 * A ledger's start input, `{ node, gpu: { role, uuid, capacityMib, reserveMib } }` (plus what
 * continue-as-new carries). Fields this does not know are left alone: the ledger's own input
 * grows, and its continuations must keep starting.
 */
export function ledgerInputProblems(input: unknown): string[] {
  if (!isRecord(input)) return ['the input must be one JSON object, { "node": …, "gpu": { "role", "uuid", "capacityMib", "reserveMib" } }'];
  const problems: string[] = [];
  const name = (path: string, v: unknown) => {
    if (typeof v !== 'string' || !NAME_PATTERN.test(v)) problems.push(`${path}: a name of ${NAME_RULE}, as in the manifest (got ${show(v)})`);
  };
  name('node', input['node']);
  problems.push(...gpuSpecProblems(input['gpu'], 'gpu'));
  if (input['state'] !== undefined && !isRecord(input['state']))
    problems.push(`state: the ledger a continue-as-new carries, an object (got ${show(input['state'])})`);
  if (input['slotWaiters'] !== undefined) problems.push(...slotWaitersProblems(input['slotWaiters'], 'slotWaiters'));
  const askMs = input['slotToldAskMs'] === undefined ? undefined : toldAskMsProblem(input['slotToldAskMs']);
  if (askMs) problems.push(`slotToldAskMs: ${askMs} (got ${show(input['slotToldAskMs'])})`);
  const maxEvents = input['maxHistoryEvents'];
  if (maxEvents !== undefined && !(typeof maxEvents === 'number' && Number.isSafeInteger(maxEvents) && maxEvents > 0)) {
    problems.push(`maxHistoryEvents: a positive integer (got ${show(maxEvents)})`);
  }
  return problems;
}

/** The runs a ledger tells when its start slot is freed, as its continue-as-new carries them (src/domain/slot-waiters.ts). */
function slotWaitersProblems(v: unknown, path: string): string[] {
  if (!isRecord(v)) return [`${path}: { "queue": [workflow ids], "told"?: one of them }, what a continue-as-new carries (got ${show(v)})`];
  const { queue, told } = v;
  if (!Array.isArray(queue) || queue.length > MAX_SLOT_WAITERS)
    return [`${path}.queue: an array of at most ${MAX_SLOT_WAITERS} workflow ids (got ${show(queue)})`];
  const problems = queue.flatMap((id: unknown, i) => {
    const problem = workflowIdProblem(id) ?? (queue.indexOf(id) !== i ? 'each id once' : undefined);
    return problem ? [`${path}.queue[${i}]: ${problem} (got ${show(id)})`] : [];
  });
  if (told !== undefined && !queue.includes(told)) problems.push(`${path}.told: one of its queue's ids (got ${show(told)})`);
  const { unanswered, toldSinceGive } = v;
  if (unanswered !== undefined) {
    if (!isRecord(unanswered)) problems.push(`${path}.unanswered: { workflow id: 1 or 2 }, each id one of its queue's (got ${show(unanswered)})`);
    else
      for (const [id, n] of Object.entries(unanswered)) {
        if (!queue.includes(id)) problems.push(`${path}.unanswered: ${show(id)} is not one of its queue's ids`);
        else if (n !== 1 && n !== 2) problems.push(`${path}.unanswered[${show(id)}]: 1 or 2, the times it was told without asking (got ${show(n)})`);
      }
  }
  // Whom a run told since its last give is the run's own: a next run tells from the first.
  if (toldSinceGive !== undefined) problems.push(`${path}.toldSinceGive: not carried across continue-as-new (got ${show(toldSinceGive)})`);
  return problems;
}

/** A GPU as the manifest's [[gpus]] entry gives it, `{ role, uuid, capacityMib, reserveMib }`, at `path`. */
export function gpuSpecProblems(gpu: unknown, path: string): string[] {
  if (!isRecord(gpu)) return [`${path}: { "role", "uuid", "capacityMib", "reserveMib" } from the manifest's [[gpus]] entry (got ${show(gpu)})`];
  const problems: string[] = [];
  if (typeof gpu['role'] !== 'string' || !NAME_PATTERN.test(gpu['role']))
    problems.push(`${path}.role: a name of ${NAME_RULE}, as in the manifest (got ${show(gpu['role'])})`);
  if (typeof gpu['uuid'] !== 'string' || gpu['uuid'] === '') problems.push(`${path}.uuid: the GPU's uuid, a non-empty string (got ${show(gpu['uuid'])})`);
  for (const [k, bound] of [
    ['capacityMib', BOUNDS.capacityMib],
    ['reserveMib', BOUNDS.reserveMib],
  ] as const) {
    if (!withinBound(bound, gpu[k])) problems.push(`${path}.${k}: ${boundRule(bound)} (got ${show(gpu[k])})`);
  }
  const { capacityMib, reserveMib } = gpu;
  if (typeof capacityMib === 'number' && typeof reserveMib === 'number' && reserveMib >= capacityMib) {
    problems.push(`${path}.reserveMib: ${reserveMib} MiB must be less than ${path}.capacityMib ${capacityMib} MiB`);
  }
  return problems;
}
