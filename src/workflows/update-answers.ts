// Each Update's answer, as a replay gives it again, out through a sink (src/shared/update-answers.ts).
// Live runs say nothing: the answer is in history already, and the ledger's Updates are its hot path.
import { proxySinks, workflowInfo } from '@temporalio/workflow';
import type { Next, UpdateInput, WorkflowInboundCallsInterceptor } from '@temporalio/workflow';
import type { UpdateAnswerSinks } from '../shared/update-answers';

const { updateAnswers } = proxySinks<UpdateAnswerSinks>();

export class UpdateAnswersInterceptor implements WorkflowInboundCallsInterceptor {
  async handleUpdate(input: UpdateInput, next: Next<WorkflowInboundCallsInterceptor, 'handleUpdate'>): Promise<unknown> {
    if (!workflowInfo().unsafe.isReplaying) return next(input);
    const { updateId, name } = input;
    try {
      const success = await next(input);
      updateAnswers.replayed({ updateId, name, outcome: { success } });
      return success;
    } catch (err) {
      updateAnswers.replayed({ updateId, name, outcome: { failure: err instanceof Error ? err.message : String(err) } });
      throw err;
    }
  }
}
