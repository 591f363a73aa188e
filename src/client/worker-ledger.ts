// `gpures ledger` on the node's own box, read through its worker's endpoint (GET /v1/ledger beside
// /metrics) rather than a Temporal client of its own: the worker holds a warm connection and a
// live nvidia-smi stream, so the command loads no gRPC or protobuf code and spawns no nvidia-smi.
// The figures are the same reads: the worker queries the same ledgers and leases through Temporal
// (src/worker/ledger-endpoint.ts).
//
// The answer is used only when it is this command's: the manifest's node and GPUs, each GPU's
// ledger running, and the same Temporal address and namespace the command would connect to.
// Anything else (no worker there, an older worker, another node's, another Temporal's, a ledger
// not started yet, an error, no whole answer in time) falls back to the command's own read through
// Temporal; only a mismatch is worth a note. What answers on this host's loopback port is trusted
// as the Temporal address on loopback is: a process of this host's.
import { request } from 'node:http';
import type { LeaseView } from '../domain/lease';
import type { LedgerState } from '../domain/ledger';
import { isLoopback, isWildcard } from '../domain/manifest';
import type { Manifest } from '../domain/types';
import { httpUrl } from '../domain/serve';
import type { DeviceReadings } from './ledger-view';

/** The endpoint's path, beside /metrics. */
export const WORKER_LEDGER_PATH = '/v1/ledger';
/** Sent by the command and required by the endpoint: a web page's cross-site GET cannot carry it without a preflight. */
export const WORKER_LEDGER_HEADER = 'x-gpures-reader';
/** The answer's shape; a worker whose answer carries another is read around, through Temporal. */
export const WORKER_LEDGER_VERSION = 1;
/** The worker answers from a warm connection in tens of milliseconds; past this, for the whole answer, the command reads for itself. */
export const WORKER_LEDGER_TIMEOUT_MS = 1500;
/** A worker's answer is a few KiB; anything past this is not one. */
const MAX_ANSWER_BYTES = 1 << 20;

