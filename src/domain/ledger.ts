// Ledger arithmetic for one GPU: pure functions over a JSON-safe state, so the ledger workflow
// can carry the state across continue-as-new and the CLI can render a snapshot it received.
import type { ServeClass, SleepEviction } from './types';

/**
 * admitted: reservation held, container being brought up by its holder.
 * running: healthy and identity-verified; no operation under way.
 * stopping: a bring-down holds it while its tier drains and its container stops; still committed.
 * evicting: chosen as a victim; still holds its MiB until its stop is confirmed.
 * evicted: stopped for an acquirer; listed, not committed, until restored or released.
 * sleeping: put to sleep for an acquirer (vLLM's sleep mode); only its residual MiB stay committed,
 *   until it is woken (restored) or released.
 * pending: an acquirer waiting for its victims; its MiB are held so no one else takes them.
 * Entries leave the ledger when released.
 */
export type ReservationPhase = 'admitted' | 'running' | 'stopping' | 'evicting' | 'evicted' | 'sleeping' | 'pending';

/** Phases whose MiB count as committed. */
const COMMITTED: readonly ReservationPhase[] = ['admitted', 'running', 'stopping', 'evicting'];

export interface Reservation {
  serve: string;
  vramMib: number;
  class: ServeClass;
  phase: ReservationPhase;
  /**
   * The workflow run (`<workflow id>/<run id>`) that holds the reservation: the fencing token
   * every step that changes the serve's container must present (see `operationUnderWay`).
   */
  holder: string;
  /** For victims: the acquirer they make room for. */
  evictedFor?: string;
  /** For victims: the acquirer's run, which holds the victim while it is evicted. */
  evictedBy?: string;
  /** nvidia-smi's device delta when the serve came up, where measured. */
  measuredMib?: number;
  /**
   * The residency fields: recorded only for an admission whose request carried minResidencyS
   * (none before the setting existed), so a ledger's older decisions replay unchanged.
   * How the serve came up; only an acquisition or a restore is protected from eviction.
   */
  cameUpBy?: CameUpBy;
  /** Its min_residency_s when it was admitted. */
  minResidencyS?: number;
  /**
   * How it is evicted when it is: by sleeping at this level, keeping residualMib on the GPU
   * (absent: stopped). Recorded only for an admission whose request carried it.
   */
  sleep?: Pick<SleepEviction, 'level' | 'residualMib'>;
  /** While sleeping: the level it was put to sleep at (a level-1 sleep may have fallen back to 2). */
  sleptAtLevel?: 1 | 2;
  /** The ledger's workflow time (epoch ms) when it was first marked running. */
  runningSinceMs?: number;
  /**
   * What its admission found: the serve set aside (evicted, or asleep at a level). The server
   * answers a retried update from its first answer only within one run of the ledger; after a
   * continue-as-new the retry is recognised here and answered the same.
   */
  admittedFrom?: { evicted: true; asleepAt?: 1 | 2; asleepHeldMib?: number } & Pick<Reservation, 'evictedFor' | 'evictedBy'>;
  /** While a bring-down holds it: what the take answered (the phase and holder it took it from, its MiB, victims back to running), for a retry of the take. */
  takenFrom?: { phase: ReservationPhase; holder: string; vramMib: number; victimsRunning?: string[] };
  /** The bring-down that let go of it and gave the hold back: its let-go, retried after a continue-as-new, is answered the same. */
  letGoBy?: string;
}

/** A plain bring-up, an acquisition (with or without victims), or the restore of an evicted serve. */
export type CameUpBy = 'bring-up' | 'acquisition' | 'restore';

/** The GPU's start slot (src/domain/start-slot.ts): which run starts (or wakes) a serve on it now. */
export interface StartSlot {
  serve: string;
  /** The run that holds it (`<workflow id>/<run id>`), as a reservation's holder. */
  holder: string;
  /** The ledger's clock (epoch ms) when that run took it. */
  sinceMs: number;
  /** The holder's own start timeout: how long its start may take before it fails by itself. */
  startTimeoutS: number;
  /** What the holder does on the card: absent, a start (or wake). A stop frees memory, which fails another serve's profiling as much. */
  doing?: SlotWork;
  /**
   * How long the holder may hold it from `sinceMs`, where that is not its start timeout: a stop's
   * own timeout and its release check. Waiters count their bound from this. Absent: startTimeoutS.
   */
  holdS?: number;
}

