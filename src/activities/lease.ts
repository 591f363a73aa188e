// What an idle lease is judged by: its serve's router tier as the router sees it when the
// lease's timer fires (requests in flight, when a routed request last began or ended). And an
// acquisition's "last at least this long" to a lease that runs, answered.
import type { LeaseControl } from '../adapters/leases/port';
import type { RouterAdmin } from '../adapters/router-admin/port';
import type { LeaseAtLeastAnswer, LeaseTerms } from '../shared/messages';
import { configuredRouter } from './eviction';
import { nonRetryable, permanentAsFailure } from './failure';
import { activityContext, heartbeating } from './heartbeat';

export interface TierUse {
  tier: string;
  inFlight: number;
  /** null when the router has routed none since it started, or does not report it. */
  lastUsedAtEpochMs: number | null;
}

export function createLeaseActivities(deps: { router?: RouterAdmin; leases?: LeaseControl }) {
  return heartbeating({
    /** The lease's own answer to the terms (src/workflows/lease.ts, leaseAtLeastUpdate). */
    async leaseAtLeast(input: { workflowId: string; terms: LeaseTerms; updateId: string }): Promise<LeaseAtLeastAnswer> {
      if (!deps.leases) throw nonRetryable('LeasesNotConfigured', 'this worker was given no way to reach a lease (ActivityDeps.leases)');
      return deps.leases.atLeast(input.workflowId, input.terms, input.updateId, activityContext()?.cancellationSignal);
    },
    async tierUse(input: { tier: string }): Promise<TierUse> {
      const router = configuredRouter(deps.router);
      const s = await permanentAsFailure(() => router.tierState(input.tier));
      return { tier: s.tier, inFlight: s.inFlight, lastUsedAtEpochMs: s.lastUsedAtEpochMs ?? null };
    },
  });
}
