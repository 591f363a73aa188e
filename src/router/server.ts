// The reference router: an OpenAI-compatible front door that maps presets to tiers (backends),
// and implements our router admin contract (docs/router-admin-api.md): quiesce, tier state with
// the in-flight count, guarded readmit, reload, healthz. Tests and the demo run it; a production
// router plugs in by implementing the same contract.
import { createHash, timingSafeEqual } from 'node:crypto';
import { readFile, rename, writeFile } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import type { IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import Fastify from 'fastify';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ReadmitOutcome, ReadmitRefusal, TierMode, TierState } from '../shared/contracts';
import { findTier, parseRouterConfig } from '../domain/router-config';
import type { RouterConfig, RouterTier } from '../domain/router-config';
import type { ManifestIssue } from '../domain/types';
import { formatIssue } from '../domain/types';
import { httpUrl } from '../domain/serve';

export interface RouterOptions {
  configPath: string;
  /** Loopback unless asked: the admin API must not be reachable beyond this host by accident. */
  host?: string;
  /** 0 picks a free port. */
  port?: number;
  /** Bearer token every /admin request must present. */
  adminToken: string;
  /** Timeout of each readmit probe (/health, /v1/models). Default 5000 ms. */
  probeTimeoutMs?: number;
  /** Largest accepted request body; vision requests carry base64 images. Default 64 MiB. */
  bodyLimitBytes?: number;
  /**
   * Where the quiesced tiers are kept across restarts. Without it a restarted router routes an
   * evicted serve's tier again (to a stopped backend: 502s, where the eviction meant 503s) until
   * the next readmit.
   */
  stateFile?: string;
}

export interface RouterSnapshot {
  mappingVersion: string;
  tiers: TierState[];
}

export interface RunningRouter {
  url: string;
  port: number;
  close(): Promise<void>;
  state(): RouterSnapshot;
}

/** Per-tier runtime state; it survives reloads for tiers that still exist. */
interface TierRuntime {
  mode: TierMode;
  inFlight: number;
}

/** Routes the router proxies, and the backend path each goes to. */
const PROXIED = ['/v1/chat/completions', '/v1/embeddings'] as const;
/** Response headers relayed from the backend besides the status and the body. */
const RELAYED_HEADERS = ['content-type', 'cache-control'] as const;

class ConfigLoadError extends Error {
  constructor(readonly issues: ManifestIssue[]) {
    super(issues.map(formatIssue).join('\n'));
    this.name = 'ConfigLoadError';
  }
}

async function loadConfig(configPath: string): Promise<{ config: RouterConfig; warnings: ManifestIssue[] }> {
  let text: string;
  try {
    text = await readFile(configPath, 'utf8');
  } catch (err) {
    throw new ConfigLoadError([{ file: configPath, path: '', message: `cannot read: ${err instanceof Error ? err.message : String(err)}` }]);
  }
  const result = parseRouterConfig(text, configPath);
  if (!result.ok) throw new ConfigLoadError(result.errors);
  return { config: result.config, warnings: result.warnings };
}

function digest(s: string): Buffer {
  return createHash('sha256').update(s, 'utf8').digest();
}

/** Constant-time bearer check: both sides are hashed first, so lengths leak nothing either. */
function bearerMatches(header: string | undefined, expected: Buffer): boolean {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header ?? '');
  const presented = digest(m?.[1] ?? '');
  return timingSafeEqual(presented, expected) && m !== null;
}

function errorBody(message: string, type: string, extra: Record<string, unknown> = {}) {
  return { error: { message, type, ...extra } };
}

function errText(err: unknown): string {
  if (err instanceof Error) {
    const cause = err.cause instanceof Error ? `: ${err.cause.message}` : '';
    return `${err.message}${cause}`;
  }
  return String(err);
}

/** Serializes admin changes, so a readmit's probes cannot interleave with a quiesce or a reload. */
class Mutex {
  private tail: Promise<void> = Promise.resolve();

