// One cold start at a time per GPU (FIELD.md §2 item 15, §4 item 8): vLLM profiles the card's free
// memory while it starts, and another process allocating or freeing on the card meanwhile fails
// that check ("Error in memory profiling. Initial free memory …, current free memory …") or makes
// a whole-GPU measured delta count the other start's MiB. The ledger holds the GPU's start slot:
// which run starts (or wakes) a serve on it now. PURE: the ledger workflow imports it.
import { BOUNDS } from './bounds';
import { slotWorkText } from './ledger';
import type { LedgerState, SlotWork, StartSlot } from './ledger';

export type { SlotWork, StartSlot } from './ledger';

export interface StartSlotRequest {
  serve: string;
  holder: string;
  /** true: take it (a retry by its holder is answered taken again); false: give it back (only its holder's give does). */
  take: boolean;
  /** With take: the serve's start_timeout_s, which bounds how long another start waits for this one. */
  startTimeoutS?: number;
  /** With take: a holder the caller saw ended (its run closed): its slot is taken over. */
  takeOverFrom?: string;
  /**
   * With take, by its holder: the slot's since is now, and its start timeout this one. A wake that
   * falls back to a cold start starts its timeout again: the waiters' bound, counted from since,
   * would otherwise run out while the holder works as it should (a wake, a stop, then a cold start).
   */
  renew?: boolean;
  /** With take: what the holder does, where it is not a start (a bring-down's stop). */
  doing?: SlotWork;
  /** With take: how long it may hold the slot, where that is not its start timeout (a stop's timeout and release check). */
  holdS?: number;
  /** With take: the asker's workflow id, signalled (startSlotFreed) when the slot it was refused is given back. */
  wake?: string;
}

export type StartSlotDecision = { taken: true } | { taken: false; heldBy?: StartSlot };

/** Past the holder's own start timeout, this much more is waited (its container's create, its compensation's removal). */
export const SLOT_MARGIN_S = 120;
/** Never waited longer than this for another start, whatever its timeout says. */
export const SLOT_WAIT_CAP_S = 1800;

/** The decision and the state after it. A give of a slot another run holds changes nothing. */
export function decideStartSlot(state: LedgerState, req: StartSlotRequest, nowMs: number): { decision: StartSlotDecision; state: LedgerState } {
  const held = state.startSlot;
  if (!req.take) {
    if (held?.holder !== req.holder) return { decision: { taken: false, ...(held ? { heldBy: held } : {}) }, state };
    return { decision: { taken: false }, state: slotAfter(state, { step: 'give', holder: req.holder }) };
  }
  if (held && held.holder !== req.holder && held.holder !== req.takeOverFrom) return { decision: { taken: false, heldBy: held }, state };
  const sinceMs = held?.holder === req.holder && !req.renew ? held.sinceMs : nowMs;
  const slot: StartSlot = {
    serve: req.serve,
    holder: req.holder,
    sinceMs,
    startTimeoutS: req.startTimeoutS ?? 0,
    ...(req.doing ? { doing: req.doing } : {}),
    ...(req.holdS !== undefined ? { holdS: req.holdS } : {}),
  };
  return { decision: { taken: true }, state: { ...state, startSlot: slot } };
}

/**
 * A ledger step that may end the run holding the GPU's start slot. Every way a holder ends, each
 * of which frees the slot (one rule, so a new way is added here and not missed, as a take-over was):
 * - `give`: its own give (startSlot, take false): a start measured, a stop's release seen, a run
 *   compensated (the saga's give, since stop-takes-slot);
 * - `release`: any release it asks: its serve's (a bring-down's release is its give), or a
 *   compensation's of a serve another run holds by now;
 * - `abortEviction`: its eviction's abort, a failed acquisition's compensation, never a release;
 * - `beginStop` taken over from it (takeOverFrom): a bring-down took its serve over, its caller
 *   having seen the run end (behind take-over-frees-slot: the ledger asks only where this frees it).
 * Not one: a take naming it in takeOverFrom, which hands the slot to the taker (decideStartSlot),
 * and a fresh ledger's reconcile, which carries a lost run's slot while its holder runs. Nor is
 * the rule "the holder has left the ledger's records": a reconciled ledger's reservations name the
 * runs that started its running containers, never a stop's or an eviction's holder whose slot it
 * carries, and a restore's release that puts its sleeper back asleep keeps its reservation.
 */
