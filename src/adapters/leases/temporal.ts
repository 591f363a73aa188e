// A serve's running lease through Temporal: the acquisition's "last at least this long", answered.
import { ServiceError, WorkflowNotFoundError, WorkflowUpdateFailedError } from '@temporalio/client';
import type { Client } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { Failure } from '../../shared/failures';
import { leaseAtLeastUpdate } from '../../shared/messages';
import type { LeaseAtLeastAnswer, LeaseTerms } from '../../shared/messages';
import type { LeaseControl } from './port';

export class TemporalLeases implements LeaseControl {
  constructor(private readonly client: Client) {}

  async atLeast(workflowId: string, terms: LeaseTerms, updateId: string, signal?: AbortSignal): Promise<LeaseAtLeastAnswer> {
    const send = () => this.client.workflow.getHandle(workflowId).executeUpdate(leaseAtLeastUpdate, { args: [terms], updateId });
    try {
      return await (signal ? this.client.withAbortSignal(signal, send) : send());
    } catch (err) {
      if (err instanceof WorkflowNotFoundError || (err instanceof ServiceError && /already completed|not found/i.test(err.message))) {
        // Terms that only extend are sent without trying to start a lease first: none runs.
        if (terms.extendOnly === true) return { applied: false, state: 'none', why: `${workflowId} is not running` };
        // Closed between the acquisition's start of it (already running) and this: its expiry is over.
        return { applied: false, state: 'ended', why: `${workflowId} has closed` };
      }
      // The lease's validator refused the terms: its answer, not a fault to retry.
      if (err instanceof WorkflowUpdateFailedError) {
        const cause = err.cause instanceof ApplicationFailure ? err.cause : undefined;
        throw ApplicationFailure.create({ type: cause?.type ?? Failure.InvalidInput, message: cause?.message ?? err.message, nonRetryable: true });
      }
      throw err;
    }
  }
}