/** What a start slot's holder does where it is not starting: a bring-down stopping its serve, an acquisition evicting for its start. */
export type SlotWork = 'stopping' | 'evicting';

export interface LedgerState {
  node: string;
  gpuRole: string;
  gpuUuid: string;
  capacityMib: number;
  reserveMib: number;
  /** Ordered by admission: the ledger prints in the order serves came up. */
  reservations: Reservation[];
  /** Only in a snapshot taken while a fresh ledger still reads the running containers: its figures are not the truth yet. */
  reconciling?: true;
  /**
   * A ledger started afresh that could not read the run it replaced (its history gone, no answer
   * within 10 s): why, and when it reconciled (the ledger's clock, epoch ms). Its restore links
   * may be missing. `told` once an operation's answer has carried it (its step log says it).
   */
  lostRunUnread?: LostRunUnread;
  /** The run starting (or waking) a serve on the GPU now: one cold start at a time (src/domain/start-slot.ts). */
  startSlot?: StartSlot;
}

export interface LostRunUnread {
  why: string;
  atMs: number;
  told?: true;
}

/** What the operator reads of a ledger that could not read the run it replaced (`gpures ledger`, the page, an operation's step). */
export function lostRunUnreadText(n: Pick<LostRunUnread, 'why' | 'atMs'>): string {
  return (
    `reconciled from the box alone at ${new Date(n.atMs).toISOString()}: the ledger run it replaced could not be read (${n.why}); ` +
    `a serve that run held evicted or asleep for an acquirer may be missing, or listed for no one (serves up NAME brings one back)`
  );
}

export interface AdmitRequest {
  serve: string;
  vramMib: number;
  class: ServeClass;
  holder: string;
  /** The serve's min_residency_s; absent from requests made before the setting existed. */
  minResidencyS?: number;
  /** How the serve is evicted, when by sleeping; absent from requests made before sleep mode existed. */
  sleep?: Pick<SleepEviction, 'level' | 'residualMib'>;
}

export type AdmitDecision =
  | { decision: 'admitted'; serve: string; vramMib: number; freeAfterMib: number }
  | { decision: 'already-held'; serve: string; phase: ReservationPhase; holder: string }
  | { decision: 'denied'; serve: string; vramMib: number; freeMib: number; shortfallMib: number };

export interface LedgerTotals {
  budgetMib: number;
  committedMib: number;
  /** MiB promised to acquirers whose victims are still draining. */
  heldMib: number;
  freeMib: number;
}

export function emptyLedger(node: string, gpu: { role: string; uuid: string; capacityMib: number; reserveMib: number }): LedgerState {
  return { node, gpuRole: gpu.role, gpuUuid: gpu.uuid, capacityMib: gpu.capacityMib, reserveMib: gpu.reserveMib, reservations: [] };
}

/** What a reservation commits now: its MiB in a committed phase, its residual while it sleeps, else none. */
export function committedMibOf(r: Reservation): number {
  if (COMMITTED.includes(r.phase)) return r.vramMib;
  return r.phase === 'sleeping' ? (r.sleep?.residualMib ?? 0) : 0;
}

/** What evicting it gives back: all of its MiB when stopped, all but the residual when put to sleep. */
export function freedByEviction(r: Pick<Reservation, 'vramMib' | 'sleep'>): number {
  return r.vramMib - (r.sleep?.residualMib ?? 0);
}

export function totals(state: LedgerState): LedgerTotals {
  const budgetMib = state.capacityMib - state.reserveMib;
  const committedMib = state.reservations.reduce((total, r) => total + committedMibOf(r), 0);
  const heldMib = state.reservations.filter((r) => r.phase === 'pending').reduce((total, r) => total + r.vramMib, 0);
  return { budgetMib, committedMib, heldMib, freeMib: budgetMib - committedMib - heldMib };
}

