// An acquisition's abandon: the router asks (abandonUpdate) once its held requests for the serve
// have all gone; the run decides (src/domain/abandon.ts) and, abandoning, cancels its own work
// the way a cancel does: the scope its eviction and start run in is cancelled, the drain under
// way ends, and the saga readmits the victim's tier, aborts the eviction and releases the MiB.
// The handlers only record and decide, at once: a handler waiting (for the run's plan) would
// answer whenever the run got there, long after the asker stopped waiting, and never for a run
// that failed first. An ask the run cannot decide yet, or one it would take but that was delivered
// after its asker stopped waiting (ABANDON_ANSWER_MS: the worker was down meanwhile), is refused
// with askAgain: the router asks again while nobody is held. A refusal is final, late or not.
// Every answer not taken says why in `reason`, which the router counts. No command of a run that
// is never asked changes, so histories recorded before this replay unchanged.
import { CancellationScope, setHandler } from '@temporalio/workflow';
import { abandonDecision, callerOf, withJoined } from '../domain/abandon';
import type { AbandonState } from '../domain/abandon';
import { ABANDON_ANSWER_MS, abandonUpdate, joinedSignal, joinedUpdate } from '../shared/messages';
import type { AbandonAnswer, JoinedAnswer } from '../shared/messages';
import { ACQUISITION_HANDLERS } from '../shared/handler-descriptions';
import type { StepLog } from './step-log';

export class RunAbandon {
  private state: AbandonState;
  private scope: CancellationScope | undefined;
  private closed = false;
  /** The step under way when the run was abandoned, once it was. */
  abandonedAt: string | undefined;

  constructor(
    serve: string,
    startedBy: unknown,
    private readonly log: StepLog,
  ) {
    const by = callerOf(startedBy);
    this.state = { serve, joinedBy: [], ...(by ? { startedBy: by } : {}) };
    setHandler(joinedSignal, (caller) => this.joined(caller), { description: ACQUISITION_HANDLERS.joined });
    setHandler(joinedUpdate, (caller) => this.joinedAnswered(caller), { description: ACQUISITION_HANDLERS.joinedAnswered });
    setHandler(abandonUpdate, (asked) => this.ask(asked?.askedAtEpochMs), { description: ACQUISITION_HANDLERS.abandon });
  }

  /** A caller joined (a join signal's caller; nothing named: a client older than callers). */
  joined(caller: unknown): void {
    this.state = { ...this.state, joinedBy: withJoined(this.state.joinedBy, callerOf(caller) ?? 'unnamed') };
  }

  /** A caller joined, and is told whether the router's abandon came first (the run then ends Abandoned whatever it waits for). */
  private joinedAnswered(caller: unknown): JoinedAnswer {
    this.joined(caller);
    return this.abandonedAt !== undefined ? { abandonedAt: this.abandonedAt } : {};
  }

  /** A step abandoning would not undo has begun: from now on the run is not abandoned. */
  commit(step: string): void {
    this.state.committed ??= step;
  }

  /** Runs the eviction and the start in a scope an abandon cancels. */
  run<T>(work: () => Promise<T>): Promise<T> {
    this.scope = new CancellationScope();
    return this.scope.run(work);
  }

  /** The run is past what an abandon can act on (it returns, or compensates): asks from now on are refused. */
  close(): void {
    this.closed = true;
  }

  private ask(askedAtEpochMs: number | undefined): AbandonAnswer {
    if (this.abandonedAt) return { abandoned: true, at: this.abandonedAt };
    if (this.closed) return { abandoned: false, why: 'the run is already ending (completed, failed or cancelled)', reason: 'ending' };
    if (!this.scope) return { abandoned: false, why: 'still admitting: ask again', reason: 'admitting', askAgain: true };
    // A refusal is final however late it arrives (a stop begun, an operator joined): the asker
    // stops asking. Only an abandon decided on a stale ask is held back.
    const d = abandonDecision(this.state);
    if (!d.abandon) {
      this.log.record('abandon', `not abandoned: ${d.why}`);
      return { abandoned: false, why: d.why, reason: d.reason };
    }
    // Date.now() in a workflow is its task's start: deterministic on replay.
    const ageMs = askedAtEpochMs === undefined ? 0 : Date.now() - askedAtEpochMs;
    if (ageMs > ABANDON_ANSWER_MS) {
      return { abandoned: false, why: `asked ${(ageMs / 1000).toFixed(1)} s ago, past the asker's wait: ask again`, reason: 'late', askAgain: true };
    }
    this.abandonedAt = this.log.current;
    this.log.record('abandon', `abandoned at ${this.abandonedAt}: the router's held requests had all gone`);
    this.scope.cancel();
    return { abandoned: true, at: this.abandonedAt };
  }
}
