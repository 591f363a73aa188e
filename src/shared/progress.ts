// What a follower (the CLI) reads of an operation under way, besides its completed steps: the
// step it is in, and the figures its waiting activities heartbeat. Heartbeat details are also
// what a retried attempt resumes from (src/activities/heartbeat.ts), so these only ever add
// fields to what an attempt records; a follower treats every field as possibly absent (a worker
// from before them, or an attempt that has not beaten yet).

import type { VramReading } from './contracts';

/** The figures a drain heartbeats each poll (src/activities/eviction.ts drainServe). */
export interface DrainBeat {
  startedAtEpochMs: number;
  polls: number;
  routerInFlight: number;
  vllmRunning: number | null;
  /** When the drain gives up (the workflow's drain timeout past its start). */
  deadlineEpochMs?: number;
  /** When these figures were read. */
  atEpochMs?: number;
}

/** The figures a health wait heartbeats each probe (src/activities/index.ts waitHealthy). */
export interface HealthBeat {
  startedAtEpochMs: number;
  probes: number;
  last: string;
  /** When the wait fails HealthTimeout: the serve's start_timeout_s past the step's start. */
  deadlineEpochMs?: number;
  timeoutS?: number;
  atEpochMs?: number;
}

/** The figures the wait for a stopped victim's VRAM heartbeats (confirmVramReleased). */
export interface VramBeat {
  startedAtEpochMs: number;
  releasedMib: number;
  /** Which reading the wait goes by: the victim's own processes, or the whole GPU (and why). */
  reading?: VramReading;
  expectedMib: number;
  deadlineEpochMs?: number;
  atEpochMs?: number;
}

/** The step an operation is in, begun but not yet recorded. */
export interface StepUnderWay {
  step: string;
  /** When it began (the workflow's clock, ISO). */
  since: string;
}

/** The `liveProgress` query's answer: the steps so far, and the one under way. */
export interface LiveProgress {
  steps: { step: string; at: string; outcome: string }[];
  underway?: StepUnderWay;
}
