// The workflow interceptors every bundle carries (src/worker/workflow-code.ts lists this module):
// what each run does whoever started it (the CLI, the API, the Temporal UI, `temporal workflow
// start`, a parent), without each workflow repeating it. They run inside the sandbox, so they take
// what workflows take (the rule in .dependency-cruiser.cjs).
import type { WorkflowInterceptorsFactory } from '@temporalio/workflow';
import { ActivitySummaries } from './activity-summaries';
import { operationMetricsInterceptors } from './operation-metrics';
import { RunTagsInterceptor } from './run-tags';
import { UpdateAnswersInterceptor } from './update-answers';

// The metrics interceptor outermost: it sees how the run closed, tagging included.
export const interceptors: WorkflowInterceptorsFactory = () => {
  const metrics = operationMetricsInterceptors();
  return {
    inbound: [metrics.inbound, new RunTagsInterceptor(), new UpdateAnswersInterceptor()],
    outbound: [metrics.outbound, new ActivitySummaries()],
    internals: [],
  };
};
