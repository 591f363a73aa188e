// Victim planning and the hand-over of freed MiB to an acquirer. Pure over LedgerState, so the
// ledger workflow's decisions replay exactly and the tie-break is testable on its own.
import type { AdmitRequest, LedgerState, Reservation } from './ledger';
import { applyAdmit, freedByEviction, outOfEviction, totals, victimsOf } from './ledger';

export interface Victim {
  serve: string;
  vramMib: number;
  /** What nvidia-smi saw it take at bring-up, where measured: what its stop should give back. */
  measuredMib?: number;
  /** Evicted by sleeping at this level, keeping residualMib on the GPU; absent: stopped. */
  sleep?: { level: 1 | 2; residualMib: number };
}

/** A running evictable serve inside its minimum residency: not a victim until it ends. */
export interface ResidencyWindow {
  serve: string;
  cameUpBy: 'acquisition' | 'restore';
  /** The ledger's workflow time when it became running. */
  runningSinceMs: number;
  minResidencyS: number;
  /** Whole seconds, rounded down: with evictableInS (rounded up) they add up to minResidencyS. */
  runningForS: number;
  evictableInS: number;
}

export type EvictionPlan =
  | { kind: 'fits' }
  | { kind: 'evict'; victims: Victim[]; shortfallMib: number; reason: string }
  | { kind: 'impossible'; shortfallMib: number; evictableMib: number }
  /**
   * The evictable serves would cover the shortfall, but not without one inside its minimum
   * residency. `windows`: every such serve, the first to end first; retryAfterS: until that end.
   */
  | { kind: 'resident'; shortfallMib: number; evictableMib: number; windows: ResidencyWindow[]; retryAfterS: number };

/** Beyond this many candidates, subsets are not enumerated; a GPU never runs that many evictables. */
const MAX_ENUMERATED = 16;

/**
 * What a victim's stop gives back on the card: what it was seen to take when it came up, else its
 * reservation (`vramMib`, as the acquisition resolves it): one reserved with headroom gives back
 * less than it reserved.
 */
export function victimTookMib(v: Pick<Victim, 'measuredMib'>, vramMib: number): number {
  return Math.min(v.measuredMib ?? vramMib, vramMib);
}

/** A reservation as a victim: what the eviction needs to know of it. */
export function toVictim(r: Reservation): Victim {
  return {
    serve: r.serve,
    vramMib: r.vramMib,
    ...(r.measuredMib !== undefined ? { measuredMib: r.measuredMib } : {}),
    ...(r.sleep ? { sleep: { level: r.sleep.level, residualMib: r.sleep.residualMib } } : {}),
  };
}

/**
 * The window a reservation is inside at `nowMs`, if any. A plain bring-up has none: what came up
 * by hand may be taken again at once (field report T013 evicts vision right after its bring-up).
 * The window ends at runningSinceMs + minResidencyS: from that instant on it may be evicted.
 */
export function residencyWindow(r: Reservation, nowMs: number): ResidencyWindow | undefined {
  const { cameUpBy, minResidencyS, runningSinceMs } = r;
  if ((cameUpBy !== 'acquisition' && cameUpBy !== 'restore') || minResidencyS === undefined || runningSinceMs === undefined) return undefined;
  const endsAtMs = runningSinceMs + minResidencyS * 1000;
  if (nowMs >= endsAtMs) return undefined;
  const runningForS = Math.max(0, Math.floor((nowMs - runningSinceMs) / 1000));
  return { serve: r.serve, cameUpBy, runningSinceMs, minResidencyS, runningForS, evictableInS: Math.ceil((endsAtMs - nowMs) / 1000) };
}

/**
 * The smallest set of running evictable serves on this GPU whose MiB cover the shortfall, none
 * of them inside its minimum residency at `nowMs` (the ledger's workflow time; without it, as in
 * a what-if, every window counts as ended).
 * Tie-break, in order: fewest victims; then the least MiB evicted (take no more than needed);
 * then the most recently admitted (the one that has served least since it came up); then name.
 */