  run<T>(fn: () => Promise<T>): Promise<T> {
    const result = this.tail.then(fn);
    this.tail = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  }
}

/** The tiers a previous run left quiesced; none when the file does not exist yet. */
async function loadQuiesced(file: string): Promise<Set<string>> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return new Set();
    throw err;
  }
  const data = JSON.parse(text) as { quiesced?: unknown };
  if (!Array.isArray(data.quiesced) || !data.quiesced.every((t) => typeof t === 'string')) {
    throw new Error(`${file}: quiesced must be a list of tier names`);
  }
  return new Set(data.quiesced);
}

export async function startRouter(opts: RouterOptions): Promise<RunningRouter> {
  if (!opts.adminToken) throw new Error('startRouter: adminToken is required (the admin API is never open)');
  const host = opts.host ?? '127.0.0.1';
  const probeTimeoutMs = opts.probeTimeoutMs ?? 5000;
  const tokenDigest = digest(opts.adminToken);

  let { config } = await loadConfig(opts.configPath);
  const persisted = opts.stateFile ? await loadQuiesced(opts.stateFile) : new Set<string>();
  let runtime = new Map<string, TierRuntime>(config.tiers.map((t) => [t.name, { mode: persisted.has(t.name) ? 'quiesced' : 'active', inFlight: 0 }]));
  const admin = new Mutex();
  /** Called inside admin.run, so writes never interleave. */
  const saveState = async (): Promise<void> => {
    if (!opts.stateFile) return;
    const quiesced = [...runtime].filter(([, rt]) => rt.mode === 'quiesced').map(([name]) => name).sort();
    const tmp = `${opts.stateFile}.${process.pid}.tmp`;
    await writeFile(tmp, `${JSON.stringify({ quiesced }, null, 2)}\n`);
    await rename(tmp, opts.stateFile);
  };
  /** A mode change counts only once it is saved: a failed write leaves memory and file as they were. */
  const setMode = async (name: string, mode: TierMode): Promise<void> => {
    const rt = tierRuntime(name);
    const previous = rt.mode;
    rt.mode = mode;
    try {
      await saveState();
    } catch (err) {
      rt.mode = previous;
      throw err;
    }
  };
  // A state file that cannot be written fails the start, not the first eviction.
  await saveState();

  const tierRuntime = (name: string): TierRuntime => {
    let rt = runtime.get(name);
    if (!rt) {
      rt = { mode: 'active', inFlight: 0 };
      runtime.set(name, rt);
    }
    return rt;
  };
  const tierState = (tier: RouterTier): TierState => {
    const rt = tierRuntime(tier.name);
    return { tier: tier.name, state: rt.mode, inFlight: rt.inFlight, backend: tier.backend, modelIdentity: tier.modelIdentity };
  };

  const app: FastifyInstance = Fastify({ logger: false, bodyLimit: opts.bodyLimitBytes ?? 64 * 1024 * 1024 });

  // JSON bodies; an empty body is allowed (admin POSTs carry none, whatever their content-type).
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_req, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    if (text.trim() === '') return done(null, undefined);
    try {
      done(null, JSON.parse(text));
    } catch (err) {
      const e = new Error(`request body is not valid JSON: ${errText(err)}`) as Error & { statusCode: number };
      e.statusCode = 400;
      done(e, undefined);
    }
  });

  app.setNotFoundHandler((req, reply) => {
    void reply.code(404).send(errorBody(`no route for ${req.method} ${req.url}`, 'not_found'));
  });
  app.setErrorHandler((err: Error & { statusCode?: number }, _req, reply) => {
    const status = err.statusCode !== undefined && err.statusCode >= 400 && err.statusCode < 600 ? err.statusCode : 500;
    void reply.code(status).send(errorBody(err.message, status >= 500 ? 'internal_error' : 'invalid_request'));
  });

  // ---- public surface -----------------------------------------------------------------------

  app.get('/healthz', () => ({ status: 'ok', mapping_version: config.mappingVersion }));

  app.get('/v1/models', () => ({
    object: 'list',
    data: config.presets.map((p) => ({ id: p.name, object: 'model', owned_by: 'gpures-router' })),
  }));

  for (const route of PROXIED) {
    app.post(route, (req, reply) => proxy(route, req, reply));
  }

  async function proxy(route: (typeof PROXIED)[number], req: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
    const body = req.body;
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      return reply.code(400).send(errorBody('request body must be a JSON object with a "model" field', 'invalid_request'));
    }
    const model = (body as Record<string, unknown>).model;
    const cfg = config;
    const preset = typeof model === 'string' ? cfg.presets.find((p) => p.name === model) : undefined;
    if (!preset) {
      const presets = cfg.presets.map((p) => p.name);
      const what = typeof model === 'string' ? `unknown model '${model}'` : 'missing "model"';
      return reply
        .code(typeof model === 'string' ? 404 : 400)
        .send(errorBody(`${what}; known presets: ${presets.join(', ')}`, 'model_not_found', { presets }));
    }
    const tier = findTier(cfg, preset.tier);
    if (!tier) throw new Error(`preset '${preset.name}' names missing tier '${preset.tier}'`); // a validated config rules this out
    const rt = tierRuntime(tier.name);
    if (rt.mode === 'quiesced') {
      return reply
        .code(503)
        .send(errorBody(`tier '${tier.name}' is quiesced (evicted or draining); retry later`, 'tier_unavailable', { tier: tier.name }));
    }

    // In flight from here (the check above and this increment are one synchronous step, so no
    // request gets past a quiesce that has returned) until the response is finished or aborted.
    rt.inFlight++;
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      rt.inFlight--;
    };
    reply.raw.once('finish', release);
    reply.raw.once('close', release);

    const payload = JSON.stringify({ ...(body as Record<string, unknown>), model: tier.servedModelName });
    let upstream: IncomingMessage;
    try {
      upstream = await forward(`${tier.backend}${route}`, payload, req, reply);
    } catch (err) {
      if (reply.raw.destroyed) return reply.hijack();
      return reply
        .code(502)
        .send(
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

  // ---- admin surface ------------------------------------------------------------------------

  await app.register((scope, _o, done) => {
    scope.addHook('onRequest', (req, reply, next) => {
      if (bearerMatches(req.headers.authorization, tokenDigest)) return next();
      void reply
        .code(401)
        .header('www-authenticate', 'Bearer realm="gpures-router-admin"')
        .send(errorBody('admin API requires Authorization: Bearer <token>; missing or wrong token', 'unauthorized'));
    });

    const unknownTier = (reply: FastifyReply, name: string) =>
      reply
        .code(404)
        .send(
          errorBody(`unknown tier '${name}' (known tiers: ${config.tiers.map((t) => t.name).join(', ')})`, 'unknown_tier', {
            tier: name,
          }),
        );

    scope.get('/admin/tiers', () => ({ mapping_version: config.mappingVersion, tiers: config.tiers.map(tierState) }));

    scope.get<{ Params: { tier: string } }>('/admin/tiers/:tier', (req, reply) => {
      const tier = findTier(config, req.params.tier);
      return tier ? reply.send(tierState(tier)) : unknownTier(reply, req.params.tier);
    });

    scope.post<{ Params: { tier: string } }>('/admin/tiers/:tier/quiesce', (req, reply) =>
      admin.run(() => {
        const tier = findTier(config, req.params.tier);
        if (!tier) return Promise.resolve(unknownTier(reply, req.params.tier));
        return setMode(tier.name, 'quiesced').then(() => reply.send(tierState(tier)));
      }),
    );

    scope.post<{ Params: { tier: string } }>('/admin/tiers/:tier/readmit', (req, reply) =>
      admin.run(async () => {
        const tier = findTier(config, req.params.tier);
        if (!tier) return unknownTier(reply, req.params.tier);
        const outcome = await guardedReadmit(tier);
        if (!outcome.ok) return reply.code(409).send(outcome);
        await setMode(tier.name, 'active');
        return reply.send(outcome);
      }),
    );

    scope.post('/admin/reload', (_req, reply) =>
      admin.run(async () => {
        let loaded: { config: RouterConfig; warnings: ManifestIssue[] };
        try {
          loaded = await loadConfig(opts.configPath);
        } catch (err) {
          if (!(err instanceof ConfigLoadError)) throw err;
          return reply.code(400).send(
            errorBody(`config ${opts.configPath} is invalid; the running mapping '${config.mappingVersion}' stays`, 'invalid_config', {
              errors: err.issues.map(formatIssue),
              issues: err.issues,
              mapping_version: config.mappingVersion,
            }),
          );
        }
        // Tiers that still exist keep their mode (a quiesced tier stays quiesced) and their
        // in-flight count; new tiers start active.
        const next = new Map<string, TierRuntime>();
        for (const t of loaded.config.tiers) next.set(t.name, runtime.get(t.name) ?? { mode: 'active', inFlight: 0 });
        config = loaded.config;
        runtime = next;
        await saveState();
        return reply.send({ mapping_version: config.mappingVersion, warnings: loaded.warnings.map(formatIssue) });
      }),
    );
    done();
  });

  /** Health, then exact identity; never changes the tier's mode itself. */
  async function guardedReadmit(tier: RouterTier): Promise<ReadmitOutcome> {
    const refuse = (reason: ReadmitRefusal, message: string): ReadmitOutcome => ({ ok: false, tier: tier.name, reason, message });
    if (!tier.modelIdentity) {
      return refuse(
        'identity_not_configured',
        `tier '${tier.name}' does not set model_identity = true, so its backend's identity cannot be verified and a guarded readmit refuses; set model_identity = true (with served_model_name = the serve's served model name) and reload`,
      );
    }
    const healthUrl = `${tier.backend}/health`;
    try {
      const res = await fetch(healthUrl, { signal: AbortSignal.timeout(probeTimeoutMs) });
      await res.arrayBuffer();
      if (res.status !== 200) return refuse('unhealthy', `GET ${healthUrl} answered ${res.status}, not 200`);
    } catch (err) {
      return refuse('unhealthy', `GET ${healthUrl} failed: ${errText(err)}`);
    }
    const modelsUrl = `${tier.backend}/v1/models`;
    let ids: string[];
    try {
      const res = await fetch(modelsUrl, { signal: AbortSignal.timeout(probeTimeoutMs) });
      const text = await res.text();
      if (res.status !== 200) return refuse('unhealthy', `GET ${modelsUrl} answered ${res.status}, not 200`);
      const parsed = JSON.parse(text) as { data?: unknown };
      if (!Array.isArray(parsed.data)) return refuse('unhealthy', `GET ${modelsUrl} did not return an OpenAI model list`);
      ids = (parsed.data as unknown[]).map((m) =>
        typeof m === 'object' && m !== null && typeof (m as { id?: unknown }).id === 'string' ? (m as { id: string }).id : String(m),
      );
    } catch (err) {
      return refuse('unhealthy', `GET ${modelsUrl} failed: ${errText(err)}`);
    }
    if (!ids.includes(tier.servedModelName)) {
      const observed = ids.length ? ids.map((i) => `'${i}'`).join(', ') : 'no models';
      return refuse(
        'identity_mismatch',
        `backend ${tier.backend} serves ${observed}, not '${tier.servedModelName}' (exact match required); observed ids: [${ids.join(', ')}]`,
      );
    }
    return { ok: true, tier: tier.name, observedModel: tier.servedModelName };
  }

  await app.listen({ host, port: opts.port ?? 0 });
  const address = app.server.address() as AddressInfo;

  return {
    url: httpUrl(address.address, address.port),
    port: address.port,
    close: () => app.close(),
    state: () => ({ mappingVersion: config.mappingVersion, tiers: config.tiers.map(tierState) }),
  };
}
