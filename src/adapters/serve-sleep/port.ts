// How activities put a vLLM serve to sleep and wake it (vLLM's sleep mode: the process stays,
// most of its GPU memory goes): HTTP against vLLM's own endpoints (http.ts) implements it.
// A sleep aborts the requests in flight (vLLM's default): an eviction quiesces and drains first.

import type { SleepLevel } from '../../domain/sleep';

export type { SleepLevel };

export interface ServeSleep {
  /** POST /sleep?level=N: level 1 offloads the weights to host RAM, level 2 discards them; the KV cache goes either way. */
  sleep(baseUrl: string, level: SleepLevel, timeoutMs: number): Promise<void>;
  /**
   * Back to serving from a sleep at `level`: one /wake_up after level 1; after level 2 the weights'
   * memory first (/wake_up?tags=weights), their reload from disk, then the KV cache, so the two are
   * never allocated while the weights are missing.
   */
  wake(baseUrl: string, level: SleepLevel, timeoutMs: number): Promise<void>;
  /** GET /is_sleeping. */
  isSleeping(baseUrl: string, timeoutMs: number): Promise<boolean>;
}
