// The operation's steps as they complete. The `progress` query lets a CLI print them live, and
// the result (or the failure's details) carries them into history, where the audit reads them.
import { setHandler } from '@temporalio/workflow';
import { progressQuery } from '../shared/messages';
import type { StepRecord } from '../shared/messages';

export class StepLog {
  readonly steps: StepRecord[] = [];
  /** The step under way, named in the error if it fails. */
  current = 'resolve';

  constructor() {
    setHandler(progressQuery, () => this.steps);
  }

  begin(step: string): void {
    this.current = step;
  }

  record(step: string, outcome: string): void {
    this.steps.push({ step, at: new Date().toISOString(), outcome });
  }
}
