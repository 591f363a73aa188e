// A serve's running lease, as an acquisition's activity reaches it: a workflow cannot send an
// Update to another workflow. Temporal (temporal.ts) implements it.
import type { LeaseAtLeastAnswer, LeaseTerms } from '../../shared/messages';

export interface LeaseControl {
  /**
   * Asks the lease `workflowId` to last at least `terms` (leaseAtLeastUpdate) and answers what it
   * did; a lease that has closed answers not applied, `ended` (`none` for `extendOnly` terms, sent
   * without a lease being started first: closed or never started, none runs). The same `updateId`
   * on every try: the server answers a repeat with the first one's outcome. `signal` abandons the wait.
   */
  atLeast(workflowId: string, terms: LeaseTerms, updateId: string, signal?: AbortSignal): Promise<LeaseAtLeastAnswer>;
}
