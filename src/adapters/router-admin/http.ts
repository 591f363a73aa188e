// RouterAdmin over the router's HTTP admin API (docs/router-admin-api.md). Thin on purpose: it
// maps status codes onto typed failures and validates response shapes, nothing else.
//   401/403            -> PermanentError RouterAuthFailed
//   404 on a tier      -> PermanentError UnknownTier (elsewhere: RouterAdminUnsupported)
//   409 from readmit   -> the { ok: false, reason } outcome, not a throw
//   400 from reload    -> PermanentError RouterConfigInvalid
//   other 4xx          -> PermanentError RouterAdminRejected (408 and 429 stay retryable)
//   5xx, network, timeout, malformed answer -> plain Error (retryable)
import { z } from 'zod';
import { QUIESCE_REASONS } from '../../shared/contracts';
import type { QuiesceWhy, ReadmitOutcome, TierState } from '../../shared/contracts';
import type { RouterTarget } from '../router-deployment/port';
import type { RouterAdmin } from './port';
import { PermanentError } from '../errors';
import { Failure } from '../../shared/failures';

export interface HttpRouterAdminOptions {
  /** The router's base URL, e.g. `http://127.0.0.1:8000`. */
  baseUrl: string;
  token: string;
  /** Per call; readmit waits for the router's own probes, so keep it above twice their timeout. Default 15000. */
  timeoutMs?: number;
}

/** The failure types this adapter throws, named once in src/shared/failures.ts. */
export const RouterFailure = {
  AuthFailed: Failure.RouterAuthFailed,
  UnknownTier: Failure.UnknownTier,
  ConfigInvalid: Failure.RouterConfigInvalid,
  AdminUnsupported: Failure.RouterAdminUnsupported,
  AdminRejected: Failure.RouterAdminRejected,
} as const;

const TierStateSchema = z.object({
  tier: z.string(),
  state: z.enum(['active', 'quiesced']),
  inFlight: z.number().int().nonnegative(),
  backend: z.string(),
  modelIdentity: z.boolean(),
  lastUsedAtEpochMs: z.number().int().nonnegative().nullable().optional(),
  quiesceMark: z.string().optional(),
  quiesceReason: z.enum(QUIESCE_REASONS).optional(),
  quiesceServe: z.string().optional(),
});

const ReadmitSchema = z.discriminatedUnion('ok', [
  z.object({ ok: z.literal(true), tier: z.string(), observedModel: z.string() }),
  z.object({
    ok: z.literal(false),
    tier: z.string(),
    reason: z.enum(['identity_not_configured', 'identity_mismatch', 'unhealthy', 'quiesced_since']),
    message: z.string(),
  }),
]);

const ReloadSchema = z.object({ mapping_version: z.string() });
const HealthzSchema = z.object({ status: z.string(), mapping_version: z.string() });

interface Answer {
  status: number;
  body: unknown;
  text: string;
}

function errorMessage(a: Answer): string {
  const e = (a.body as { error?: { message?: unknown } } | undefined)?.error;
  if (e && typeof e.message === 'string') return e.message;
  const m = (a.body as { message?: unknown } | undefined)?.message;
  if (typeof m === 'string') return m;
  return a.text.slice(0, 300) || `HTTP ${a.status}`;
}

/** The admin client of a router this worker may promote: its URL and token, from the worker's configuration. */
export function httpRouterAdminFor(target: Pick<RouterTarget, 'url' | 'adminToken'>, timeoutMs: number): RouterAdmin {
  return new HttpRouterAdmin({ baseUrl: target.url, token: target.adminToken, timeoutMs });
}

export class HttpRouterAdmin implements RouterAdmin {
  private readonly baseUrl: string;
  private readonly token: string;
  private readonly timeoutMs: number;

  constructor(opts: HttpRouterAdminOptions) {
    this.baseUrl = opts.baseUrl.replace(/\/+$/, '');
    this.token = opts.token;
    this.timeoutMs = opts.timeoutMs ?? 15_000;
  }

  async quiesce(tier: string, why?: QuiesceWhy): Promise<TierState> {
    const query = why ? `?${new URLSearchParams({ reason: why.reason, ...(why.serve !== undefined ? { serve: why.serve } : {}) }).toString()}` : '';
    const a = await this.call('POST', `${tierPath(tier, '/quiesce')}${query}`);
    this.expectOk(a, 'quiesce', tier);
    return parse(TierStateSchema, a, 'quiesce');
  }

