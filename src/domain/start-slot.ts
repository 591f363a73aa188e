// One cold start at a time per GPU (FIELD.md §2 item 15, §4 item 8): vLLM profiles the card's free
// memory while it starts, and another process allocating or freeing on the card meanwhile fails
// that check ("Error in memory profiling. Initial free memory …, current free memory …") or makes
// a whole-GPU measured delta count the other start's MiB. The ledger holds the GPU's start slot:
// which run starts (or wakes) a serve on it now. PURE: the ledger workflow imports it.
import type { LedgerState, StartSlot } from './ledger';

export type { StartSlot } from './ledger';

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
    return { decision: { taken: false }, state: withoutStartSlot(state) };
  }
  if (held && held.holder !== req.holder && held.holder !== req.takeOverFrom) return { decision: { taken: false, heldBy: held }, state };
  const sinceMs = held?.holder === req.holder && !req.renew ? held.sinceMs : nowMs;
  const slot: StartSlot = { serve: req.serve, holder: req.holder, sinceMs, startTimeoutS: req.startTimeoutS ?? 0 };
  return { decision: { taken: true }, state: { ...state, startSlot: slot } };
}

/** The state without its slot when `holder` holds it (a release by the run gives its slot back too). */
export function slotGivenBy(state: LedgerState, holder: string | undefined): LedgerState {
  return holder !== undefined && state.startSlot?.holder === holder ? withoutStartSlot(state) : state;
}

function withoutStartSlot(state: LedgerState): LedgerState {
  const next = { ...state };
  delete next.startSlot;
  return next;
}

/** How long a start waits for the slot's holder, from when it took it: its start timeout plus the margin, capped. */
export function slotWaitBoundMs(slot: Pick<StartSlot, 'startTimeoutS'>): number {
  return Math.min(slot.startTimeoutS + SLOT_MARGIN_S, SLOT_WAIT_CAP_S) * 1000;
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
  return `start slot: ${slot.serve} is starting on ${gpuRole} since ${Math.max(0, Math.round((nowMs - slot.sinceMs) / 1000))} s`;
}
