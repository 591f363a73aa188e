// The eviction's waits as the worker's metrics see them: the drain and the VRAM-release wait,
// observed where each activity ends (its figures already count from the first attempt's start).
import { ApplicationFailure } from '@temporalio/activity';
import type { ActivityMetrics } from '../adapters/metrics/port';
import type { VramReleaseResult } from '../shared/contracts';
import { Failure } from '../shared/failures';
import type { createEvictionActivities } from './eviction';

type EvictionActivities = ReturnType<typeof createEvictionActivities>;

export function observedEviction(activities: EvictionActivities, metrics: ActivityMetrics | undefined): EvictionActivities {
  if (!metrics) return activities;
  return {
    ...activities,
    async drainServe(input) {
      const r = await activities.drainServe(input);
      metrics.drainEnded({ ...(r.tier ? { tier: r.tier } : {}), drained: r.drained, waitedMs: r.waitedMs });
      return r;
    },
    async confirmVramReleased(input) {
      try {
        const r = await activities.confirmVramReleased(input);
        metrics.vramReleaseEnded({ released: true, waitedMs: r.waitedMs });
        return r;
      } catch (err) {
        if (err instanceof ApplicationFailure && err.type === Failure.VramNotReleased) {
          const details = err.details?.[0] as Partial<VramReleaseResult> | undefined;
          if (typeof details?.waitedMs === 'number') metrics.vramReleaseEnded({ released: false, waitedMs: details.waitedMs });
        }
        throw err;
      }
    },
  };
}
