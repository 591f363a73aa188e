// Counts every operation run by kind and outcome, however it was started (the CLI, the API, the
// Temporal UI, `temporal workflow start`, a restore's parent): an inbound interceptor around each
// run's execute() that tells the worker through a Sink at the end. A sink adds no command and no
// history event, so recorded histories replay unchanged; it is not called during replay.
import { ApplicationFailure, CancellationScope, ContinueAsNew, TemporalFailure, isCancellation, proxySinks, workflowInfo } from '@temporalio/workflow';
import type {
  GetLogAttributesInput,
  Next,
  WorkflowExecuteInput,
  WorkflowInboundCallsInterceptor,
  WorkflowOutboundCallsInterceptor,
} from '@temporalio/workflow';
import { Failure } from '../shared/failures';
import { OPERATION_KINDS } from '../shared/operation-metrics';
import type { OperationEnded, OperationKind, OperationOutcome, OperationSinks } from '../shared/operation-metrics';
import { FAILURE_TYPE_LOG_ATTRIBUTE, OUTCOME_LOG_ATTRIBUTE } from '../shared/operation-metrics';

const { operations } = proxySinks<OperationSinks>();

function kindOf(workflowType: string): OperationKind | undefined {
  return Object.prototype.hasOwnProperty.call(OPERATION_KINDS, workflowType) ? OPERATION_KINDS[workflowType as keyof typeof OPERATION_KINDS] : undefined;
}

/** A run's result as an outcome: only the fields the operations' results declare (src/shared/operations.ts) are read. */
export function completedOutcome(kind: OperationKind, result: unknown): OperationEnded {
  const r = (typeof result === 'object' && result !== null ? result : {}) as { outcome?: unknown; victims?: unknown };
  if (r.outcome === 'already-running') return { kind, outcome: 'already-running' };
  switch (kind) {
    case 'bring-up':
      return { kind, outcome: r.outcome === 'restored' ? 'restored' : 'admitted' };
    case 'acquisition':
      return { kind, outcome: Array.isArray(r.victims) && r.victims.length > 0 ? 'evicted' : 'admitted' };
    case 'bring-down':
      // 'cancelled' (it cancelled the serve's holder) stopped it too; a serve found stopped did not need one.
      return { kind, outcome: r.outcome === 'already-stopped' || r.outcome === 'left-alone' ? r.outcome : 'stopped' };
    default:
      return { kind, outcome: 'completed' };
  }
}

/**
 * A run's failure as an outcome. `cancelRequested`: the run itself was cancelled; a cancellation
 * error without it (an inner CancellationScope's, a cancelled activity's) fails the run, as the
 * SDK closes it.
 */
export function failedOutcome(kind: OperationKind, err: unknown, cancelRequested: boolean): OperationEnded {
  if (cancelRequested && isCancellation(err)) return { kind, outcome: 'cancelled' };
  const type = err instanceof ApplicationFailure ? (err.type ?? 'unknown') : 'unknown';
  return type === Failure.AdmissionDenied ? { kind, outcome: 'denied' } : { kind, outcome: 'failed', failureType: type };
}

/** The run was cancelled (its root scope, which execute runs in), not an inner scope of it. */
function runCancelled(): boolean {
  return CancellationScope.current().consideredCancelled;
}

/** Whether the SDK closes the run on this error (src: the SDK's handleWorkflowFailure), continue-as-new aside. */
export function closesRun(err: unknown, cancelRequested: boolean): boolean {
  if (err instanceof ContinueAsNew) return false;
  return (cancelRequested && isCancellation(err)) || err instanceof TemporalFailure;
}

/** How the run ended, once it has: shared by the run's two interceptors below. */
interface RunEnd {
  outcome?: OperationOutcome;
  failureType?: string;
}

export class OperationMetricsInterceptor implements WorkflowInboundCallsInterceptor {
  constructor(private readonly end: RunEnd = {}) {}

  async execute(input: WorkflowExecuteInput, next: Next<WorkflowInboundCallsInterceptor, 'execute'>): Promise<unknown> {
    const kind = kindOf(workflowInfo().workflowType);
    if (!kind) return next(input);
    let result: unknown;
    try {
      result = await next(input);
    } catch (err) {
      // Only what closes the run counts: a lease that continues as new has not ended, and any
      // other error (a TypeError, a bug) fails the workflow task, which the server retries while
      // the run stays Running; the sink would fire again on every retry.
      const cancelled = runCancelled();
      if (closesRun(err, cancelled)) {
        const ended = failedOutcome(kind, err, cancelled);
        this.end.outcome = ended.outcome;
        this.end.failureType = ended.failureType;
        operations.ended(ended);
      }
      throw err;
    }
    operations.ended(completedOutcome(kind, result));
    return result;
  }
}

/**
 * Marks the SDK's own 'Workflow failed' line with the outcome, for the worker's logger to write an
 * honest denial as one info line (src/worker/log.ts): the error it carries crosses from the
 * workflow thread by structured clone, which drops the failure's type.
 */
export class OutcomeLogAttributes implements WorkflowOutboundCallsInterceptor {
  constructor(private readonly end: RunEnd) {}

  getLogAttributes(input: GetLogAttributesInput, next: Next<WorkflowOutboundCallsInterceptor, 'getLogAttributes'>): Record<string, unknown> {
    const attrs = next(input);
    if (!this.end.outcome) return attrs;
    return { ...attrs, [OUTCOME_LOG_ATTRIBUTE]: this.end.outcome, ...(this.end.failureType ? { [FAILURE_TYPE_LOG_ATTRIBUTE]: this.end.failureType } : {}) };
  }
}

/** One run's pair, sharing what its end was. */
export function operationMetricsInterceptors(): { inbound: WorkflowInboundCallsInterceptor; outbound: WorkflowOutboundCallsInterceptor } {
  const end: RunEnd = {};
  return { inbound: new OperationMetricsInterceptor(end), outbound: new OutcomeLogAttributes(end) };
}
