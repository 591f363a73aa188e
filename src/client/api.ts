// The HTTP API the router calls to acquire an on-demand serve. It starts (or joins) the same
// acquire workflow the CLI starts; the token is checked before anything reaches Temporal.
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { Client } from '@temporalio/client';
import { ApplicationFailure, WorkflowNotFoundError, WorkflowUpdateFailedError, WorkflowUpdateRPCTimeoutOrCancelledError } from '@temporalio/client';
import type { WorkflowHandle } from '@temporalio/client';
import { Counter, Registry, collectDefaultMetrics } from 'prom-client';
import { z } from 'zod';
import { boundProblem } from '../domain/inputs';
import { findServe, isLoopback } from '../domain/manifest';
import { httpUrl } from '../domain/serve';
import type { Manifest, ServeSpec } from '../domain/types';
import type { LeaseRequest } from '../shared/operations';
import { ABANDON_ANSWER_MS, abandonUpdate, joinedSignal, joinLeaseSignal, NODE_ANSWER_MS, progressQuery, workflowIds } from '../shared/messages';
import type { StepRecord } from '../shared/messages';
import { singleFlight } from '../shared/single-flight';
import { foundRunning } from '../shared/wording';
import { serveGoingDown } from './serve-going-down';
import { startOperation } from './start-operation';
import { JOIN_SIGNALS_PER_RUN, JoinTerms } from './join-terms';
import { checksOwnReader, registerLedgerPage } from './ledger-page';
import type { LedgerPageOptions } from './ledger-page';
import { refuseForeignHosts } from '../adapters/loopback-host';
import { boundedFastify } from '../adapters/http-bounds';
import type { acquireWorkflow } from '../workflows/acquire';
import { bearerMatches, tokenDigest } from '../adapters/bearer';
import { MIN_TOKEN_CHARS } from '../config/env';
import { describe, unknownKeyMessage } from '../config/issues';

export interface ApiOptions {
  client: Client;
  manifest: Manifest;
  manifestFile: string;
  token: string;
  /**
   * The API listens on loopback addresses only: every route answers 421 to a Host that is not a
   * loopback name (DNS rebinding), and the ledger page reads without the token.
   */
  loopbackOnly?: boolean;
  /** The ledger page's settings (src/client/ledger-page.ts). */
  ledgerPage?: Pick<LedgerPageOptions, 'nvidiaSmi' | 'temporalUiUrl' | 'readDeadlineMs'>;
  /** /metrics carries prom-client's process_* and nodejs_* metrics too: for the `gpures api` process. */
  processMetrics?: boolean;
  /** How long a client may take to send a whole request (http-bounds.ts). Default 60 s. */
  requestTimeoutMs?: number;
  /** Connections open at once (API_MAX_CONNECTIONS). */
  maxConnections?: number;
}

/**
 * The API's callers are few: the router (a POST and its polls per on-demand tier acquiring), the
 * operator's scripts, a browser on the ledger page and a Prometheus scrape. 128 is many times
 * that, and keeps what anyone on the host can hold open at 128 sockets of at most 1 MiB of body.
 */
export const API_MAX_CONNECTIONS = 128;

/**
 * Retry-After of a request that arrives while the API closes: its restart (`gpures api` connects to
 * Temporal, about a second on a box) after the 2 s it gives requests in flight (STOP_GRACE_MS).
 * The router, its main caller, polls a running acquisition again within 500 ms anyway.
 */
const CLOSING_RETRY_AFTER_S = 5;
/** Retry-After of an abandon the run did not answer in time: the router asks again a second later anyway. */
const ABANDON_RETRY_AFTER_S = 1;

/** Retry-After of a join refused past JOIN_SIGNALS_PER_RUN: an acquisition takes seconds to minutes. */
const JOIN_FULL_RETRY_AFTER_S = 10;

const errorText = (err: unknown) => (err instanceof Error ? err.message : String(err));

/** Routes anyone on the network path may ask, without the token: they tell nothing secret and change nothing. */
const OPEN_ROUTES = new Set(['/healthz', '/metrics']);

