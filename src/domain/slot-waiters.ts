// The runs waiting for a GPU's start slot that its ledger tells when the slot is given back
// (startSlotFreed, to the workflow id a refused take named in `wake`). One is told at a time, the
// longest waiting first: telling them all made each ask again at once, one Update each for one
// winner (15 starts queued, 14 Updates a give). PURE: the ledger workflow imports it.

/** Past this many, the rest are not told and poll (1, 2, 4, then every 5 s). */
export const MAX_SLOT_WAITERS = 64;

/**
 * How long a told run has to ask before the next waiter is told too, while the slot is still free
 * (slot-told-bounded). A told run asks at once: 465 ms from the signal to its take in
 * ledger-slot-woken.json (recorded at load 12-16). Told one at a time, a run alive but not asking
 * (compensating, a reused id, a loaded worker) kept the slot free until some waiter's poll came
 * round, up to 5 s a give; this bounds that at 1 s. Shorter, a run merely slow is joined by the
 * next more often: one more Update, and the slower keeps its place.
 */
export const SLOT_TOLD_ASK_MS = 1000;

/**
 * What a ledger's input may set it to instead (slotToldAskMs). Past the 5 s poll the timer only
 * tells where the waiters' polls would have asked first; up to 30 s lets a test hold it off.
 */
export const SLOT_TOLD_ASK_MS_BOUND = { min: 50, max: 30_000 } as const;

/** The problem with a ledger input's slotToldAskMs; undefined when it is fine. */
export const toldAskMsProblem = (v: unknown): string | undefined =>
  typeof v === 'number' && Number.isSafeInteger(v) && v >= SLOT_TOLD_ASK_MS_BOUND.min && v <= SLOT_TOLD_ASK_MS_BOUND.max
    ? undefined
    : `a whole number of milliseconds in ${SLOT_TOLD_ASK_MS_BOUND.min}..${SLOT_TOLD_ASK_MS_BOUND.max}`;

export interface SlotWaiters {
  /** Workflow ids, the longest waiting first. */
  queue: string[];
  /** Before slot-told-bounded: the first of them, told at the last give and not heard from since. */
  told?: string;
  /**
   * Since slot-told-bounded: how many times each waiter has been told without asking since (1 or
   * 2). Carried across continue-as-new, so a silent first waiter is dropped after two tells
   * whichever runs told it, rather than told again at each continuation's start.
   */
  unanswered?: Record<string, number>;
  /** Since slot-told-bounded: the waiters told since the slot was last given back, in order; never carried (a next run starts as at a give). */
  toldSinceGive?: string[];
}

export const NO_SLOT_WAITERS: SlotWaiters = { queue: [] };

/** A workflow's id the ledger signals: what Temporal takes (1..1000 characters). */
export const workflowIdProblem = (v: unknown): string | undefined =>
  typeof v === 'string' && v.trim() !== '' && v.length <= 1000 ? undefined : "a workflow's id, 1 to 1000 characters";

/** The waiters' marks kept for the ids still in the queue only: what bounds them by its 64. */
function waiters(queue: string[], told: string | undefined, w: SlotWaiters = NO_SLOT_WAITERS): SlotWaiters {
  const out: SlotWaiters = told !== undefined && queue.includes(told) ? { queue, told } : { queue };
  const unanswered = Object.entries(w.unanswered ?? {}).filter(([id]) => queue.includes(id));
  if (unanswered.length) out.unanswered = Object.fromEntries(unanswered);
  const since = (w.toldSinceGive ?? []).filter((id) => queue.includes(id));
  if (since.length) out.toldSinceGive = since;
  return out;
}

/**
 * A take refused: a new waiter goes last. One already waiting keeps its place: told, it came back
 * and found another asker (a poll, a new run) had taken the slot first; it is told again at the next give.
 */
export function waiterRefused(w: SlotWaiters, id: string): SlotWaiters {
  const queue = w.queue.includes(id) || w.queue.length >= MAX_SLOT_WAITERS ? w.queue : [...w.queue, id];
  // It asked: told since or not, it is silent no more.
  const unanswered = Object.fromEntries(Object.entries(w.unanswered ?? {}).filter(([x]) => x !== id));
  return waiters(queue, w.told === id ? undefined : w.told, { ...w, unanswered });
}

/** A take granted: its run waits no more. */
export function waiterTook(w: SlotWaiters, id: string): SlotWaiters {
  return waiters(
    w.queue.filter((x) => x !== id),
    w.told,
    w,
  );
}

/**
 * Before slot-told-bounded (runs recorded then replay it): the slot given back: who to tell, the first waiting. One told at the give before that has not
 * asked since loses its place first: its run ended after it was told, or its id names a run that
 * no longer waits; were it kept first, every give would tell it and nobody else. Still waiting, it
 * asks at its next poll, and waits from the back.
 */
export function waiterToTell(w: SlotWaiters): { waiters: SlotWaiters; tell?: string } {
  const queue = w.told !== undefined ? w.queue.filter((x) => x !== w.told) : w.queue;
  const tell = queue[0];
  return { waiters: waiters(queue, tell), ...(tell !== undefined ? { tell } : {}) };
}

/**
 * Since slot-told-bounded: the next to tell while the slot is free, at a give (`given`) or once the
 * last told has had SLOT_TOLD_ASK_MS without the slot being taken: the first waiting not yet told
 * since the give. One told earlier and silent is told again, in its place; told twice without
 * asking, it is dropped (its run no longer waits for this slot: ended, or its id reused; still
 * waiting, it asks at its next poll and waits from the back). One that asks late and finds the
 * slot taken keeps its place (waiterRefused clears its count).
 */
export function waiterToTellNext(w: SlotWaiters, given: boolean): { waiters: SlotWaiters; tell?: string } {
  const unanswered = w.unanswered ?? {};
  const queue = w.queue.filter((id) => (unanswered[id] ?? 0) < 2);
  const since = given ? [] : (w.toldSinceGive ?? []);
  const tell = queue.find((id) => !since.includes(id));
  if (tell === undefined) return { waiters: waiters(queue, undefined, { ...w, toldSinceGive: since }) };
  const marks = { queue, unanswered: { ...unanswered, [tell]: (unanswered[tell] ?? 0) + 1 }, toldSinceGive: [...since, tell] };
  return { waiters: waiters(queue, undefined, marks), tell };
}

/** Since slot-told-bounded: the last told since the give, whose signal failing passes the turn. */
export const lastTold = (w: SlotWaiters): string | undefined => w.toldSinceGive?.at(-1);

/** Its signal failed: the run has closed. */
export function waiterGone(w: SlotWaiters, id: string): SlotWaiters {
  return waiterTook(w, id);
}
