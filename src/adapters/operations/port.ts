// The operations (workflow runs) that hold serves, as a bring-down asks and cancels them:
// Temporal (temporal.ts) implements it.

/** How an operation's workflow run stands: what a bring-down needs to wait out or take over from. */
export type OperationStatus = 'running' | 'closed';

export interface OperationControl {
  status(workflowId: string, runId: string): Promise<{ status: OperationStatus; closedAs?: string }>;
  /** The run under `workflowId` that is running now and has recorded one of `steps` (its progress), if one is. */
  runningPast(workflowId: string, steps: readonly string[]): Promise<string | undefined>;
  /**
   * Requests cancellation; the operation's compensations then give back what it took. `reason`
   * is recorded with the request: what the cancelled run's follower names as who cancelled it.
   */
  cancel(workflowId: string, runId: string, reason?: string): Promise<void>;
}
