// What `gpures ledger --json` prints for this node, and the ledger page shows: each GPU's ledger
// with its totals, the leases its serves hold, and beside it what nvidia-smi sees on this box.
// One reading for both, so the page's figures are the CLI's.
import type { Client } from '@temporalio/client';
import type { LedgerState } from '../domain/ledger';
import { leaseText } from '../domain/lease';
import type { LeaseView } from '../domain/lease';
import { physicalTruth } from '../domain/physical';
import type { PhysicalTruth } from '../domain/physical';
import type { Manifest } from '../domain/types';
import type { GpuReading } from '../shared/contracts';
import { runningLeases } from './lease';
import { ledgerJson } from './node-ledgers';

export interface HeldLease extends LeaseView {
  /** `lease: 1h59m left`, `idle lease: 4m12s left (ttl 5m)`. */
  text: string;
}

/** Leases that count: only while their acquisition still holds the serve (one brought down by hand keeps a lease that will end without acting). */
export function heldLeases(ledgers: readonly LedgerState[], leases: ReadonlyMap<string, LeaseView>, nowMs: number): Map<string, HeldLease> {
  const out = new Map<string, HeldLease>();
  for (const l of ledgers) {
    for (const r of l.reservations) {
      const v = leases.get(r.serve);
      if (v && (v.holder === r.holder || v.state === 'expiring')) out.set(r.serve, { ...v, text: leaseText(v, nowMs) });
    }
  }
  return out;
}

export function leasesOn(l: LedgerState, held: ReadonlyMap<string, HeldLease>): HeldLease[] {
  return l.reservations.flatMap((r) => held.get(r.serve) ?? []);
}

export type DeviceReadings = { ok: true; gpus: GpuReading[] } | { ok: false; error: string };

/** nvidia-smi on this box, if it has one: the ledger is shown either way. */
export async function readDevices(binary: string, timeoutMs?: number): Promise<DeviceReadings> {
  const { NvidiaSmi } = await import('../adapters/gpu/nvidia-smi');
  try {
    return { ok: true, gpus: await new NvidiaSmi({ binary, ...(timeoutMs !== undefined ? { timeoutMs } : {}) }).readGpus() };
  } catch (err) {
    return { ok: false, error: `not available (${(err as Error).message})` };
  }
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

/**
 * This node's ledgers as `readLedgers` reads them (the CLI's turns a missing worker into exit 4),
 * with their leases and nvidia-smi's reading of each GPU.
 */
export async function readLocalLedger(
  client: Client,
  manifest: Manifest,
  nvidiaSmi: string,
  readLedgers: (client: Client, manifest: Manifest) => Promise<LedgerState[]>,
): Promise<LocalLedger> {
  // nvidia-smi's spawn (100–300 ms) runs beside the Temporal reads rather than after them.
  const [ledgers, leases, devices] = await Promise.all([readLedgers(client, manifest), runningLeases(client, manifest.node), readDevices(nvidiaSmi)]);
  return localLedger(ledgers, leases, devices, Date.now());
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

/** A row as `gpures ledger --json` prints it. */
export function ledgerRowJson(r: LedgerRow) {
  return { ...ledgerJson(r.ledger), leases: leasesOn(r.ledger, r.held), physical: r.physical ?? null };
}
