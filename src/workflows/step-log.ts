// The operation's steps as they complete. The `progress` query lets a CLI print them live, and
// the result (or the failure's details) carries them into history, where the audit reads them.
// `liveProgress` adds the step under way and when it began; queries are not history, so neither
// changes what a run records or how it replays. The same steps are the run's current details,
// under the line run-tags set (`serves up vision on primary-node`), so an operator in the
// Temporal UI (User Metadata, Current Details) sees the step under way and those done; current
// details are answered to a query, not recorded either.
import { getCurrentDetails, setCurrentDetails, setHandler } from '@temporalio/workflow';
import { literalMarkdown } from '../domain/markdown';
import { lostRunUnreadText } from '../domain/ledger';
import type { LedgerState } from '../domain/ledger';
import { liveProgressQuery, progressQuery } from '../shared/messages';
import { OPERATION_HANDLERS } from '../shared/handler-descriptions';
import type { StepRecord } from '../shared/messages';
import type { StepUnderWay } from '../shared/progress';

/** Steps done shown in the details: the latest, as a run has a few dozen at most. */
const DETAILS_STEPS = 12;

export class StepLog {
  readonly steps: StepRecord[] = [];
  /** The step under way, named in the error if it fails. */
  current = 'resolve';
  /** The step begun and not recorded yet, for a follower's live line. */
  private underway: StepUnderWay | undefined;
  /** Each step done as its line in the details, escaped once: the details are set again at every step. */
  private readonly doneLines: string[] = [];

  /** The run's details as the step log began (run-tags' operator line). */
  private readonly heading = getCurrentDetails();

  constructor() {
    setHandler(progressQuery, () => this.steps, { description: OPERATION_HANDLERS.progress });
    setHandler(liveProgressQuery, () => ({ steps: this.steps, ...(this.underway ? { underway: this.underway } : {}) }), {
      description: OPERATION_HANDLERS.liveProgress,
    });
  }

  begin(step: string): void {
    this.current = step;
    this.underway = { step, since: new Date().toISOString() };
    this.showDetails();
  }

  record(step: string, outcome: string): void {
    const done = { step, at: new Date().toISOString(), outcome };
    this.steps.push(done);
    this.doneLines.push(literalMarkdown(`done ${done.at.slice(11, 19)}: ${step}: ${outcome}`));
    if (this.underway?.step === step) this.underway = undefined;
    this.showDetails();
  }

  /**
   * A ledger that could not read the run it replaced (its restore links may be missing) says so
   * in the first answer it gives an operation after its reconcile: this run's steps say it then.
   */
  ledgerSaid(ledger: LedgerState | undefined): void {
    const unread = ledger?.lostRunUnread;
    if (unread && !unread.told) this.record('ledger', lostRunUnreadText(unread));
  }

  /** The last steps, one paragraph each (the UI renders details as markdown). */
  private showDetails(): void {
    const now = this.underway ? [literalMarkdown(`under way since ${this.underway.since.slice(11, 19)}: ${this.underway.step}`)] : [];
    setCurrentDetails([...(this.heading ? [this.heading] : []), ...this.doneLines.slice(-DETAILS_STEPS), ...now].join('\n\n'));
  }
}
