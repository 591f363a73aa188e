// The router's public surface: /healthz, /v1/models (the presets), and the proxied OpenAI routes,
// each forwarded to its preset's tier with `model` rewritten to the tier's served_model_name.
// A quiesced tier answers 503; a request counts as in flight until its response is done.
import http from 'node:http';
import https from 'node:https';
import type { IncomingMessage } from 'node:http';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { findTier } from '../config/router-model';
import { errorBody, errText } from './errors';
import type { TierTable } from './tier-table';

/** Routes the router proxies, and the backend path each goes to. */
const PROXIED = ['/v1/chat/completions', '/v1/embeddings'] as const;
/** Response headers relayed from the backend besides the status and the body. */
const RELAYED_HEADERS = ['content-type', 'cache-control'] as const;

export function registerPublicRoutes(app: FastifyInstance, table: TierTable): void {
  app.get('/healthz', () => ({ status: 'ok', mapping_version: table.config.mappingVersion }));

  app.get('/v1/models', () => ({
    object: 'list',
    data: table.config.presets.map((p) => ({ id: p.name, object: 'model', owned_by: 'gpures-router' })),
  }));

  for (const route of PROXIED) {
    app.post(route, (req, reply) => proxy(table, route, req, reply));
  }
}

async function proxy(table: TierTable, route: (typeof PROXIED)[number], req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const body = req.body;
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    return reply.code(400).send(errorBody('request body must be a JSON object with a "model" field', 'invalid_request'));
  }
  const model = (body as Record<string, unknown>).model;
  const cfg = table.config;
  const preset = typeof model === 'string' ? cfg.presets.find((p) => p.name === model) : undefined;
  if (!preset) {
    const presets = cfg.presets.map((p) => p.name);
    const what = typeof model === 'string' ? `unknown model '${model}'` : 'missing "model"';
    return reply.code(typeof model === 'string' ? 404 : 400).send(errorBody(`${what}; known presets: ${presets.join(', ')}`, 'model_not_found', { presets }));
  }
  const tier = findTier(cfg, preset.tier);
  if (!tier) throw new Error(`preset '${preset.name}' names missing tier '${preset.tier}'`); // a validated config rules this out
  const rt = table.runtimeOf(tier.name);
  if (rt.mode === 'quiesced') {
    return reply.code(503).send(errorBody(`tier '${tier.name}' is quiesced (evicted or draining); retry later`, 'tier_unavailable', { tier: tier.name }));
  }

  // In flight from here (the check above and this increment are one synchronous step, so no
  // request gets past a quiesce that has returned) until the response is finished or aborted.
  rt.inFlight++;
  rt.lastUsedAtEpochMs = Date.now();
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    rt.inFlight--;
    rt.lastUsedAtEpochMs = Date.now();
  };
  reply.raw.once('finish', release);
  reply.raw.once('close', release);

  const payload = JSON.stringify({ ...(body as Record<string, unknown>), model: tier.servedModelName });
  let upstream: IncomingMessage;
  try {
    upstream = await forward(`${tier.backend}${route}`, payload, req, reply);
  } catch (err) {
    if (reply.raw.destroyed) return reply.hijack();
    return reply.code(502).send(
      errorBody(`tier '${tier.name}' backend ${tier.backend} is unreachable: ${errText(err)}`, 'backend_unreachable', {
        tier: tier.name,
        backend: tier.backend,
      }),
    );
  }
  if (reply.raw.destroyed) {
    upstream.destroy();
    return reply.hijack();
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
        reject(err);
      }
    });
    upstreamReq.end(payload);
  });
}