  async tierState(tier: string): Promise<TierState> {
    const a = await this.call('GET', tierPath(tier));
    this.expectOk(a, 'tier state', tier);
    return parse(TierStateSchema, a, 'tier state');
  }

  async readmit(tier: string, quiesceMark?: string): Promise<ReadmitOutcome> {
    const mark = quiesceMark === undefined ? '' : `?quiesce_mark=${encodeURIComponent(quiesceMark)}`;
    const a = await this.call('POST', `${tierPath(tier, '/readmit')}${mark}`);
    if (a.status === 409) {
      const outcome = parse(ReadmitSchema, a, 'readmit');
      if (outcome.ok) throw new Error(`router readmit of '${tier}' answered 409 with ok: true`);
      return outcome;
    }
    this.expectOk(a, 'readmit', tier);
    const outcome = parse(ReadmitSchema, a, 'readmit');
    if (!outcome.ok) throw new Error(`router readmit of '${tier}' answered 200 with ok: false`);
    return outcome;
  }

  async reload(): Promise<{ mappingVersion: string }> {
    const a = await this.call('POST', '/admin/reload');
    if (a.status === 400) {
      const errors = (a.body as { error?: { errors?: unknown } } | undefined)?.error?.errors;
      const detail = Array.isArray(errors) ? `\n${errors.map(String).join('\n')}` : '';
      throw new PermanentError(RouterFailure.ConfigInvalid, `router reload refused: ${errorMessage(a)}${detail}`);
    }
    this.expectOk(a, 'reload');
    return { mappingVersion: parse(ReloadSchema, a, 'reload').mapping_version };
  }

  async healthz(): Promise<{ ok: boolean; mappingVersion: string }> {
    const a = await this.call('GET', '/healthz', false);
    this.expectOk(a, 'healthz');
    const body = parse(HealthzSchema, a, 'healthz');
    return { ok: body.status === 'ok', mappingVersion: body.mapping_version };
  }

  private async call(method: 'GET' | 'POST', path: string, auth = true): Promise<Answer> {
    const url = `${this.baseUrl}${path}`;
    let res: Response;
    let text: string;
    try {
      res = await fetch(url, {
        method,
        headers: auth ? { authorization: `Bearer ${this.token}` } : {},
        signal: AbortSignal.timeout(this.timeoutMs),
      });
      text = await res.text();
    } catch (err) {
      const cause = err instanceof Error && err.cause instanceof Error ? `: ${err.cause.message}` : '';
      throw new Error(`router ${method} ${url} failed: ${err instanceof Error ? err.message : String(err)}${cause}`);
    }
    let body: unknown;
    try {
      body = text ? JSON.parse(text) : undefined;
    } catch {
      body = undefined;
    }
    return { status: res.status, body, text };
  }

  /** Throws the typed failure for any status but 200. */
  private expectOk(a: Answer, what: string, tier?: string): void {
    if (a.status === 200) return;
    const msg = `router ${what}${tier === undefined ? '' : ` of tier '${tier}'`} answered ${a.status}: ${errorMessage(a)}`;
    // The router's own words say a token is wrong, not whose: the operator fixes it in the worker's environment.
    if (a.status === 401 || a.status === 403) throw new PermanentError(RouterFailure.AuthFailed, `${msg} (${routerTokenHint(this.baseUrl)})`);
    if (a.status === 404) throw new PermanentError(tier === undefined ? RouterFailure.AdminUnsupported : RouterFailure.UnknownTier, msg);
    if (a.status >= 400 && a.status < 500 && a.status !== 408 && a.status !== 429) throw new PermanentError(RouterFailure.AdminRejected, msg);
    throw new Error(msg);
  }
}

/** What a 401 from the admin API means on this side: the worker's token is not the router's. */
export function routerTokenHint(baseUrl: string): string {
  return `GPURES_ROUTER_TOKEN in the worker's environment is not the token the router at ${baseUrl} was started with`;
}

function tierPath(tier: string, suffix = ''): string {
  return `/admin/tiers/${encodeURIComponent(tier)}${suffix}`;
}

function parse<T>(schema: z.ZodType<T>, a: Answer, what: string): T {
  const r = schema.safeParse(a.body);
  if (!r.success) {
    throw new Error(
      `router ${what} answered ${a.status} with an unexpected body: ${a.text.slice(0, 300)} ` +
        `(${r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')})`,
    );
  }
  return r.data;
}
