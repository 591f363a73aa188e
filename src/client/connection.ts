// The Temporal connection follows Temporal's own environment configuration (TEMPORAL_ADDRESS,
// TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TLS settings, TEMPORAL_PROFILE and the config file), so
// a user's existing `temporal` CLI setup works unchanged (./temporal-config.ts). Default: the local dev server.
import { connect } from 'node:net';
import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { Client, Connection, defaultGrpcRetryOptions, makeGrpcRetryInterceptor } from '@temporalio/client';
import type { ConnectionOptions } from '@temporalio/client';
import { temporalConfig, temporalTarget } from './temporal-config';
import { NOT_FRONTEND_HINT, notTemporalFrontend } from './not-frontend';

/** Temporal did not answer at the address the configuration gave. */
export class TemporalUnreachable extends Error {
  override readonly name = 'TemporalUnreachable';
  constructor(
    readonly address: string,
    readonly namespace: string,
    cause: Error,
  ) {
    super(`cannot reach Temporal at ${address} (namespace ${namespace}): ${cause.message}`);
  }
}

/** Nothing listening is known within this; the gRPC connect would retry a refused port until its deadline. */
export const TCP_PROBE_MS = 2000;
/** Once the port answers, a loaded server (or 30 CLIs starting at once) gets this long to complete the handshake. */
const CONNECT_TIMEOUT = '10s';

/** The port the SDK connects to when an address names none (its normalizeGrpcEndpointAddress). */
const SDK_DEFAULT_PORT = 7233;

/**
 * Resolves when a TCP connection to HOST:PORT (HOST alone: the SDK's port 7233) opens; rejects at
 * once when refused or unresolvable, or after `timeoutMs`.
 */
export function probeTcp(address: string, timeoutMs = TCP_PROBE_MS): Promise<void> {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]+))(?::(\d+))?$/.exec(address);
  const host = m?.[1] ?? m?.[2];
  if (!m || !host) return Promise.resolve(); // not [HOST]:PORT: leave it to the SDK's own error
  const port = m[3] !== undefined ? Number(m[3]) : SDK_DEFAULT_PORT;
  return new Promise((resolve, reject) => {
    const socket = connect({ host, port, timeout: timeoutMs });
    socket.once('connect', () => {
      socket.destroy();
      resolve();
    });
    socket.once('timeout', () => {
      socket.destroy();
      reject(new Error(`no TCP answer within ${timeoutMs} ms`));
    });
    socket.once('error', (err: NodeJS.ErrnoException) =>
      reject(new Error(err.code === 'ECONNREFUSED' ? 'connection refused (nothing listens there)' : err.message)),
    );
  });
}

/** Whether grpc-js would reach Temporal through a proxy: then only the gRPC connect can tell. */
export function viaProxy(env: NodeJS.ProcessEnv): boolean {
  return ['grpc_proxy', 'https_proxy', 'http_proxy', 'GRPC_PROXY', 'HTTPS_PROXY', 'HTTP_PROXY'].some((v) => (env[v] ?? '') !== '');
}

/**
 * Who starts, signals or cancels a run, as its history records it (the identity of
 * WorkflowExecutionStarted, of a cancel request): `gpures-cli/<pid>@<host>`, `gpures-api/…`,
 * `gpures-worker/…`. The audit report tells the callers apart by it (src/audit/report/caller.ts);
 * the SDK's own default, `<pid>@<host>`, would not say which of them it was. No secret in it.
 */
export type ClientRole = 'cli' | 'api' | 'worker';
// Made unique by a random tail: a pid is reused (two CLIs minutes apart, two containers of one host
// name), and a run's start identity is how a CLI tells an operation it started from one it joined.
const TAIL = randomUUID().slice(0, 8);
export function clientIdentity(role: ClientRole): string {
  return `gpures-${role}/${process.pid}@${hostname()}/${TAIL}`;
}

