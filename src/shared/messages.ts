// Message definitions, ids and task-queue names shared by workflows, activities and clients.
// Only @temporalio/workflow's define* helpers are used here: they are plain descriptors, safe
// to import on the client side as well as inside the workflow sandbox.
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { LeaseExtension, LeaseView } from '../domain/lease';
import type { AdmitDecision, AdmitRequest, LedgerState, LedgerTotals, ReservationPhase } from '../domain/ledger';
import type { GpuSpec } from '../domain/types';
import type { AbandonRefusal } from '../domain/abandon';
import type { ResidencyWindow, Victim } from '../domain/eviction';
import type { StopDecision, StopRequest } from '../domain/fence';
import type { StartSlotDecision, StartSlotRequest } from '../domain/start-slot';
import type { LiveProgress } from './progress';

export interface LedgerAdmitArgs extends AdmitRequest {
  /** The GPU as the manifest declares it now: the ledger adopts the newest capacity and reserve. */
  gpu: GpuSpec;
  /**
   * A bring-up's: the GPU's start slot taken with the admission where it admits a serve to start
   * cold (not a sleeper, whose wake takes it by its own), its start timeout as a take's. Absent:
   * the run takes the slot by an Update of its own (runs from before, acquisitions).
   */
  startSlot?: { startTimeoutS: number };
}
/**
 * Every update answers the ledger's totals after its decision, enough for an auditor to check from
 * that history alone that no decision left it over budget. An answer an operation records the
 * ledger from (admit, acquire, a phase, a release, a victim's release, an abort) carries the whole
 * state after the decision as well: the query right after each, which it replaces, was a workflow
 * task of its own and halved the ledger's decisions per second. A fence or a take answers only
 * the totals. The ledger's history holds every answer, and continues as new well before its size matters.
 */
export interface LedgerAnswer {
  totals: LedgerTotals;
  /** The state right after the decision; absent in answers recorded before it was carried. */
  ledger?: LedgerState;
}
export interface LedgerAdmitAnswer extends LedgerAnswer {
  decision: AdmitDecision;
  /** The serve had been evicted: this admission is its restore. */
  wasEvicted?: boolean;
  /** It had been put to sleep at this level: its restore may wake it rather than start it cold. */
  wasAsleep?: 1 | 2;
  /** Where the admission asked for the start slot and took the serve to start cold: the take's answer. */
  startSlot?: StartSlotDecision;
}
/** What an operation's activity returns: the answer and the ledger read right after it. */
export interface LedgerAdmitResult extends LedgerAdmitAnswer {
  ledger: LedgerState;
}
export interface LedgerPhaseArgs {
  serve: string;
  phase: ReservationPhase;
  /** nvidia-smi's device delta at bring-up, where measured: what an eviction should see come back. */
  measuredMib?: number;
  /** The run that holds the reservation; another run's reservation is not its to change. */
  holder?: string;
  /** Its caller shows the answer to no operator (a compensation): the ledger's lost-run note is not marked told by it. */
  quiet?: boolean;
  /** With `running`: the start slot its holder holds given back by the same Update (a start measured, with no readmit between). */
  giveStartSlot?: boolean;
}
export interface LedgerReleaseArgs {
  serve: string;
  /**
   * The run releasing it: only the holder's release takes effect. A compensation whose serve is
   * someone else's by now is answered `released: false` and changes nothing. Runs from before
   * fencing name none; the ledger then accepts the release only of a settled serve (running or
   * evicted), never under an operation still under way.
   */
  holder?: string;
  /** A restore's compensation before its wake touched the sleeper: put it back asleep, not released (backAsleep). */
  keepAsleep?: boolean;
  /** Its caller shows the answer to no operator (a compensation): the ledger's lost-run note is not marked told by it. */
  quiet?: boolean;
}
export interface LedgerReleaseAnswer extends LedgerAnswer {
  released: boolean;
  vramMib: number;
  /** When not released: who holds the serve instead. */
  heldBy?: string;
}
export interface LedgerReleaseResult extends LedgerReleaseAnswer {
  ledger: LedgerState;
}
/** A bring-down takes its serve before it touches the tier or the container. */
export type LedgerStopArgs = StopRequest;
export type LedgerStopAnswer = StopDecision &
  LedgerAnswer & {
    /** Asked (answerLedger): the state before this take; `ledger` is the state after it. */
    ledgerBefore?: LedgerState;
    /** Asked (stopSlot) and the serve taken: the start slot's take for the stop, as startSlot answers it. */
    slot?: StartSlotDecision;
  };