/**
 * Free MiB as a person reads them: never negative. While victims drain, an acquirer's held MiB and
 * its victims' still-committed MiB exceed the budget until the victims are stopped.
 */
export function freeText(t: Pick<LedgerTotals, 'freeMib' | 'heldMib'>, victims: readonly string[] = []): string {
  if (t.freeMib >= 0) return `free ${t.freeMib} MiB`;
  // Without an eviction under way the budget itself shrank (the manifest's reserve was raised).
  if (t.heldMib === 0) return `free 0 MiB (committed exceeds the budget by ${-t.freeMib} MiB)`;
  const until = victims.length ? `until ${victims.join(', ')} ${victims.length === 1 ? 'stops' : 'stop'}` : 'while victims drain';
  return `free 0 MiB (over budget by ${-t.freeMib} MiB ${until})`;
}

/** Any entry for the serve, evicted ones included. */
export function findReservation(state: LedgerState, serve: string): Reservation | undefined {
  return state.reservations.find((r) => r.serve === serve);
}

/** Put out of the way for an acquirer, stopped or asleep: the serve itself runs nothing. */
export function setAside(r: Pick<Reservation, 'phase'>): boolean {
  return r.phase === 'evicted' || r.phase === 'sleeping';
}

/** The serve's entry if it holds the serve now (an evicted or sleeping entry does not). */
export function activeReservation(state: LedgerState, serve: string): Reservation | undefined {
  return state.reservations.find((r) => r.serve === serve && !setAside(r));
}

/** What a serve's sleeping entry still holds on its GPU: a wake needs only the rest. None when it does not sleep. */
export function heldAsleepMib(state: LedgerState, serve: string): number {
  const r = findReservation(state, serve);
  return r?.phase === 'sleeping' ? committedMibOf(r) : 0;
}

/** Decide an admission without changing the state; `applyAdmit` commits an 'admitted' decision. */
export function decideAdmit(state: LedgerState, req: AdmitRequest): AdmitDecision {
  const held = activeReservation(state, req.serve);
  if (held) return { decision: 'already-held', serve: req.serve, phase: held.phase, holder: held.holder };
  const { freeMib } = totals(state);
  // Waking a sleeping serve needs only what its sleep gave back: its residual is still committed.
  const needMib = req.vramMib - heldAsleepMib(state, req.serve);
  if (needMib > freeMib) {
    return { decision: 'denied', serve: req.serve, vramMib: req.vramMib, freeMib, shortfallMib: needMib - Math.max(0, freeMib) };
  }
  return { decision: 'admitted', serve: req.serve, vramMib: req.vramMib, freeAfterMib: freeMib - needMib };
}

/** Commits an admission; a restored serve takes the place of its evicted (or sleeping) entry. */
export function applyAdmit(state: LedgerState, req: AdmitRequest, phase: ReservationPhase = 'admitted', cameUpBy: CameUpBy = 'bring-up'): LedgerState {
  const residency = req.minResidencyS !== undefined ? { cameUpBy, minResidencyS: req.minResidencyS } : {};
  // A sleeper woken is the process measured when it came up: its next eviction expects that back.
  const asleep = findReservation(state, req.serve);
  const measured = asleep?.phase === 'sleeping' && asleep.measuredMib !== undefined ? { measuredMib: asleep.measuredMib } : {};
  const from = admittedFromOf(asleep);
  return {
    ...state,
    reservations: [
      ...state.reservations.filter((r) => r.serve !== req.serve),
      {
        serve: req.serve,
        vramMib: req.vramMib,
        class: req.class,
        phase,
        holder: req.holder,
        ...residency,
        ...measured,
        ...(req.sleep ? { sleep: { level: req.sleep.level, residualMib: req.sleep.residualMib } } : {}),
        ...(from ? { admittedFrom: from } : {}),
      },
    ],
  };
}

