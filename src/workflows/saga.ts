// Compensations registered only after their step succeeded, run in reverse on failure. A
// compensation that fails is logged and skipped: the original error is what the caller needs.
import { ActivityFailure, ApplicationFailure, CancellationScope, ChildWorkflowFailure, isCancellation, log, patched } from '@temporalio/workflow';
import { failure } from '../shared/wording';
import { Failure } from '../shared/failures';
import { PATCHES } from './patches';
import type { PatchId } from './patches';
import type { StepLog } from './step-log';
import type { OwnContainer } from '../domain/fence';

export class Saga {
  private readonly compensations: { name: string; run: () => Promise<unknown> }[] = [];
  readonly compensated: string[] = [];
  /** The compensations that failed, with their reason as the operator reads it. */
  readonly failed: { name: string; why: string }[] = [];
  /** Set once a fence refused this run (steps.ts disowned): the serve, and the container under its name, are no longer its own. */
  fenceRefused = false;
  /** The container the run started or woke (its id once known): what its compensations may stop, remove or take out of rotation. */
  own?: OwnContainer;
  /**
   * The GPU's start slot (start-slot.ts): whether the run holds it, how many takes it has asked
   * (each Update's id), and (since stop-takes-slot) the step that gives it back once compensated.
   */
  readonly startSlot: { held: boolean; asks: number; give?: () => Promise<void> } = { held: false, asks: 0 };
  /** A restore's sleeper its wake has not touched yet (it waits for the start slot): a compensation then puts it back asleep. */
  sleeperUntouched = false;

  /** Returns a function that withdraws the compensation once it no longer applies. */
  add(name: string, run: () => Promise<unknown>): () => void {
    const entry = { name, run };
    this.compensations.push(entry);
    return () => {
      const i = this.compensations.indexOf(entry);
      if (i >= 0) this.compensations.splice(i, 1);
    };
  }

  /** Runs outside cancellation: a cancelled bring-up must still give back what it took. */
  async compensate(): Promise<void> {
    await CancellationScope.nonCancellable(() => this.runAll());
  }

  private async runAll(): Promise<void> {
    for (const c of this.compensations.reverse()) {
      try {
        const other = leftAlone(await c.run());
        this.compensated.push(other !== undefined ? failure.leftAlone(c.name, other) : c.name);
      } catch (err) {
        log.error(`compensation '${c.name}' failed`, { error: String(err) });
        this.failed.push({ name: c.name, why: rootCause(err).message });
      }
    }
    this.compensations.length = 0;
    // The run is done with the GPU, whichever step it failed at: one give of its start slot, not
    // one in each compensation that may end a run (a release, an eviction's abort). Not listed as
    // undone: the slot is the card's turn, not something the run changed on the box.
    if (this.startSlot.held && this.startSlot.give) {
      try {
        await this.startSlot.give();
      } catch (err) {
        log.error('the start slot was not given back', { error: String(err) });
      }
    }
  }
}

/** The holder of another run's container that a compensation found under the serve's name and left alone, if it did. */
function leftAlone(r: unknown): string | undefined {
  return typeof r === 'object' && r !== null && 'leftAlone' in r && typeof r.leftAlone === 'string' ? r.leftAlone : undefined;
}

/**
 * Runs a step that takes something (a reservation, a quiesce) outside cancellation: a cancel
 * that arrived meanwhile is handled once the step is known to have acted, so its compensation is
 * registered and runs, instead of racing an attempt still under way. Behind a patch: runs
 * cancelled before this existed requested the step's cancellation, and replay that way.
 */
export function whole<T>(patchId: PatchId, step: () => Promise<T>): Promise<T> {
  return patched(patchId) ? CancellationScope.nonCancellable(step) : step();
}

/** The business failure under an activity failure: its type and message, as the operator reads them. */
export function rootCause(err: unknown): { type: string; message: string } {
  let e: unknown = err;
  // A child's failure (a restore's bring-up, a lease's bring-down) says only 'Child Workflow
  // execution failed'; the child's own failure, and the activity's beneath it, say what went wrong.
  while ((e instanceof ActivityFailure || e instanceof ChildWorkflowFailure) && e.cause) e = e.cause;
  if (e instanceof ApplicationFailure) return { type: e.type ?? 'Error', message: e.message };
  if (e instanceof Error) return { type: e.name, message: e.message };
  return { type: 'Error', message: String(e) };
}

/**
 * Runs the compensations and returns the error to throw: the original failure's type, and a
 * message naming the operation, the step that failed and what was undone. A cancellation (from
 * the UI or `temporal workflow cancel`) is compensated the same way and rethrown, so the run
 * ends Cancelled rather than Failed.
 */
export async function failAndCompensate(operation: string, err: unknown, saga: Saga, steps: StepLog, extra = ''): Promise<Error> {
  const cause = rootCause(err);
  const step = steps.current;
  const cancelled = isCancellation(err);
  steps.record(step, cancelled ? 'cancelled' : `failed: ${cause.message}`);
  await saga.compensate();
  // Runs cancelled before this change failed after compensating; they replay that way.
  if (cancelled && patched(PATCHES.cancelledEndsCancelled)) {
    // The cancellation carries no message of ours: what was undone is in the steps (progress query, history).
    const summary = failure.cancelled(operation, step, saga.compensated, extra, saga.failed);
    steps.record('compensate', summary);
    log.info(summary);
    return err as Error;
  }
  return ApplicationFailure.create({
    type: cause.type,
    message: failure.failed(operation, step, cause.message, saga.compensated, extra, saga.failed),
    nonRetryable: true,
    cause: err instanceof Error ? err : undefined,
    details: [{ step, steps: steps.steps }],
  });
}

/**
 * An acquisition abandoned for the router (src/workflows/abandon.ts): compensated as a cancel is,
 * then failed as Abandoned, not cancelled (nobody cancelled it: it was asked and decided), its
 * message saying what was left running and what was undone.
 */
export async function abandonAndCompensate(operation: string, step: string, saga: Saga, steps: StepLog, victims: string[]): Promise<Error> {
  steps.record(step, 'abandoned');
  await saga.compensate();
  const message = failure.abandoned(operation, step, victims, saga.compensated, saga.failed);
  steps.record('compensate', message);
  log.info(message);
  return ApplicationFailure.create({ type: Failure.Abandoned, message, nonRetryable: true, details: [{ step, steps: steps.steps }] });
}
