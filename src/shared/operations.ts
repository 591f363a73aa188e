// Each operation's input and result: what a run's history starts and ends with, what the CLI,
// the API and the audit read. The workflows build them; nothing here runs.
import type { DrainResult, OperationEnd, VramReleaseResult } from './contracts';
import type { StepRecord } from './messages';
import type { LeaseClock, LeaseKind } from '../domain/lease';

// ---- serves up (bring-up) ------------------------------------------------------------------------

export interface BringUpInput {
  serve: string;
}

export interface BringUpResult {
  serve: string;
  /** restored: the serve had been evicted and came back through the guarded readmit. */
  outcome: 'started' | 'restored' | 'already-running';
  message: string;
  gpuRole: string;
  vramMib: number;
  containerId?: string;
  observedModels?: string[];
  measuredDeltaMib?: number;
  readmittedTier?: string;
  /** A serve that slept: woken, or started cold when it could not be. */
  restoredBy?: 'wake' | 'cold-start';
  ledgerBefore: string[];
  ledgerAfter: string[];
  steps: StepRecord[];
}

// ---- serves up --evict (acquisition) ---------------------------------------------------------------

export interface AcquireInput {
  serve: string;
  /** Evict evictable serves on the same GPU when the serve does not fit. */
  evict?: boolean;
  /** Stop victims even when their drain times out. */
  force?: boolean;
  /** Per victim; default 120 s. */
  drainTimeoutS?: number;
  /** How long nvidia-smi may take to show a victim's VRAM back; default 30 s. */
  releaseTimeoutS?: number;
  /** Once running, the serve is held under a lease (lease.ts): on expiry it goes down and its victims come back. */
  lease?: LeaseRequest;
  /**
   * Who started it: 'router' (the acquisition API, for the router's held requests) lets the router
   * abandon it once those have all gone (src/domain/abandon.ts). Only the API sets it, and only for
   * the router: a worker built before it refuses the field (unknown), so the router's acquisitions
   * need workers at least as new as the API.
   */
  trigger?: 'router' | 'operator' | 'cli';
}

/** A fixed lease of so many seconds, or an idle one whose time to live is the serve's idle_ttl_s. */
export type LeaseRequest = { kind: 'fixed'; seconds: number } | { kind: 'idle' };

/** One caller's lease terms that could not be applied to the serve it asked them of. */
export interface LeaseTermsNotApplied {
  asked: LeaseRequest;
  /** Why, as leaseNotApplied says it. */
  why: string;
  /**
   * expiring (or ended): the serve's lease had already begun to expire (or had ended) when the
   * terms reached it: its bring-down takes the serve down as planned, whatever was asked.
   * none, not-this-holder: a router's idle terms, which only make the lease that runs for the
   * serve's holder last longer: no lease runs (none is started for them), or the one that runs is
   * another run's (it is not moved to the serve); the serve stays up as it was.
   */
  leaseState?: 'expiring' | 'ended' | 'none' | 'not-this-holder';
  /** false: do not count on the serve staying up (its lease is taking it down); true: it runs on, under no lease these terms made. */
  serveStays: boolean;
}

export interface VictimRecord {
  serve: string;
  vramMib: number;
  tier?: string;
  inFlightAtQuiesce?: number;
  drain?: DrainResult;
  inFlightAtStop: number;
  wasRunning: boolean;
  stopIssuedAtEpochMs?: number;
  vram?: VramReleaseResult;
  /** Evicted by sleeping (or tried to be): the level, its figures, and why it was stopped instead, if it was. */
  sleep?: {
    level: 1 | 2;
    /** Why the level differs from the declared one (the node's host-RAM budget). */
    levelFellBack?: string;
    /** When /sleep was sent, and how long it took. */
    issuedAtEpochMs?: number;
    waitedMs?: number;
    residualDeclaredMib: number;
    /** What it was seen to keep on the GPU asleep. */
    residualSeenMib?: number;
    /** The sleep gave up and the victim was stopped: why, with the figures. */
    fellBack?: string;
  };
}

export interface AcquireResult {
  serve: string;
  outcome: 'started' | 'already-running';
  message: string;
  gpuRole: string;
  vramMib: number;
  evictionReason?: string;
  victims: VictimRecord[];
  containerId?: string;
  observedModels?: string[];
  measuredDeltaMib?: number;
  /**
   * The lease the serve is now held under, when one was asked (and could be started). `how`: the
   * last terms applied started the lease, or made the lease already running last at least
   * `seconds` from now (a join's or an already-running serve's: docs/acquisition-api.md).
   */
  lease?: { workflowId: string; kind: LeaseKind; seconds: number; how?: 'started' | 'at-least' };
  /** Lease terms asked (by the POST or by one that joined) that could not be applied, and why. */
  leaseNotApplied?: string[];
  /** The same, for a program (the API's clients, the CLI's exit code): each set of terms not applied. */
  leaseTermsNotApplied?: LeaseTermsNotApplied[];
  ledgerBefore: string[];
  ledgerAfter: string[];
  steps: StepRecord[];
}

