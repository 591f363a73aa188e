// An Update's answer as a replay gives it again, for the audit to hold against the answer history
// recorded. Temporal's replay checks a run's commands, not what its Update handlers answered: a
// ledger whose admit now decides differently replays "ok" (its decisions issue no command) while
// its state drifts from what its callers were told. The replayer's sink carries each answer out of
// the workflow sandbox (src/workflows/update-answers.ts); the audit compares (src/audit/replay.ts).
import type { Sinks } from '@temporalio/workflow';

export interface UpdateAnswer {
  updateId: string;
  name: string;
  /** The handler's result, or its error's message. */
  outcome: { success: unknown } | { failure: string };
}

export interface UpdateAnswerSinks extends Sinks {
  updateAnswers: {
    replayed(answer: UpdateAnswer): void;
  };
}
