// The activity results that workflow histories record and that workflows and the audit read back
// by name: one place both sides import, so an activity, its workflow and the report cannot drift
// apart. Their shapes are what recorded histories hold: change one only with a patch.
// (The ledger's update answers are with their updates, in messages.ts.)
import type { GpuSpec, ServeSpec } from '../domain/types';
import type { UnverifiedWrite } from '../domain/promotion';

// ---- the router admin contract (docs/router-admin-api.md) ----

export type TierMode = 'active' | 'quiesced';

/**
 * Why a tier was quiesced, as its quiesce said (`?reason=`): an eviction's victim (`evicted`), a
 * serve draining before it goes down for a while (`draining`), a serve an operator brought down
 * (`operator-down`: nothing brings it back but `gpures serves up`), or one whose lease ended
 * (`lease-ended`: an on-demand tier acquires it again; any other stays down as an operator's).
 * A quiesce without one keeps the old meaning, evicted or draining: back on its own.
 */
export const QUIESCE_REASONS = ['draining', 'evicted', 'operator-down', 'lease-ended'] as const;
export type QuiesceReason = (typeof QUIESCE_REASONS)[number];

/** A quiesce's reason, with the serve behind the tier (the router config does not name it). */
export interface QuiesceWhy {
  reason: QuiesceReason;
  serve?: string;
}

export interface TierState {
  tier: string;
  state: TierMode;
  /** Requests whose response has not finished yet. */
  inFlight: number;
  backend: string;
  modelIdentity: boolean;
  /**
   * When a routed request to the tier last began or ended (epoch ms); null when none has since the
   * router started. With inFlight it is the use an idle lease is judged by. Optional in the contract:
   * a router that does not report it leaves idle leases to count from the acquisition.
   */
  lastUsedAtEpochMs?: number | null;
  /**
   * Opaque; changes with every quiesce of the tier (of one already quiesced too) and with every
   * start of the router. A readmit that sends it back lifts only the quiesce it saw: one made since
   * is someone else's, who relies on it. Optional in the contract: without it a readmit is unguarded.
   */
  quiesceMark?: string;
  /**
   * Its backend answered since the router started (a routed request got a response, or a guarded
   * readmit passed) and has not refused a connection since: `state` alone does not say so (a tier
   * is active until someone quiesces it). Optional in the contract.
   */
  backendAnswered?: boolean;
  /** Why the tier is quiesced, when its last quiesce said (QUIESCE_REASONS); none while active. Optional in the contract. */
  quiesceReason?: QuiesceReason;
  /** The serve its last quiesce named (what `gpures serves up` brings back). */
  quiesceServe?: string;
}

/**
 * Each serve's quiesce mark, read before a bring-down's take (the quiesceMarks activity): what its
 * guarded readmit sends back. `unread`: the router, or the serve's tier, could not be read; that
 * tier is left quiesced.
 */
export type QuiesceMarks = Record<string, { mark: string } | { unread: string }>;
export type ReadmitRefusal = 'identity_not_configured' | 'identity_mismatch' | 'unhealthy' | 'quiesced_since';

export type ReadmitOutcome = { ok: true; tier: string; observedModel: string } | { ok: false; tier: string; reason: ReadmitRefusal; message: string };

// ---- the GPU, as nvidia-smi reads it ----

export interface GpuReading {
  index: number;
  uuid: string;
  name: string;
  totalMib: number;
  usedMib: number;
  freeMib: number;
}

export interface GpuProcess {
  gpuUuid: string;
  pid: number;
  processName: string;
  /** null where the driver does not report it (WSL2 prints [N/A]). */
  usedMib: number | null;
}

// ---- bring-up and bring-down ----

export interface ResolvedServe {
  node: string;
  serve: ServeSpec;
  gpu: GpuSpec;
}

/** How the operation that held a serve ended, for a bring-down that had to wait it out. */
export interface OperationEnd {
  holder: string;
  /**
   * cancelled: this asked it to cancel and it ended Cancelled (its compensations ran); ended: it
   * closed otherwise (before, or on its own); running: it still runs (mode status); no-run: the
   * hold names no run.
   */
  outcome: 'cancelled' | 'ended' | 'running' | 'no-run';
  closedAs?: string;
  waitedMs: number;
}

/** cancel: ask it to cancel, then wait; wait: wait for it to end on its own; status: only look. */
export type OperationEndMode = 'cancel' | 'wait' | 'status';

