// Named activity option sets: where a workflow creates its proxies it picks one of these.
import type { ActivityOptions, RetryPolicy } from '@temporalio/workflow';
import { NON_RETRYABLE } from '../shared/failures';

const retry: RetryPolicy = { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '10s', maximumAttempts: 5, nonRetryableErrorTypes: NON_RETRYABLE };

/** Ledger updates, manifest reads, inspections: quick, retried through transient faults. */
export const quick: ActivityOptions = { startToCloseTimeout: '30s', retry };

/** Creating and starting a container: image inspection and create can take a moment. */
export const containerOps: ActivityOptions = { startToCloseTimeout: '2m', retry };

/** A wait bounded by the serve's own deadline; heartbeats show it alive between probes. */
export function waitFor(seconds: number): ActivityOptions {
  return { startToCloseTimeout: `${seconds + 30}s`, heartbeatTimeout: '15s', retry };
}