/** The fence a step shows before it changes the serve's container. */
export interface LedgerFenceArgs {
  serve: string;
  holder: string;
  /** `start` before the container is created, `started` just after, `wake`, `sleep`, `stop` (see FENCE_STEPS in src/domain/fence.ts). */
  step: string;
}
export interface LedgerFenceAnswer extends LedgerAnswer {
  serve: string;
  phase: ReservationPhase;
}
/** A cold start takes the GPU's start slot before it creates or wakes its container, and gives it back once measured. */
export type LedgerStartSlotArgs = StartSlotRequest;
export type LedgerStartSlotAnswer = StartSlotDecision & LedgerAnswer;
/** What setPhase, victimReleased and abortEviction answer. */
export interface LedgerChangeAnswer extends LedgerAnswer {
  serve: string;
}

export interface LedgerAcquireArgs extends LedgerAdmitArgs {
  /** Without it an acquisition that does not fit is denied and nothing is touched. */
  evict: boolean;
}
export type AcquireDecision =
  | { decision: 'admitted'; serve: string; vramMib: number; freeAfterMib: number }
  | { decision: 'already-held'; serve: string; phase: ReservationPhase; holder: string }
  | {
      decision: 'denied';
      serve: string;
      vramMib: number;
      freeMib: number;
      shortfallMib: number;
      evictableMib?: number;
      /** Denied because the victims that would cover it are inside their minimum residency: each of them, the first to end first. */
      residency?: ResidencyWindow[];
      /** With residency: the seconds until the first of those windows ends, when asking again may be admitted. */
      retryAfterS?: number;
    }
  | { decision: 'evicting'; serve: string; vramMib: number; shortfallMib: number; victims: Victim[]; reason: string };
export interface LedgerAcquireAnswer extends LedgerAnswer {
  decision: AcquireDecision;
  /** The serve acquired had been put to sleep at this level: it is woken rather than started. */
  wasAsleep?: 1 | 2;
}
export interface LedgerAcquireResult extends LedgerAcquireAnswer {
  ledger: LedgerState;
}
export interface LedgerVictimArgs {
  victim: string;
  acquirer: string;
  /** The acquirer's run: only the eviction that holds the victim may hand its MiB over. */
  holder?: string;
  /** The victim was put to sleep at this level, not stopped: its residual stays committed. */
  asleepAt?: 1 | 2;
  /** What nvidia-smi showed it keep asleep, when above its declared residual: the ledger holds that instead. */
  residualSeenMib?: number;
}
export interface LedgerAbortArgs {
  acquirer: string;
  /** Victims whose containers were already stopped: they stay evicted. */
  stopped: string[];
  /** Victims already put to sleep, by the level they sleep at: they stay sleeping. */
  slept?: Record<string, 1 | 2>;
  /**
   * MiB to hold for a victim in `slept` whose sleep has not been seen to give its VRAM back (the
   * release check still under way, or failed): its whole reservation, or what it was seen to keep
   * above its declared residual. Without it the ledger holds the declared residual.
   */
  sleptHoldingMib?: Record<string, number>;
  /** The acquirer's run: an eviction another run holds by now is left alone. */
  holder?: string;
  /** Its caller shows the answer to no operator (a compensation): the ledger's lost-run note is not marked told by it. */
  quiet?: boolean;
}

