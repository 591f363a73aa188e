// Workflow code bundled into one test's worker beside the workflows: an acquisition's terms to a
// lease that runs already (its start refused: already started) are held a while before they are
// sent, so that the test can end that lease in between, the window a lease closing on its own
// would find.
import { sleep } from '@temporalio/workflow';
import type { WorkflowInterceptorsFactory } from '@temporalio/workflow';

export const LEASE_TELL_HOLD_MS = 10_000;

export const interceptors: WorkflowInterceptorsFactory = () => ({
  outbound: [
    {
      async signalWorkflow(input, next) {
        if (input.target.type === 'external' && input.target.workflowExecution.workflowId?.startsWith('lease/')) await sleep(LEASE_TELL_HOLD_MS);
        return next(input);
      },
    },
  ],
});
