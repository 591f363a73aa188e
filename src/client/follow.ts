// Live progress of a running operation: polls its steps query and reports each new step once,
// until the workflow closes. What the operator watches while a vLLM serve takes minutes to load.
import type { StepRecord } from '../shared/messages';

export interface StepFollower {
  /** Reports the steps not seen yet, e.g. the final list from a result or failure details. */
  report(this: void, steps: readonly StepRecord[]): void;
  /** Resolves once `done` settles, having polled `readSteps` meanwhile. */
  until(done: Promise<unknown>): Promise<void>;
}

export function followSteps(readSteps: () => Promise<readonly StepRecord[]>, onStep: (step: StepRecord) => void, pollMs = 500): StepFollower {
  let seen = 0;
  const report = (steps: readonly StepRecord[]) => {
    for (; seen < steps.length; seen++) {
      const s = steps[seen];
      if (s) onStep(s);
    }
  };
  return {
    report,
    async until(done) {
      let finished = false;
      const settled = done.then(
        () => undefined,
        () => undefined,
      );
      void settled.then(() => {
        finished = true;
      });
      while (!finished) {
        try {
          report(await readSteps());
        } catch {
          // no worker answered yet, or the workflow just closed
        }
        if (!finished) await Promise.race([settled, new Promise((r) => setTimeout(r, pollMs))]);
      }
    },
  };
}

/** One line per step, as the CLI prints progress. */
export function formatStep(s: StepRecord): string {
  return `  ${s.step}: ${s.outcome}`;
}
