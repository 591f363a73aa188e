// How activities ask a serve whether it is up and what it serves: HTTP (http.ts) implements it.

export interface HealthProbe {
  ok: boolean;
  status?: number;
  error?: string;
}

export interface ServeProbe {
  health(url: string, timeoutMs: number): Promise<HealthProbe>;
  /** Ids reported by an OpenAI-compatible /v1/models; ServeUnreachable (../errors) when nothing answers. */
  modelIds(baseUrl: string, timeoutMs: number): Promise<string[]>;
  /** vLLM's vllm:num_requests_running summed over models; null where the serve has no /metrics. */
  requestsRunning(baseUrl: string, timeoutMs: number): Promise<number | null>;
}
