// Each operation's input and result: what a run's history starts and ends with, what the CLI,
// the API and the audit read. The workflows build them; nothing here runs.
import type { DrainResult, OperationEnd, VramReleaseResult } from './contracts';
import type { StepRecord } from './messages';

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
  ledgerBefore: string[];
  ledgerAfter: string[];
  steps: StepRecord[];
}

// ---- serves down (bring-down, and its restore) -------------------------------------------------------

export interface BringDownInput {
  serve: string;
  /** Then bring back the serves evicted for this one (each a bring-up: health, identity, guarded readmit). */
  restore?: boolean;
  /** How long requests in flight to its tier may take before the stop; default 120 s. */
  drainTimeoutS?: number;
}

export interface BringDownResult {
  serve: string;
  /** cancelled: an operation was bringing the serve up; it was cancelled and gave back what it took. */
  outcome: 'stopped' | 'already-stopped' | 'cancelled';
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
