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
  const sinceMs = held?.holder === req.holder ? held.sinceMs : nowMs;
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

/** Between two asks of a held slot: 1, 2, 4, then every 5 s (each ask is one Update of the ledger). */
export function slotPollMs(asked: number): number {
  return Math.min(1000 * 2 ** asked, 5000);
}

/** The line `gpures ledger`, its page and a waiting start print. */
export function slotLine(slot: StartSlot, gpuRole: string, nowMs: number): string {
  return `start slot: ${slot.serve} is starting on ${gpuRole} since ${Math.max(0, Math.round((nowMs - slot.sinceMs) / 1000))} s`;
}