export interface StopResult {
  containerName: string;
  /** 'stopped' also when an earlier attempt issued the stop and this one found it done. */
  stop: 'stopped' | 'already-stopped' | 'absent';
  /** `left <status>`: a container that had exited and was not removed by this attempt (a stop fence refused with the serve down). */
  remove: 'removed' | 'absent' | `left ${string}`;
  /** When the stop was issued, by the attempt that issued it. */
  issuedAtEpochMs: number;
  /** That attempt's number (1 unless a worker died after issuing it). */
  issuedByAttempt?: number;
  /** When this attempt saw the container down (its stop returned): a process listing started since lists none of its processes alive. Absent before it was kept. */
  downAtEpochMs?: number;
  /** Asked for the run's own container only: the one found under the name was another run's (its holder label), and was left running. */
  leftAlone?: string;
  /**
   * A stop fence refused (a ledger started afresh since the take, or since an earlier attempt whose
   * record of issuing the stop never reached the server) with the container not running: a retry
   * takes the stop as the earlier attempt's, a first attempt (nothing held for the serve) finds it
   * down already. The refusal or that finding, and what the box showed. Nothing was stopped or
   * removed by that attempt.
   */
  downAfterRefusal?: string;
}

// ---- eviction (an on-demand acquisition) ----

export interface DrainResult {
  tier?: string;
  drained: boolean;
  polls: number;
  waitedMs: number;
  routerInFlightAtStart: number;
  vllmRunningAtStart: number | null;
  routerInFlightAtEnd: number;
  vllmRunningAtEnd: number | null;
  /** When in-flight was first seen at 0 (epoch ms), for the drain-to-stop latency. */
  drainedAtEpochMs?: number;
  /** A victim's own processes on its GPU, read during the drain (asked with processesOn). */
  processes?: ServeProcesses;
}

import type { ServeProcesses, VramReading } from '../domain/vram-release';
export type { ServeProcesses, VramReading } from '../domain/vram-release';

export interface VramReleaseResult {
  gpuUuid: string;
  /** The whole GPU's memory.used before the drain and at the end (what confirmed it, where `reading` is whole-gpu or absent). */
  usedBeforeMib: number;
  usedAfterMib: number;
  /** What the victim gave back: by its own processes' figures where they confirmed it. */
  releasedMib: number;
  expectedMib: number;
  waitedMs: number;
  /** Absent in results recorded before own-process readings: the whole GPU confirmed those. */
  reading?: VramReading;
}

/** A victim put to sleep (vLLM's sleep mode): at which level, and how long /sleep took. */
export interface SleepResult {
  serve: string;
  level: 1 | 2;
  /** It was asleep already (a retried attempt after the first one's sleep landed). */
  alreadyAsleep: boolean;
  /** When /sleep was sent (absent when it was asleep already): after the drain's last answer. */
  issuedAtEpochMs?: number;
  waitedMs: number;
}

/** A sleeping serve woken for its restore: how long /wake_up (and the reload after level 2) took. */
export interface WakeResult {
  serve: string;
  level: 1 | 2;
  /** It was awake already (a retried attempt after the first one's wake landed). */
  alreadyAwake: boolean;
  waitedMs: number;
}

// ---- router promotion (docs/promotion.md) ----

export interface RouterContainer {
  id: string;
  name: string;
  /** The image reference the container was created from (`Config.Image`). */
  image: string;
  /** The image's id (`sha256:…`). */
  imageId: string;
  running: boolean;
  restarting: boolean;
  status: string;
  exitCode: number;
  restartCount: number;
  labels: Record<string, string>;
}

/** A target as the workflow may see it: everything but the token. */
export interface PublicRouterTarget {
  name: string;
  container: string;
  configPath: string;
  containerConfigPath: string;
  url: string;
  verifyWindowS: number;
  healthzStreak: number;
  backupsKept: number;
  validateTimeoutS: number;
}

export interface RouterDescription {
  target: PublicRouterTarget;
  container: RouterContainer;
  targetImageId: string;
  /** The target image's id differs from the running container's (a rebuilt tag counts). */
  imageChanged: boolean;
  live: {
    exists: boolean;
    sha256: string | null;
    bytes: number;
    mappingVersion: string | null;
    /**
     * The live file is another promotion run's write that it neither verified nor restored (the
     * journal's word, see unverifiedWriteOf); backupExists: its backup is still there. Absent
     * otherwise, and in runs resolved before this was read.
     */
    unverified?: UnverifiedWrite & { backupExists: boolean };
  };
}

export interface BackupResult {
  /** null when there was no live file to back up (a rollback then removes the new one). */
  path: string | null;
  sha256: string | null;
  mappingVersion: string | null;
  /** False when an earlier attempt of this run had made it already. */
  created: boolean;
  pruned: string[];
}
