// `gpures ledger` on the node's own box, read through its worker's loopback endpoint (GET
// /v1/ledger beside /metrics) rather than a Temporal client of its own: the worker holds a warm
// connection and a live nvidia-smi stream, so the command loads no gRPC or protobuf code, spawns
// no nvidia-smi, and answers in about a third of the time. The figures are the same reads: the
// worker queries the same ledgers and leases through Temporal (src/worker/ledger-endpoint.ts).
//
// The answer is used only when it is this command's: the manifest's node and GPUs, and the same
// Temporal address and namespace the command would connect to. Anything else (no worker there,
// an older worker, another node's, another Temporal's, no answer in time) falls back to the
// command's own read through Temporal, and only a mismatch is worth a note.
import { request } from 'node:http';
import type { LeaseView } from '../domain/lease';
import type { LedgerState } from '../domain/ledger';
import type { Manifest } from '../domain/types';
import { httpUrl } from '../domain/serve';
import type { DeviceReadings } from './ledger-view';

/** The endpoint's path, beside /metrics. */
export const WORKER_LEDGER_PATH = '/v1/ledger';
/** The answer's shape; a worker whose answer carries another is read around, through Temporal. */
export const WORKER_LEDGER_VERSION = 1;
/** The worker answers from a warm connection in tens of milliseconds; past this the command reads for itself. */
export const WORKER_LEDGER_TIMEOUT_MS = 1500;
/** A worker's answer is a few KiB; anything past this is not one. */
const MAX_ANSWER_BYTES = 1 << 20;

/** What GET /v1/ledger answers: the reads `gpures ledger` makes, made by the node's worker. */
export interface WorkerLedgerAnswer {
  version: typeof WORKER_LEDGER_VERSION;
  node: string;
  temporal: { address: string; namespace: string };
  ledgers: LedgerState[];
  leases: LeaseView[];
  devices: DeviceReadings;
}

/** Where the worker's endpoint listens and what its answer must match. */
export interface WorkerLedgerTarget {
  host: string;
  port: number;
  manifest: Manifest;
  temporal: { address: string; namespace: string };
}

export type WorkerLedgerRead =
  | { ok: true; answer: WorkerLedgerAnswer }
  /** `note` says why an answer was not this command's; a worker not there says nothing. */
  | { ok: false; note?: string };

function getJson(host: string, port: number, timeoutMs: number): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const req = request({ host, port, path: WORKER_LEDGER_PATH, method: 'GET', timeout: timeoutMs, headers: { accept: 'application/json' } }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size > MAX_ANSWER_BYTES) req.destroy(new Error(`answer larger than ${MAX_ANSWER_BYTES} bytes`));
        else chunks.push(c);
      });
      res.on('end', () => {
        try {
          resolve({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) });
        } catch (err) {
          reject(err instanceof Error ? err : new Error(String(err)));
        }
      });
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end();
  });
}

/** Why the answer is not this command's, or undefined when it is. */
export function mismatch(a: WorkerLedgerAnswer, target: Pick<WorkerLedgerTarget, 'manifest' | 'temporal'>): string | undefined {
  const { manifest, temporal } = target;
  if (a.node !== manifest.node) return `it serves node '${a.node}', not '${manifest.node}'`;
  if (a.temporal.address !== temporal.address || a.temporal.namespace !== temporal.namespace) {
    return `it reads Temporal at ${a.temporal.address} namespace ${a.temporal.namespace}, this command ${temporal.address} namespace ${temporal.namespace}`;
  }
  const theirs = a.ledgers.map((l) => l.gpuRole).join(', ');
  const ours = manifest.gpus.map((g) => g.role).join(', ');
  if (theirs !== ours) return `its manifest's GPUs are ${theirs || 'none'}, this one's ${ours}`;
  return undefined;
}

function isAnswer(body: unknown): body is WorkerLedgerAnswer {
  const a = body as Partial<WorkerLedgerAnswer> | null;
  return (
    typeof a === 'object' &&
    a !== null &&
    a.version === WORKER_LEDGER_VERSION &&
    typeof a.node === 'string' &&
    typeof a.temporal?.address === 'string' &&
    typeof a.temporal.namespace === 'string' &&
    Array.isArray(a.ledgers) &&
    Array.isArray(a.leases) &&
    typeof a.devices?.ok === 'boolean'
  );
}

/** The node's worker's read, when it is there, answers in time and is this command's. */
export async function ledgerFromWorker(target: WorkerLedgerTarget, timeoutMs = WORKER_LEDGER_TIMEOUT_MS): Promise<WorkerLedgerRead> {
  const url = `${httpUrl(target.host, target.port)}${WORKER_LEDGER_PATH}`;
  let got: { status: number; body: unknown };
  try {
    got = await getJson(target.host, target.port, timeoutMs);
  } catch {
    // Nothing listens there, or it is not a worker: the command's own read is the answer.
    return { ok: false };
  }
  if (got.status !== 200 || !isAnswer(got.body)) return { ok: false };
  const why = mismatch(got.body, target);
  if (why) return { ok: false, note: `the worker at ${url} was not asked: ${why}; read through Temporal instead` };
  return { ok: true, answer: got.body };
}
