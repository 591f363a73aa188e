// How activities ask a serve whether it is up and what it serves: HTTP (http.ts) implements it.

export interface HealthProbe {
  ok: boolean;
  status?: number;
  error?: string;
}

export interface ServeProbe {
  health(url: string, timeoutMs: number): Promise<HealthProbe>;
  /**
   * Ids reported by an OpenAI-compatible /v1/models; ServeUnreachable (../errors) when nothing answers.
   * `apiKey`: the serve's VLLM_API_KEY, sent as vLLM checks it on every /v1 route.
   */
  modelIds(baseUrl: string, timeoutMs: number, apiKey?: string): Promise<string[]>;
  /** vLLM's vllm:num_requests_running summed over models; null where the serve has no /metrics. */
  requestsRunning(baseUrl: string, timeoutMs: number): Promise<number | null>;
}
