// The reference router: an OpenAI-compatible front door that maps presets to tiers (backends),
// and implements our router admin contract (docs/router-admin-api.md): quiesce, tier state with
// the in-flight count, guarded readmit, reload, healthz. Tests and the demo run it; a production
// router plugs in by implementing the same contract.
//
// This file wires the parts into fastify: the tier table (tier-table.ts), the public routes and
// the proxy (proxy.ts), the admin API (admin.ts) with its guarded readmit (readmit.ts), and the
// on-demand queues (on-demand.ts) with their acquisition API client (acquisitions.ts), and its
// /metrics (metrics.ts).
import type { AddressInfo } from 'node:net';
import { errorCodes } from 'fastify';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { httpUrl } from '../domain/serve';
import { isLoopback } from '../domain/manifest';
import { refuseForeignHosts } from '../adapters/loopback-host';
import { boundedFastify } from '../adapters/http-bounds';
import type { ClosingAnswer } from '../adapters/http-bounds';
import { registerAdminRoutes } from './admin';
import { AcquisitionApi } from './acquisitions';
import { ConfigLoadError, loadConfig } from './config-file';
import { RouterMetrics } from './metrics';
import { Mutex } from './mutex';
import { OnDemand } from './on-demand';
import type { OnDemandOptions } from './on-demand';
import { onDemandUnmet } from './on-demand-config';
import type { OnDemandMeans } from './on-demand-config';
import { BodyBudget, BodyBudgetExceeded, budgetBodies, DEFAULT_BODY_BUDGET_BYTES, refuseOverBudget } from './body-budget';
import { errorBody, errText } from './errors';
import { registerPublicRoutes } from './proxy';
import type { RouterSnapshot } from './tier-table';
import { TierTable } from './tier-table';

export interface RouterOptions {
  configPath: string;
  /** Where the router says what its on-demand tiers did (an abandon asked, and its answer) and what of its state file it left out: main.js gives its stderr. */
  log?: (line: string) => void;
  /** Loopback unless asked: the admin API must not be reachable beyond this host by accident. */
  host?: string;
  /** 0 picks a free port. */
  port?: number;
  /** Bearer token every /admin request must present. */
  adminToken: string;
  /** Timeout of each readmit probe (/health, /v1/models). Default 5000 ms. */
  probeTimeoutMs?: number;
  /** Largest accepted request body (DEFAULT_BODY_LIMIT_BYTES). */
  bodyLimitBytes?: number;
  /**
   * The request bodies of every request together, from a body's first byte until its response has
   * ended (body-budget.ts DEFAULT_BODY_BUDGET_BYTES, 512 MiB); at least bodyLimitBytes. Past it, 503
   * with Retry-After, the body unread.
   */
  bodyBudgetBytes?: number;
  /** How long a client may take to send a whole request (http-bounds.ts). Default 60 s. */
  requestTimeoutMs?: number;
  /** Connections open at once (DEFAULT_MAX_CONNECTIONS). */
  maxConnections?: number;
  /**
   * Where the quiesced tiers are kept across restarts. Without it a restarted router routes an
   * evicted serve's tier again (to a stopped backend: 502s, where the eviction meant 503s) until
   * the next readmit, and holds a request across a residency window as if the tier's acquisition
   * after it took no time (its last one's is kept there too: on-demand.ts).
   */
  stateFile?: string;
  /**
   * The acquisition API on-demand tiers acquire through (GPURES_API_URL, GPURES_API_TOKEN).
   * Without it an on-demand tier answers like any other: 503 with Retry-After while quiesced.
   */
  acquisitions?: { url: string; token: string };
  /**
   * The bearer token a request to an on-demand preset must carry (GPURES_ROUTER_CLIENT_TOKEN): such
   * a request can acquire a serve, evicting others. Required with `acquisitions` (and under
   * `requireAcquisitionApi`) as soon as the config has an on-demand tier: such a config is refused at
   * start and on reload without it. Without `acquisitions` on-demand tiers are ordinary and it is
   * not asked for: no request can acquire anything.
   */
  clientToken?: string;
  /** Refuse a config (at start and on reload) with an on-demand tier when there is no acquisition API: main.js sets it. */
  requireAcquisitionApi?: boolean;
  /** Between two GETs of a running acquisition. Default 500 ms. */
  acquisitionPollMs?: number;
  /** The request bytes all on-demand queues together may hold (on-demand.ts DEFAULT_HELD_BYTES, 256 MiB). */
  heldBytesLimit?: number;
  /** Told each moment of an on-demand request's loop (on-demand.ts OnDemandMark): a benchmark's clock. */
  onDemandMarks?: OnDemandOptions['marks'];
  /** /metrics carries prom-client's process_* and nodejs_* metrics too: for the router's own process (main.ts). */
  processMetrics?: boolean;
}

