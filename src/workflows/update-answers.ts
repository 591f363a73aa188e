// Each Update's answer, as a replay gives it again, out through a sink (src/shared/update-answers.ts).
// Called live too: the replayer may run a history's last workflow task as a live one, and its
// Updates must be compared as well. A live worker's sink drops the call (callDuringReplay false).
import { proxySinks } from '@temporalio/workflow';
import type { Next, UpdateInput, WorkflowInboundCallsInterceptor } from '@temporalio/workflow';
import type { UpdateAnswerSinks } from '../shared/update-answers';

const { updateAnswers } = proxySinks<UpdateAnswerSinks>();

export class UpdateAnswersInterceptor implements WorkflowInboundCallsInterceptor {
  /**
   * One `then` on the answer, not an async function: the SDK's promise hook takes a stack trace,
   * mapped through the bundle's source map, of every promise a workflow makes, and an async
   * function awaiting makes two (its own, and the throwaway one V8 creates for an await while a
   * hook is installed). On the ledger's hottest path that was 570 ms of the workflow thread's CPU
   * in 3,500 Updates, 320 ms after (bench/ledger-callers.ts under `node --cpu-prof`).
   */
  handleUpdate(input: UpdateInput, next: Next<WorkflowInboundCallsInterceptor, 'handleUpdate'>): Promise<unknown> {
    const { updateId, name } = input;
    const failed = (err: unknown): never => {
      updateAnswers.replayed({ updateId, name, outcome: { failure: err instanceof Error ? err.message : String(err) } });
      throw err;
    };
    let answer: Promise<unknown>;
    try {
      answer = next(input);
    } catch (err) {
      // As the async function did: a throw is a rejected answer, whatever was thrown (the SDK's next is async and never throws).
      // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors
      return Promise.reject(err).catch(failed);
    }
    return answer.then((success) => {
      updateAnswers.replayed({ updateId, name, outcome: { success } });
      return success;
    }, failed);
  }
}