export const admitUpdate = defineUpdate<LedgerAdmitAnswer, [LedgerAdmitArgs]>('admit');
export const setPhaseUpdate = defineUpdate<LedgerChangeAnswer, [LedgerPhaseArgs]>('setPhase');
export const releaseUpdate = defineUpdate<LedgerReleaseAnswer, [LedgerReleaseArgs]>('release');
export const acquireUpdate = defineUpdate<LedgerAcquireAnswer, [LedgerAcquireArgs]>('acquire');
export const victimReleasedUpdate = defineUpdate<LedgerChangeAnswer, [LedgerVictimArgs]>('victimReleased');
export const abortEvictionUpdate = defineUpdate<LedgerChangeAnswer, [LedgerAbortArgs]>('abortEviction');
export const beginStopUpdate = defineUpdate<LedgerStopAnswer, [LedgerStopArgs]>('beginStop');
export const fenceUpdate = defineUpdate<LedgerFenceAnswer, [LedgerFenceArgs]>('fence');
export const startSlotUpdate = defineUpdate<LedgerStartSlotAnswer, [LedgerStartSlotArgs]>('startSlot');
/**
 * The ledger to a run it refused the start slot (that run's take named itself in `wake`): the slot
 * has been given back, so ask again now rather than at the next poll (1, 2, 4, then every 5 s).
 */
export const startSlotFreedSignal = defineSignal('startSlotFreed');
/** One step of an operation as it completed: what the CLI prints and the audit report reads. */
export interface StepRecord {
  step: string;
  at: string;
  outcome: string;
}

/** The steps an operation (bring-up, bring-down, acquisition) has completed so far. */
export const progressQuery = defineQuery<StepRecord[]>('progress');
/**
 * The steps so far and the step under way, with when it began: what a follower times its lines
 * by. A query of its own, so clients of `progress` keep their answer; a run on a worker from
 * before it has no handler, and a follower falls back to `progress`.
 */
export const liveProgressQuery = defineQuery<LiveProgress>('liveProgress');

export const snapshotQuery = defineQuery<LedgerState>('snapshot');

/** A lease's serve, kind, expiry and the use it saw. */
export const leaseQuery = defineQuery<LeaseView>('lease');
/** Moves the expiry (by seconds past it, or to a time), bounded; answers the lease as it is after. */
export const extendLeaseUpdate = defineUpdate<LeaseView, [LeaseExtension]>('extend');
/** Expires the lease now; answers the lease as it expires. */
export const releaseLeaseUpdate = defineUpdate<LeaseView, []>('release');
/** A new acquisition of a serve whose lease still runs: the lease goes on under the new holder and terms. */
export const renewLeaseSignal = defineSignal<[{ holder: string; kind: 'fixed' | 'idle'; seconds: number }]>('renew');
/**
 * Another caller's terms for a lease that runs (an acquisition joined, or one of a serve already
 * up): the lease lasts at least `seconds` from now, never shorter, its kind unchanged. Terms of
 * another holder than the lease's are a renewal: the lease's own hold is gone.
 */
export const leaseAtLeastSignal = defineSignal<[{ holder: string; kind: 'fixed' | 'idle'; seconds: number }]>('atLeast');
/** A lease's terms: the run that holds its serve, its kind, and its seconds (fixed: its length; idle: its time to live unused). */
export interface LeaseTerms {
  holder: string;
  kind: 'fixed' | 'idle';
  seconds: number;
  /**
   * Only make the lease that runs for `holder` last longer (a router's idle terms, which no caller
   * asked for): a lease held by another run does not take them as a renewal, and none is started.
   * Only in leaseAtLeastUpdate's terms, never a lease's own.
   */
  extendOnly?: boolean;
}
/**
 * What a lease answers another caller's terms (leaseAtLeastUpdate). Applied: it lasts at least
 * that long from now (`at-least`), or, the terms naming another holder, goes on under them
 * (`renewed`: after its bring-down for the old holder, if one was under way). Not applied: it had
 * already begun to expire (`expiring`: its bring-down takes the serve down as planned); the terms
 * were `extendOnly` and name another holder than its own (`not-this-holder`: it runs on as it
 * was, `why` naming its holder); or, read by the activity that asked, it had ended (`ended`), or,
 * `extendOnly` terms, none runs (`none`: closed or never started, and none is started for them).
 */
export type LeaseAtLeastAnswer =
  | { applied: true; how: 'at-least' | 'renewed'; view: LeaseView }
  | { applied: false; state: 'expiring' | 'ended' | 'not-this-holder' | 'none'; why: string; view?: LeaseView };
/**
 * leaseAtLeastSignal as an Update: the same terms, and the lease answers whether it took them,
 * so an acquisition never tells its caller that an expiring lease will last (sent by an activity:
 * a workflow cannot send an update). Acquisitions from before it send the signal.
 */