/** How long /healthz waits for Temporal's answer. */
const HEALTH_TEMPORAL_MS = 2000;
/** How long one answer of Temporal's serves the /healthz after it: the route needs no token, so a flood of probes is not a flood of RPCs. */
const HEALTH_CACHE_MS = 1000;

/** A value as a JSON body holds it: `"yes"`, `1`, `an object`, `an array`. */
function shown(v: unknown): string {
  return v !== null && typeof v === 'object' && !Array.isArray(v) ? 'an object' : describe(v);
}

/** A field's message in the API's own words (`must be true or false (got "yes")`, `is required (…)`, as the manifest's), not zod's. */
function expecting(what: string) {
  return { error: (iss: { input?: unknown }) => (iss.input === undefined ? `is required (${what})` : `must be ${what} (got ${shown(iss.input)})`) };
}

const AcquisitionBody = z.strictObject(
  {
    serve: z.string(expecting('the name of a serve in the manifest')).min(1, expecting('the name of a serve in the manifest')),
    evict: z.boolean(expecting('true or false')).default(false),
    force: z.boolean(expecting('true or false')).default(false),
    /** Who asked: an operator's script, or the router for a held request (the lease seam). */
    trigger: z.enum(['operator', 'router'], expecting('"operator" or "router"')).default('operator'),
    drain_timeout_s: z
      .custom<number>((v) => boundProblem('drainTimeoutS', v) === undefined, {
        error: (iss) => `${boundProblem('drainTimeoutS', iss.input) ?? ''} (got ${JSON.stringify(iss.input)})`,
      })
      .optional(),
    /** A fixed lease; without it, a router's acquisition of a serve that declares idle_ttl_s gets an idle lease. */
    lease_s: z
      .custom<number>((v) => boundProblem('leaseS', v) === undefined, {
        error: (iss) => `${boundProblem('leaseS', iss.input) ?? ''} (got ${JSON.stringify(iss.input)})`,
      })
      .optional(),
  },
  expecting('a JSON object'),
);

/**
 * A 400's message, field by field; an unknown field as the manifest words one (`drainTimeoutS` is
 * the workflow's spelling, `--drain-timeout` the CLI's: the API's is drain_timeout_s).
 */
function bodyProblems(issues: readonly z.core.$ZodIssue[]): string {
  const fields = Object.keys(AcquisitionBody.shape);
  return issues
    .flatMap((i) =>
      i.code === 'unrecognized_keys'
        ? i.keys.map((k) => `${i.path.join('.') || 'body'}: ${unknownKeyMessage(k, fields)}`)
        : [`${i.path.join('.') || 'body'}: ${i.message}`],
    )
    .join('; ');
}

/** The lease an acquisition asked through the API carries: lease_s, else idle for a router's when the serve declares idle_ttl_s. */
export function leaseFor(body: { trigger: 'operator' | 'router'; lease_s?: number }, serve: ServeSpec): LeaseRequest | undefined {
  if (body.lease_s !== undefined) return { kind: 'fixed', seconds: body.lease_s };
  return body.trigger === 'router' && serve.idleTtlS !== undefined ? { kind: 'idle' } : undefined;
}

/** The shortest GPURES_API_TOKEN accepted (see MIN_TOKEN_CHARS). */
export const MIN_API_TOKEN_CHARS = MIN_TOKEN_CHARS;

/** Why a token is refused, or undefined. */
export function apiTokenProblem(token: string | undefined): string | undefined {
  if (!token) return 'GPURES_API_TOKEN is not set: the acquisition API changes the box and refuses to run without a token';
  if (token.length < MIN_API_TOKEN_CHARS) {
    return (
      `GPURES_API_TOKEN is ${token.length} characters, too short to be secret: ` +
      `at least ${MIN_API_TOKEN_CHARS} are required (e.g. \`openssl rand -hex 32\`)`
    );
  }
  return undefined;
}

