// The ledger's fence for a step of the run that asks: the activity names the run it runs for, and
// the ledger refuses (ReservationLost) a step of a run that does not hold the serve as the step
// needs it (see FENCE_STEPS in src/domain/fence.ts).
import { Context } from '@temporalio/activity';
import type { LedgerPort } from '../adapters/ledger/port';
import { holderOf } from '../domain/fence';
import type { FenceStep } from '../domain/ledger-requests';
import type { GpuSpec } from '../domain/types';
import { Failure } from '../shared/failures';
import { nonRetryable } from './failure';

export async function fenceThisRun(ledger: LedgerPort, node: string, gpu: GpuSpec, serve: string, step: FenceStep): Promise<void> {
  const { workflowExecution: run, attempt } = Context.current().info;
  if (!run) throw nonRetryable(Failure.ReservationLost, `${step} of ${serve} refused: no operation holds it`);
  const holder = holderOf(run.workflowId, run.runId);
  // The serve in the id: an eviction's stops (or sleeps) of two victims are two checks, which the
  // server would otherwise answer as one (an Update id is deduplicated within the ledger's run).
  await ledger.fence(node, gpu, { serve, holder, step }, `${holder}/fence-${step}/${serve}/${attempt}`);
}
