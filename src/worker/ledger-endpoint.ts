// GET /v1/ledger on the worker's HTTP endpoint, beside /metrics: the node's ledgers, their leases
// and the GPUs' reading, read by the worker for `gpures ledger` on this box
// (src/client/worker-ledger.ts). The worker's connection is warm and its nvidia-smi stream
// running, so the command needs neither a Temporal client nor a spawn of its own.
//
// It only reads: a GPU whose ledger does not run is named, not started (the command's own read
// starts it). It is for this host alone, whatever address /metrics is bound to for a Prometheus
// elsewhere: a peer beyond loopback is refused, and so is a request whose Host is not a loopback
// name (a web page that rebinds a name of its own to 127.0.0.1) or that lacks the CLI's header (a
// page's plain cross-site GET cannot send one without a preflight this endpoint never answers).
// At most a few reads run at once; past them the answer is 503 and the command reads for itself.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Client } from '@temporalio/client';
import type { GpuProbe } from '../adapters/gpu/port';
import type { ManifestSource } from '../adapters/manifest/port';
import { loopbackHost } from '../adapters/loopback-host';
import { devicesOf } from '../client/ledger-view';
import { readLocalLedger } from '../client/local-ledger';
import { readLedgersAsTheirWorker } from '../client/node-ledgers';
import { WORKER_LEDGER_HEADER, WORKER_LEDGER_TIMEOUT_MS, WORKER_LEDGER_VERSION } from '../client/worker-ledger';
import type { WorkerLedgerAnswer } from '../client/worker-ledger';
import { manifestOrThrow, parseManifest } from '../config/manifest';
import { isLoopback } from '../domain/manifest';
import { RECENT_READING_MS } from '../domain/physical';

export interface LedgerEndpointSources {
  client: Client;
  /** The Temporal this worker reads, which the command compares with its own. */
  temporal: { address: string; namespace: string };
  node: string;
  manifest: ManifestSource;
  gpu?: GpuProbe;
}

export type LedgerRead = () => Promise<WorkerLedgerAnswer>;
export type LedgerReadOutcome = 'answered' | 'failed' | 'busy' | 'refused';

/** Reads at once past which the endpoint answers 503: a CLI then reads for itself. */
export const MAX_LEDGER_READS_IN_FLIGHT = 4;

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
    // The command gives up on the worker after WORKER_LEDGER_TIMEOUT_MS: a ledger slower than that is not waited for here either.
    // This worker polls the node's queue: asking Temporal whether one does would only delay the queries.
    const running = (client: Client, m: typeof manifest) => readLedgersAsTheirWorker(client, m, WORKER_LEDGER_TIMEOUT_MS);
    const r = await readLocalLedger(s.client, manifest, devices, running);
    const read = new Set(r.ledgers.map((l) => l.gpuRole));
    return {
      version: WORKER_LEDGER_VERSION,
      node: s.node,
      temporal: s.temporal,
      ledgers: r.ledgers,
      notRunning: manifest.gpus.map((g) => g.role).filter((role) => !read.has(role)),
      leases: [...r.leases.values()],
      devices: r.devices,
    };
  };
}

function send(res: ServerResponse, status: number, body: string, type = 'text/plain; charset=utf-8'): void {
  res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' }).end(body);
}

/** Serves GET /v1/ledger through `read`, at most MAX_LEDGER_READS_IN_FLIGHT at once; `ended` learns each request's outcome. */
export function ledgerHandler(read: LedgerRead, ended: (outcome: LedgerReadOutcome) => void = () => undefined) {
  let inFlight = 0;
  return (req: IncomingMessage, res: ServerResponse): void => {
    const peer = (req.socket.remoteAddress ?? '').replace(/^::ffff:/, '');
    const refusal = !isLoopback(peer)
      ? ([403, 'the ledger is read from this host only\n'] as const)
      : !loopbackHost(req.headers.host)
        ? ([421, 'address this endpoint by a loopback name (127.0.0.1, ::1, localhost)\n'] as const)
        : req.headers[WORKER_LEDGER_HEADER] === undefined
          ? ([403, `ask as gpures ledger does, with the ${WORKER_LEDGER_HEADER} header\n`] as const)
          : undefined;
    if (refusal) {
      ended('refused');
      return send(res, refusal[0], refusal[1]);
    }
    if (inFlight >= MAX_LEDGER_READS_IN_FLIGHT) {
      ended('busy');
      return send(res, 503, `${inFlight} ledger reads under way; read through Temporal instead\n`);
    }
    inFlight++;
    read()
      .then(
        (answer) => {
          send(res, 200, JSON.stringify(answer), 'application/json');
          ended('answered');
        },
        (err: unknown) => {
          send(res, 503, `the ledger read failed: ${err instanceof Error ? err.message : String(err)}\n`);
          ended('failed');
        },
      )
      .catch(() => res.destroy())
      .finally(() => inFlight--);
  };
}