/** What an admission finds the serve as: set aside (evicted, or asleep at the level it was put to sleep at; 2 when not known), or nothing. */
export function admittedFromOf(before: Reservation | undefined): Reservation['admittedFrom'] {
  if (!before || !setAside(before)) return undefined;
  // Asleep, what it was held at (its residual, or more when seen to keep more): its process keeps that until it wakes or stops.
  if (before.phase !== 'sleeping') return { evicted: true };
  // For whom it slept too: a restore that ends before its wake puts it back as it was (backAsleep).
  const link = {
    ...(before.evictedFor !== undefined ? { evictedFor: before.evictedFor } : {}),
    ...(before.evictedBy !== undefined ? { evictedBy: before.evictedBy } : {}),
  };
  return { evicted: true, asleepAt: before.sleptAtLevel ?? 2, asleepHeldMib: committedMibOf(before), ...link };
}

/**
 * A restore of a sleeper that ended before its wake touched it (cancelled, or refused, while it
 * waited for the start slot): the serve sleeps on, so its entry goes back to what its admission
 * found, asleep at its level, holding what it held asleep, for the acquirer it slept for. None
 * where the admission found no sleeper.
 */
export function backAsleep(state: LedgerState, serve: string): LedgerState | undefined {
  const r = findReservation(state, serve);
  const from = r?.phase === 'admitted' ? r.admittedFrom : undefined;
  if (!r || from?.asleepAt === undefined || !r.sleep) return undefined;
  const asleep: Reservation = {
    ...r,
    phase: 'sleeping',
    sleptAtLevel: from.asleepAt,
    sleep: { ...r.sleep, residualMib: from.asleepHeldMib ?? r.sleep.residualMib },
    ...(from.evictedFor !== undefined ? { evictedFor: from.evictedFor } : {}),
    ...(from.evictedBy !== undefined ? { evictedBy: from.evictedBy } : {}),
  };
  delete asleep.admittedFrom;
  return { ...state, reservations: state.reservations.map((x) => (x.serve === serve ? asleep : x)) };
}

/**
 * `atMs`, the ledger's clock: a reservation with a residency records when it first became
 * running (a retried setPhase, or an eviction given up, does not restart its window). `holder`:
 * the run that holds it from now on, where it changes hands.
 */
export function withPhase(state: LedgerState, serve: string, phase: ReservationPhase, measuredMib?: number, atMs?: number, holder?: string): LedgerState {
  const since = (r: Reservation) =>
    phase === 'running' && atMs !== undefined && r.minResidencyS !== undefined && r.runningSinceMs === undefined ? { runningSinceMs: atMs } : {};
  return {
    ...state,
    reservations: state.reservations.map((r) => {
      if (r.serve !== serve) return r;
      const next: Reservation = {
        ...r,
        phase,
        ...(measuredMib !== undefined ? { measuredMib } : {}),
        ...since(r),
      };
      // What a bring-down's take found is only for a retry of that take, while it holds the serve;
      // what an admission found, for a retry of it, which cannot come once the serve runs.
      delete next.takenFrom;
      delete next.letGoBy;
      if (holder !== undefined && holder !== r.holder) {
        next.holder = holder;
        next.letGoBy = r.holder;
      }
      if (phase === 'running') delete next.admittedFrom;
      return next;
    }),
  };
}

/** The reservation in a new phase, no longer part of an eviction (as victim of whom, for whom). */
export function outOfEviction(r: Reservation, phase: ReservationPhase, holder = r.holder): Reservation {
  const next: Reservation = { ...r, phase, holder };
  delete next.evictedFor;
  delete next.evictedBy;
  return next;
}

export function withoutReservation(state: LedgerState, serve: string): LedgerState {
  return { ...state, reservations: state.reservations.filter((r) => r.serve !== serve) };
}

/** The operator-facing denial, worded as in the field reports. */
export function denialMessage(d: Extract<AdmitDecision, { decision: 'denied' }>): string {
  return `serves up ${d.serve} denied: over budget by ${d.shortfallMib} MiB, nothing started`;
}

/** The victims an acquirer waits for: the reservations being evicted for it. */
export function victimsOf(state: LedgerState, acquirer: string): Reservation[] {
  return state.reservations.filter((r) => r.phase === 'evicting' && r.evictedFor === acquirer);
}

