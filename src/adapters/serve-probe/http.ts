// ServeProbe over HTTP: vLLM's /health answers 200 when ready, /v1/models lists served names.
import type { HealthProbe, ServeProbe } from './port';
import { PermanentError, unreachable } from '../errors';
import { Failure } from '../../shared/failures';

export class HttpServeProbe implements ServeProbe {
  async health(url: string, timeoutMs: number): Promise<HealthProbe> {
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
      await res.arrayBuffer();
      return { ok: res.status === 200, status: res.status };
    } catch (err) {
      return { ok: false, error: err instanceof Error ? (err.cause instanceof Error ? err.cause.message : err.message) : String(err) };
    }
  }

  async modelIds(baseUrl: string, timeoutMs: number, apiKey?: string): Promise<string[]> {
    const url = `${baseUrl}/v1/models`;
    let status: number;
    let text: string;
    try {
      const headers: Record<string, string> = apiKey === undefined ? {} : { authorization: `Bearer ${apiKey}` };
      const res = await fetch(url, { headers, signal: AbortSignal.timeout(timeoutMs) });
      status = res.status;
      text = await res.text();
    } catch (err) {
      throw unreachable(url, err);
    }
    if (status === 401) {
      throw new PermanentError(
        Failure.ServeUnauthorized,
        apiKey === undefined
          ? `GET ${url} answered 401: the serve wants an API key, and its manifest entry sets no VLLM_API_KEY (or --api-key) for the probe to send`
          : `GET ${url} answered 401 to the serve's own VLLM_API_KEY: the server was started with another key`,
      );
    }
    if (status !== 200) throw new Error(`GET ${url} answered ${status}`);
    const body = JSON.parse(text) as { data?: { id?: unknown }[] };
    return (body.data ?? []).map((m) => String(m.id));
  }

  async requestsRunning(baseUrl: string, timeoutMs: number): Promise<number | null> {
    let res: Response;
    try {
      res = await fetch(`${baseUrl}/metrics`, { signal: AbortSignal.timeout(timeoutMs) });
    } catch {
      // Nothing answering: a serve that already died runs no requests.
      return 0;
    }
    if (res.status !== 200) {
      await res.arrayBuffer();
      return null;
    }
    return parseRequestsRunning(await res.text());
  }
}

/** Sums `vllm:num_requests_running` samples (one per model name label) in Prometheus text. */
export function parseRequestsRunning(text: string): number | null {
  let found = false;
  let total = 0;
  for (const line of text.split('\n')) {
    const m = /^vllm:num_requests_running(?:\{[^}]*\})?\s+([0-9.eE+-]+)/.exec(line.trim());
    if (m?.[1] !== undefined) {
      found = true;
      total += Number(m[1]);
    }
  }
  return found ? total : null;
}
