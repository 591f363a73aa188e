// Named activity option sets: where a workflow creates its proxies it picks one of these.
import { ActivityCancellationType } from '@temporalio/workflow';
import type { ActivityOptions, RetryPolicy } from '@temporalio/workflow';
import { NON_RETRYABLE } from '../shared/failures';

const retry: RetryPolicy = { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '10s', maximumAttempts: 5, nonRetryableErrorTypes: NON_RETRYABLE };

/**
 * Every activity heartbeats while it runs (src/activities/heartbeat.ts, every 2 s), so a worker
 * killed mid-step is noticed here and the step retried about 11 s later (this plus the first
 * retry interval) on whichever worker polls next, instead of at the start-to-close timeout: a
 * stop's 65 s left the GPU idle, a recreate's 2 min left the router down. Not part of a
 * workflow's commands, so changing it is replay-safe.
 */
const heartbeatTimeout = '10s';

/** Ledger updates, manifest reads, inspections: quick, retried through transient faults. */
export const quick: ActivityOptions = { startToCloseTimeout: '30s', heartbeatTimeout, retry };

/**
 * The router's admin calls: a guarded readmit waits for the router's own probes (and behind its
 * other admin calls), two calls of up to 15 s each.
 */
export const routerOps: ActivityOptions = { startToCloseTimeout: '90s', heartbeatTimeout, retry };

/**
 * Creating or removing a container: wait for a cancelled attempt to finish, so a compensation
 * registered for it never runs before the container exists.
 */
export const containerOps: ActivityOptions = { startToCloseTimeout: '2m', heartbeatTimeout, retry, cancellationType: ActivityCancellationType.WAIT_CANCELLATION_COMPLETED };

/** A graceful stop: SIGTERM, up to the serve's stop timeout, then SIGKILL and removal. */
export function stopOptions(stopTimeoutS: number): ActivityOptions {
  return { ...containerOps, startToCloseTimeout: `${stopTimeoutS + 60}s` };
}

/** A wait bounded by the serve's own deadline; heartbeats show it alive between probes. */
export function waitFor(seconds: number): ActivityOptions {
  return { startToCloseTimeout: `${seconds + 30}s`, heartbeatTimeout, retry };
}
