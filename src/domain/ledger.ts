// Ledger arithmetic for one GPU: pure functions over a JSON-safe state, so the ledger workflow
// can carry the state across continue-as-new and the CLI can render a snapshot it received.
import type { ServeClass } from './types';

/**
 * admitted: reservation held, container being brought up.
 * running: healthy and identity-verified.
 * Entries leave the ledger when released.
 */
export type ReservationPhase = 'admitted' | 'running';

export interface Reservation {
  serve: string;
  vramMib: number;
  class: ServeClass;
  phase: ReservationPhase;
  /** Workflow that holds the reservation, so a retry from the same holder is recognised. */
  holder: string;
}

export interface LedgerState {
  node: string;
  gpuRole: string;
  gpuUuid: string;
  capacityMib: number;
  reserveMib: number;
  /** Ordered by admission: the ledger prints in the order serves came up. */
  reservations: Reservation[];
}

export interface AdmitRequest {
  serve: string;
  vramMib: number;
  class: ServeClass;
  holder: string;
}

export type AdmitDecision =
  | { decision: 'admitted'; serve: string; vramMib: number; freeAfterMib: number }
  | { decision: 'already-held'; serve: string; phase: ReservationPhase; holder: string }
  | { decision: 'denied'; serve: string; vramMib: number; freeMib: number; shortfallMib: number };

export interface LedgerTotals {
  budgetMib: number;
  committedMib: number;
  freeMib: number;
}

export function emptyLedger(node: string, gpu: { role: string; uuid: string; capacityMib: number; reserveMib: number }): LedgerState {
  return { node, gpuRole: gpu.role, gpuUuid: gpu.uuid, capacityMib: gpu.capacityMib, reserveMib: gpu.reserveMib, reservations: [] };
}

export function totals(state: LedgerState): LedgerTotals {
  const budgetMib = state.capacityMib - state.reserveMib;
  const committedMib = state.reservations.reduce((sum, r) => sum + r.vramMib, 0);
  return { budgetMib, committedMib, freeMib: budgetMib - committedMib };
}

export function findReservation(state: LedgerState, serve: string): Reservation | undefined {
  return state.reservations.find((r) => r.serve === serve);
}

/** Decide an admission without changing the state; `applyAdmit` commits an 'admitted' decision. */
export function decideAdmit(state: LedgerState, req: AdmitRequest): AdmitDecision {
  const held = findReservation(state, req.serve);
  if (held) return { decision: 'already-held', serve: req.serve, phase: held.phase, holder: held.holder };
  const { freeMib } = totals(state);
  if (req.vramMib > freeMib) {
    return { decision: 'denied', serve: req.serve, vramMib: req.vramMib, freeMib, shortfallMib: req.vramMib - freeMib };
  }
  return { decision: 'admitted', serve: req.serve, vramMib: req.vramMib, freeAfterMib: freeMib - req.vramMib };
}

export function applyAdmit(state: LedgerState, req: AdmitRequest): LedgerState {
  return {
    ...state,
    reservations: [...state.reservations, { serve: req.serve, vramMib: req.vramMib, class: req.class, phase: 'admitted', holder: req.holder }],
  };
}

export function withPhase(state: LedgerState, serve: string, phase: ReservationPhase): LedgerState {
  return { ...state, reservations: state.reservations.map((r) => (r.serve === serve ? { ...r, phase } : r)) };
}

export function withoutReservation(state: LedgerState, serve: string): LedgerState {
  return { ...state, reservations: state.reservations.filter((r) => r.serve !== serve) };
}

/** The operator-facing denial, worded as in the field reports. */
export function denialMessage(d: Extract<AdmitDecision, { decision: 'denied' }>): string {
  return `serves up ${d.serve} denied: over budget by ${d.shortfallMib} MiB, nothing started`;
}

/** Renders the ledger exactly as the field reports print it. */
export function formatLedger(state: LedgerState): string[] {
  const t = totals(state);
  return [
    `gpu_role '${state.gpuRole}': capacity ${state.capacityMib} MiB, reserve ${state.reserveMib} MiB, committed ${t.committedMib} MiB, free ${t.freeMib} MiB`,
    ...state.reservations.map((r) => `  ${r.serve} ${r.vramMib} MiB (${r.class}, ${r.phase === 'admitted' ? 'starting' : r.phase})`),
  ];
}