export type HolderEnd =
  { step: 'give' | 'release' | 'abortEviction'; holder: string | undefined } | { step: 'beginStop'; taken: boolean; takeOverFrom: string | undefined };

/** The run `end` ends, if any (a step without a holder is a run's from before fencing: it ends none). */
function endedHolder(end: HolderEnd): string | undefined {
  return end.step === 'beginStop' ? (end.taken ? end.takeOverFrom : undefined) : end.holder;
}

/** The state after `end`: without its slot where the run it ends holds it, else the same state. */
export function slotAfter(state: LedgerState, end: HolderEnd): LedgerState {
  const holder = endedHolder(end);
  return holder !== undefined && state.startSlot?.holder === holder ? withoutStartSlot(state) : state;
}

function withoutStartSlot(state: LedgerState): LedgerState {
  const next = { ...state };
  delete next.startSlot;
  return next;
}

/** How long the holder may hold the slot by its own bounds: a stop's, or its start timeout. */
export function slotHoldS(slot: Pick<StartSlot, 'startTimeoutS' | 'holdS'>): number {
  return slot.holdS ?? slot.startTimeoutS;
}

/** How long a start (or stop) waits for the slot's holder, from when it took it: what the holder may take plus the margin, capped. */
export function slotWaitBoundMs(slot: Pick<StartSlot, 'startTimeoutS' | 'holdS'>): number {
  return Math.min(slotHoldS(slot) + SLOT_MARGIN_S, SLOT_WAIT_CAP_S) * 1000;
}

/** What an acquisition's hold of the slot may take by the bounds it runs under. */
export interface EvictionHoldBounds {
  /** Each victim's stop timeout, and whether it is put to sleep first (a sleep that gives up is followed by a stop). */
  victims: { stopTimeoutS: number; sleeps: boolean }[];
  drainTimeoutS: number;
  releaseTimeoutS: number;
  sleepTimeoutS: number;
  /** A stop activity's bound past the serve's stop timeout. */
  stopMarginS: number;
  /** The acquirer's own start timeout (its health wait). */
  startTimeoutS: number;
}

/**
 * How long an acquisition may hold the slot, taken before its first victim's stop: every victim's
 * stop (and sleep) with its release check, the drain of each victim after the first (its quiesce
 * and drain run while the slot is held), and its own start. A waiter adds SLOT_MARGIN_S and the cap.
 */
export function evictionHoldS(b: EvictionHoldBounds): number {
  const victims = b.victims.reduce(
    (sum, v, i) =>
      sum + v.stopTimeoutS + b.stopMarginS + b.releaseTimeoutS + (v.sleeps ? b.sleepTimeoutS + b.releaseTimeoutS : 0) + (i > 0 ? b.drainTimeoutS : 0),
    0,
  );
  return Math.min(victims + b.startTimeoutS, BOUNDS.holdS.max);
}

/**
 * The ledger Update's id of a run's take or give: each distinct per ask (`ask`, the run's count of
 * its asks so far), so a second take-and-give in one run is not answered from the first one's
 * (the server dedupes an Update by its id within a ledger run).
 */
export function slotUpdateId(holder: string, ask: number, take: boolean): string {
  return take ? `${holder}/start-slot/${ask}` : `${holder}/start-slot/give/${ask}`;
}

/** Between two asks of a held slot: 1, 2, 4, then every 5 s (each ask is one Update of the ledger). */
export function slotPollMs(asked: number): number {
  return Math.min(1000 * 2 ** asked, 5000);
}

/** The line `gpures ledger`, its page and a waiting start print. */
export function slotLine(slot: StartSlot, gpuRole: string, nowMs: number): string {
  return `start slot: ${slot.serve} is ${slotWorkText(slot)} on ${gpuRole} since ${Math.max(0, Math.round((nowMs - slot.sinceMs) / 1000))} s`;
}
