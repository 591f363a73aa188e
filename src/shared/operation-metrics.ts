// What a workflow run tells the worker's metrics when it ends, through a Sink (no history event,
// not called during replay): the operation's kind and outcome, whoever started the run. The
// workflow side (src/workflows/operation-metrics.ts) classifies; the worker counts.
import type { Sinks } from '@temporalio/workflow';

/** The operator's names for the workflow types that are operations (the ledger is not one). */
export const OPERATION_KINDS = {
  bringUpWorkflow: 'bring-up',
  acquireWorkflow: 'acquisition',
  bringDownWorkflow: 'bring-down',
  promoteWorkflow: 'promotion',
  leaseWorkflow: 'lease',
} as const;
export type OperationKind = (typeof OPERATION_KINDS)[keyof typeof OPERATION_KINDS];

/**
 * admitted: a serve came up on free MiB; evicted: it came up after evicting victims; restored: an
 * evicted serve came back; already-running: nothing to do; stopped: a bring-down's stop (of
 * the serve, or of its holder's operation, cancelled); already-stopped: a bring-down found the
 * serve stopped; left-alone: a lease's bring-down found its serve another run's by then; completed: a promotion or lease that ended well; denied: the ledger said no; cancelled; failed.
 */
export const OPERATION_OUTCOMES = [
  'admitted',
  'evicted',
  'restored',
  'already-running',
  'stopped',
  'already-stopped',
  'left-alone',
  'completed',
  'denied',
  'cancelled',
  'failed',
] as const;
export type OperationOutcome = (typeof OPERATION_OUTCOMES)[number];

export interface OperationEnded {
  kind: OperationKind;
  outcome: OperationOutcome;
  /** A failed run's failure type (src/shared/failures.ts), or 'unknown'. */
  failureType?: string;
}

export interface OperationSinks extends Sinks {
  operations: {
    ended(event: OperationEnded): void;
  };
}

/** The log attribute that carries a failed run's outcome on the SDK's 'Workflow failed' line. */
export const OUTCOME_LOG_ATTRIBUTE = 'gpuresOutcome';

/** Beside it, a failed run's failure type (its message's, not the error's, which loses it crossing threads). */
export const FAILURE_TYPE_LOG_ATTRIBUTE = 'gpuresFailureType';
