// The steps a serve going down takes, whoever takes it down: an eviction's victim and a
// bring-down both drain the tier's requests, then stop the container within its stop timeout.
import type { DrainResult } from '../shared/contracts';
import type { GpuSpec, ServeSpec } from '../domain/types';
import { ApplicationFailure, patched } from '@temporalio/workflow';
import { Failure } from '../shared/failures';
import type { Saga } from './saga';
import { isOwnContainer } from '../domain/fence';
import type { OwnContainer } from '../domain/fence';
import { eviction, failure } from '../shared/wording';
import { PATCHES } from './patches';
import { reads, router, stopping, waiting } from './proxies';

/** The compensations that take a serve's container away, by the names the operations register them under. */
export const REMOVE_CONTAINER = 'remove container';
export const STOP_SLEEPER = 'stop the sleeping serve';
const CONTAINER_REMOVALS = [REMOVE_CONTAINER, STOP_SLEEPER];

export const DEFAULT_DRAIN_TIMEOUT_S = 120;
/** How long nvidia-smi may take to show a stopped victim's VRAM back. */
export const DEFAULT_RELEASE_TIMEOUT_S = 30;
/**
 * How long vLLM's /sleep may take: a level-1 sleep copies the weights to host RAM ("3–6 s" for large
 * models in vLLM's own figures); past this the victim is stopped instead.
 */
export const DEFAULT_SLEEP_TIMEOUT_S = 60;

/** Waits until nothing is in flight to the serve (its tier at the router, and vLLM), up to timeoutS. */
export function drainFor(tier: string | undefined, serve: ServeSpec, timeoutS: number, processesOn?: { node: string; gpuUuid: string }): Promise<DrainResult> {
  return waiting(timeoutS).drainServe({ tier, serve, deadlineEpochMs: Date.now() + timeoutS * 1000, ...(processesOn ? { processesOn } : {}) });
}

/**
 * Graceful stop and removal of the serve's container, bounded by its own stop timeout. `own` (a
 * compensation's): only the run's own container, another run's under the name left alone. `fence`:
 * the GPU whose ledger must hold the serve for this run (evicting or stopping) before the stop, for
 * a victim's stop and a bring-down's; a compensation removing the run's own container passes none.
 * Activity input only: the same command with either or without.
 */
export function stopServe(
  node: string,
  serve: { name: string; stopTimeoutS: number },
  guard: { own?: OwnContainer; fence?: GpuSpec; listWhenDown?: boolean } = {},
) {
  const { own, fence, listWhenDown } = guard;
  return stopping(serve.stopTimeoutS).stopServeContainer({
    node,
    serve: serve.name,
    timeoutS: serve.stopTimeoutS,
    ...(own ? { own } : {}),
    ...(fence ? { fence } : {}),
    ...(listWhenDown ? { listWhenDown } : {}),
  });
}

/**
 * The guarded readmit of a tier this run quiesced, lifting only its own quiesce (its mark; none,
 * unguarded, when the quiesce failed after acting): a readmit the router refuses over a quiesce made
 * since undid nothing, and throws, so a saga lists it as not undone, saying why.
 */
export async function readmitOwnQuiesce(tier: string, serve: string, mark: string | undefined): Promise<void> {
  const r = await router.readmitIfQuiesced({ tier, ...(mark !== undefined ? { quiesceMark: mark } : {}) });
  if (r.action === 'quiesced-since') {
    throw ApplicationFailure.create({ type: Failure.ReadmitRefused, message: eviction.leftQuiesced(tier, serve), nonRetryable: true });
  }
}

/**
 * A compensation's give-back of a serve's MiB, once its container is seen not to run: a removal
 * that failed (dockerd erroring past the retries) leaves it running, and MiB given back under a
 * running container are MiB the ledger admits another serve to, whoever started it (this run, or
 * a sleeper's run before it that this one woke). Kept, they stay with this run, which ends:
 * `serves down` takes the hold over, stops the container and gives them back. Where a fence
 * refused the run (saga.fenceRefused), it no longer holds them and a container running under the
 * name is another run's: the release changes nothing, and goes ahead without the wait, which
 * would say that container keeps this run's MiB. Runs from before this gave them back at once,
 * and replay that way.
 */
export async function giveBackWhenDown<T>(node: string, serve: string, saga: Saga, giveBack: () => Promise<T>): Promise<T> {
  if (patched(PATCHES.giveBackWhenDown) && !saga.fenceRefused) {
    const c = await reads().inspectServe({ node, serve });
    // Another run's container under the name (its removal left it alone) keeps none of this run's
    // MiB: the release names this run and changes nothing where another holds the serve.
    const others = c?.running && saga.own !== undefined && !isOwnContainer(c, saga.own) && patched(PATCHES.giveBackBesideOthers);
    if (c?.running && !others) {
      const removal = saga.failed.find((f) => CONTAINER_REMOVALS.includes(f.name));
      throw ApplicationFailure.create({ type: Failure.ContainerStillRunning, message: failure.kept(serve, c.name, removal?.why), nonRetryable: true });
    }
  }
  return giveBack();
}

/**
 * A fence refused this run (ReservationLost): the ledger holds the serve for another run or for
 * none, and a container under its name may be that run's (a ledger started afresh admitted it
 * and it started one). The caller withdraws its removals by name when this answers true; the
 * start step removed its own container by id. Runs from before this removed by name and waited
 * for that container in their give-back, and replay that way (false).
 */
export function disowned(saga: Saga): boolean {
  if (!patched(PATCHES.startRefusedLeavesContainer)) return false;
  saga.fenceRefused = true;
  return true;
}

/**
 * A step started beside another and awaited only after it: until then its failure is not an
 * unhandled rejection (which fails the workflow task); awaited, it throws as any step does.
 */
export function awaitedLater<T>(step: Promise<T>): Promise<T> {
  void step.catch(() => undefined);
  return step;
}
