// The ledger's fence for a step of the run that asks: the activity names the run it runs for, and
// the ledger refuses (ReservationLost) a step of a run that does not hold the serve as the step
// needs it (see FENCE_STEPS in src/domain/fence.ts).
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import type { ContainerRuntime } from '../adapters/containers/port';
import type { LedgerPort } from '../adapters/ledger/port';
import { FENCE_STEPS, holderOf } from '../domain/fence';
import { containerName } from '../domain/serve';
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

/**
 * The stop's fence, for an attempt that has no record of an earlier one issuing the stop. A retry
 * refused with the serve's container not running answers why (its stop taken as done, nothing
 * issued or removed by this attempt), where it would fail as "not stopped"; undefined when the
 * fence passed. The earlier attempt may have issued the stop and died before its `issued`
 * heartbeat reached the server (heartbeats are throttled, never acknowledged), and a ledger started
 * afresh since then no longer holds the serve for the run; the serve is down either way, and
 * failing would readmit the tier of a serve going down. A container that runs is refused as
 * before: it may be the one another run's reservation holds, and a stop must not hit it.
 */
export async function fencedOrDown(
  deps: { ledger: LedgerPort; runtime: ContainerRuntime },
  node: string,
  gpu: GpuSpec,
  serve: string,
  attempt: number,
): Promise<string | undefined> {
  try {
    await fenceThisRun(deps.ledger, node, gpu, serve, 'stop');
    return undefined;
  } catch (err) {
    if (attempt === 1 || !(err instanceof ApplicationFailure) || err.type !== Failure.ReservationLost) throw err;
    const c = await deps.runtime.inspect(containerName(node, serve));
    if (c?.running) throw err;
    // The refusal's own "it was not stopped" is this attempt's, not the run's: left out.
    const refused = err.message.replace(`; ${FENCE_STEPS.stop.undone}`, '');
    return `${refused}; container ${containerName(node, serve)} ${c ? c.status : 'absent'}, the stop taken as an earlier attempt's`;
  }
}
