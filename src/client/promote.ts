// `router promote` as calls on Temporal: start the promotion under its deterministic id (one at a
// time per router: a second start is refused, naming the running one), follow its steps through
// the `steps` query, and return the outcome as data. Printing belongs to the CLI.
import type { Client, WorkflowHandleWithFirstExecutionRunId } from '@temporalio/client';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { PromoteFailureDetails, PromoteInput, PromoteResult, StepRecord } from '../shared/promotion';
import { followDeadline } from './follow';
import type { FollowHandlers } from './follow';
import { promoteWorkflowId, promotionStepsQuery } from '../shared/promotion';
import { followOperation, startOperation } from './start-operation';
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
export async function startPromotion(
  client: Client,
  node: string,
  input: PromoteInput,
): Promise<WorkflowHandleWithFirstExecutionRunId<typeof promoteWorkflow>> {
  const workflowId = promoteWorkflowId(node, input.router);
  try {
    return await startOperation<typeof promoteWorkflow>(client, {
      workflowType: 'promoteWorkflow',
      workflowId,
      node,
      input,
      summary: `router promote ${input.router}: ${input.image}${input.validateOnly ? ' (validate only)' : ''}`,
      onConflict: 'refuse',
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

/** Reports each step as it completes (and the step under way), until the workflow closes; then its outcome. */
export async function followPromotion(
  handle: WorkflowHandleWithFirstExecutionRunId<typeof promoteWorkflow>,
  watch: FollowHandlers | ((step: StepRecord) => void),
  pollMs = 500,
): Promise<PromotionOutcome> {
  const { workflowId } = handle;
  const runId = handle.firstExecutionRunId;
  const handlers = typeof watch === 'function' ? { onStep: watch } : watch;
  const run = handle.client.getHandle(workflowId, runId);
  const within = followDeadline(handle.client);
  const readSteps = async () => (await within(() => handle.query(promotionStepsQuery))).steps;
  const settled = await followOperation(handle, { readSteps, run, handlers, pollMs, within });
  if (settled.ok) return { ok: true, workflowId, runId, result: settled.result };
  const { failureType, message } = settled;
  // Only an application failure carries details; the outcome has the key exactly when it does.
  return 'details' in settled
    ? { ok: false, workflowId, runId, failureType, message, details: settled.details as PromoteFailureDetails | undefined }
    : { ok: false, workflowId, runId, failureType, message };
}
