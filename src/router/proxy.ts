// The router's public surface: /healthz, /v1/models (the presets), and the proxied OpenAI routes,
// each forwarded to its preset's tier with `model` rewritten to the tier's served_model_name.
// A quiesced tier answers 503 with Retry-After, unless it is on demand: then the request waits in
// its queue while the serve is acquired (on-demand.ts). A request counts as in flight from when it
// is forwarded until its response is done; a held one is not (there is nothing to drain yet).
// A request to an on-demand preset must carry the client token, whatever its tier's state: it
// can start an acquisition (an eviction), and while the serve runs it renews the serve's idle lease.
// No client header reaches a backend but Accept: the client token stays with the router.
import { pipeline } from 'node:stream/promises';
import http from 'node:http';
import https from 'node:https';
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { bearerMatches, tokenDigest } from '../adapters/bearer';
import { findTier } from '../config/router-model';
import { errorBody, errText } from './errors';
import type { RouterTier } from '../config/router-model';
import type { RouterMetrics } from './metrics';
import type { OnDemand, Refusal } from './on-demand';
import type { TierRuntime, TierTable } from './tier-table';
import type { QuiesceWhy } from '../shared/contracts';

/** Routes the router proxies, and the backend path each goes to. */
const PROXIED = ['/v1/chat/completions', '/v1/embeddings'] as const;
/** Response headers relayed from the backend besides the status and the body. */
const RELAYED_HEADERS = ['content-type', 'cache-control'] as const;

export interface PublicRouteOptions {
  /** The token requests to on-demand presets must carry (GPURES_ROUTER_CLIENT_TOKEN); without it every such request is refused. */
  clientToken?: string;
}

export function registerPublicRoutes(app: FastifyInstance, table: TierTable, demand: OnDemand, metrics: RouterMetrics, opts: PublicRouteOptions = {}): void {
  app.get('/healthz', () => ({ status: 'ok', mapping_version: table.config.mappingVersion }));

  app.get('/v1/models', () => modelList(table, demand));

  const clientDigest = opts.clientToken ? tokenDigest(opts.clientToken) : undefined;
  // Fails closed: a router without a client token refuses its on-demand presets (server.ts refuses to load them first).
  const isClient = (authorization: string | undefined) => clientDigest !== undefined && bearerMatches(authorization, clientDigest);
  for (const route of PROXIED) {
    app.post(route, (req, reply) => proxy(table, demand, metrics, isClient, route, req, reply));
  }
}

/** 401 for a request to an on-demand preset without the client token: nothing is held, acquired or forwarded. */
function unauthorized(reply: FastifyReply, preset: string, tier: RouterTier): FastifyReply {
  return reply
    .code(401)
    .header('www-authenticate', 'Bearer realm="gpures-router"')
    .send(
      errorBody(
        `preset '${preset}' is on demand: a request to it can acquire serve '${tier.onDemand?.serve ?? ''}' of tier '${tier.name}', ` +
          'which can evict other serves, so it must carry Authorization: Bearer <client token> (GPURES_ROUTER_CLIENT_TOKEN; ' +
          "an OpenAI client's api_key); missing or wrong token",
        'unauthorized',
        { code: 'unauthorized', reason: 'unauthorized', tier: tier.name },
      ),
    );
}

/**
 * What OpenAI clients read (`data`: id, object, owned_by) for the presets that can answer now or
 * on demand, each with `availability`; the others under `unavailable`, with why and when to retry.
 */
function modelList(table: TierTable, demand: OnDemand) {
  const cfg = table.config;
  const data: Record<string, unknown>[] = [];
  const unavailable: Record<string, unknown>[] = [];
  for (const p of cfg.presets) {
    const tier = findTier(cfg, p.tier);
    if (!tier) continue;
    const quiesced = table.runtimeOf(tier.name).mode === 'quiesced';
    // A refusal's cooldown says nothing once the tier is back (brought up by an operator meanwhile).
    const refusal = tier.onDemand && quiesced ? demand.cooldown(tier.name) : undefined;
    const down = quiesced ? broughtDown(tier, table.runtimeOf(tier.name), demand) : undefined;
    if (refusal) unavailable.push({ id: p.name, tier: tier.name, reason: refusal.reason, message: refusal.message, retry_after_s: refusal.retryAfterS });
    else if (down) unavailable.push({ id: p.name, ...downFields(down) });
    else if (quiesced && !(tier.onDemand && demand.enabled))
      unavailable.push({ id: p.name, tier: tier.name, reason: 'quiesced', retry_after_s: cfg.retryAfterS });
    else {
      data.push({ id: p.name, object: 'model', owned_by: 'gpures-router', tier: tier.name, availability: availability(table, tier, demand, quiesced) });
    }
  }
  return { object: 'list', data, unavailable };
}

