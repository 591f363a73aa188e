// `router promote` as calls on Temporal: start the promotion under its deterministic id (one at a
// time per router: a second start is refused, naming the running one), follow its steps through
// the `steps` query, and return the outcome as data. Printing belongs to the CLI.
import type { Client, WorkflowHandleWithFirstExecutionRunId } from '@temporalio/client';
import { WorkflowExecutionAlreadyStartedError, WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { taskQueueFor } from '../shared/messages';
import type { PromoteFailureDetails, PromoteInput, PromoteResult, StepRecord } from '../shared/promotion';
import { followSteps } from './follow';
import { promoteWorkflowId, promotionStepsQuery } from '../shared/promotion';
import type { promoteWorkflow } from '../workflows/promote';

/** A promotion of the same router is already running; nothing was started. */
export class PromotionRefused extends Error {
  constructor(
    message: string,
    readonly workflowId: string,
    readonly runningRunId: string | undefined,
    readonly runningStep: string | undefined,
  ) {
    super(message);
    this.name = 'PromotionRefused';
  }
}

export type PromotionOutcome =
  | { ok: true; workflowId: string; runId: string; result: PromoteResult }
  | { ok: false; workflowId: string; runId: string; failureType: string; message: string; details?: PromoteFailureDetails };

/**
 * Starts `promoteWorkflow` as `promote/<node>/<router>` with conflict policy FAIL: while one runs,
 * another start for the same router is refused (PromotionRefused), never queued or joined.
 */
export async function startPromotion(client: Client, node: string, input: PromoteInput): Promise<WorkflowHandleWithFirstExecutionRunId<typeof promoteWorkflow>> {
  const workflowId = promoteWorkflowId(node, input.router);
  try {
    return await client.workflow.start<typeof promoteWorkflow>('promoteWorkflow', {
      workflowId,
      taskQueue: taskQueueFor(node),
      args: [input],
      workflowIdConflictPolicy: 'FAIL',
      workflowIdReusePolicy: 'ALLOW_DUPLICATE',
      staticSummary: `router promote ${input.router}: ${input.image}${input.validateOnly ? ' (validate only)' : ''}`,
    });
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
    const handle = client.workflow.getHandle(workflowId);
    let runId: string | undefined;
    let started = '';
    let step: string | undefined;
    try {
      const desc = await handle.describe();
      runId = desc.runId;
      started = `, started ${desc.startTime.toISOString()}`;
      step = (await handle.query(promotionStepsQuery)).current;
    } catch {
      // It may have just finished; the refusal stands, with what we know.
    }
    throw new PromotionRefused(
      `router promote ${input.router} refused: a promotion of router '${input.router}' on node '${node}' is already running ` +
        `(workflow ${workflowId}${runId ? `, run ${runId}` : ''}${started}${step ? `, at step ${step}` : ''}); ` +
        'one promotion at a time per router: wait for it to finish, or cancel it, then start again',
      workflowId,
      runId,
      step,
    );
  }
}

/** Reports each step as it completes, until the workflow closes; then its outcome. */
export async function followPromotion(
  handle: WorkflowHandleWithFirstExecutionRunId<typeof promoteWorkflow>,
  onStep: (step: StepRecord) => void,
  pollMs = 500,
): Promise<PromotionOutcome> {
  const follower = followSteps(async () => (await handle.query(promotionStepsQuery)).steps, onStep, pollMs);
  const result = handle.result();
  await follower.until(result);
  const report = (steps: readonly StepRecord[]) => follower.report(steps);
  const runId = handle.firstExecutionRunId;
  try {
    const r = await result;
    report(r.steps);
    return { ok: true, workflowId: handle.workflowId, runId, result: r };
  } catch (err) {
    if (err instanceof WorkflowFailedError && err.cause instanceof ApplicationFailure) {
      const details = err.cause.details?.[0] as PromoteFailureDetails | undefined;
      if (details?.steps) report(details.steps);
      return { ok: false, workflowId: handle.workflowId, runId, failureType: err.cause.type ?? 'Error', message: err.cause.message, details };
    }
    if (err instanceof WorkflowFailedError) {
      return { ok: false, workflowId: handle.workflowId, runId, failureType: err.cause?.name ?? 'WorkflowFailed', message: err.cause?.message ?? err.message };
    }
    throw err;
  }
}

export { formatStep } from './follow';
