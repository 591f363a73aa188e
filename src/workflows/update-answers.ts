// Each Update's answer, as a replay gives it again, out through a sink (src/shared/update-answers.ts).
// Called live too: the replayer may run a history's last workflow task as a live one, and its
// Updates must be compared as well. A live worker's sink drops the call (callDuringReplay false).
import { proxySinks } from '@temporalio/workflow';
import type { Next, UpdateInput, WorkflowInboundCallsInterceptor } from '@temporalio/workflow';
import type { UpdateAnswerSinks } from '../shared/update-answers';

const { updateAnswers } = proxySinks<UpdateAnswerSinks>();

export class UpdateAnswersInterceptor implements WorkflowInboundCallsInterceptor {
  async handleUpdate(input: UpdateInput, next: Next<WorkflowInboundCallsInterceptor, 'handleUpdate'>): Promise<unknown> {
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
