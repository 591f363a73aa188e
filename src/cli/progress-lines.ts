// An operation's progress as the CLI notes it: the line that says whether this process started
// the operation or joined one already running, each step with its times, a child's steps under
// a line naming it, and the step under way as the status line.
import { formatChild, formatStep } from '../client/follow';
import type { FollowHandlers } from '../client/follow';
import type { OperationWatch } from '../client/operations';
import type { RunOrigin } from '../client/start-operation';
import type { CommandContext } from './command';

/** HH:MM:SS on the operator's clock. */
export function clockTime(d: Date): string {
  return d.toTimeString().slice(0, 8);
}

/** The first line about an operation: started by this process, or joined. */
export function startLine(operation: string, workflowId: string, runId: string, origin: RunOrigin | undefined): string {
  if (origin?.joined)
    return `joined ${operation} already running since ${clockTime(origin.startedAt)} (started by ${origin.startedBy}; workflow ${workflowId})`;
  return `${operation}: workflow ${workflowId} (run ${runId})`;
}

/** Steps, children and the step under way, noted on the command's context. */
export function followFor(ctx: CommandContext): FollowHandlers {
  return {
    onStep: (step) => ctx.note(formatStep(step)),
    onChild: (child, depth) => ctx.note(formatChild(child, depth)),
    onStatus: (status) => ctx.status(status),
  };
}

export function watchFor(ctx: CommandContext): OperationWatch {
  return {
    ...followFor(ctx),
    onStart: ({ operation, workflowId, runId, origin }) => ctx.note(startLine(operation, workflowId, runId, origin)),
    onAbandonedJoin: ({ workflowId, runId }) =>
      ctx.note(`the router's acquisition this command joined (${workflowId}, run ${runId}) was abandoned before the join reached it: acquiring afresh`),
  };
}
