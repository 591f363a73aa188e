// The activity proxies every workflow uses, each declared once with a named option set. The
// options are not part of a workflow's commands: changing them is replay-safe.
import { ActivityCancellationType, patched, proxyActivities, proxyLocalActivities } from '@temporalio/workflow';
import type { LocalActivityOptions } from '@temporalio/workflow';
import type { ActivityOptions, RetryPolicy } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { NON_RETRYABLE } from '../shared/failures';
import { PATCHES } from './patches';

/** Retries' intervals: 1, 2, 4, 8, then every 10 s. */
const backoff: RetryPolicy = { initialInterval: '1s', backoffCoefficient: 2, maximumInterval: '10s', nonRetryableErrorTypes: NON_RETRYABLE };
const retry: RetryPolicy = { ...backoff, maximumAttempts: 5 };

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
 * A ledger's reconcile, retried while Docker does not answer (dockerd restarting), every 10 s, for
 * up to RECONCILE_FOR. The ledger accepts no Update meanwhile (reconcilingRefusal), so one that
 * fails here fails none; callers are told the reconcile's last error (LedgerClient), and the next
 * operation after the bound starts another ledger. Unbounded, a Docker error that never passes (a
 * socket the worker may not open) left a ledger reconciling for ever, its error on no run.
 */
const RECONCILE_FOR = '5m';
const reconcileOps: ActivityOptions = { ...quick, scheduleToCloseTimeout: RECONCILE_FOR, retry: backoff };

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

/** A stop's activity runs this much past the serve's stop timeout (SIGKILL, the removal). */
export const STOP_ACTIVITY_MARGIN_S = 60;

/** A graceful stop: SIGTERM, up to the serve's stop timeout, then SIGKILL and removal. */
function stopOptions(stopTimeoutS: number): ActivityOptions {
  return { ...containerOps, startToCloseTimeout: `${stopTimeoutS + STOP_ACTIVITY_MARGIN_S}s` };
}

/** A wait bounded by the serve's own deadline; heartbeats show it alive between probes. */
function waitFor(seconds: number): ActivityOptions {
  return { startToCloseTimeout: `${seconds + 30}s`, heartbeatTimeout, retry };
}

/** The bound of a reading that only a check needs (readOnce). */
export const READ_ONCE_S = 30;
/**
 * A reading that only a check needs, taken while the run holds something others wait for (a
 * bring-down's GPU reading before its stop, under the start slot): one attempt, its spawns bounded
 * by their own timeouts, so a hanging nvidia-smi holds the slot READ_ONCE_S at most, not five
 * attempts with their backoff; the check then says it was not read.
 */
export const readOnce = proxyActivities<Activities>({ startToCloseTimeout: `${READ_ONCE_S}s`, heartbeatTimeout, retry: { ...retry, maximumAttempts: 1 } });

/** File steps of a promotion take milliseconds; the heartbeat timeout notices a lost worker in 5 s, not 10. */
const fileOps: ActivityOptions = { ...quick, heartbeatTimeout: '5s' };

/** Ledger updates, manifest reads, inspections, GPU readings. */
export const act = proxyActivities<Activities>(quick);
/** A ledger's reconcile with the box. */
export const reconciling = proxyActivities<Activities>(reconcileOps);
/** Creating, recreating and removing containers. */
export const containers = proxyActivities<Activities>(containerOps);
/** The router's admin calls (quiesce, readmit, preflight), shared by every workflow that takes a tier out or back. */
export const router = proxyActivities<Activities>(routerOps);
/** A promotion's backup, write and restore of the live config. */
export const files = proxyActivities<Activities>(fileOps);

/**
 * The steps of an operation that take milliseconds as local activities: run in the workflow task
 * by the worker that holds it, their results recorded as markers, with no round trip to the
 * server and no poll between. They are the read-only ones (resolve the serve, the ledger's
 * snapshot, inspect a container, read the GPU, the eviction's preflight) and the ledger's Updates
 * on the way through (admit, acquire, running, a victim's release, a bring-down's take and
 * release), each idempotent by its update id. None waits on the box, so none needs heartbeats: a
 * worker lost mid-step loses the workflow task, which times out (10 s) and runs again, step and
 * all, on the next worker. Compensations stay activities, and so does the identity check, whose
 * retries of a serve that does not answer are evidence an audit reads. Histories recorded before
 * ran these as activities, and replay that way.
 */
const localSteps: LocalActivityOptions = { startToCloseTimeout: '30s', retry };
const local = proxyLocalActivities<Activities>(localSteps);
/** The preflight waits on the router's admin calls (two of up to 15 s each). */
const localRouterReads = proxyLocalActivities<Activities>({ ...localSteps, startToCloseTimeout: '90s' });

/** The proxy a read-only step goes through: local where the run has the patch, an activity before. */
export function reads(): Pick<typeof act, 'resolveServe' | 'ledgerSnapshot' | 'inspectServe' | 'readGpu' | 'measureGpu'> {
  return patched(PATCHES.localSteps) ? local : act;
}

/** The proxy an Update of the ledger on an operation's way through goes through, as reads() chooses. */
export function ledgerUpdates(): Pick<
  typeof act,
  'ledgerAdmit' | 'ledgerAcquire' | 'ledgerSetPhase' | 'ledgerVictimReleased' | 'ledgerRelease' | 'ledgerBeginStop' | 'ledgerStartSlot'
> {
  return patched(PATCHES.localSteps) ? local : act;
}

/**
 * The room check before a cold start (readStartRoom): local since room-read-local. It reads the
 * box (a listing, the ledger, docker top) and may read a shortfall again for a few seconds, well
 * inside the local step's 30 s; a worker lost meanwhile loses the task, which runs it again.
 */
export function roomReads(): Pick<typeof act, 'readStartRoom'> {
  return patched(PATCHES.roomReadLocal) ? local : act;
}

/**
 * readOnce as a local step, since read-before-stop-local: a bring-down's reading before its stop
 * (an nvidia-smi listing and docker top, one attempt within READ_ONCE_S) runs in the workflow task
 * that took the start slot, as the other reads do, instead of a dispatch and a task of its own.
 */
const readOnceLocal = proxyLocalActivities<Activities>({ startToCloseTimeout: `${READ_ONCE_S}s`, retry: { ...retry, maximumAttempts: 1 } });

/** The proxy a bring-down's reading before its stop goes through: local where the run has the patch, an activity before. */
export function readsOnce(): Pick<typeof readOnce, 'readBeforeStop'> {
  return patched(PATCHES.readBeforeStopLocal) ? readOnceLocal : readOnce;
}

/** The eviction's preflight, as reads() chooses. */
export function preflightReads(): Pick<typeof act, 'preflightEviction'> {
  return patched(PATCHES.localSteps) ? localRouterReads : router;
}

/** Steps that wait on the box up to a deadline of their own (health, drain, VRAM release, verify). */
export function waiting(seconds: number) {
  return proxyActivities<Activities>(waitFor(seconds));
}

/** A graceful stop and removal, bounded by the serve's own stop timeout. */
export function stopping(stopTimeoutS: number) {
  return proxyActivities<Activities>(stopOptions(stopTimeoutS));
}
