// What an idle lease is judged by: its serve's router tier as the router sees it when the
// lease's timer fires (requests in flight, when a routed request last began or ended).
import type { RouterAdmin } from '../adapters/router-admin/port';
import { configuredRouter } from './eviction';
import { permanentAsFailure } from './failure';
import { heartbeating } from './heartbeat';

export interface TierUse {
  tier: string;
  inFlight: number;
  /** null when the router has routed none since it started, or does not report it. */
  lastUsedAtEpochMs: number | null;
}

export function createLeaseActivities(deps: { router?: RouterAdmin }) {
  return heartbeating({
    async tierUse(input: { tier: string }): Promise<TierUse> {
      const router = configuredRouter(deps.router);
      const s = await permanentAsFailure(() => router.tierState(input.tier));
      return { tier: s.tier, inFlight: s.inFlight, lastUsedAtEpochMs: s.lastUsedAtEpochMs ?? null };
    },
  });
}
