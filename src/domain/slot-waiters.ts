// The runs waiting for a GPU's start slot that its ledger tells when the slot is given back
// (startSlotFreed, to the workflow id a refused take named in `wake`). One is told at a time, the
// longest waiting first: telling them all made each ask again at once, one Update each for one
// winner (15 starts queued, 14 Updates a give). PURE: the ledger workflow imports it.

/** Past this many, the rest are not told and poll (1, 2, 4, then every 5 s). */
export const MAX_SLOT_WAITERS = 64;

export interface SlotWaiters {
  /** Workflow ids, the longest waiting first. */
  queue: string[];
  /** The first of them, told at the last give and not heard from since. */
  told?: string;
}

export const NO_SLOT_WAITERS: SlotWaiters = { queue: [] };

/** A workflow's id the ledger signals: what Temporal takes (1..1000 characters). */
export const workflowIdProblem = (v: unknown): string | undefined =>
  typeof v === 'string' && v.trim() !== '' && v.length <= 1000 ? undefined : "a workflow's id, 1 to 1000 characters";

function waiters(queue: string[], told: string | undefined): SlotWaiters {
  return told !== undefined && queue.includes(told) ? { queue, told } : { queue };
}

/**
 * A take refused: a new waiter goes last. One already waiting keeps its place: told, it came back
 * and found another asker (a poll, a new run) had taken the slot first; it is told again at the next give.
 */
export function waiterRefused(w: SlotWaiters, id: string): SlotWaiters {
  const queue = w.queue.includes(id) || w.queue.length >= MAX_SLOT_WAITERS ? w.queue : [...w.queue, id];
  return waiters(queue, w.told === id ? undefined : w.told);
}

/** A take granted: its run waits no more. */
export function waiterTook(w: SlotWaiters, id: string): SlotWaiters {
  return waiters(
    w.queue.filter((x) => x !== id),
    w.told,
  );
}

/**
 * The slot given back: who to tell, the first waiting. One told at the give before that has not
 * asked since loses its place first: its run ended after it was told, or its id names a run that
 * no longer waits; were it kept first, every give would tell it and nobody else. Still waiting, it
 * asks at its next poll, and waits from the back.
 */
export function waiterToTell(w: SlotWaiters): { waiters: SlotWaiters; tell?: string } {
  const queue = w.told !== undefined ? w.queue.filter((x) => x !== w.told) : w.queue;
  const tell = queue[0];
  return { waiters: waiters(queue, tell), ...(tell !== undefined ? { tell } : {}) };
}

/** Its signal failed: the run has closed. */
export function waiterGone(w: SlotWaiters, id: string): SlotWaiters {
  return waiterTook(w, id);
}
