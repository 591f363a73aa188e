// The operations that hold serves, seen through Temporal: a bring-down asks whether the run that
// holds its serve still runs, and cancels it (its compensations give the serve back).
import { randomUUID } from 'node:crypto';
import { WorkflowNotFoundError } from '@temporalio/client';
import type { Client } from '@temporalio/client';
import type { OperationControl, OperationStatus } from './port';
import { progressQuery } from '../../shared/messages';

export class TemporalOperations implements OperationControl {
  constructor(private readonly client: Client) {}

  async status(workflowId: string, runId: string): Promise<{ status: OperationStatus; closedAs?: string }> {
    try {
      const d = await this.client.workflow.getHandle(workflowId, runId).describe();
      return d.status.name === 'RUNNING' ? { status: 'running' } : { status: 'closed', closedAs: d.status.name };
    } catch (err) {
      // Gone from the server (retention, or a dev server that lost its state): it holds nothing any more.
      if (err instanceof WorkflowNotFoundError) return { status: 'closed', closedAs: 'NOT_FOUND' };
      throw err;
    }
  }

  async runningPast(workflowId: string, steps: readonly string[]): Promise<string | undefined> {
    try {
      const d = await this.client.workflow.getHandle(workflowId).describe();
      if (d.status.name !== 'RUNNING') return undefined;
      const done = await this.client.workflow.getHandle(workflowId, d.runId).query(progressQuery);
      return done.some((s) => steps.includes(s.step)) ? d.runId : undefined;
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return undefined;
      throw err;
    }
  }

  async cancel(workflowId: string, runId: string, reason?: string): Promise<void> {
    try {
      // The service's call, not the handle's: the SDK's cancel() sends no reason.
      await this.client.workflowService.requestCancelWorkflowExecution({
        namespace: this.client.options.namespace,
        workflowExecution: { workflowId, runId },
        identity: this.client.options.identity,
        requestId: randomUUID(),
        ...(reason ? { reason } : {}),
      });
    } catch (err) {
      // Ended meanwhile: there is nothing left to cancel, which is what the caller wants.
      if ((await this.status(workflowId, runId)).status === 'closed') return;
      throw err;
    }
  }
}