/** The largest request body: vision requests carry base64 images. */
export const DEFAULT_BODY_LIMIT_BYTES = 64 * 1024 * 1024;

/**
 * Above what the router is made to hold at once: one tier's default on-demand queue (512 held
 * requests) beside vLLM's default batch of 256 sequences in flight, so a full queue is answered by
 * its own 503 queue_full with Retry-After rather than by a dropped connection.
 */
export const DEFAULT_MAX_CONNECTIONS = 1024;

export interface RunningRouter {
  url: string;
  port: number;
  close(): Promise<void>;
  state(): RouterSnapshot;
}

/** A request body that is not JSON: its own code, where fastify's errors have theirs. */
class InvalidJson extends Error {
  readonly statusCode = 400;
  readonly code = 'invalid_json';
}

/** JSON bodies; an empty body is allowed (admin POSTs carry none, whatever their content-type). */
function acceptJsonBodies(app: FastifyInstance): void {
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    if (text.trim() === '') return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch (err) {
      done(new InvalidJson(`request body is not valid JSON: ${errText(err)}`), undefined);
    }
  });
}

/** The `code` of fastify's own errors a client can cause, and what the router says of them. */
function fastifyError(err: Error & { code?: string }, bodyLimitBytes: number): { code: string; message: string } | undefined {
  switch (err.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return {
        code: 'body_too_large',
        message: `the request body is over the router's limit of ${bodyLimitBytes} bytes (${(bodyLimitBytes / 1024 / 1024).toFixed(2)} MiB)`,
      };
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return { code: 'unsupported_media_type', message: `${err.message}: the router takes application/json bodies` };
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return { code: 'invalid_content_length', message: err.message };
    default:
      return undefined;
  }
}

/**
 * A body whose Content-Length is over the limit is answered 413 at its headers, unread: Node reads
 * the rest off the socket and drops it (within the request bound), and the connection serves on.
 * fastify's own 413 (its parser's) closes the connection, and an OpenAI client, whose connections
 * are kept alive, lost its connection to a body it would send whole anyway. Before parsing, after
 * every onRequest hook: the admin token's 401 still comes first.
 */
function refuseOverLimitUnread(app: FastifyInstance, bodyLimitBytes: number): void {
  app.addHook('preParsing', (req, _reply, payload, done) => {
    const declared = req.headers['content-length'];
    if (declared !== undefined && /^\d+$/.test(declared) && Number(declared) > bodyLimitBytes) return done(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE());
    done(null, payload);
  });
}

/**
 * Whether a refused request's connection can serve the next one. fastify's parser closes it after
 * any error of its own (`connection: close`), the body read or not. A body read whole and found
 * not JSON leaves the connection at the next request's first byte: kept. A chunked body over the
 * limit is refused at the chunk that passes it, and closes: its end is not announced, and reading
 * on to find it would take in, without bound, the bytes the limit is there to refuse.
 */
function keepsConnection(err: Error, req: FastifyRequest): boolean {
  return err instanceof InvalidJson && req.raw.complete;
}

/**
 * Every miss and every failure answers in the router's error shape, fastify's own included (a body
 * too large, one of another media type, a route that does not exist): clients read error.message
 * and error.code, where fastify's bodies have a string for `error`. What Node answers before
 * fastify (408, 431, 400 on a request that is not HTTP) is answered in the same shape by
 * http-bounds.ts.
 */
function answerErrors(app: FastifyInstance, table: TierTable, bodyLimitBytes: number): void {
  app.setNotFoundHandler((req, reply) => {
    void reply.code(404).send(errorBody(`no route for ${req.method} ${req.url}`, 'not_found', { code: 'not_found' }));
  });
  app.setErrorHandler((err: Error & { statusCode?: number; code?: string }, req, reply) => {
    if (err instanceof BodyBudgetExceeded) return void refuseOverBudget(reply, err.message, table.config.retryAfterS);
    if (keepsConnection(err, req)) reply.removeHeader('connection');
    const status = err.statusCode !== undefined && err.statusCode >= 400 && err.statusCode < 600 ? err.statusCode : 500;
    if (status >= 500) return void reply.code(status).send(errorBody(err.message, 'internal_error', { code: 'internal_error' }));
    const known = err instanceof InvalidJson ? { code: err.code, message: err.message } : fastifyError(err, bodyLimitBytes);
    void reply.code(status).send(errorBody(known?.message ?? err.message, 'invalid_request', { code: known?.code ?? 'invalid_request' }));
  });
}