export function planEviction(state: LedgerState, vramMib: number, nowMs?: number): EvictionPlan {
  const { freeMib } = totals(state);
  if (vramMib <= freeMib) return { kind: 'fits' };
  const shortfallMib = vramMib - Math.max(0, freeMib);
  const order = new Map(state.reservations.map((r, i) => [r.serve, i]));
  const evictable = state.reservations.filter((r) => r.class === 'evictable' && r.phase === 'running');
  // A victim put to sleep gives back all but its residual.
  const freed = (set: readonly Reservation[]) => set.reduce((s, r) => s + freedByEviction(r), 0);
  const evictableMib = freed(evictable);
  if (evictableMib < shortfallMib) return { kind: 'impossible', shortfallMib, evictableMib };
  const windows = nowMs === undefined ? [] : evictable.flatMap((r) => residencyWindow(r, nowMs) ?? []);
  const candidates = evictable.filter((r) => !windows.some((w) => w.serve === r.serve));
  if (freed(candidates) < shortfallMib) {
    windows.sort((a, b) => a.evictableInS - b.evictableInS || a.serve.localeCompare(b.serve));
    return { kind: 'resident', shortfallMib, evictableMib, windows, retryAfterS: windows[0]?.evictableInS ?? 0 };
  }

  let best: Reservation[] | undefined;
  const better = (a: Reservation[], b: Reservation[]): boolean => {
    if (a.length !== b.length) return a.length < b.length;
    const ma = freed(a);
    const mb = freed(b);
    if (ma !== mb) return ma < mb;
    const recency = (set: Reservation[]) => -Math.max(...set.map((r) => order.get(r.serve) ?? 0));
    if (recency(a) !== recency(b)) return recency(a) < recency(b);
    return (
      a
        .map((r) => r.serve)
        .sort()
        .join(',') <
      b
        .map((r) => r.serve)
        .sort()
        .join(',')
    );
  };
  if (candidates.length <= MAX_ENUMERATED) {
    for (let mask = 1; mask < 1 << candidates.length; mask++) {
      const set = candidates.filter((_, i) => mask & (1 << i));
      if (freed(set) >= shortfallMib && (!best || better(set, best))) best = set;
    }
  } else {
    // Largest first reaches the shortfall in the fewest victims.
    best = [];
    for (const r of [...candidates].sort((a, b) => freedByEviction(b) - freedByEviction(a))) {
      if (freed(best) >= shortfallMib) break;
      best.push(r);
    }
  }
  const victims = (best ?? []).map(toVictim);
  const reason =
    `short by ${shortfallMib} MiB; ${victims.map((v) => `${v.serve} (${v.sleep ? `${freedByEviction(v)} of ${v.vramMib} MiB by sleeping` : `${v.vramMib} MiB`})`).join(' + ')} ` +
    `is the smallest set of running evictable serves that covers it (of ${candidates.length} evictable)` +
    (windows.length ? `; ${windows.map((w) => w.serve).join(', ')} kept: inside ${windows.length > 1 ? 'their' : 'its'} minimum residency` : '');
  return { kind: 'evict', victims, shortfallMib, reason };
}

/** Marks the victims evicting and holds the acquirer's MiB as pending, in one step. */
export function applyEvictionPlan(state: LedgerState, req: AdmitRequest, victims: Victim[]): LedgerState {
  const names = new Set(victims.map((v) => v.serve));
  const marked: LedgerState = {
    ...state,
    reservations: state.reservations.map((r) => (names.has(r.serve) ? { ...r, phase: 'evicting', evictedFor: req.serve, evictedBy: req.holder } : r)),
  };
  return applyAdmit(marked, req, 'pending', 'acquisition');
}

/**
 * A victim's stop (or sleep, at `asleepAt`) is confirmed: it stops counting, but for a sleeping
 * victim's residual (the one seen, when above the declared). Once no victim of the acquirer is still evicting, the acquirer's held MiB
 * become its admitted reservation.
 */
