// The activity proxies every workflow uses, each declared once with a named option set. The
// options are not part of a workflow's commands: changing them is replay-safe.
import { ActivityCancellationType, proxyActivities } from '@temporalio/workflow';
import type { ActivityOptions, RetryPolicy } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { NON_RETRYABLE } from '../shared/failures';

const retry: RetryPolicy = { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '10s', maximumAttempts: 5, nonRetryableErrorTypes: NON_RETRYABLE };

/**
 * Every activity heartbeats while it runs (src/activities/heartbeat.ts, every 2 s), so a worker
 * killed mid-step is noticed here and the step retried about 11 s later (this plus the first
 * retry interval) on whichever worker polls next, instead of at the start-to-close timeout: a
 * stop's 65 s left the GPU idle, a recreate's 2 min left the router down.
 */
const heartbeatTimeout = '10s';

/** Ledger updates, manifest reads, inspections: quick, retried through transient faults. */
const quick: ActivityOptions = { startToCloseTimeout: '30s', heartbeatTimeout, retry };

/**
 * The router's admin calls: a guarded readmit waits for the router's own probes (and behind its
 * other admin calls), two calls of up to 15 s each.
 */
const routerOps: ActivityOptions = { startToCloseTimeout: '90s', heartbeatTimeout, retry };

/**
 * Creating or removing a container: wait for a cancelled attempt to finish, so a compensation
 * registered for it never runs before the container exists.
 */
const containerOps: ActivityOptions = {
  startToCloseTimeout: '2m',
  heartbeatTimeout,
  retry,
  cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
};

/** A graceful stop: SIGTERM, up to the serve's stop timeout, then SIGKILL and removal. */
function stopOptions(stopTimeoutS: number): ActivityOptions {
  return { ...containerOps, startToCloseTimeout: `${stopTimeoutS + 60}s` };
}

/** A wait bounded by the serve's own deadline; heartbeats show it alive between probes. */
function waitFor(seconds: number): ActivityOptions {
  return { startToCloseTimeout: `${seconds + 30}s`, heartbeatTimeout, retry };
}

/** File steps of a promotion take milliseconds; the heartbeat timeout notices a lost worker in 5 s, not 10. */
const fileOps: ActivityOptions = { ...quick, heartbeatTimeout: '5s' };

/** Ledger updates, manifest reads, inspections, GPU readings. */
export const act = proxyActivities<Activities>(quick);
/** Creating, recreating and removing containers. */
export const containers = proxyActivities<Activities>(containerOps);
/** The router's admin calls (quiesce, readmit, preflight), shared by every workflow that takes a tier out or back. */
export const router = proxyActivities<Activities>(routerOps);
/** A promotion's backup, write and restore of the live config. */
export const files = proxyActivities<Activities>(fileOps);

/** Steps that wait on the box up to a deadline of their own (health, drain, VRAM release, verify). */
export function waiting(seconds: number) {
  return proxyActivities<Activities>(waitFor(seconds));
}

/** A graceful stop and removal, bounded by the serve's own stop timeout. */
export function stopping(stopTimeoutS: number) {
  return proxyActivities<Activities>(stopOptions(stopTimeoutS));
}
