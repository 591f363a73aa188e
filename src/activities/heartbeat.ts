// Heartbeats while an activity works, so a worker killed mid-step is noticed at the heartbeat
// timeout (src/workflows/options.ts) and the step retried on another worker within seconds,
// rather than at its start-to-close timeout (minutes for a stop or a recreate).
//
// An activity's heartbeat details are what its next attempt reads (Context.info.heartbeatDetails):
// a step that must report what its first attempt saw (when a stop was issued, what was in flight
// when a drain began) records that with `progress()` before it acts. The periodic heartbeat
// re-sends the latest details, never undefined, which would erase them.
import { asyncLocalStorage } from '@temporalio/activity';
import type { Context } from '@temporalio/activity';

/** Well inside the 10 s heartbeat timeout, so a busy box that delays a beat or two does not fail the attempt. */
export const HEARTBEAT_EVERY_MS = 2000;

/**
 * The worker's `maxHeartbeatThrottleInterval`. By default a worker sends at most one heartbeat
 * per 0.8 × the heartbeat timeout (8 s of 10): 2 s of slack before the server gives up on a live
 * attempt. At this, the beats above reach the server as they are made.
 */
export const HEARTBEAT_THROTTLE = '2s';

/** The activity's context, or undefined when called outside one (the simulated box, a plain script). */
export function activityContext(): Context | undefined {
  // What Context.current() reads, without the Error it throws outside an activity.
  return asyncLocalStorage.getStore();
}

/**
 * The context of an activity that can heartbeat: a local step cannot (its worker holds the workflow
 * task, which the SDK extends while the step runs; the SDK core refuses a local step's heartbeat
 * with a warning every beat, "Activity heartbeat failed ... UnknownActivity").
 */
function heartbeatingContext(): Context | undefined {
  const ctx = activityContext();
  return ctx && !ctx.info.isLocal ? ctx : undefined;
}

/** Latest details per running attempt; an entry exists only while whileHeartbeating runs it. */
const latest = new WeakMap<Context, { details: unknown }>();

/** Records the attempt's progress as its heartbeat details: the next attempt, should this one die, reads them. */
export function progress(details: unknown): void {
  const ctx = heartbeatingContext();
  if (!ctx) return;
  const slot = latest.get(ctx);
  if (slot) slot.details = details;
  ctx.heartbeat(details);
}

/** What an earlier attempt of this activity recorded with progress(), if any. */
export function earlierProgress<T>(): T | undefined {
  return activityContext()?.info.heartbeatDetails as T | undefined;
}

/**
 * Runs `work`, heartbeating every `everyMs` until it settles. Until this attempt records its own
 * details, the earlier attempt's are re-sent, so a second crash does not lose the first's. The
 * first beat waits `everyMs`: a progress() call at the start is then the attempt's first
 * heartbeat, which the worker sends at once rather than throttled.
 */
export async function whileHeartbeating<T>(work: () => Promise<T>, everyMs = HEARTBEAT_EVERY_MS): Promise<T> {
  const ctx = heartbeatingContext();
  if (!ctx || latest.has(ctx)) return work();
  const slot = { details: ctx.info.heartbeatDetails as unknown };
  latest.set(ctx, slot);
  const timer = setInterval(() => ctx.heartbeat(slot.details), everyMs);
  try {
    return await work();
  } finally {
    clearInterval(timer);
    latest.delete(ctx);
  }
}

/** The same activities, each running under whileHeartbeating. */
export function heartbeating<A extends Record<string, (input: never) => Promise<unknown>>>(activities: A): A {
  const wrapped: Record<string, (input: never) => Promise<unknown>> = {};
  for (const [name, fn] of Object.entries(activities)) wrapped[name] = (input: never) => whileHeartbeating(() => fn(input));
  return wrapped as A;
}
