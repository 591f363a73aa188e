// The operation's steps as they complete. The `progress` query lets a CLI print them live, and
// the result (or the failure's details) carries them into history, where the audit reads them.
// `liveProgress` adds the step under way and when it began; queries are not history, so neither
// changes what a run records or how it replays.
import { setHandler } from '@temporalio/workflow';
import { liveProgressQuery, progressQuery } from '../shared/messages';
import type { StepRecord } from '../shared/messages';
import type { StepUnderWay } from '../shared/progress';

export class StepLog {
  readonly steps: StepRecord[] = [];
  /** The step under way, named in the error if it fails. */
  current = 'resolve';
  /** The step begun and not recorded yet, for a follower's live line. */
  private underway: StepUnderWay | undefined;

  constructor() {
    setHandler(progressQuery, () => this.steps);
    setHandler(liveProgressQuery, () => ({ steps: this.steps, ...(this.underway ? { underway: this.underway } : {}) }));
  }

  begin(step: string): void {
    this.current = step;
    this.underway = { step, since: new Date().toISOString() };
  }

  record(step: string, outcome: string): void {
    this.steps.push({ step, at: new Date().toISOString(), outcome });
    if (this.underway?.step === step) this.underway = undefined;
  }
}