/** What GET /v1/ledger answers: the reads `gpures ledger` makes, made by the node's worker. */
export interface WorkerLedgerAnswer {
  version: typeof WORKER_LEDGER_VERSION;
  node: string;
  temporal: { address: string; namespace: string };
  /** The running ledgers, in the manifest's order. */
  ledgers: LedgerState[];
  /** The manifest's GPUs whose ledger does not run: the endpoint starts none. */
  notRunning: string[];
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

/**
 * The address to ask the worker at, given where its endpoint listens: a wildcard bind is reached
 * on loopback; a specific address beyond loopback is not asked at all (the endpoint would refuse
 * a peer that is not loopback, and this command does not send its reads across a network).
 */
export function workerLedgerHost(bound: string): string | undefined {
  if (isWildcard(bound)) return bound.includes(':') ? '::1' : '127.0.0.1';
  return isLoopback(bound) ? bound : undefined;
}

function getJson(host: string, port: number, timeoutMs: number, sent: () => void): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const req = request({ host, port, path: WORKER_LEDGER_PATH, method: 'GET', headers: { accept: 'application/json', [WORKER_LEDGER_HEADER]: 'gpures-cli' } });
    // A bound on the whole answer, not on a quiet socket: a peer trickling bytes is given up on too.
    const deadline = setTimeout(() => req.destroy(new Error(`no whole answer within ${timeoutMs} ms`)), timeoutMs);
    req.on('response', (res) => {
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
    req.on('error', reject);
    // On its way once written to the socket; a request that failed before that is done with too.
    req.on('finish', sent);
    req.on('close', () => {
      clearTimeout(deadline);
      sent();
    });
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
  const theirs = [...a.ledgers.map((l) => l.gpuRole), ...a.notRunning].sort().join(', ');
  const ours = manifest.gpus
    .map((g) => g.role)
    .sort()
    .join(', ');
  if (theirs !== ours) return `its manifest's GPUs are ${theirs || 'none'}, this one's ${ours}`;
  return undefined;
}

const isString = (v: unknown): v is string => typeof v === 'string';
const isNumber = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);

function isLedger(v: unknown): v is LedgerState {
  const l = v as Partial<LedgerState> | null;
  return (
    typeof l === 'object' &&
    l !== null &&
    isString(l.node) &&
    isString(l.gpuRole) &&
    isString(l.gpuUuid) &&
    isNumber(l.capacityMib) &&
    isNumber(l.reserveMib) &&
    Array.isArray(l.reservations) &&
    l.reservations.every((r) => typeof r === 'object' && r !== null && isString(r.serve) && isNumber(r.vramMib) && isString(r.phase))
  );
}

/** The shape this command renders from, checked element by element: anything else is read around. */
function isAnswer(body: unknown): body is WorkerLedgerAnswer {
  const a = body as Partial<WorkerLedgerAnswer> | null;
  return (
    typeof a === 'object' &&
    a !== null &&
    a.version === WORKER_LEDGER_VERSION &&
    isString(a.node) &&
    isString(a.temporal?.address) &&
    isString(a.temporal.namespace) &&
    Array.isArray(a.ledgers) &&
    a.ledgers.every(isLedger) &&
    Array.isArray(a.notRunning) &&
    a.notRunning.every(isString) &&
    Array.isArray(a.leases) &&
    a.leases.every((l) => typeof l === 'object' && l !== null && isString(l.serve) && isString(l.holder) && isNumber(l.expiresAtEpochMs)) &&
    typeof a.devices?.ok === 'boolean'
  );
}

/** What the worker replied, as it came, and where it was asked; judged once the manifest is read. */
export interface WorkerReply {
  host: string;
  port: number;
  status: number;
  body: unknown;
}

/** A read asked of the worker: `sent` once the request is written to its socket (or failed), `reply` when it ends. */
export interface WorkerAsk {
  sent: Promise<void>;
  /** Never rejects: undefined when nothing answered there in time, or not as HTTP (the command's own read is the answer then). */
  reply: Promise<WorkerReply | undefined>;
}

/**
 * Asks the worker now, so that it reads while the command reads its manifest and Temporal's
 * configuration; undefined for an endpoint this command does not ask (beyond loopback).
 */
export function askWorkerLedger(endpoint: { host: string; port: number }, timeoutMs = WORKER_LEDGER_TIMEOUT_MS): WorkerAsk | undefined {
  const host = workerLedgerHost(endpoint.host);
  if (host === undefined) return undefined;
  let sent = (): void => undefined;
  const written = new Promise<void>((resolve) => (sent = resolve));
  const reply = getJson(host, endpoint.port, timeoutMs, () => sent()).then(
    (got) => ({ host, port: endpoint.port, ...got }),
    () => undefined,
  );
  return { sent: written, reply };
}

/** The worker's reply as this command's read, when it is one: the answer's shape, and for this manifest and this Temporal. */
export function workerLedgerRead(reply: WorkerReply | undefined, target: Pick<WorkerLedgerTarget, 'manifest' | 'temporal'>): WorkerLedgerRead {
  if (reply === undefined || reply.status !== 200 || !isAnswer(reply.body)) return { ok: false };
  const why = mismatch(reply.body, target);
  if (why)
    return {
      ok: false,
      note: `the answer of the worker at ${httpUrl(reply.host, reply.port)}${WORKER_LEDGER_PATH} was not used: ${why}; read through Temporal instead`,
    };
  // A ledger not started yet is started by the command's own read, which the endpoint does not do.
  if (reply.body.notRunning.length > 0) return { ok: false };
  return { ok: true, answer: reply.body };
}

/** The node's worker's read, when it is there, answers in time and is this command's. */
export async function ledgerFromWorker(target: WorkerLedgerTarget, timeoutMs = WORKER_LEDGER_TIMEOUT_MS): Promise<WorkerLedgerRead> {
  return workerLedgerRead(await askWorkerLedger(target, timeoutMs)?.reply, target);
}