/**
 * The serves the runs named (acquisitions, by their fencing tokens) left set aside, stopped or
 * asleep: an acquisition that ended before its hand-over leaves its victims as its stops left them.
 */
export function setAsideBy(state: LedgerState, runs: readonly string[]): Reservation[] {
  return state.reservations.filter((r) => setAside(r) && r.evictedBy !== undefined && runs.includes(r.evictedBy));
}

/** A reservation's phase in the operator's words, as `gpures ledger` and `serves status` both print it (`evicted for big`). */
export function phaseLabel(state: LedgerState, r: Reservation): string {
  switch (r.phase) {
    case 'admitted':
      return 'starting';
    case 'evicting':
      return `evicting for ${r.evictedFor ?? '?'}`;
    case 'evicted':
      return r.evictedFor ? `evicted for ${r.evictedFor}` : 'evicted';
    case 'sleeping':
      return `sleeping${r.sleptAtLevel ? ` at level ${r.sleptAtLevel}` : ''}${r.evictedFor ? ` for ${r.evictedFor}` : ''}, ${committedMibOf(r)} MiB held`;
    case 'pending': {
      const victims = victimsOf(state, r.serve).map((v) => v.serve);
      return victims.length ? `waiting for victims ${victims.join(', ')}` : 'waiting for victims';
    }
    default:
      return r.phase;
  }
}

/**
 * The MiB held for acquirers, and for whom. While victims drain, the acquirer's MiB are promised
 * on paper before the victims' are given back, so free can fall below zero: the text says how far
 * and until what, and never prints a negative free.
 */
function heldAndFree(state: LedgerState, t: LedgerTotals): string {
  const pending = state.reservations.filter((r) => r.phase === 'pending');
  const held = t.heldMib > 0 ? `, held ${t.heldMib} MiB for ${pending.map((r) => r.serve).join(', ')}` : '';
  return `${held}, ${ledgerFreeText(state, t)}`;
}

/** The ledger's free MiB as its text says them, the victims its acquirers wait for named. */
export function ledgerFreeText(state: LedgerState, t: LedgerTotals = totals(state)): string {
  const pending = state.reservations.filter((r) => r.phase === 'pending');
  return freeText(
    t,
    pending.flatMap((r) => victimsOf(state, r.serve).map((v) => v.serve)),
  );
}

/** What the slot's holder is doing, as its lines say it. */
export function slotWorkText(s: Pick<StartSlot, 'doing'>): string {
  return s.doing === 'evicting' ? 'evicting to start' : (s.doing ?? 'starting');
}

/** The GPU's start slot as `gpures ledger`, its page and an operation's ledger lines print it. */
export function startSlotText(s: StartSlot): string {
  return `start slot: ${s.serve} is ${slotWorkText(s)} (${s.holder}) since ${new Date(s.sinceMs).toISOString()}`;
}

/**
 * What a set-aside entry's line adds so the lines add up to the header: an evicted serve keeps its
 * declared MiB on its line for its restore, none of them committed; a sleeping one its residual.
 */
function uncountedText(r: Reservation): string {
  if (r.phase === 'evicted') return ': not committed';
  return r.phase === 'sleeping' ? `: ${committedMibOf(r)} MiB of it committed` : '';
}

/** Renders the ledger as the field reports print it, set-aside entries marked as not (fully) committed. */
export function formatLedger(state: LedgerState): string[] {
  const t = totals(state);
  return [
    `gpu_role '${state.gpuRole}': capacity ${state.capacityMib} MiB, reserve ${state.reserveMib} MiB, committed ${t.committedMib} MiB${heldAndFree(state, t)}`,
    ...state.reservations.map((r) => `  ${r.serve} ${r.vramMib} MiB (${r.class}, ${phaseLabel(state, r)})${uncountedText(r)}`),
    ...(state.lostRunUnread ? [`note: ${lostRunUnreadText(state.lostRunUnread)}`] : []),
    ...(state.startSlot ? [startSlotText(state.startSlot)] : []),
  ];
}