// ---- a lease (lease/<node>/<serve>) -------------------------------------------------------------------

export interface LeaseInput {
  serve: string;
  /** The acquisition run that holds the serve: a serve held by anything else by the expiry is left alone. */
  holder: string;
  kind: LeaseKind;
  /** fixed: the lease's length; idle: its time to live without a routed request. */
  seconds: number;
  /** What a continue-as-new carries: the lease's times so far. */
  clock?: LeaseClock;
  /**
   * This run is a renewal that waited for the last lease's end, not a continuation of its own: it
   * logs its start, and the terms it starts with, though it carries a clock (its holder's other
   * callers' at-least terms).
   */
  renewal?: true;
  /** Continue as new past this many events (default 2000; the server may suggest it sooner). A test's knob: 20..2000. */
  maxHistoryEvents?: number;
  /** A lease that continued as new while expiring: it goes on bringing its serve down, from what it knew. */
  expiring?: LeaseExpiring;
}

/** What an expiring lease knows, carried across its continue-as-new (LeaseInput.expiring). */
export interface LeaseExpiring {
  /** Expiring because it was released (`serves release`), not by its clock. */
  released: boolean;
  /** Bring-downs failed so far, of the BRING_DOWN_ATTEMPTS it tries. */
  failures: number;
  /** A serves down of the serve was found under way: it is what took the serve, if it is gone. */
  downUnderWay: boolean;
  /** Waiting out other operations since (epoch ms), and its next look's wait: the wait's bound holds across runs. */
  waits?: { sinceEpochMs: number; nextMs: number };
  /** A renewal that came while it expired, run once it has ended, and how long its holder's other callers asked it to last (epoch ms). */
  renewal?: { holder: string; kind: LeaseKind; seconds: number };
  renewalAtLeastUntilEpochMs?: number;
}

export interface LeaseResult {
  serve: string;
  /**
   * expired or released: the serve was brought down and its victims restored (bringDown);
   * not-held: the serve was no longer held by the lease's acquisition, nothing was done;
   * down-under-way: a serves down of it was already running; the lease waited it out, and it took the serve.
   */
  outcome: 'expired' | 'released' | 'not-held' | 'down-under-way';
  message: string;
  bringDown?: { workflowId: string; ok: boolean; message: string; restored?: RestoreRecord[] };
  steps: StepRecord[];
}

// ---- serves down (bring-down, and its restore) -------------------------------------------------------

export interface BringDownInput {
  serve: string;
  /** Then bring back the serves evicted for this one (each a bring-up: health, identity, guarded readmit). */
  restore?: boolean;
  /** How long requests in flight to its tier may take before the stop; default 120 s. */
  drainTimeoutS?: number;
  /** Only while this run (`<workflow id>/<run id>`) holds the serve running: a lease's expiry, which must not stop a newer acquisition's serve. */
  onlyIfHeldBy?: string;
  /**
   * Why the serve goes down, as its tier's quiesce tells the router: `operator-down` (the default:
   * `gpures serves down`, the UI), whose 503 has no Retry-After, or `lease-ended` (a lease's end).
   */
  downReason?: BringDownReason;
}

export const BRING_DOWN_REASONS = ['operator-down', 'lease-ended'] as const;
export type BringDownReason = (typeof BRING_DOWN_REASONS)[number];

export interface BringDownResult {
  serve: string;
  /**
   * cancelled: an operation was bringing the serve up; it was cancelled and gave back what it took.
   * left-alone: asked to take the serve only from a run that no longer held it running; nothing changed.
   */
  outcome: 'stopped' | 'already-stopped' | 'cancelled' | 'left-alone';
  /** Operations that held the serve and were ended first. */
  ended?: OperationEnd[];
  message: string;
  gpuRole: string;
  releasedMib: number;
  /** The drain before the stop, for a serve behind the router. */
  drain?: DrainResult;
  restored: RestoreRecord[];
  ledgerBefore: string[];
  ledgerAfter: string[];
  steps: StepRecord[];
}

export interface RestoreRecord {
  serve: string;
  workflowId: string;
  ok: boolean;
  message: string;
  observedModels?: string[];
}