/**
 * What the server actually bound, as URLs, each a wildcard said so: fastify's own listen() answer
 * names 127.0.0.1 for a 0.0.0.0 bind, which hid that the API was reachable from everywhere.
 */
export function boundAddresses(app: FastifyInstance): string[] {
  return app.addresses().map((a) => {
    if (typeof a === 'string') return a; // a unix socket's path
    const url = httpUrl(a.address, a.port);
    if (a.address === '0.0.0.0' || a.address === '::') return `${url} (every ${a.address === '::' ? '' : 'IPv4 '}interface: reachable beyond this host)`;
    return isLoopback(a.address) ? url : `${url} (reachable beyond this host)`;
  });
}

/**
 * A running acquisition's steps so far, from its `progress` query: `step` is the last one
 * completed (`admit`, `quiesce vision`, `stop vision`, …); `found_running`, whether the run found
 * its serve already running (it starts nothing), for a caller such as the router to act on
 * without reading the step's sentence. Nothing when the query cannot be
 * answered (no worker has run the first task), or not within NODE_ANSWER_MS: the node's worker
 * answers it, and with that worker dead (the server still listing its poller) the query would
 * hold the GET until the RPC's own timeout.
 */
async function progressOf(client: Client, run: WorkflowHandle): Promise<{ step?: StepRecord; steps_completed?: number; found_running?: boolean }> {
  try {
    const steps = await client.withDeadline(Date.now() + NODE_ANSWER_MS, () => run.query(progressQuery));
    const last = steps[steps.length - 1];
    return { steps_completed: steps.length, ...(last ? { step: last } : {}), found_running: foundRunning(steps) };
  } catch {
    return {};
  }
}

/** A failed acquisition's error; a denial that says when to retry (details[0].retryAfterS) passes it on. */
function failureOf(err: unknown): { type?: string; message: string; retry_after_s?: number } {
  const cause = (err as { cause?: unknown }).cause;
  if (!(cause instanceof ApplicationFailure)) {
    const c = cause as { type?: string; message?: string } | undefined;
    return { type: c?.type, message: c?.message ?? String(err) };
  }
  const first = cause.details?.[0] as { retryAfterS?: unknown } | undefined;
  const retryAfterS = first?.retryAfterS;
  return {
    type: cause.type ?? undefined,
    message: cause.message,
    ...(typeof retryAfterS === 'number' && Number.isFinite(retryAfterS) ? { retry_after_s: retryAfterS } : {}),
  };
}

