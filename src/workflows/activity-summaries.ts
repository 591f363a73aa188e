// Every activity a run schedules carries a summary in the operator's words (the serve, victim or
// tier it acts on: src/domain/activity-summary.ts), which the Temporal UI shows on the run's timeline
// and under User Metadata, "Events with Metadata". A summary is user metadata on the
// schedule command, not part of what replay matches (type and id): histories recorded without
// summaries replay against this unchanged (test/replay.test.ts, `gpures audit replay`).
import type { ActivityInput, LocalActivityInput, Next, WorkflowOutboundCallsInterceptor } from '@temporalio/workflow';
import { activitySummary } from '../domain/activity-summary';

function withSummary<T extends ActivityInput | LocalActivityInput>(input: T): T {
  if (input.options.summary) return input;
  const summary = activitySummary(input.activityType, input.args[0]);
  return summary ? { ...input, options: { ...input.options, summary } } : input;
}

export class ActivitySummaries implements WorkflowOutboundCallsInterceptor {
  scheduleActivity(input: ActivityInput, next: Next<WorkflowOutboundCallsInterceptor, 'scheduleActivity'>): Promise<unknown> {
    return next(withSummary(input));
  }

  scheduleLocalActivity(input: LocalActivityInput, next: Next<WorkflowOutboundCallsInterceptor, 'scheduleLocalActivity'>): Promise<unknown> {
    return next(withSummary(input));
  }
}