/** gRPC's RESOURCE_EXHAUSTED: a rate limit, or a workflow that cannot take the call now. */
const RESOURCE_EXHAUSTED = 8;
/** What the server answers an update sent to a workflow as it continues as new (consts.ErrWorkflowClosing). */
const WORKFLOW_CLOSING = /workflow is closing/i;

/**
 * The SDK's gRPC retries, but for one refusal. An update in flight when its workflow continues as
 * new is refused RESOURCE_EXHAUSTED "workflow is closing", and the next run takes it tens of
 * milliseconds later; the SDK waits 1 s before retrying any RESOURCE_EXHAUSTED (fit for a rate
 * limit), so every update in flight at a ledger's continue-as-new stalled 1–2 s. That one is
 * retried after 20 ms (then 34, 58, … as the SDK grows it); every other status as the SDK does.
 */
export function temporalInterceptors(): NonNullable<ConnectionOptions['interceptors']> {
  const initialIntervalMs = ({ code, details }: { code: number; details: string }): number =>
    WORKFLOW_CLOSING.test(details) ? 20 : code === RESOURCE_EXHAUSTED ? 1000 : 100;
  return [makeGrpcRetryInterceptor(defaultGrpcRetryOptions({ initialIntervalMs }))];
}

/**
 * Where the address answers TCP yet no gRPC handshake completed: what else may be listening, and
 * the TLS setting that does not match the server's (TLS against a plain port, or none against a
 * TLS one, fails the same way: the usual mistake with Temporal Cloud or an mTLS server).
 */
function noHandshakeHint(tls: boolean): string {
  // An API key turns TLS on by itself (envconfig), though neither TLS setting was made.
  const mismatch = tls
    ? "a frontend without TLS while TLS is on (TEMPORAL_TLS, a TEMPORAL_TLS_* setting, the profile's tls, or an API key turns it on; TEMPORAL_TLS=false turns it off)"
    : "a frontend that expects TLS (set TEMPORAL_TLS=true, or the profile's tls)";
  return `the port is open but no gRPC handshake completed in time: a server still starting, ${mismatch}, or not Temporal's gRPC frontend (7233 by default; the UI's and the HTTP API's ports are others)`;
}

/**
 * Connects with `connect` once the address answers TCP (at once when nothing listens there,
 * rather than after the gRPC connect's deadline); any failure is TemporalUnreachable, naming the
 * address (`tls`: the connection's TLS setting, for what a failed handshake may mean). The CLI's client, the worker's connections and the demo's all go through it.
 */
export async function reachTemporal<T>(address: string, namespace: string, tls: unknown, connect: () => Promise<T>): Promise<T> {
  let opened = false;
  try {
    // Through a proxy (grpc-js honours these) the address need not be reachable from here.
    if (!viaProxy(process.env)) {
      await probeTcp(address);
      opened = true;
    }
    return await connect();
  } catch (err) {
    const cause = err as Error;
    if (opened && /before the deadline/i.test(cause.message))
      throw new TemporalUnreachable(address, namespace, new Error(`${cause.message}: ${noHandshakeHint(Boolean(tls))}`));
    if (notTemporalFrontend(cause)) throw new TemporalUnreachable(address, namespace, new Error(`${cause.message}: ${NOT_FRONTEND_HINT}`));
    throw new TemporalUnreachable(address, namespace, cause);
  }
}

export async function connectClient(role: ClientRole = 'cli'): Promise<{ client: Client; connection: Connection; address: string; namespace: string }> {
  const config = temporalConfig();
  const { address, namespace } = temporalTarget(config);
  const connection = await reachTemporal(address, namespace, config.connectionOptions.tls, () =>
    Connection.connect({ ...config.connectionOptions, connectTimeout: CONNECT_TIMEOUT, interceptors: temporalInterceptors() }),
  );
  return { client: new Client({ connection, namespace, identity: clientIdentity(role) }), connection, address, namespace };
}