/**
 * A listed tier's availability. Its mode alone does not say its backend answers: a tier is active
 * until someone quiesces it, so a fresh router (or a new state file) finds an evicted or stopped
 * serve's tier active. Only a backend that answered since the router started is `now`; before,
 * an on-demand tier is `on_demand` (a request may have to acquire it), any other `unknown` (a
 * request may get 502). The router does not probe backends for a listing.
 */
function availability(table: TierTable, tier: RouterTier, demand: OnDemand, quiesced: boolean): 'now' | 'on_demand' | 'unknown' {
  if (!quiesced && table.runtimeOf(tier.name).answered) return 'now';
  return tier.onDemand && demand.enabled ? 'on_demand' : 'unknown';
}

/** A quiesced tier whose serve was brought down and that nothing brings back on its own: why, and what does. */
export interface DownRefusal {
  tier: string;
  reason: 'operator_down' | 'lease_ended';
  message: string;
  /** The command that brings the serve back. */
  bringsBack: string;
}

/**
 * Whether a quiesced tier's serve is down for good as far as the router can tell: brought down by
 * an operator, or at its lease's end, and not a tier this router acquires (an on-demand tier, with
 * the acquisition API, acquires it again whatever the reason: README's "On demand through the
 * router"). Any other quiesce (an eviction's, a drain's, one that gave no reason) is back on its own.
 */
function broughtDown(tier: RouterTier, rt: TierRuntime, demand: OnDemand): DownRefusal | undefined {
  const why: QuiesceWhy | undefined = rt.why;
  if (!why || (why.reason !== 'operator-down' && why.reason !== 'lease-ended') || (tier.onDemand && demand.enabled)) return undefined;
  const serve = why.serve ?? tier.onDemand?.serve;
  const bringsBack = `gpures serves up ${serve ?? '<its serve>'}`;
  const whose = serve !== undefined ? `its serve '${serve}'` : 'its serve';
  const what =
    why.reason === 'operator-down'
      ? `an operator brought ${whose} down (gpures serves down)`
      : `${whose} was brought down when its lease ended, and only an acquisition or an operator brings it back`;
  return {
    tier: tier.name,
    reason: why.reason === 'operator-down' ? 'operator_down' : 'lease_ended',
    message: `tier '${tier.name}' is down: ${what}; it stays down until \`${bringsBack}\`: retrying will not bring it back`,
    bringsBack,
  };
}

/** What a down tier's 503 and its /v1/models entry say: no retry_after_s, since no wait brings it back. */
const downFields = (d: DownRefusal) => ({ tier: d.tier, reason: d.reason, message: d.message, brought_back_by: d.bringsBack });

/** 503 without Retry-After (a client retrying on it would retry forever) and the router's error shape. */
function refuseDown(reply: FastifyReply, d: DownRefusal): void {
  const { message, ...fields } = downFields(d);
  void reply.code(503).send(errorBody(message, 'tier_unavailable', { code: d.reason, ...fields }));
}

/** 503 with Retry-After and the router's error shape; once a held stream has begun, an SSE error event. */
function refuseWith(reply: FastifyReply, r: Refusal, streamed: boolean): void {
  const body = errorBody(r.message, 'tier_unavailable', {
    code: r.reason,
    tier: r.tier,
    reason: r.reason,
    retry_after_s: r.retryAfterS,
    ...(r.acquisition ? { acquisition: { workflow_id: r.acquisition.workflowId, step: r.acquisition.step ?? null } } : {}),
  });
  if (streamed) reply.raw.end(sseError(body));
  else void reply.code(503).header('retry-after', String(r.retryAfterS)).send(body);
}

/** openai-node throws an APIError for an SSE message whose data carries `error`. */
const sseError = (body: unknown) => `event: error\ndata: ${JSON.stringify(body)}\n\n`;

/**
 * While a streaming request waits: after each keepalive_s an SSE comment line (which OpenAI
 * clients skip), the 200 and the event-stream headers going out with the first. Until then the
 * client may still get a plain status, whatever the wait ends in.
 */
