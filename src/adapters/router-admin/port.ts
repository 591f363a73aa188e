// The router's admin API (docs/router-admin-api.md) as activities use it: HTTP (http.ts)
// implements it. Its answers are recorded in history, so their types are in src/shared/contracts.
import type { QuiesceWhy, ReadmitOutcome, TierState } from '../../shared/contracts';

export interface RouterAdmin {
  /**
   * New requests to the tier get 503; requests in flight go on. Idempotent. `why` says why (an
   * operator's bring-down: its 503 has no Retry-After); without it, the old meaning (evicted or draining).
   */
  quiesce(tier: string, why?: QuiesceWhy): Promise<TierState>;
  tierState(tier: string): Promise<TierState>;
  /**
   * The router probes the backend's health and /v1/models identity before it routes again. With
   * a quiesce mark (TierState.quiesceMark) it first refuses, `quiesced_since`, if the tier was
   * quiesced again since that mark was read.
   */
  readmit(tier: string, quiesceMark?: string): Promise<ReadmitOutcome>;
  reload(): Promise<{ mappingVersion: string }>;
  healthz(): Promise<{ ok: boolean; mappingVersion: string }>;
}
