// The argument of each ledger Update, checked by its validator before the update is accepted. An
// update may come from the Temporal UI or `temporal workflow update`, not only from gpures; one
// whose handler then threw on its shape would fail the ledger's workflow task, and fail it again on
// every retry, holding every later decision on that GPU. Refused here, it never enters history.
// Fields this does not know are left alone: the callers' requests grow. One exception, stopSlot,
// whose fields become the start slot's take: its two bounds and nothing else. PURE: the ledger imports it.
import { BOUNDS, boundRule, NAME_PATTERN, NAME_RULE, withinBound } from './bounds';
import { gpuSpecProblems, isRecord, oneOf, show } from './inputs';
import { workflowIdProblem } from './slot-waiters';

/** The steps a fence is shown at (see the ledger's FENCE_STEPS). */
export const FENCE_STEP_NAMES = ['start', 'started', 'wake', 'sleep', 'stop'] as const;
export type FenceStep = (typeof FENCE_STEP_NAMES)[number];

export type LedgerUpdateName = 'admit' | 'acquire' | 'victimReleased' | 'abortEviction' | 'beginStop' | 'fence' | 'setPhase' | 'release' | 'startSlot';

type Check = (v: unknown) => string | undefined;
type Field = { check: Check; required?: boolean };

const SERVE_CLASSES = ['resident', 'evictable', 'on-demand'];

const serveName: Check = (v) => (typeof v === 'string' && NAME_PATTERN.test(v) ? undefined : `a serve name of ${NAME_RULE}`);
/** A run's id: what the ledger compares, never parses. */
const runId: Check = (v) => (typeof v === 'string' && v.trim() !== '' ? undefined : "a run's id, a non-empty string");
const boolean: Check = (v) => (typeof v === 'boolean' ? undefined : 'true or false');
const bounded =
  (name: keyof typeof BOUNDS): Check =>
  (v) =>
    withinBound(BOUNDS[name], v) ? undefined : boundRule(BOUNDS[name]);
/** A reading of nvidia-smi: MiB, not necessarily whole, never above any GPU's memory. */
const readMib: Check = (v) =>
  typeof v === 'number' && Number.isFinite(v) && v >= 0 && v <= BOUNDS.capacityMib.max ? undefined : `MiB in 0..${BOUNDS.capacityMib.max}`;
const serveNames: Check = (v) => (Array.isArray(v) && v.every((x) => serveName(x) === undefined) ? undefined : 'an array of serve names');
const sleepLevel = oneOf([1, 2]);
const sleptLevels: Check = (v) =>
  isRecord(v) && Object.entries(v).every(([k, level]) => serveName(k) === undefined && sleepLevel(level) === undefined)
    ? undefined
    : 'an object of serve name to sleep level (1 or 2)';
const heldMibs: Check = (v) =>
  isRecord(v) && Object.entries(v).every(([k, mib]) => serveName(k) === undefined && withinBound({ ...BOUNDS.vramMib, min: 0 }, mib))
    ? undefined
    : `an object of serve name to MiB (${boundRule({ ...BOUNDS.vramMib, min: 0 })})`;
const sleepEviction: Check = (v) =>
  isRecord(v) && sleepLevel(v['level']) === undefined && withinBound({ ...BOUNDS.vramMib, min: 0 }, v['residualMib'])
    ? undefined
    : `{ "level": 1 or 2, "residualMib": ${boundRule({ ...BOUNDS.vramMib, min: 0 })} }`;
/**
 * A take's ask for the start slot with the serve: the two bounds a startSlot take carries, and
 * nothing else (a wake or a takeOverFrom there would pass the checks a startSlot take has).
 */
const STOP_SLOT_FIELDS = ['startTimeoutS', 'holdS'];
const stopSlot: Check = (v) =>
  isRecord(v) &&
  withinBound(BOUNDS.startTimeoutS, v['startTimeoutS']) &&
  withinBound(BOUNDS.holdS, v['holdS']) &&
  Object.keys(v).every((k) => STOP_SLOT_FIELDS.includes(k))
    ? undefined
    : `{ "startTimeoutS": ${boundRule(BOUNDS.startTimeoutS)}, "holdS": ${boundRule(BOUNDS.holdS)} } and nothing else`;