export function buildApi(opts: ApiOptions): FastifyInstance {
  const problem = apiTokenProblem(opts.token);
  if (problem) throw new Error(problem);
  // :id is acquire/<node>/<serve>, %2F-encoded; fastify's default of 100 would answer 414 to long node names.
  const app = boundedFastify(
    { logger: false, routerOptions: { maxParamLength: 1000 } },
    {
      requestTimeoutMs: opts.requestTimeoutMs,
      maxConnections: opts.maxConnections ?? API_MAX_CONNECTIONS,
      whileClosing: () => ({
        retryAfterS: CLOSING_RETRY_AFTER_S,
        body: {
          error: {
            type: 'shutting_down',
            code: 'shutting_down',
            message: 'the acquisition API is shutting down; send the request again once it is back',
            retry_after_s: CLOSING_RETRY_AFTER_S,
          },
        },
      }),
    },
  );
  const { client, manifest } = opts;

  // One error shape for every answer, fastify's own (malformed JSON, 415, 404 routes) included.
  app.setErrorHandler(async (err: { statusCode?: number; message: string; code?: string }, _req, reply) => {
    const status = err.statusCode && err.statusCode >= 400 && err.statusCode < 600 ? err.statusCode : 500;
    return reply.code(status).send({ error: { type: status >= 500 ? 'internal' : 'bad_request', message: err.message } });
  });
  app.setNotFoundHandler(async (req, reply) => reply.code(404).send({ error: { type: 'not_found', message: `no route ${req.method} ${req.url}` } }));

  const registry = new Registry();
  if (opts.processMetrics) collectDefaultMetrics({ register: registry });
  const requests = new Counter({
    name: 'gpures_api_requests_total',
    help: "Requests the acquisition API answered, by route (its pattern; 'unmatched' for none) and HTTP status code",
    labelNames: ['route', 'code'],
    registers: [registry],
  });
  app.addHook('onResponse', async (req, reply) => {
    requests.inc({ route: req.routeOptions.url ?? 'unmatched', code: String(reply.statusCode) });
  });

  if (opts.loopbackOnly) refuseForeignHosts(app);
  const digest = tokenDigest(opts.token);
  app.addHook('onRequest', async (req, reply) => {
    if (checksOwnReader(req)) return undefined;
    if (OPEN_ROUTES.has(req.url.split('?')[0] ?? '') && req.method === 'GET') return undefined;
    if (!bearerMatches(req.headers.authorization, digest)) {
      return reply.code(401).send({ error: { type: 'unauthorized', message: 'missing or wrong bearer token' } });
    }
    return undefined;
  });

  registerLedgerPage(app, {
    client,
    manifest,
    ...opts.ledgerPage,
    loopbackOnly: opts.loopbackOnly === true,
    authorized: (req) => bearerMatches(req.headers.authorization, digest),
  });
  // Alive, and whether Temporal answers: without it no acquisition can start (503).
  const temporalReachable = singleFlight(
    () =>
      client
        .withDeadline(Date.now() + HEALTH_TEMPORAL_MS, () => client.workflowService.getSystemInfo({}))
        .then(
          () => true,
          () => false,
        ),
    HEALTH_CACHE_MS,
  );
  app.get('/healthz', async (_req, reply) => {
    if (await temporalReachable()) return { status: 'ok', node: manifest.node, temporal: 'reachable' };
    return reply.code(503).send({ status: 'degraded', node: manifest.node, temporal: 'unreachable' });
  });

  app.get('/metrics', async (_req, reply) => reply.type(registry.contentType).send(await registry.metrics()));

  const joins = new JoinTerms();
  /** The run each acquisition id was last told an operator joined (one id per serve of the manifest). */
  const toldJoined = new Map<string, string>();
  app.post('/v1/acquisitions', async (req, reply) => {
    const parsed = AcquisitionBody.safeParse(req.body);
    if (!parsed.success) {
      return reply.code(400).send({ error: { type: 'bad_request', message: bodyProblems(parsed.error.issues) } });
    }
    const body = parsed.data;
    const serve = findServe(manifest, body.serve);
    if (!serve) {
      return reply.code(404).send({ error: { type: 'unknown_serve', message: `${opts.manifestFile}: no serve named '${body.serve}'` } });
    }
    const lease = leaseFor(body, serve);
    const workflowId = workflowIds.acquire(manifest.node, body.serve);
    const via = body.trigger === 'router' ? 'acquisition API, for the router' : 'acquisition API';
    // A repeated POST while an acquisition runs joins it.
    const start = (signalled: boolean) =>
      startOperation<typeof acquireWorkflow>(client, {
        workflowType: 'acquireWorkflow',
        workflowId,
        node: manifest.node,
        // Only the router's says who: its runs are the ones it may abandon, and a worker older than
        // the field refuses it (README), so an operator's POST stays startable on one.
        input: {
          serve: body.serve,
          evict: body.evict,
          force: body.force,
          drainTimeoutS: body.drain_timeout_s,
          ...(lease ? { lease } : {}),
          ...(body.trigger === 'router' ? { trigger: 'router' as const } : {}),
        },
        summary: `serves up ${body.serve}${body.evict ? ' --evict' : ''} (${via}) on ${manifest.node}`,
        onConflict: 'join',
        // Joined, the run keeps the first POST's input: the lease asked goes to it as well (docs/acquisition-api.md).
        // The caller is named: a run the router started goes on for an operator who joined it.
        ...(lease && signalled
          ? { joinSignal: { signal: joinLeaseSignal, args: [lease, body.trigger] } }
          : body.trigger === 'operator' && signalled
            ? { joinSignal: { signal: joinedSignal, args: ['operator'] } }
            : {}),
      });
    const accepted = (runId: string) =>
      reply
        .code(202)
        .header('location', `/v1/acquisitions/${encodeURIComponent(workflowId)}`)
        .send({ workflow_id: workflowId, run_id: runId, status_url: `/v1/acquisitions/${encodeURIComponent(workflowId)}` });
    // The run a signal's count is reserved on: counted before the send's await, so that
    // concurrent POSTs cannot all pass the cap before any is counted.
    let reserved: string | undefined;
    if (lease && (joins.lastRun(workflowId) || joins.sending(workflowId))) {
      // Joined first without a signal (no event in a running run's history): which run, and whether it has the terms already.
      const askedAtMs = Date.now();
      const joined = await start(false);
      const runId = joined.firstExecutionRunId;
      // The run it joined had closed, and this call started a new one, whose input carries the
      // terms: sending them again could start yet another run, should that one finish first.
      if (runId !== joins.lastRun(workflowId) && (await joined.startedHere())) {
        joins.started(workflowId, runId, lease, askedAtMs);
        return accepted(runId);
      }
      if (joins.covered(workflowId, runId, lease, Date.now())) return accepted(runId);
      if (joins.reserve(workflowId, runId)) reserved = runId;
      else {
        const asked = lease.kind === 'idle' ? 'idle terms' : `lease_s ${lease.seconds}`;
        return reply
          .code(429)
          .header('retry-after', String(JOIN_FULL_RETRY_AFTER_S))
          .send({
            error: {
              type: 'too_many_joins',
              message:
                `${workflowId} (run ${runId}) has had ${JOIN_SIGNALS_PER_RUN} POSTs' lease terms from this API, each an event in its history; ` +
                `they ask ${joins.asked(workflowId)}, which does not cover ${asked}, so nothing was sent: ` +
                "POST again once the acquisition has completed (the serve's lease then takes the terms as at least), or extend its lease",
              retry_after_s: JOIN_FULL_RETRY_AFTER_S,
            },
          });
      }
    }
    // An operator's POST without terms tells the run it waits too (joinedSignal), once per run from
    // this API: a flood of POSTs is not a flood of events in its history.
    if (!lease && body.trigger === 'operator') {
      const told = toldJoined.get(workflowId);
      if (told !== undefined && (await start(false)).firstExecutionRunId === told) return accepted(told);
      const h = await start(true);
      toldJoined.set(workflowId, h.firstExecutionRunId);
      return accepted(h.firstExecutionRunId);
    }
    const sentAtMs = Date.now();
    if (lease) joins.begin(workflowId);
    let handle: Awaited<ReturnType<typeof start>>;
    try {
      handle = await start(true);
    } catch (err) {
      if (reserved !== undefined) joins.release(workflowId, reserved);
      throw err;
    } finally {
      if (lease) joins.end(workflowId);
    }
    if (lease) joins.record(workflowId, handle.firstExecutionRunId, lease, sentAtMs, reserved);
    return accepted(handle.firstExecutionRunId);
  });

  /** The serve of this node's acquisition `workflowId`, or undefined (answered 404): another node's answers as one never started, existing or not. */
  const ownServe = (workflowId: string): string | undefined => {
    const serve = workflowId.startsWith(`acquire/${manifest.node}/`) ? workflowId.slice(`acquire/${manifest.node}/`.length) : '';
    return serve && !serve.includes('/') ? serve : undefined;
  };
  const notOurs = (reply: FastifyReply, workflowId: string) =>
    reply.code(404).send({ error: { type: 'not_found', message: `${workflowId} is not an acquisition of node '${manifest.node}'` } });

  // The router's held requests for the serve have all gone: the run decides whether to abandon itself (an Update, recorded in its history).
  app.post<{ Params: { id: string } }>('/v1/acquisitions/:id/abandon', async (req, reply) => {
    const workflowId = req.params.id;
    if (!ownServe(workflowId)) return notOurs(reply, workflowId);
    let d;
    try {
      d = await client.workflow.getHandle(workflowId).describe();
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return reply.code(404).send({ error: { type: 'not_found', message: `no acquisition ${workflowId}` } });
      throw err;
    }
    const ended = (why: string) => ({ workflow_id: workflowId, run_id: d.runId, abandoned: false, why, reason: 'ending' });
    // Paused is not ended: the run is asked, and answers once resumed (else its Update times out: 504).
    if (d.status.name !== 'RUNNING' && d.status.name !== 'PAUSED' && d.closeTime !== undefined) {
      return ended(`the acquisition has already ended (${d.status.name.toLowerCase()})`);
    }
    const run = client.workflow.getHandle(workflowId, d.runId);
    try {
      // The run answers in its next workflow task, never waiting; the ask is stamped so a run that
      // gets it only after this deadline (its worker down meanwhile) refuses it rather than acting late.
      const askedAtEpochMs = Date.now();
      const answer = await client.withDeadline(askedAtEpochMs + ABANDON_ANSWER_MS, () =>
        run.executeUpdate(abandonUpdate, { args: [{ by: 'router', askedAtEpochMs }] }),
      );
      const said = answer.abandoned
        ? answer
        : { abandoned: false, why: answer.why, ...(answer.reason ? { reason: answer.reason } : {}), ...(answer.askAgain ? { ask_again: true } : {}) };
      return { workflow_id: workflowId, run_id: d.runId, ...said };
    } catch (err) {
      // Described running, then not found: the run ended meanwhile, nothing left to abandon.
      if (err instanceof WorkflowNotFoundError) return ended('the acquisition ended while it was asked');
      // No answer within ABANDON_ANSWER_MS (its worker down or busy): ask again later.
      if (err instanceof WorkflowUpdateRPCTimeoutOrCancelledError) {
        return reply
          .code(504)
          .header('retry-after', String(ABANDON_RETRY_AFTER_S))
          .send({ error: { type: 'abandon_unanswered', message: `${workflowId} did not answer the abandon within ${ABANDON_ANSWER_MS} ms: ask again` } });
      }
      // The Update itself failed (its handler threw, or the run refused it): the failure's own words.
      if (err instanceof WorkflowUpdateFailedError) {
        return reply.code(409).send({ error: { type: 'not_abandoned', message: `${workflowId} refused the abandon: ${errorText(err.cause ?? err)}` } });
      }
      throw err;
    }
  });

  app.get<{ Params: { id: string } }>('/v1/acquisitions/:id', async (req, reply) => {
    const workflowId = req.params.id;
    const serve = ownServe(workflowId);
    if (!serve) return notOurs(reply, workflowId);
    const handle = client.workflow.getHandle(workflowId);
    try {
      const d = await handle.describe();
      const status = d.status.name;
      // The run described, not the latest: a POST in between must not make this GET wait on it.
      const run = client.workflow.getHandle(workflowId, d.runId);
      if (status === 'COMPLETED') {
        const result = (await run.result()) as unknown;
        const goingDown = await serveGoingDown(client, manifest.node, serve, result, d.startTime);
        return { workflow_id: workflowId, run_id: d.runId, status: 'completed', result, ...(goingDown ? { serve_going_down: goingDown } : {}) };
      }
      if (status === 'RUNNING' || status === 'PAUSED' || d.closeTime === undefined)
        return { workflow_id: workflowId, run_id: d.runId, status: status === 'PAUSED' ? 'paused' : 'running', ...(await progressOf(client, run)) };
      let failure: { type?: string; message: string; retry_after_s?: number } = { message: status.toLowerCase() };
      try {
        await run.result();
      } catch (err) {
        failure = failureOf(err);
      }
      return { workflow_id: workflowId, run_id: d.runId, status: status.toLowerCase(), error: failure };
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return reply.code(404).send({ error: { type: 'not_found', message: `no acquisition ${workflowId}` } });
      throw err;
    }
  });

  return app;
}