export function applyVictimReleased(state: LedgerState, victim: string, acquirer: string, asleepAt?: 1 | 2, residualSeenMib?: number): LedgerState {
  // A sleeper seen to keep more than it declared holds what it keeps.
  const setAside = (r: Reservation): Reservation =>
    asleepAt !== undefined ? { ...r, phase: 'sleeping', sleptAtLevel: asleepAt, ...holdingAsleep(r, residualSeenMib) } : { ...r, phase: 'evicted' };
  const reservations = state.reservations.map((r) => (r.serve === victim && r.phase === 'evicting' ? setAside(r) : r));
  const waiting = reservations.some((r) => r.phase === 'evicting' && r.evictedFor === acquirer);
  return {
    ...state,
    reservations: waiting ? reservations : reservations.map((r) => (r.serve === acquirer && r.phase === 'pending' ? { ...r, phase: 'admitted' as const } : r)),
  };
}

/** A sleeper's residual raised to `mib` when that is more than it declared, never past its reservation. */
function holdingAsleep(r: Reservation, mib: number | undefined): Partial<Reservation> {
  return r.sleep && mib !== undefined && mib > r.sleep.residualMib ? { sleep: { ...r.sleep, residualMib: Math.min(mib, r.vramMib) } } : {};
}

/**
 * An acquisition gave up: victims already stopped stay evicted, those already asleep stay
 * sleeping (`slept`, by the level they sleep at), the others return to running, and the
 * acquirer's held or admitted MiB are let go. A sleeper whose VRAM was not seen back holds what
 * `holding` says (its whole reservation, at most), not the residual it declared: vLLM's sleep leaks.
 */
export function applyEvictionAborted(
  state: LedgerState,
  acquirer: string,
  stopped: string[] = [],
  slept: Record<string, 1 | 2> = {},
  holding: Record<string, number> = {},
): LedgerState {
  const kept = (r: Reservation) => holdingAsleep(r, Object.hasOwn(holding, r.serve) ? holding[r.serve] : undefined);
  return {
    ...state,
    reservations: state.reservations
      .filter((r) => !(r.serve === acquirer && (r.phase === 'pending' || r.phase === 'admitted')))
      .map((r) => {
        if (r.phase !== 'evicting' || r.evictedFor !== acquirer) return r;
        const level = Object.hasOwn(slept, r.serve) ? slept[r.serve] : undefined;
        if (level !== undefined) return { ...r, phase: 'sleeping' as const, sleptAtLevel: level, ...kept(r) };
        return stopped.includes(r.serve) ? { ...r, phase: 'evicted' as const } : outOfEviction(r, 'running');
      }),
  };
}

/** MiB held for an acquirer while its victims drain: taken on paper, not free for anyone else. */
export interface HeldFor {
  serve: string;
  vramMib: number;
  /** The acquirer's run (its fencing token). */
  holder: string;
  victims: string[];
}

export function heldForAcquirers(state: LedgerState): HeldFor[] {
  return state.reservations
    .filter((r) => r.phase === 'pending')
    .map((r) => ({
      serve: r.serve,
      vramMib: r.vramMib,
      holder: r.holder,
      victims: victimsOf(state, r.serve).map((v) => v.serve),
    }));
}

/**
 * What eviction could do for a denied request, told with the denial and never acted on:
 * `--evict` would evict these; or it could not, because of residency windows or too few
 * evictable MiB (and whose eviction holds the rest).
 */
export type EvictionOutlook =
  { kind: 'would-evict'; victims: Victim[] } | { kind: 'resident'; windows: ResidencyWindow[] } | { kind: 'short'; evictableMib: number; held: HeldFor[] };

export function evictionOutlook(state: LedgerState, vramMib: number, nowMs?: number): EvictionOutlook {
  const plan = planEviction(state, vramMib, nowMs);
  if (plan.kind === 'evict') return { kind: 'would-evict', victims: plan.victims };
  if (plan.kind === 'resident') return { kind: 'resident', windows: plan.windows };
  return { kind: 'short', evictableMib: plan.kind === 'impossible' ? plan.evictableMib : 0, held: heldForAcquirers(state) };
}