const ADMIT: Record<string, Field> = {
  serve: { check: serveName, required: true },
  vramMib: { check: bounded('vramMib'), required: true },
  class: { check: oneOf(SERVE_CLASSES), required: true },
  holder: { check: runId, required: true },
  minResidencyS: { check: bounded('minResidencyS') },
  sleep: { check: sleepEviction },
};

/** An admission's take of the start slot: the start timeout its waiters count. */
const slotWithAdmit: Check = (v) =>
  isRecord(v) && withinBound(BOUNDS.startTimeoutS, v['startTimeoutS']) ? undefined : `{ "startTimeoutS": ${boundRule(BOUNDS.startTimeoutS)} }`;

const FIELDS: Record<LedgerUpdateName, Record<string, Field>> = {
  admit: { ...ADMIT, startSlot: { check: slotWithAdmit } },
  acquire: { ...ADMIT, evict: { check: boolean, required: true } },
  victimReleased: {
    victim: { check: serveName, required: true },
    acquirer: { check: serveName, required: true },
    holder: { check: runId },
    asleepAt: { check: sleepLevel },
    residualSeenMib: { check: readMib },
  },
  abortEviction: {
    acquirer: { check: serveName, required: true },
    stopped: { check: serveNames, required: true },
    slept: { check: sleptLevels },
    sleptHoldingMib: { check: heldMibs },
    holder: { check: runId },
    quiet: { check: boolean },
  },
  beginStop: {
    serve: { check: serveName, required: true },
    holder: { check: runId, required: true },
    class: { check: oneOf(SERVE_CLASSES) },
    takeOverFrom: { check: runId },
    victimsDown: { check: serveNames },
    victimsAsleep: { check: serveNames },
    onlyIfHeldBy: { check: runId },
    answerLedger: { check: boolean },
    stopSlot: { check: stopSlot },
  },
  fence: {
    serve: { check: serveName, required: true },
    holder: { check: runId, required: true },
    step: { check: oneOf(FENCE_STEP_NAMES), required: true },
  },
  // An operation sets only `running` by this update; every other phase follows from a decision
  // (admit, stop, eviction), and one set by hand would take the serve's MiB out of the budget.
  setPhase: {
    serve: { check: serveName, required: true },
    phase: { check: oneOf(['running']), required: true },
    holder: { check: runId, required: true },
    measuredMib: { check: readMib },
    quiet: { check: boolean },
    giveStartSlot: { check: boolean },
  },
  release: {
    serve: { check: serveName, required: true },
    holder: { check: runId },
    keepAsleep: { check: boolean },
    quiet: { check: boolean },
  },
  startSlot: {
    serve: { check: serveName, required: true },
    holder: { check: runId, required: true },
    take: { check: boolean, required: true },
    startTimeoutS: { check: bounded('startTimeoutS') },
    takeOverFrom: { check: runId },
    renew: { check: boolean },
    doing: { check: oneOf(['stopping', 'evicting']) },
    holdS: { check: bounded('holdS') },
    wake: { check: workflowIdProblem },
  },
};

/** Every problem with an update's argument, each naming its field; empty when the handler can take it. */
export function ledgerUpdateProblems(update: LedgerUpdateName, arg: unknown): string[] {
  const fields = FIELDS[update];
  if (!isRecord(arg)) return [`${update}: the argument must be one JSON object with ${Object.keys(fields).join(', ')} (got ${show(arg)})`];
  // Named by the serve it is about, where that much is readable: `admit vision: vramMib …`.
  const about = [arg['serve'], arg['victim'], arg['acquirer']].find((v): v is string => typeof v === 'string' && serveName(v) === undefined);
  const prefix = about ? `${update} ${about}` : update;
  const problems: string[] = [];
  for (const [k, { check, required }] of Object.entries(fields)) {
    if (arg[k] === undefined) {
      if (required) problems.push(`${prefix}: ${k} is required`);
      continue;
    }
    const problem = check(arg[k]);
    if (problem) problems.push(`${prefix}: ${k} must be ${problem} (got ${show(arg[k])})`);
  }
  if (update === 'admit' || update === 'acquire') problems.push(...gpuSpecProblems(arg['gpu'], `${prefix}: gpu`));
  return problems;
}
