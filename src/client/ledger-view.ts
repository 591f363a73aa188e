// What `gpures ledger --json` prints for this node, and the ledger page shows: each GPU's ledger
// with its totals, the leases its serves hold, and beside it what nvidia-smi sees on this box.
// One reading for both, so the page's figures are the CLI's.
import { committedMibOf, lostRunUnreadText, startSlotText, totals } from '../domain/ledger';
import type { LedgerState } from '../domain/ledger';
import { inFluxBy, leaseLine, leaseStands } from '../domain/lease';
import type { LeaseView } from '../domain/lease';
import { physicalTruth } from '../domain/physical';
import type { PhysicalTruth } from '../domain/physical';
import type { GpuReading } from '../shared/contracts';
import type { GpuProbe, ReadingAge } from '../adapters/gpu/port';

export interface HeldLease extends LeaseView {
  /** `lease: 1h59m left`, `idle lease: 4m12s left (ttl 5m)`. */
  text: string;
}

/**
 * Leases that count: only while they stand (leaseStands: one whose serve was brought down by hand
 * keeps a lease that will end without acting), with what another run holding the serve for now
 * means for it. A ledger still reconciling is not the truth yet: its leases are shown as they say.
 */
export function heldLeases(ledgers: readonly LedgerState[], leases: ReadonlyMap<string, LeaseView>, nowMs: number): Map<string, HeldLease> {
  const out = new Map<string, HeldLease>();
  for (const l of ledgers) {
    for (const r of l.reservations) {
      const v = leases.get(r.serve);
      if (!v || !(l.reconciling || leaseStands(v, l))) continue;
      out.set(r.serve, { ...v, text: leaseLine(v, l.reconciling ? undefined : inFluxBy(v, l), nowMs) });
    }
  }
  return out;
}

export function leasesOn(l: LedgerState, held: ReadonlyMap<string, HeldLease>): HeldLease[] {
  return l.reservations.flatMap((r) => held.get(r.serve) ?? []);
}

export type DeviceReadings = { ok: true; gpus: GpuReading[] } | { ok: false; error: string };

/** What a GPU probe reads, or why it read nothing: the ledger is shown either way. */
export async function devicesOf(probe: Pick<GpuProbe, 'readGpus'>, age?: ReadingAge): Promise<DeviceReadings> {
  try {
    return { ok: true, gpus: await probe.readGpus(age) };
  } catch (err) {
    return { ok: false, error: `not available (${(err as Error).message})` };
  }
}

/** nvidia-smi on this box, if it has one, by a process of its own. */
export async function readDevices(binary: string, timeoutMs?: number): Promise<DeviceReadings> {
  const { NvidiaSmi } = await import('../adapters/gpu/nvidia-smi');
  return devicesOf(new NvidiaSmi({ binary, ...(timeoutMs !== undefined ? { timeoutMs } : {}) }));
}

export interface LedgerRow {
  ledger: LedgerState;
  physical?: PhysicalTruth;
  held: ReadonlyMap<string, HeldLease>;
}

export interface LocalLedger {
  rows: LedgerRow[];
  /** Why nvidia-smi gave nothing, when it did not. */
  nvidiaSmiError?: string;
}

/** The rows, from the ledgers, the leases and nvidia-smi's readings however they were read. */
export function localLedger(ledgers: readonly LedgerState[], leases: ReadonlyMap<string, LeaseView>, readings: DeviceReadings, nowMs: number): LocalLedger {
  const held = heldLeases(ledgers, leases, nowMs);
  const rows = ledgers.map((ledger) => {
    const reading = readings.ok ? readings.gpus.find((g) => g.uuid === ledger.gpuUuid) : undefined;
    return { ledger, held, ...(reading ? { physical: physicalTruth(ledger, reading) } : {}) };
  });
  return { rows, ...(readings.ok ? {} : { nvidiaSmiError: readings.error }) };
}

/** A ledger as --json prints it: its reservations with the totals a person reads in its text. */
export function ledgerJson(l: LedgerState) {
  // The note in the operator's words too, for the page (the same as `gpures ledger` prints).
  // Each reservation's committedMib too: an evicted one's vramMib is declared, not committed.
  const reservations = l.reservations.map((r) => ({ ...r, committedMib: committedMibOf(r) }));
  return {
    ...l,
    reservations,
    ...totals(l),
    ...(l.lostRunUnread ? { lostRunNote: lostRunUnreadText(l.lostRunUnread) } : {}),
    ...(l.startSlot ? { startSlotNote: startSlotText(l.startSlot) } : {}),
  };
}

/** A row as `gpures ledger --json` prints it. */
export function ledgerRowJson(r: LedgerRow) {
  return { ...ledgerJson(r.ledger), leases: leasesOn(r.ledger, r.held), physical: r.physical ?? null };
}
