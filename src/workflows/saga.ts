// Compensations registered only after their step succeeded, run in reverse on failure. A
// compensation that fails is logged and skipped: the original error is what the caller needs.
import { ActivityFailure, ApplicationFailure, CancellationScope, log } from '@temporalio/workflow';

export class Saga {
  private readonly compensations: { name: string; run: () => Promise<unknown> }[] = [];
  readonly compensated: string[] = [];

  add(name: string, run: () => Promise<unknown>): void {
    this.compensations.push({ name, run });
  }

  /** Runs outside cancellation: a cancelled bring-up must still give back what it took. */
  async compensate(): Promise<void> {
    await CancellationScope.nonCancellable(() => this.runAll());
  }

  private async runAll(): Promise<void> {
    for (const c of this.compensations.reverse()) {
      try {
        await c.run();
        this.compensated.push(c.name);
      } catch (err) {
        log.error(`compensation '${c.name}' failed`, { error: String(err) });
      }
    }
    this.compensations.length = 0;
  }
}

/** The business failure under an activity failure: its type and message, as the operator reads them. */
export function rootCause(err: unknown): { type: string; message: string } {
  let e: unknown = err;
  if (e instanceof ActivityFailure && e.cause) e = e.cause;
  if (e instanceof ApplicationFailure) return { type: e.type ?? 'Error', message: e.message };
  if (e instanceof Error) return { type: e.name, message: e.message };
  return { type: 'Error', message: String(e) };
}
