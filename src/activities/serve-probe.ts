// ServeProbe over HTTP: vLLM's /health answers 200 when ready, /v1/models lists served names.
import type { HealthProbe, ServeProbe } from './ports';

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

  async modelIds(baseUrl: string, timeoutMs: number): Promise<string[]> {
    const res = await fetch(`${baseUrl}/v1/models`, { signal: AbortSignal.timeout(timeoutMs) });
    if (res.status !== 200) throw new Error(`GET ${baseUrl}/v1/models answered ${res.status}`);
    const body = (await res.json()) as { data?: { id?: unknown }[] };
    return (body.data ?? []).map((m) => String(m.id));
  }
}