function keepAlive(reply: FastifyReply, tier: RouterTier, seconds: number): { started: () => boolean; stop: () => void } {
  let started = false;
  const timer = setInterval(() => {
    if (reply.raw.destroyed) return;
    if (!started) {
      started = true;
      reply.hijack();
      reply.raw.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'x-gpures-tier': tier.name });
    }
    reply.raw.write(`: waiting for tier '${tier.name}' to be acquired\n\n`);
  }, seconds * 1000);
  return { started: () => started, stop: () => clearInterval(timer) };
}

/**
 * Counts the request in flight until its response is finished or aborted; the release is
 * idempotent, and takes its listeners off: a request held after a refused attempt enters again,
 * and each attempt's listeners left on the response would add up past Node's warning.
 */
function enterInFlight(rt: TierRuntime, reply: FastifyReply): () => void {
  rt.inFlight++;
  rt.lastUsedAtEpochMs = Date.now();
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    reply.raw.off('finish', release);
    reply.raw.off('close', release);
    rt.inFlight--;
    rt.lastUsedAtEpochMs = Date.now();
  };
  reply.raw.once('finish', release);
  reply.raw.once('close', release);
  return release;
}

const refused = (err: unknown) => (err as NodeJS.ErrnoException | undefined)?.code === 'ECONNREFUSED';

async function proxy(
  table: TierTable,
  demand: OnDemand,
  metrics: RouterMetrics,
  isClient: (authorization: string | undefined) => boolean,
  route: (typeof PROXIED)[number],
  req: FastifyRequest,
  reply: FastifyReply,
): Promise<FastifyReply> {
  const body = req.body;
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return reply.code(400).send(errorBody('request body must be a JSON object with a "model" field', 'invalid_request', { code: 'invalid_body' }));
  }
  const model = (body as Record<string, unknown>).model;
  const cfg = table.config;
  const preset = typeof model === 'string' ? cfg.presets.find((p) => p.name === model) : undefined;
  if (!preset) {
    const presets = cfg.presets.map((p) => p.name);
    const what = typeof model === 'string' ? `unknown model '${model}'` : 'missing "model"';
    // OpenAI's own code for a model it does not serve, so clients that branch on it recognise ours.
    const [status, code] = typeof model === 'string' ? [404, 'model_not_found'] : [400, 'missing_model'];
    return reply.code(status).send(errorBody(`${what}; known presets: ${presets.join(', ')}`, 'model_not_found', { code, presets }));
  }
  const tier = findTier(cfg, preset.tier);
  if (!tier) throw new Error(`preset '${preset.name}' names missing tier '${preset.tier}'`); // a validated config rules this out
  const rt = table.runtimeOf(tier.name);
  metrics.requestFor(tier.name, reply);
  // Whenever the router can acquire for the tier, before its state is even looked at: the answer
  // does not depend on whether the serve happens to be up.
  if (tier.onDemand && demand.enabled && !isClient(req.headers.authorization)) return unauthorized(reply, preset.name, tier);
  const refuse = (r: Refusal, streamed = false) => {
    metrics.refused(r);
    refuseWith(reply, r, streamed);
  };
  const streaming = (body as Record<string, unknown>).stream === true;
  const payload = JSON.stringify({ ...(body as Record<string, unknown>), model: tier.servedModelName });
  let held: ReturnType<typeof keepAlive> | undefined;

  /**
   * Waits in the tier's queue: false to go on, true once the reply has been given. (Not the
   * reply itself: a FastifyReply is thenable, and an async function would await it.)
   */
  const wait = async (): Promise<boolean> => {
    const down = broughtDown(tier, rt, demand);
    if (down) {
      metrics.refused(down);
      refuseDown(reply, down);
      return true;
    }
    if (!tier.onDemand || !demand.enabled) {
      const why = tier.onDemand ? '; it is on demand, but this router has no acquisition API (GPURES_API_URL, GPURES_API_TOKEN)' : '';
      refuse({
        tier: tier.name,
        reason: 'quiesced',
        message: `tier '${tier.name}' is quiesced (evicted or draining)${why}; retry later`,
        retryAfterS: cfg.retryAfterS,
      });
      return true;
    }
    if (streaming) held ??= keepAlive(reply, tier, tier.onDemand.keepaliveS);
    const outcome = await demand.hold(tier, reply, Buffer.byteLength(payload));
    held?.stop();
    if (outcome.ok) return false;
    if ('gone' in outcome) reply.hijack();
    else refuse(outcome.refusal, held?.started());
    return true;
  };

  for (let attempt = 0; ; attempt++) {
    if (rt.mode === 'quiesced' && (await wait())) return reply;
    // In flight from here (the check above and this increment are one synchronous step, so no
    // request gets past a quiesce that has returned) until the response is finished or aborted.
    const release = enterInFlight(rt, reply);
    let upstream: IncomingMessage;
    try {
      upstream = await forward(`${tier.backend}${route}`, payload, req, reply);
    } catch (err) {
      if (refused(err)) rt.answered = false;
      if (reply.raw.destroyed) return reply.hijack();
      // An on-demand tier's serve that is down: hold the request and acquire it, once.
      if (attempt === 0 && tier.onDemand && demand.enabled && refused(err)) {
        release();
        if (await wait()) return reply;
        continue;
      }
      const e = errorBody(`tier '${tier.name}' backend ${tier.backend} is unreachable: ${errText(err)}`, 'backend_unreachable', {
        code: 'backend_unreachable',
        tier: tier.name,
        backend: tier.backend,
      });
      if (!held?.started()) return reply.code(502).send(e);
      reply.raw.end(sseError(e));
      return reply;
    }
    rt.answered = true;
    if (reply.raw.destroyed) {
      upstream.destroy();
      return reply.hijack();
    }
    if (held?.started()) {
      await relayIntoStream(upstream, reply);
      return reply;
    }
    reply.code(upstream.statusCode ?? 502);
    for (const h of RELAYED_HEADERS) {
      const v = upstream.headers[h];
      if (v !== undefined) reply.header(h, v);
    }
    reply.header('x-gpures-tier', tier.name);
    // Streamed, never buffered: SSE chunks reach the client as the backend writes them.
    return reply.send(upstream);
  }
}