export const leaseAtLeastUpdate = defineUpdate<LeaseAtLeastAnswer, [LeaseTerms]>('atLeastAnswered');
/**
 * A caller that joined a running acquisition (USE_EXISTING) and asked for a lease: its terms go
 * to the run, which honours them with its own (sent with the start: signalWithStart).
 */
export const joinLeaseSignal = defineSignal<[{ kind: 'fixed'; seconds: number } | { kind: 'idle' }, JoinCaller?]>('joinLease'); // operations.ts's LeaseRequest (which imports this module)
/**
 * Who joins an acquisition (src/domain/abandon.ts's AcquisitionCaller): the second argument of
 * joinLeaseSignal, and joinedSignal's only one. Joins from clients older than this name nobody.
 */
export type JoinCaller = 'router' | 'operator' | 'cli';
/**
 * A caller without lease terms that joined a running acquisition (an operator's POST, once per run
 * from an API; a `serves up` built before joinedUpdate): it waits for the serve too, so the router
 * may no longer abandon the run for its own held requests having gone. Sent with the start
 * (signalWithStart).
 */
export const joinedSignal = defineSignal<[JoinCaller]>('joined');
/**
 * joinedSignal as an Update, which the CLI's `serves up` sends to a run it joined (not one it
 * started) under a fixed update id: the server deduplicates Updates by id within a run, so a
 * script's repeated `serves up` adds the run's history its events once, never once a call.
 * Answers whether the run had already been abandoned when it was told.
 */
export const joinedUpdate = defineUpdate<JoinedAnswer, [JoinCaller]>('joinedAnswered');
/** What a run answers a caller that joined it (joinedUpdate). */
export interface JoinedAnswer {
  /** The step the run was abandoned at, when the router's abandon came first. */
  abandonedAt?: string;
}
/** The update id of the CLI's joinedUpdate: one per run, whichever process sends it. */
export const CLI_JOINED_UPDATE_ID = 'joined/cli';
/** What an acquisition answers a request to abandon it: abandoned, or why not (its own decision, recorded in its history). */
/** `reason` since the router counts refusals by it (runs before that answered without: a field added to the answer, replay compatible). */
export type AbandonAnswer = { abandoned: true; at: string } | { abandoned: false; why: string; reason?: AbandonRefusal; askAgain?: true };
/**
 * The router's held requests for the serve have all gone: the run abandons itself if that still
 * saves something and nobody else waits on it (src/domain/abandon.ts), as a cancel would undo it.
 */
export const abandonUpdate = defineUpdate<AbandonAnswer, [{ by: 'router'; askedAtEpochMs?: number }]>('abandon');
/**
 * How long the API waits for a run's answer to an abandon, and how old an ask a run still
 * answers (its askedAtEpochMs, the API's clock when it sent it): one delivered later (its worker
 * was down or stopped meanwhile) is refused with askAgain, for requests may be held again by then.
 * Well under the router's own 10 s call, so the router hears an answer, not its own timeout.
 */
export const ABANDON_ANSWER_MS = 3_000;

// Kept in a module of their own, which imports nothing: the CLI's help text names them.
export { NODE_ANSWER_MS, STICKY_SCHEDULE_TO_START_MS } from './node-answer';

const TASK_QUEUE_PREFIX = 'gpures.';

export function taskQueueFor(node: string): string {
  return `${TASK_QUEUE_PREFIX}${node}`;
}

/** The node whose task queue this is; undefined for a queue that is not a node's. */
export function nodeOfTaskQueue(taskQueue: string): string | undefined {
  return taskQueue.startsWith(TASK_QUEUE_PREFIX) && taskQueue.length > TASK_QUEUE_PREFIX.length ? taskQueue.slice(TASK_QUEUE_PREFIX.length) : undefined;
}

export const workflowIds = {
  ledger: (node: string, gpuRole: string) => `ledger/${node}/${gpuRole}`,
  bringUp: (node: string, serve: string) => `serves-up/${node}/${serve}`,
  bringDown: (node: string, serve: string) => `serves-down/${node}/${serve}`,
  acquire: (node: string, serve: string) => `acquire/${node}/${serve}`,
  lease: (node: string, serve: string) => `lease/${node}/${serve}`,
};
