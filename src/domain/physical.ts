// The physical truth beside the ledger (the field report's honesty note): what nvidia-smi says
// the device uses, and how much of it no reservation accounts for.
import type { LedgerState, Reservation, ReservationPhase } from './ledger';
import { committedMibOf, freedByEviction } from './ledger';

/**
 * A reading that records the GPU where it cannot be moving may be this old: the stream's latest
 * block then serves it at once instead of the next one (half an interval, 50 ms at the default
 * 100). Before a drain the victim holds its VRAM; a serve measured after health took its memory
 * before /health answered (vLLM allocates weights and KV cache before its API server starts); the
 * preflight and `gpures ledger` show the GPU as it is. A reading that decides or follows a change
 * is queried after it is asked for: the baseline before a start, the room for a wake (a stop just
 * before frees memory with a lag), the wait for freed VRAM after a stop. 250 ms is Ollama's own
 * VRAM poll.
 */
export const RECENT_READING_MS = 250;

export interface DeviceReading {
  uuid: string;
  totalMib: number;
  usedMib: number;
}

type FluxPhase = 'starting' | 'stopping' | 'evicting';

/** The phases whose serve's memory is growing or shrinking now, as a reading says them. */
const FLUX: Partial<Record<ReservationPhase, FluxPhase>> = { admitted: 'starting', stopping: 'stopping', evicting: 'evicting' };

export interface PhysicalTruth {
  usedMib: number;
  totalMib: number;
  /** Held by running serves according to their reservations (a sleeping one: its residual). */
  servesMib: number;
  /** Device used minus what the running serves hold: display, sidecars, leaks, and whatever a serve in flux holds now. */
  nonLedgerDrawMib: number;
  /**
   * Serves starting (admitted), stopping or being evicted: each holds between none and all of its
   * reservation right now, so up to their MiB of the draw above may be theirs.
   */
  inFlux: { serve: string; phase: FluxPhase; vramMib: number }[];
  /** The draw with every serve in flux taken at its whole reservation: what the draw is at least. */
  nonLedgerDrawMinMib: number;
  /** How much of the draw may be the serves in flux: their reservations, never more than the draw itself. */
  fluxShareMib: number;
  reserveMib: number;
  /** True when the draw is sure to exceed the reserve (even at its least), i.e. the ledger's free figure is optimistic. */
  optimistic: boolean;
}

export function physicalTruth(ledger: LedgerState, reading: DeviceReading): PhysicalTruth {
  // A sleeping serve's process still holds its residual, and one being evicted to sleep keeps it:
  // only the rest of it is in flux.
  const held = (r: Reservation) =>
    r.phase === 'running' ? r.vramMib : r.phase === 'sleeping' ? committedMibOf(r) : r.phase === 'evicting' ? r.vramMib - freedByEviction(r) : 0;
  const servesMib = ledger.reservations.reduce((s, r) => s + held(r), 0);
  const inFlux = ledger.reservations.flatMap((r) => {
    const phase = FLUX[r.phase];
    return phase ? [{ serve: r.serve, phase, vramMib: r.vramMib - held(r) }] : [];
  });
  const nonLedgerDrawMib = reading.usedMib - servesMib;
  // A start's memory grows for seconds (a stop's, an eviction's shrinks): judged at the least, a
  // serve in flux is no warning that the reserve is exceeded.
  const nonLedgerDrawMinMib = nonLedgerDrawMib - inFlux.reduce((s, f) => s + f.vramMib, 0);
  return {
    usedMib: reading.usedMib,
    totalMib: reading.totalMib,
    servesMib,
    nonLedgerDrawMib,
    inFlux,
    nonLedgerDrawMinMib,
    fluxShareMib: Math.max(0, Math.min(nonLedgerDrawMib, nonLedgerDrawMib - nonLedgerDrawMinMib)),
    reserveMib: ledger.reserveMib,
    optimistic: nonLedgerDrawMinMib > ledger.reserveMib,
  };
}

export function formatPhysical(t: PhysicalTruth): string[] {
  const flux = t.inFlux.map((f) => `${f.serve} ${f.phase}`).join(', ');
  const draw = t.inFlux.length
    ? `non-ledger draw ${Math.max(0, t.nonLedgerDrawMinMib)} to ${Math.max(0, t.nonLedgerDrawMib)} MiB (up to ${t.fluxShareMib} MiB of it ${flux})`
    : `non-ledger draw ${t.nonLedgerDrawMib} MiB`;
  const lines = [`  nvidia-smi: used ${t.usedMib} of ${t.totalMib} MiB; ${draw} against a reserve of ${t.reserveMib} MiB`];
  if (t.optimistic) {
    const by = t.nonLedgerDrawMinMib - t.reserveMib;
    lines.push(
      `  warning: non-ledger draw exceeds the reserve by ${t.inFlux.length ? 'at least ' : ''}${by} MiB: the ledger's free figure is that much optimistic`,
    );
  }
  return lines;
}

/**
 * A serve's measured draw against its reservation; a warning when it draws more. `how`: the
 * evidence, the whole GPU's device delta unless said (its own processes' MiB since start-slot).
 */
export function formatMeasuredDelta(serve: string, deltaMib: number, vramMib: number, how = 'device delta'): { line: string; exceeds: boolean } {
  const exceeds = deltaMib > vramMib;
  return {
    exceeds,
    line: exceeds
      ? `warning: ${serve} measured ${deltaMib} MiB ${how}, ${deltaMib - vramMib} MiB above its ${vramMib} MiB reservation`
      : `${serve} measured ${deltaMib} MiB ${how}, inside its ${vramMib} MiB reservation`,
  };
}

/** What a started serve's own processes hold on its GPU (docker top's pids against nvidia-smi's list), or why they could not say. */
export type OwnDraw = { mib: number; pids: number[] } | { unread: string };

/** How a measure line names its evidence: its own processes, or the whole GPU and why not its own. */
export function measuredHow(own: OwnDraw | undefined): string {
  if (!own) return 'device delta';
  if ('unread' in own) return `device delta (the whole GPU: its own processes could not say: ${own.unread})`;
  return `by its own processes (pid ${own.pids.join(', ')})`;
}