/** The 'close' listeners a held stream's response may carry: the router's 4 and pipeline's 7, with room. */
const RELAYED_STREAM_LISTENERS = 16;

/** The backend's answer into a stream whose 200 already went out: its events, or its error as an SSE error event. */
async function relayIntoStream(upstream: IncomingMessage, reply: FastifyReply): Promise<void> {
  if (upstream.statusCode === 200) {
    // pipeline puts 7 'close' listeners of Node's own on the response, beside the router's 4 (the
    // in-flight count, the metrics, the body budget, the client's going): past Node's default of 10
    // it warns of a leak that is not one. Each is per response and goes with it.
    reply.raw.setMaxListeners(RELAYED_STREAM_LISTENERS);
    // pipeline, not pipe: a backend that dies mid-stream never emits 'end', and pipe would leave
    // the client's stream open and the request in flight for good (no drain, no idle lease, ends).
    await pipeline(upstream, reply.raw).catch((err: unknown) => reply.raw.destroy(err instanceof Error ? err : undefined));
    return;
  }
  const chunks: Buffer[] = [];
  try {
    for await (const c of upstream) chunks.push(c as Buffer);
  } catch (err) {
    reply.raw.destroy(err instanceof Error ? err : undefined);
    return;
  }
  const text = Buffer.concat(chunks).toString('utf8');
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  const error = (body as { error?: unknown } | undefined)?.error
    ? body
    : errorBody(`backend answered ${upstream.statusCode ?? 0}: ${text.slice(0, 500)}`, 'backend_error', { code: 'backend_error' });
  reply.raw.end(sseError(error));
}

/** POSTs the payload to the backend; resolves at the response headers. Aborts when the client goes. */
function forward(url: string, payload: string, req: FastifyRequest, reply: FastifyReply): Promise<IncomingMessage> {
  return new Promise((resolve, reject) => {
    const target = new URL(url);
    const client = target.protocol === 'https:' ? https : http;
    const headers: Record<string, string | number> = {
      'content-type': 'application/json',
      'content-length': Buffer.byteLength(payload),
    };
    const accept = req.headers.accept;
    if (accept) headers.accept = accept;
    const upstreamReq = client.request(target, { method: 'POST', headers });
    let settled = false;
    // The client went away before the response finished: stop the backend's work too.
    const onClientGone = () => {
      if (!reply.raw.writableFinished) upstreamReq.destroy(new Error('client disconnected'));
    };
    reply.raw.once('close', onClientGone);
    upstreamReq.once('response', (res) => {
      settled = true;
      resolve(res);
    });
    upstreamReq.once('error', (err) => {
      if (!settled) {
        settled = true;
        // No response to abort: a refused attempt's listener would stay on the reply for good.
        reply.raw.off('close', onClientGone);
        reject(err);
      }
    });
    upstreamReq.end(payload);
  });
}
