// Workflow code bundled into one test's worker beside the workflows: a lease's start is held a
// while before its command is made, so that the test's cancel lands in the lease's start. It lands
// before the command: a cancel landing after it, while the server starts the child, is not what
// this holds open.
import { sleep } from '@temporalio/workflow';
import type { WorkflowInterceptorsFactory } from '@temporalio/workflow';

/** Long enough that the test's cancel lands in it on a loaded runner; a test that does not cancel waits it out. */
export const LEASE_START_HOLD_MS = 20_000;

export const interceptors: WorkflowInterceptorsFactory = () => ({
  outbound: [
    {
      async startChildWorkflowExecution(input, next) {
        if (input.workflowType === 'leaseWorkflow') await sleep(LEASE_START_HOLD_MS);
        return next(input);
      },
    },
  ],
});
