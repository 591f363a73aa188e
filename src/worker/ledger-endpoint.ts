// GET /v1/ledger on the worker's loopback endpoint, beside /metrics: the node's ledgers, their
// leases and the GPUs' reading, read by the worker for `gpures ledger` on this box
// (src/client/worker-ledger.ts). The worker's connection is warm and its nvidia-smi stream
// running, so the command needs neither a Temporal client nor a spawn of its own.
//
// Read-only, like /metrics, but for this box alone: only a loopback peer addressing a loopback
// name gets it (an endpoint bound wider for Prometheus does not hand the ledger out, and a web
// page that rebinds a name of its own to 127.0.0.1 is refused).
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Client } from '@temporalio/client';
import { RECENT_READING_MS } from '../domain/physical';
import type { GpuProbe } from '../adapters/gpu/port';
import type { ManifestSource } from '../adapters/manifest/port';
import { loopbackHost } from '../client/loopback-host';
import { devicesOf } from '../client/ledger-view';
import { readLocalLedger } from '../client/local-ledger';
import { WORKER_LEDGER_VERSION } from '../client/worker-ledger';
import type { WorkerLedgerAnswer } from '../client/worker-ledger';
import { manifestOrThrow, parseManifest } from '../config/manifest';
import { isLoopback } from '../domain/manifest';

export interface LedgerEndpointSources {
  client: Client;
  /** The Temporal this worker reads, which the command compares with its own. */
  temporal: { address: string; namespace: string };
  node: string;
  manifest: ManifestSource;
  gpu?: GpuProbe;
}

export type LedgerRead = () => Promise<WorkerLedgerAnswer>;

/** The read, from the manifest as it is now: a GPU added to it is read as the command would read it. */
export function workerLedgerRead(s: LedgerEndpointSources): LedgerRead {
  return async () => {
    const { text, file } = await s.manifest.read();
    const manifest = manifestOrThrow(parseManifest(text, file));
    if (manifest.node !== s.node) throw new Error(`${file} is now node '${manifest.node}'s manifest; this worker serves '${s.node}'`);
    const { gpu } = s;
    const devices = gpu
      ? () => devicesOf(gpu, { maxAgeMs: RECENT_READING_MS })
      : () => Promise.resolve({ ok: false as const, error: 'not available (this worker reads no GPU)' });
    const r = await readLocalLedger(s.client, manifest, devices);
    return { version: WORKER_LEDGER_VERSION, node: s.node, temporal: s.temporal, ledgers: r.ledgers, leases: [...r.leases.values()], devices: r.devices };
  };
}

function send(res: ServerResponse, status: number, body: string, type: string): void {
  res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' }).end(body);
}

/** Answers GET /v1/ledger: 403 to a peer beyond this host, 421 to a name that is not loopback, 503 when the read failed. */
export function answerLedger(req: IncomingMessage, res: ServerResponse, read: LedgerRead): void {
  const peer = (req.socket.remoteAddress ?? '').replace(/^::ffff:/, '');
  if (!isLoopback(peer)) return send(res, 403, 'the ledger is read from this host only\n', 'text/plain; charset=utf-8');
  if (!loopbackHost(req.headers.host))
    return send(res, 421, 'address this endpoint by a loopback name (127.0.0.1, ::1, localhost)\n', 'text/plain; charset=utf-8');
  read().then(
    (answer) => send(res, 200, JSON.stringify(answer), 'application/json'),
    (err: unknown) => send(res, 503, `the ledger read failed: ${(err as Error).message}\n`, 'text/plain; charset=utf-8'),
  );
}
