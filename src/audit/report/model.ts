// The report's model: what one operation's history proves, as data. The JSON output is this,
// as it is; the text and markdown outputs lay it out (sections.ts).
import type { Activities } from '../../activities';

/** The activities this code declares, with the input and result each declares. */
export type ActivityName = keyof Activities;
export type ActivityInput<K extends ActivityName> = Parameters<Activities[K]>[0];
export type ActivityResult<K extends ActivityName> = Awaited<ReturnType<Activities[K]>>;

export type DrainResult = ActivityResult<'drainServe'>;
export type VramReleaseResult = ActivityResult<'confirmVramReleased'>;

export interface StepEvidence {
  step: string;
  at?: string;
  outcome: string;
}

export interface FailureEvidence {
  type?: string;
  message: string;
  details: unknown[];
  cause?: FailureEvidence;
}

export interface ActivityEvidence {
  /** The ActivityTaskScheduled event's id. */
  eventId: number;
  activityId: string;
  type: string;
  scheduledAt?: string;
  closedAt?: string;
  attempts: number;
  status: 'completed' | 'failed' | 'timed-out' | 'canceled' | 'pending';
  input: unknown;
  result?: unknown;
  failure?: FailureEvidence;
  /** One line, as an operator reads it. */
  summary: string;
}

export interface UpdateEvidence {
  eventId: number;
  updateId: string;
  name: string;
  acceptedAt?: string;
  completedAt?: string;
  request: unknown;
  result?: unknown;
  failure?: FailureEvidence;
  summary: string;
}

export interface ChildEvidence {
  workflowId: string;
  /** From ChildWorkflowExecutionStarted: absent while the child has not started (or never did). */
  runId?: string;
  workflowType: string;
  initiatedAt?: string;
  closedAt?: string;
  status: 'completed' | 'failed' | 'running' | 'canceled' | 'terminated' | 'timed-out' | 'not started';
  input: unknown;
  result?: unknown;
  failure?: FailureEvidence;
  summary: string;
}

export interface VictimEvidence {
  serve: string;
  vramMib?: number;
  tier?: string;
  inFlightAtQuiesce?: number;
  drain?: DrainResult;
  /** Requests still in flight at the router when the stop was issued (absent: never stopped). */
  inFlightAtStop?: number;
  stopped: boolean;
  stop?: string;
  stopIssuedAt?: string;
  vram?: VramReleaseResult;
  /** Evicted by sleeping, or tried to be (then stopped): as the acquisition recorded it. */
  sleep?: { level?: number; issuedAt?: string; waitedMs?: number; residualDeclaredMib?: number; residualSeenMib?: number; fellBack?: string };
}

export interface IdentityEvidence {
  serve?: string;
  tier?: string;
  /** `GET /v1/models` by the workflow, or the router's guarded readmit. */
  by: 'v1/models' | 'router readmit';
  expected?: string;
  observed: string[];
  ok: boolean;
  at?: string;
}

export interface PromotionEvidence {
  router?: string;
  image?: string;
  previousImage?: string;
  imageChanged?: boolean;
  mappingVersion?: string | null;
  previousMappingVersion?: string | null;
  profile?: string;
  candidateSha256?: string;
  validation?: { passed: boolean; exitCode: number | null; durationMs: number; output: string; timedOut: boolean };
  backupPath?: string | null;
  write?: string;
  reload?: string;
  verify?: Record<string, unknown>;
  /** What the failed verification saw (restart counts of a crash loop, a healthz mismatch). */
  observed?: unknown;
  rollback?: Record<string, unknown>;
  outcome: string;
}

/** A ledger's state at an instant (`--at`, src/audit/report/ledger-at.ts). */
export interface LedgerAtEvidence {
  at: string;
  /** The answer the lines are: an update's (and the run that sent it), or the run's input. */
  asOf: { what: string; at?: string; eventId?: number; by?: string };
  lines: string[];
  /** Each reservation's holder run and, for a victim, the run that evicted it. */
  holders: string[];
  /** The ledger's answers carry no state (recorded before they did): the lines are older than T, see notInLines. */
  olderRecording?: true;
  /** Updates answered by then whose answer carries no state (a beginStop): not in the lines. */
  notInLines: string[];
  /** The run had closed by then (continued as new, or ended): its successor may hold more. */
  afterClose?: string;
}

/** Who started the run (src/audit/report/caller.ts). */
export interface CallerEvidence {
  caller: 'CLI' | 'API' | 'worker' | 'UI' | 'temporal CLI' | 'parent' | 'continue-as-new' | 'retry' | 'cron' | 'SDK client';
  /** The identity of WorkflowExecutionStarted, as sent ('' when none was). */
  identity: string;
  parent?: { workflowId: string; runId: string };
  /** The run this one continues (continue-as-new, a retry, a cron run). */
  continuedFrom?: string;
}

export type WorkflowStatus = 'completed' | 'failed' | 'running' | 'canceled' | 'terminated' | 'timed-out' | 'continued-as-new';

export interface AuditReport {
  workflow: {
    workflowId: string;
    runId?: string;
    type: string;
    taskQueue?: string;
    startedAt?: string;
    closedAt?: string;
    status: WorkflowStatus;
    events: number;
    parent?: string;
    startedBy: CallerEvidence;
  };
  /** The operator's verb, as the CLI spells it. */
  operation: string;
  serve?: string;
  input: unknown;
  outcome: { message: string; failureType?: string; failedStep?: string; cause?: { type?: string; message: string } };
  steps: StepEvidence[];
  ledger: { gpuRole?: string; before?: string[]; after?: string[]; at?: LedgerAtEvidence };
  eviction?: { reason?: string; shortfallMib?: number; victims: VictimEvidence[] };
  identity: IdentityEvidence[];
  nvidiaSmi: {
    readings: { at?: string; activity: string; uuid: string; usedMib: number; freeMib: number; totalMib: number }[];
    /** Each room check's decision (readStartRoom): whether the card had the room, with its figures and which reading decided. */
    rooms?: { at?: string; serve: string; allowed: boolean; line: string }[];
    releases: (VramReleaseResult & { victim?: string })[];
    measuredDelta?: { serve?: string; deltaMib: number; declaredMib?: number };
  };
  promotion?: PromotionEvidence;
  restored: { serve: string; workflowId: string; ok: boolean; message: string; observedModels?: string[] }[];
  children: ChildEvidence[];
  updates: UpdateEvidence[];
  activities: ActivityEvidence[];
  patches: string[];
}