/** A request on a kept-alive connection while the router closes (http-bounds.ts answers it). */
function closingAnswer(retryAfterS: number): ClosingAnswer {
  return {
    retryAfterS,
    body: errorBody('the router is shutting down; send the request again (to the router that replaces it)', 'server_busy', {
      code: 'shutting_down',
      reason: 'shutting_down',
      retry_after_s: retryAfterS,
    }),
  };
}

export async function startRouter(opts: RouterOptions): Promise<RunningRouter> {
  if (!opts.adminToken) throw new Error('startRouter: adminToken is required (the admin API is never open)');
  const host = opts.host ?? '127.0.0.1';

  const bodyLimitBytes = opts.bodyLimitBytes ?? DEFAULT_BODY_LIMIT_BYTES;
  const budget = new BodyBudget(opts.bodyBudgetBytes ?? DEFAULT_BODY_BUDGET_BYTES);
  if (budget.limitBytes < bodyLimitBytes) {
    throw new Error(
      `startRouter: bodyBudgetBytes (${budget.limitBytes}) is below bodyLimitBytes (${bodyLimitBytes}): the largest body the router takes would always be refused`,
    );
  }
  const { config } = await loadConfig(opts.configPath);
  const means: OnDemandMeans = {
    acquisitionApi: Boolean(opts.acquisitions),
    requireAcquisitionApi: Boolean(opts.requireAcquisitionApi),
    clientToken: Boolean(opts.clientToken),
  };
  const unmet = onDemandUnmet(config, opts.configPath, means);
  if (unmet.length > 0) throw new ConfigLoadError(unmet);
  const table = await TierTable.open(config, opts.stateFile, opts.log);
  const probeTimeoutMs = opts.probeTimeoutMs ?? 5000;
  const changes = new Mutex();
  const api = opts.acquisitions ? new AcquisitionApi(opts.acquisitions) : undefined;
  const demand = new OnDemand(table, api, changes, {
    probeTimeoutMs,
    ...(opts.acquisitionPollMs ? { pollMs: opts.acquisitionPollMs } : {}),
    ...(opts.heldBytesLimit !== undefined ? { heldBytesLimit: opts.heldBytesLimit } : {}),
    ...(opts.onDemandMarks ? { marks: opts.onDemandMarks } : {}),
    ...(opts.log ? { log: opts.log } : {}),
  });

  const app: FastifyInstance = boundedFastify(
    { logger: false, bodyLimit: bodyLimitBytes },
    {
      requestTimeoutMs: opts.requestTimeoutMs,
      maxConnections: opts.maxConnections ?? DEFAULT_MAX_CONNECTIONS,
      whileClosing: () => closingAnswer(table.config.retryAfterS),
    },
  );
  // A request to an on-demand preset can evict serves, with the router's own API token: it must
  // carry the client token (proxy.ts), and on loopback a page rebound to 127.0.0.1 does not get
  // even as far as that check.
  if (isLoopback(host)) refuseForeignHosts(app, 'router');
  const metrics = new RouterMetrics(table, demand, budget, { processMetrics: Boolean(opts.processMetrics) });
  refuseOverLimitUnread(app, bodyLimitBytes);
  budgetBodies(app, { budget, bodyLimitBytes, retryAfterS: () => table.config.retryAfterS, onRefused: () => metrics.overBudget() });
  acceptJsonBodies(app);
  answerErrors(app, table, bodyLimitBytes);
  metrics.route(app);
  registerPublicRoutes(app, table, demand, metrics, opts.clientToken ? { clientToken: opts.clientToken } : {});
  await registerAdminRoutes(app, table, demand, changes, {
    configPath: opts.configPath,
    adminToken: opts.adminToken,
    probeTimeoutMs,
    onDemandMeans: means,
  });

  await app.listen({ host, port: opts.port ?? 0 });
  const address = app.server.address() as AddressInfo;

  return {
    url: httpUrl(address.address, address.port),
    port: address.port,
    close: () => app.close(),
    state: () => table.snapshot(),
  };
}
