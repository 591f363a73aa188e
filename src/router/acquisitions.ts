// The router's side of the acquisition API (docs/acquisition-api.md): POST one acquisition for a
// tier's serve, then GET it for its status and step. The token comes from the router's own
// environment and is sent only in the Authorization header; no message here quotes it.
import { admission } from '../shared/wording';
import { errText } from './errors';

export interface AcquisitionApiOptions {
  /** Base URL, without a trailing slash: `http://127.0.0.1:8090`. */
  url: string;
  token: string;
  /** Timeout of each call. Default 10 s. */
  timeoutMs?: number;
}

/** What a GET answers, reduced to what the router acts on. */
export type AcquisitionStatus =
  | {
      status: 'running';
      step?: string;
      /**
       * It starts the serve (admitted anew, or evicting for it): it did not find it already running
       * (the API's `found_running`; an older API's last step read instead). Said once a step has completed.
       */
      startsAfresh?: boolean;
    }
  | {
      status: 'completed';
      outcome?: string;
      /**
       * The serve is up but will not stay (a lease term answered `serveStays: false`, or the API
       * found its lease expiring when asked, `serve_going_down`, for an acquisition that asked no
       * terms: its bring-down about to drain and stop it): why.
       */
      goingDown?: string;
    }
  | { status: 'failed'; type?: string; message: string; retryAfterS?: number };

interface CompletedResult {
  outcome?: unknown;
  leaseTermsNotApplied?: unknown;
}

/** The `why` of the first lease term that says the serve will not stay up, if any. */
function goingDownOf(result: CompletedResult | undefined): string | undefined {
  const terms = result?.leaseTermsNotApplied;
  if (!Array.isArray(terms)) return undefined;
  for (const t of terms as { serveStays?: unknown; why?: unknown }[]) {
    if (t?.serveStays === false) return typeof t.why === 'string' ? t.why : 'its lease is expiring';
  }
  return undefined;
}

/**
 * Whether a running acquisition has completed a step and starts its serve (it did not find it
 * running under another holder): the API's `found_running`, which it reads from the run's steps.
 * An API older than that field answers without it: then the last step's sentence is matched, as
 * before (`admit` answered `already running`, then `lease` for its terms), so a router upgraded
 * first still clears a stale going-down.
 */
export function startsAfresh(body: { step?: { step?: unknown; outcome?: unknown }; found_running?: unknown } | undefined): boolean {
  const step = body?.step;
  if (typeof step?.step !== 'string') return false;
  if (typeof body?.found_running === 'boolean') return !body.found_running;
  if (step.step === 'lease') return false;
  return !(step.step === 'admit' && step.outcome === admission.alreadyRunning);
}

/** The API could not be reached, or answered other than documented. */
export class AcquisitionApiError extends Error {
  constructor(
    message: string,
    readonly httpStatus?: number,
  ) {
    super(message);
    this.name = 'AcquisitionApiError';
  }
}

interface ApiError {
  error?: { type?: string; message?: string; retry_after_s?: unknown };
}

export class AcquisitionApi {
  private readonly timeoutMs: number;

  constructor(private readonly opts: AcquisitionApiOptions) {
    this.timeoutMs = opts.timeoutMs ?? 10_000;
  }

  /** Starts the acquisition, or joins the one running: its workflow id either way. */
  async acquire(serve: string, evict: boolean): Promise<string> {
    const body = await this.call<{ workflow_id?: unknown }>('POST', '/v1/acquisitions', { serve, evict, trigger: 'router' }, 202);
    if (typeof body.workflow_id !== 'string') throw new AcquisitionApiError('POST /v1/acquisitions answered 202 without a workflow_id');
    return body.workflow_id;
  }

  /**
   * Asks the run to abandon itself (POST …/abandon): the run's own answer, abandoned or why not.
   * An acquisition that had ended answers not abandoned; one that cannot decide yet (still
   * admitting, or the ask reached it late) answers askAgain.
   */
  async abandon(workflowId: string): Promise<{ abandoned: true; at?: string } | { abandoned: false; why: string; reason: string; askAgain?: true }> {
    const body = await this.call<{ abandoned?: unknown; at?: unknown; why?: unknown; reason?: unknown; ask_again?: unknown }>(
      'POST',
      `/v1/acquisitions/${encodeURIComponent(workflowId)}/abandon`,
      {},
      200,
    );
    if (body.abandoned === true) return { abandoned: true, ...(typeof body.at === 'string' ? { at: body.at } : {}) };
    return {
      abandoned: false,
      why: typeof body.why === 'string' ? body.why : 'the API gave no reason',
      // An API older than the field: 'unknown' (counted, never matched from the sentence).
      reason: typeof body.reason === 'string' && /^[a-z_]{1,32}$/.test(body.reason) ? body.reason : 'unknown',
      ...(body.ask_again === true ? { askAgain: true } : {}),
    };
  }

  async status(workflowId: string): Promise<AcquisitionStatus> {
    const body = await this.call<
      {
        status?: unknown;
        step?: { step?: unknown; outcome?: unknown };
        found_running?: unknown;
        result?: CompletedResult;
        serve_going_down?: unknown;
      } & ApiError
    >('GET', `/v1/acquisitions/${encodeURIComponent(workflowId)}`, undefined, 200);
    if (body.status === 'running' || body.status === 'paused') {
      return {
        status: 'running',
        ...(typeof body.step?.step === 'string' ? { step: body.step.step } : {}),
        ...(startsAfresh(body) ? { startsAfresh: true } : {}),
      };
    }
    if (body.status === 'completed') {
      const goingDown = goingDownOf(body.result) ?? (typeof body.serve_going_down === 'string' ? body.serve_going_down : undefined);
      return {
        status: 'completed',
        ...(typeof body.result?.outcome === 'string' ? { outcome: body.result.outcome } : {}),
        ...(goingDown !== undefined ? { goingDown } : {}),
      };
    }
    const e = body.error ?? {};
    const retryAfterS = e.retry_after_s;
    return {
      status: 'failed',
      ...(e.type ? { type: e.type } : {}),
      message: e.message ?? `acquisition ${String(body.status)}`,
      ...(typeof retryAfterS === 'number' && Number.isFinite(retryAfterS) && retryAfterS > 0 ? { retryAfterS } : {}),
    };
  }

  private async call<T>(method: 'GET' | 'POST', path: string, payload: unknown, expected: number): Promise<T> {
    let res: Response;
    try {
      res = await fetch(`${this.opts.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${this.opts.token}`, ...(payload === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(payload === undefined ? {} : { body: JSON.stringify(payload) }),
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (err) {
      throw new AcquisitionApiError(`acquisition API ${this.opts.url} is unreachable: ${errText(err)}`);
    }
    const text = await res.text();
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      throw new AcquisitionApiError(`${method} ${path} answered ${res.status} with a body that is not JSON`, res.status);
    }
    if (res.status !== expected) {
      const e = (body as ApiError).error;
      throw new AcquisitionApiError(`${method} ${path} answered ${res.status}: ${e?.message ?? text.slice(0, 200)}`, res.status);
    }
    return body as T;
  }
}
