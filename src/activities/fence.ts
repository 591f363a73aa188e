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
import type { StopResult } from '../shared/contracts';
import { findReservation } from '../domain/ledger';
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
 * The stop's fence, for an attempt that has no record of an earlier one issuing the stop. Refused
 * with the serve's container not running, it answers what the box shows instead of failing as
 * "not stopped" (nothing issued or removed by this attempt); undefined when the fence passed.
 * A retry: the earlier attempt may have issued the stop and died before its `issued` heartbeat
 * reached the server (heartbeats are throttled, never acknowledged), and a ledger started afresh
 * since then no longer holds the serve for the run; the serve is down either way, and failing
 * would readmit the tier of a serve going down. A first attempt: a ledger started afresh since the
 * take found no container running and holds nothing for the serve (it crashed, or was stopped by
 * hand); it was down already. A container that runs is refused as before: it may be the one
 * another run's reservation holds, and a stop must not hit it; so is a first attempt whose ledger
 * holds the serve in any way (another run may be bringing it up).
 */
export async function fencedOrDown(
  deps: { ledger: LedgerPort; runtime: ContainerRuntime },
  node: string,
  gpu: GpuSpec,
  serve: string,
  attempt: number,
): Promise<DownAfterRefusal | undefined> {
  try {
    await fenceThisRun(deps.ledger, node, gpu, serve, 'stop');
    return undefined;
  } catch (err) {
    if (!(err instanceof ApplicationFailure) || err.type !== Failure.ReservationLost) throw err;
    const name = containerName(node, serve);
    const c = await deps.runtime.inspect(name);
    if (c?.running) throw err;
    // What the box shows, in the result's own fields: an exited container is left as it is.
    const remove = c ? (`left ${c.status}` as const) : ('absent' as const);
    const box = c ? `container ${name} ${c.status}` : `no container ${name}`;
    if (attempt === 1) {
      if (findReservation(await deps.ledger.snapshot(node, gpu, 10_000), serve)) throw err;
      return {
        stop: c ? 'already-stopped' : 'absent',
        remove,
        downAfterRefusal: `${serve} was already down: no reservation, no running container (${box}); nothing stopped`,
      };
    }
    // The refusal's own "it was not stopped" is this attempt's, not the run's: left out.
    const refused = err.message.replace(`; ${FENCE_STEPS.stop.undone}`, '');
    return { stop: 'stopped', remove, downAfterRefusal: `${refused}; ${box}, the stop taken as an earlier attempt's` };
  }
}

/** A stop fence refused with the serve down: the stop's result as the box shows it, and why. */
export type DownAfterRefusal = Pick<StopResult, 'stop' | 'remove'> & { downAfterRefusal: string };
