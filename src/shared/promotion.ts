// Router promotion: its input and result, the `steps` query and the workflow id, shared by the
// workflow, the activities and the client. Plain types and define* descriptors only, so both the
// workflow sandbox and the client import it.
import { defineQuery } from '@temporalio/workflow';
import type { PromoteInputField } from '../domain/promotion';

export interface PromoteInput {
  /** Router deployment name, as the worker's router configuration names it (default 'router'). */
  router: string;
  /**
   * The candidate config: `content` (what the CLI sends, read on the operator's machine) or a
   * `path` the worker reads on its own host. Exactly one.
   */
  config: { path?: string; content?: string };
  /** Target image: validated against the candidate, and run when it differs from the live one. */
  image: string;
  /** Promotion profile (a file name or label): recorded in the result, not interpreted. */
  profile?: string;
  /** Run the validate step only: nothing is backed up, written or reloaded. */
  validateOnly?: boolean;
  /** Overrides of the worker's verification settings (tests shorten the window). */
  verify?: { windowS?: number; streak?: number };
}

/** Fails to compile when PromoteInput gains a field the domain's input check does not know. */
type EveryFieldChecked<Unchecked extends never> = Unchecked;
export type PromoteInputChecked = EveryFieldChecked<Exclude<keyof PromoteInput, PromoteInputField>>;

import type { StepRecord } from './messages';
export type { StepRecord } from './messages';

export interface ValidationRun {
  image: string;
  passed: boolean;
  exitCode: number | null;
  /** stdout and stderr of the validate-only run, trimmed. */
  output: string;
  timedOut: boolean;
  durationMs: number;
}

export interface VerifyReport {
  mappingVersion: string | null;
  polls: number;
  streak: number;
  restartCount: number;
  containerId: string;
  waitedMs: number;
}

export interface RollbackReport {
  ok: boolean;
  restored?: 'restored' | 'unchanged' | 'removed';
  reload?: 'recreated' | 'reloaded';
  image?: string;
  verify?: VerifyReport;
  /** Why the rollback itself failed, when it did. */
  error?: string;
  /** Why the live config was not restored (someone else's change since this run wrote it): the image alone was rolled back, under it. */
  configKept?: string;
}

export interface PromoteResult {
  router: string;
  outcome: 'promoted' | 'validated';
  message: string;
  image: string;
  previousImage: string;
  imageChanged: boolean;
  mappingVersion: string;
  previousMappingVersion: string | null;
  profile?: string;
  candidateSha256: string;
  validation: ValidationRun;
  backupPath?: string | null;
  write?: 'written' | 'unchanged';
  reload?: 'recreated' | 'reloaded';
  containerId?: string;
  verify?: VerifyReport;
  steps: StepRecord[];
}

/** What a failed promotion carries in its ApplicationFailure details. */
export interface PromoteFailureDetails {
  step: string;
  steps: StepRecord[];
  validation?: ValidationRun;
  backupPath?: string | null;
  rollback?: RollbackReport;
  /** Restart counts of a crash loop; the observed answer of a healthz mismatch. */
  observed?: unknown;
}

export interface PromotionProgress {
  router: string;
  /** The step under way ('done' at the end). */
  current: string;
  steps: StepRecord[];
}

export const promotionStepsQuery = defineQuery<PromotionProgress>('steps');

export { DEFAULT_ROUTER } from '../domain/promotion';

/** One promotion per router and node: started with conflict policy FAIL, see docs/promotion.md. */
export function promoteWorkflowId(node: string, router: string): string {
  return `promote/${node}/${router}`;
}
