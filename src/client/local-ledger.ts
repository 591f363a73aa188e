// This node's ledgers, the leases its serves hold and what its GPUs read, side by side: what
// `gpures ledger` shows, read by the command itself or by the node's worker for it
// (src/worker/ledger-endpoint.ts).
import type { Client } from '@temporalio/client';
import type { LeaseView } from '../domain/lease';
import type { LedgerState } from '../domain/ledger';
import type { Manifest } from '../domain/types';
import type { DeviceReadings } from './ledger-view';
import { runningLeases } from './lease';

export interface LocalLedgerReads {
  ledgers: LedgerState[];
  leases: Map<string, LeaseView>;
  devices: DeviceReadings;
}

/**
 * The reads at once: the devices' reading (a spawn of nvidia-smi takes 100–300 ms) beside the
 * Temporal ones rather than after them. The ledgers as `readLedgers` reads them: the command's own
 * read starts a ledger that does not run, the worker's endpoint starts none.
 */
export async function readLocalLedger(
  client: Client,
  manifest: Manifest,
  devices: () => Promise<DeviceReadings>,
  readLedgers: (client: Client, manifest: Manifest) => Promise<LedgerState[]>,
): Promise<LocalLedgerReads> {
  const [ledgers, leases, readings] = await Promise.all([readLedgers(client, manifest), runningLeases(client, manifest.node), devices()]);
  return { ledgers, leases, devices: readings };
}
