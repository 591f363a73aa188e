// A lease: the acquisition that brought a serve up hands it this workflow (lease/<node>/<serve>),
// which outlives it. Its clock is a Temporal timer, so it fires on time across worker and server
// restarts. On expiry (or release) the serve goes down and its victims come back, through the
// very bring-down `serves down NAME --restore` runs, under the id the CLI uses, so its fences apply.
import {
  allHandlersFinished,
  ApplicationFailure,
  CancellationScope,
  ChildWorkflowCancellationType,
  condition,
  continueAsNew,
  executeChild,
  getExternalWorkflowHandle,
  isCancellation,
  ParentClosePolicy,
  patched,
  setHandler,
  sleep,
  startChild,
  uuid4,
  workflowInfo,
} from '@temporalio/workflow';
import type { GpuSpec, ServeSpec } from '../domain/types';
import type { LedgerState } from '../domain/ledger';
import {
  atLeastClock,
  expiresAt,
  extendedExpiry,
  extensionProblem,
  formatDuration,
  leaseHold,
  leaseInputProblems,
  newClock,
  renewalClock,
  renewalProblems,
  withUse,
} from '../domain/lease';
import type { LeaseClock, LeaseView } from '../domain/lease';
import { literalMarkdown } from '../domain/markdown';
import { Failure } from '../shared/failures';
import { extendLeaseUpdate, leaseAtLeastSignal, leaseAtLeastUpdate, leaseQuery, releaseLeaseUpdate, renewLeaseSignal, workflowIds } from '../shared/messages';
import type { LeaseAtLeastAnswer, LeaseTerms } from '../shared/messages';
import type { AcquireResult, LeaseExpiring, LeaseInput, LeaseRequest, LeaseResult, LeaseTermsNotApplied } from '../shared/operations';
import { bringDownWorkflow } from './bring-down';
import { act, reads, router, waiting } from './proxies';
import { parseHolder } from '../domain/fence';
import { rootCause } from './saga';
import { heldNow, leaseExpiring } from '../shared/wording';
import { StepLog } from './step-log';
import { PATCHES } from './patches';
import { LEASE_HANDLERS } from '../shared/handler-descriptions';

/** A router (or ledger) that did not answer is asked again this much later: an unknown use is not idleness. */
const ROUTER_RETRY_MS = 60_000;
/** A failed bring-down is tried again each ROUTER_RETRY_MS this many times (half an hour) before the lease fails. */
const BRING_DOWN_ATTEMPTS = 30;
/** How soon an expiring lease looks again at a serve in another operation's hands; doubled each time, up to the max. */
const OTHERS_RECHECK_MS = 5_000;
const OTHERS_RECHECK_MAX_MS = 60_000;
/** The bound of asking Temporal whether that operation still runs. */
const OTHERS_STATUS_S = 30;
/** How long it waits for them in all: a drain's timeout, a stop, and a restore's bring-ups, with room. */
const OTHERS_WAIT_MS = 30 * 60_000;
/** How many times an acquisition starts the lease, when the one it found running closed before its terms reached it. */
const LEASE_START_ATTEMPTS = 3;
/** Past this many events a lease continues as new (an idle lease checks the router each ttl). */
const MAX_HISTORY_EVENTS = 2_000;

type Terms = LeaseTerms;

export async function leaseWorkflow(input: LeaseInput): Promise<LeaseResult> {
  const problems = leaseInputProblems(input);
  if (problems.length) throw ApplicationFailure.create({ type: Failure.InvalidInput, message: `invalid input: ${problems.join('; ')}`, nonRetryable: true });
  const log = new StepLog();
  let terms: Terms = { holder: input.holder, kind: input.kind, seconds: input.seconds };
  let clock: LeaseClock = input.clock ?? newClock(input.seconds, Date.now());
  // A continuation of an expiring run starts where that one was: expiring, its renewal waiting.
  let expiring = input.expiring !== undefined;
  let released = input.expiring?.released ?? false;
  let changed = false;
  /** A renewal that came while the lease was expiring: it runs once this one has ended. */
  let renewal: Terms | undefined = input.expiring?.renewal;
  /** The renewal's holder's other callers asked it to last at least until then (epoch ms). */
  let renewalAtLeastUntil: number | undefined = input.expiring?.renewalAtLeastUntilEpochMs;
  const maxHistoryEvents = input.maxHistoryEvents ?? MAX_HISTORY_EVENTS;
  /** What every continue-as-new carries besides its terms, clock and phase. */
  const carried = input.maxHistoryEvents !== undefined ? { maxHistoryEvents } : {};
  const historyLong = () => workflowInfo().continueAsNewSuggested || workflowInfo().historyLength > maxHistoryEvents;

  const expiry = () => expiresAt(terms.kind, terms.seconds, clock);
  const view = (): LeaseView => ({
    serve: input.serve,
    kind: terms.kind,
    holder: terms.holder,
    expiresAtEpochMs: expiry(),
    ...(terms.kind === 'idle' ? { idleTtlS: terms.seconds, lastUseSeenEpochMs: clock.lastUseSeenEpochMs } : {}),
    state: expiring ? 'expiring' : 'running',
  });
  const refuseIfExpiring = () => {
    if (expiring || released)
      throw ApplicationFailure.create({ type: Failure.InvalidInput, message: `the lease of ${input.serve} has expired: ${input.serve} is being brought down` });
  };
  setHandler(leaseQuery, view, { description: LEASE_HANDLERS.lease });
  setHandler(
    extendLeaseUpdate,
    (ext) => {
      clock = { ...clock, notBeforeEpochMs: extendedExpiry(ext, expiry(), Date.now()) };
      changed = true;
      log.record('extend', `expires at ${new Date(expiry()).toISOString()}`);
      return view();
    },
    {
      validator: (ext) => {
        refuseIfExpiring();
        const problem = extensionProblem(ext, expiry(), Date.now());
        if (problem) throw ApplicationFailure.create({ type: Failure.InvalidInput, message: problem });
      },
      description: LEASE_HANDLERS.extend,
    },
  );
  setHandler(
    releaseLeaseUpdate,
    () => {
      released = true;
      log.record('release', 'released: expires now');
      return { ...view(), expiresAtEpochMs: Date.now() };
    },
    { validator: refuseIfExpiring, description: LEASE_HANDLERS.release },
  );
  setHandler(
    renewLeaseSignal,
    (next) => {
      // A signal cannot be refused: terms the lease cannot hold (from the UI: a year, no holder) are
      // recorded and dropped, and the lease runs on as it was. Runs from before the check took them.
      const problems = renewalProblems(next);
      if (problems.length && patched(PATCHES.leaseRenewalChecked)) {
        log.record('renew', `ignored: ${problems.join('; ')}`);
        return;
      }
      renew(next);
    },
    { description: LEASE_HANDLERS.renew },
  );
  function renew(next: Terms) {
    if (expiring) {
      if (renewal?.holder !== next.holder) renewalAtLeastUntil = undefined;
      renewal = next;
      return;
    }
    terms = next;
    clock = newClock(next.seconds, Date.now());
    changed = true;
    log.record('renew', `held by ${next.holder}: ${describe(next)}`);
  }
  // Another caller's terms. A handler issues no command; what it answers differently from runs
  // before is asked of a patch there (lease-renewal-at-least: lease-renewal-joined.json has the Update).
  function atLeast(next: Terms): LeaseAtLeastAnswer {
    if (next.holder !== terms.holder) {
      // A renewal waits for this lease's end: another caller of the same run (the router's idle
      // terms too) only makes it last at least as long (as it would the lease running), never
      // replaces the terms it waits with. Runs from before replaced them (and answered `renewed`).
      if (expiring && renewal?.holder === next.holder && patched(PATCHES.leaseRenewalAtLeast)) {
        renewalAtLeastUntil = Math.max(renewalAtLeastUntil ?? 0, Date.now() + next.seconds * 1000);
        log.record(
          'at least',
          `${formatDuration(next.seconds * 1000)} asked of the renewal by ${next.holder}: it lasts at least until ${new Date(renewalAtLeastUntil).toISOString()}`,
        );
        return { applied: true, how: 'at-least', view: view() };
      }
      // A router's idle terms (extendOnly) only make this lease last longer for its own holder: a
      // serve another run holds now (an operator's acquisition without a lease) is not put under
      // it. Only new acquisitions send the flag (patch idle-terms-only-extend).
      if (next.extendOnly === true) {
        log.record(
          'at least',
          `ignored (${describe(next)} for ${next.holder}): this lease is held by ${terms.holder}, and a router's idle terms move no lease`,
        );
        return { applied: false, state: 'not-this-holder', why: `held by ${terms.holder}`, view: view() };
      }
      // Another run holds the serve now: this lease's own hold is gone, the new one's terms are the lease.
      renew({ holder: next.holder, kind: next.kind, seconds: next.seconds });
      return { applied: true, how: 'renewed', view: view() };
    }
    if (expiring || released) {
      log.record('at least', `ignored (${describe(next)} asked): the lease has ended, ${input.serve} is being brought down`);
      const why = released ? 'released' : `expired at ${new Date(expiry()).toISOString()}`;
      return { applied: false, state: 'expiring', why, view: { ...view(), state: 'expiring' } };
    }
    const before = expiry();
    clock = atLeastClock(terms.kind, terms.seconds, clock, next.seconds, Date.now());
    changed = true;
    log.record(
      'at least',
      expiry() > before
        ? `${formatDuration(next.seconds * 1000)} asked: expires at ${new Date(expiry()).toISOString()}`
        : `${formatDuration(next.seconds * 1000)} asked: already expires later, at ${new Date(before).toISOString()}`,
    );
    return { applied: true, how: 'at-least', view: view() };
  }
  setHandler(
    leaseAtLeastSignal,
    (next) => {
      const problems = renewalProblems(next);
      if (problems.length) {
        log.record('at least', `ignored: ${problems.join('; ')}`);
        return;
      }
      atLeast(next);
    },
    { description: LEASE_HANDLERS.atLeast },
  );
  // The same, answered: the acquisition tells its caller what the lease did with the terms.
  setHandler(leaseAtLeastUpdate, atLeast, {
    validator: (next) => {
      const problems = renewalProblems(next);
      if (problems.length) throw ApplicationFailure.create({ type: Failure.InvalidInput, message: `terms refused: ${problems.join('; ')}` });
    },
    description: LEASE_HANDLERS.atLeastAnswered,
  });

  const { node, serve, gpu } = await reads().resolveServe({ serve: input.serve });
  // A continuation (past MAX_HISTORY_EVENTS) carries the clock and has started already; a renewal
  // carries one too when its holder's other callers asked it to last longer, and starts here.
  if (!input.clock || input.renewal) log.record('start', startWords(input, terms, expiry()));

  /** Running, past the history's bound: a new run goes on from this one's terms and clock. */
  const continueRunning = async (): Promise<never> => {
    await condition(allHandlersFinished);
    return continueAsNew<typeof leaseWorkflow>({ serve: input.serve, ...terms, clock, ...carried });
  };
  for (;;) {
    if (released || expiring) break;
    const due = expiry() - Date.now();
    if (due > 0) {
      if (historyLong()) return continueRunning();
      changed = false;
      if (await condition(() => released || changed, due)) continue;
    }
    if (released) break;
    // An idle lease is judged by the router's tier as it is now, not by a signal per request.
    if (terms.kind === 'idle' && serve.routerTier) {
      try {
        const use = await router.tierUse({ tier: serve.routerTier });
        clock = withUse(clock, use, Date.now());
      } catch (err) {
        log.record('use', `router did not answer for tier ${serve.routerTier} (${rootCause(err).message}); asking again in ${ROUTER_RETRY_MS / 1000} s`);
        changed = false;
        await condition(() => released || changed, ROUTER_RETRY_MS);
        // Overdue, the lease skips the wait above (and its bound) for as long as the router does
        // not answer: each retry adds its events (an activity, a timer, a workflow task), about ten
        // a minute, so a router down for days would take the history to its limit. Runs from
        // before never continued here (asked only when long); a released lease goes on to its
        // expiry, which has its own bound.
        if (!released && historyLong() && patched(PATCHES.leaseRouterRetryContinues)) return continueRunning();
        continue;
      }
      if (expiry() > Date.now()) continue;
    }
    break;
  }

  expiring = true;
  /**
   * Expiring, past the history's bound (a ledger that does not answer, other operations waited
   * out: a few events a minute, for as long as they last): a new run goes on bringing the serve
   * down from what this one knew. Runs from before never continued here (asked only when long).
   */
  const continueIfLong = async (at: ExpiryProgress): Promise<void> => {
    if (!historyLong() || !patched(PATCHES.leaseExpiryContinues)) return;
    await condition(allHandlersFinished);
    const waitingRenewal = renewal ? { renewal, ...(renewalAtLeastUntil !== undefined ? { renewalAtLeastUntilEpochMs: renewalAtLeastUntil } : {}) } : {};
    await continueAsNew<typeof leaseWorkflow>({ serve: input.serve, ...terms, clock, ...carried, expiring: { released, ...at, ...waitingRenewal } });
  };
  const result = await expire(node, gpu, input.serve, terms, released, log, input.expiring, continueIfLong);
  if (renewal) {
    // An acquisition came back for the serve while this lease ended: its lease runs on from here.
    await condition(allHandlersFinished);
    const asked = renewalAtLeastUntil;
    const clock = asked ? renewalClock(renewal.seconds, asked, Date.now()) : undefined;
    return continueAsNew<typeof leaseWorkflow>({ serve: input.serve, ...renewal, renewal: true, ...(clock ? { clock } : {}), ...carried });
  }
  await condition(allHandlersFinished);
  return result;
}

/** A lease that gave up on an unanswering ledger would leave its serve holding the victims' VRAM for good: it waits instead. */
async function ledgerWhenItAnswers(node: string, gpu: GpuSpec, log: StepLog, beforeRetry: () => Promise<void>): Promise<LedgerState> {
  for (;;) {
    try {
      return await reads().ledgerSnapshot({ node, gpu });
    } catch (err) {
      // The lease cancelled: not a ledger that did not answer (the same commands either way).
      if (isCancellation(err)) throw err;
      log.record('expire', `the ledger did not answer (${rootCause(err).message}); asking again in ${ROUTER_RETRY_MS / 1000} s`);
      await beforeRetry();
      await sleep(ROUTER_RETRY_MS);
    }
  }
}

/** The SDK's WorkflowExecutionAlreadyStartedError lives in @temporalio/common, which workflow files do not import. */
function alreadyStarted(err: unknown): boolean {
  return err instanceof Error && err.name === 'WorkflowExecutionAlreadyStartedError';
}

/** The run's start step: its terms, by whom when a renewal, and how long its holder's other callers asked it to last. */
function startWords(input: LeaseInput, terms: Terms, expiresAtMs: number): string {
  const c = input.clock;
  const longer = input.renewal && c && c.notBeforeEpochMs > c.startedAtEpochMs + terms.seconds * 1000;
  const renewed = input.renewal ? ` renewed for ${terms.holder} (its last lease had ended)` : '';
  const atLeast = longer ? `, at least until ${new Date(c.notBeforeEpochMs).toISOString()} (asked by its holder's other callers)` : '';
  return `${describe(terms)}${renewed}${atLeast}; expires at ${new Date(expiresAtMs).toISOString()}`;
}

function describe(t: Terms): string {
  return t.kind === 'idle' ? `idle lease, ttl ${formatDuration(t.seconds * 1000)}` : `lease of ${formatDuration(t.seconds * 1000)}`;
}

/**
 * The serve down and its victims back, unless it is no longer this lease's to bring down. A
 * bring-down that fails (a router mid-restart, say) is tried again a minute later, the ledger
 * checked again first: a lease that gave up would leave the victims' VRAM taken for good. So is
 * one that finds its serve in other hands that may give it back (a serves down that took it, an
 * eviction of it, either of which may fail or be cancelled), or another serves down under way:
 * the lease waits them out, then looks again.
 */
async function expire(
  node: string,
  gpu: GpuSpec,
  serve: string,
  terms: Terms,
  released: boolean,
  log: StepLog,
  /** What the run this one continues knew (it was expiring already), if any. */
  from: LeaseExpiring | undefined,
  /** Continues as new (and so does not return) when the history is long. */
  continueIfLong: (at: ExpiryProgress) => Promise<void>,
): Promise<LeaseResult> {
  const why = released ? 'released' : terms.kind === 'idle' ? `idle for ${formatDuration(terms.seconds * 1000)}` : 'expired';
  const base = { serve, outcome: released ? ('released' as const) : ('expired' as const) };
  log.record('expire', from ? `${why}; still expiring, continued as new from its last run (its history had reached its bound)` : why);
  const workflowId = workflowIds.bringDown(node, serve);
  const waits = new OthersWaitedOut(serve, why, log, from?.waits);
  /** A serves down of the serve was found under way: it is what took the serve, if it is gone. */
  let downUnderWay = from?.downUnderWay ?? false;
  /** The bring-down was started with cancellation type ABANDON (patch lease-cancel-leaves-bring-down). */
  let abandonsOnCancel = false;
  let failures = from?.failures ?? 0;
  const progress = (): ExpiryProgress => ({ failures, downUnderWay, ...waits.carried() });
  for (;;) {
    await continueIfLong(progress());
    const ledger = await ledgerWhenItAnswers(node, gpu, log, () => continueIfLong(progress()));
    const found = leaseHold(ledger, serve, terms.holder);
    const waitsOut = found.hold === 'in-flux' && patched(PATCHES.leaseWaitsOutOthers);
    // A run that ended without giving the serve back gives it to no one: serves down takes it over.
    const ended = waitsOut ? await endedHolding(found.by) : undefined;
    if (found.hold === 'in-flux' && waitsOut && !ended) {
      await waits.out(found.why);
      continue;
    }
    if (found.hold === 'ours') downUnderWay = false;
    else {
      const now = found.hold === 'gone' ? heldNow(found.phase, found.heldBy) : ended ? `${found.why}; ${ended}` : found.why;
      const under = downUnderWay ? `a serves down of ${serve} was under way (${workflowId}); ` : '';
      const message = `lease of ${serve} ${why}: ${under}${serve} is no longer held by ${terms.holder} (now ${now}), so the lease leaves it alone`;
      log.record('end', message);
      return { serve, outcome: downUnderWay ? 'down-under-way' : 'not-held', message, steps: log.steps };
    }
    try {
      // Abandoned, like an operator's: once its stop is issued a bring-down sees it through, lease or not.
      // The take itself checks the holder again: the serve may have been brought down and acquired
      // anew since the read above, and that acquisition is not this lease's to undo.
      // (A holder renewed by hand that names no run cannot be checked so: taken as before.)
      const onlyOurs = parseHolder(terms.holder) && patched(PATCHES.leaseDownOnlyItsOwn) ? { onlyIfHeldBy: terms.holder } : {};
      // Nor is a cancel of the lease passed on to it: it gives the VRAM back whether or not the
      // lease waits for it. Runs from before asked the bring-down to cancel too (the default
      // WAIT_CANCELLATION_COMPLETED), which before its stop readmitted the serve's tier and left
      // the serve up, its victims evicted, and no lease to give the VRAM back.
      abandonsOnCancel = patched(PATCHES.leaseCancelLeavesBringDown);
      const down = await executeChild(bringDownWorkflow, {
        workflowId,
        // Not an operator's down: the router tells a client of a tier not on demand that only an acquisition or `serves up` brings it back.
        args: [{ serve, restore: true, ...onlyOurs, downReason: 'lease-ended' }],
        parentClosePolicy: ParentClosePolicy.ABANDON,
        ...(abandonsOnCancel ? { cancellationType: ChildWorkflowCancellationType.ABANDON } : {}),
        staticSummary: literalMarkdown(`serves down ${serve} --restore (lease ${released ? 'released' : 'expired'}) on ${node}`),
      });
      log.record('down', down.message);
      // Taken from the lease since its read: the ledger, read again, says whether for good.
      if (down.outcome === 'left-alone' && patched(PATCHES.leaseWaitsOutOthers)) {
        await waits.out(down.message);
        continue;
      }
      if (down.outcome === 'left-alone') {
        const message = `lease of ${serve} ${why}: ${down.message}`;
        log.record('end', message);
        return { serve, outcome: 'not-held', message, steps: log.steps };
      }
      return {
        ...base,
        message: `lease of ${serve} ${why}: ${down.message}`,
        bringDown: { workflowId, ok: true, message: down.message, restored: down.restored },
        steps: log.steps,
      };
    } catch (err) {
      // The lease itself cancelled: it ends Cancelled, its bring-down going on without it. Not
      // a failed bring-down to try again (runs from before counted it one, and their retry's
      // sleep, in the cancelled scope, ended them Cancelled all the same).
      if (abandonsOnCancel && isCancellation(err) && CancellationScope.current().consideredCancelled) {
        log.record('cancel', bringDownGoesOn(workflowId, serve));
        throw err;
      }
      if (alreadyStarted(err) && patched(PATCHES.leaseWaitsOutOthers)) {
        // Another serves down under that id: of this serve (then it takes it, and the ledger says
        // so), or of the serve as it was before this acquisition (a restore that outlasted it).
        downUnderWay = true;
        await waits.out(`a serves down of ${serve} is under way (${workflowId})`);
        continue;
      }
      if (alreadyStarted(err)) {
        // The operator's serves down is already taking it: it decides what is restored.
        const message =
          `lease of ${serve} ${why}: a serves down of ${serve} is already under way (${workflowId}); ` +
          'it is left to finish, and restores what it was asked to';
        log.record('end', message);
        return { serve, outcome: 'down-under-way', message, steps: log.steps };
      }
      const cause = rootCause(err).message;
      if (++failures >= BRING_DOWN_ATTEMPTS) {
        const message = `lease of ${serve} ${why}: serves down ${serve} --restore failed ${failures} times, the last: ${cause}; ${serve} still holds its MiB`;
        log.record('down', message);
        throw ApplicationFailure.create({ type: Failure.LeaseExpiryFailed, message, nonRetryable: true, details: [{ workflowId, steps: log.steps }] });
      }
      log.record('down', `failed (attempt ${failures} of ${BRING_DOWN_ATTEMPTS}): ${cause}; trying again in ${ROUTER_RETRY_MS / 1000} s`);
      await sleep(ROUTER_RETRY_MS);
    }
  }
}

/** What a lease cancelled while its bring-down runs says of it. */
function bringDownGoesOn(workflowId: string, serve: string): string {
  return (
    `lease cancelled while its bring-down ran: ${workflowId} goes on (not cancelled), stopping ${serve} and restoring its victims; ` +
    `to keep ${serve} up, cancel ${workflowId} itself before its stop`
  );
}

/** Whether the run holding the serve has ended (without giving it back): what it became, or undefined while it runs. */
async function endedHolding(holder: string): Promise<string | undefined> {
  const e = await waiting(OTHERS_STATUS_S).endOperation({ holder, timeoutS: OTHERS_STATUS_S, mode: 'status' });
  if (e.outcome === 'running') return undefined;
  return e.outcome === 'no-run' ? `${holder} names no run` : `${holder} has ended${e.closedAs ? ` (${e.closedAs.toLowerCase()})` : ''} without giving it back`;
}

/** An expiring lease's progress, as a continue-as-new carries it (LeaseExpiring, without what the lease itself holds). */
type ExpiryProgress = Pick<LeaseExpiring, 'failures' | 'downUnderWay' | 'waits'>;

/**
 * An expiring lease's waits on other operations: OTHERS_RECHECK_MS at first, twice as long each
 * time up to OTHERS_RECHECK_MAX_MS (a long drain costs a few events, not hundreds), said once per
 * reason, and bounded: past OTHERS_WAIT_MS the lease fails, its serve still holding its MiB,
 * rather than wait for ever.
 */
class OthersWaitedOut {
  private since: number | undefined;
  private said: string | undefined;
  private nextMs = OTHERS_RECHECK_MS;

  constructor(
    private readonly serve: string,
    private readonly why: string,
    private readonly log: StepLog,
    /** The waits of the run this one continues: its bound counts from their start. */
    from?: LeaseExpiring['waits'],
  ) {
    this.since = from?.sinceEpochMs;
    this.nextMs = from?.nextMs ?? OTHERS_RECHECK_MS;
  }

  carried(): Pick<LeaseExpiring, 'waits'> {
    return this.since === undefined ? {} : { waits: { sinceEpochMs: this.since, nextMs: this.nextMs } };
  }

  async out(reason: string): Promise<void> {
    this.since ??= Date.now();
    if (Date.now() - this.since > OTHERS_WAIT_MS) {
      const message = `lease of ${this.serve} ${this.why}: waited ${formatDuration(OTHERS_WAIT_MS)} for other operations (${reason}); ${this.serve} may still hold its MiB`;
      this.log.record('wait', message);
      throw ApplicationFailure.create({ type: Failure.LeaseExpiryFailed, message, nonRetryable: true, details: [{ steps: this.log.steps }] });
    }
    if (reason !== this.said) this.log.record('wait', `${reason}: waiting for it to end, then looking again`);
    this.said = reason;
    await sleep(this.nextMs);
    this.nextMs = Math.min(this.nextMs * 2, OTHERS_RECHECK_MAX_MS);
  }
}

/**
 * Starts the serve's lease with `terms`, as a workflow of its own that outlives the run starting
 * it; when one runs already, `tell`s it them instead. Which of the two it did, and what telling answered.
 * The lease found running may close before the terms reach it (its end was under way): telling
 * fails, and the start is tried again (LEASE_START_ATTEMPTS in all). Runs from before dropped the
 * terms there, their serve left up unleased.
 */
async function startOrTell<T>(
  node: string,
  serve: ServeSpec,
  terms: Terms,
  tell: (workflowId: string) => Promise<T>,
): Promise<{ started: true } | { told: T }> {
  const workflowId = workflowIds.lease(node, serve.name);
  for (let attempt = 1; ; attempt++) {
    try {
      await startChild(leaseWorkflow, {
        workflowId,
        args: [{ serve: serve.name, ...terms }],
        parentClosePolicy: ParentClosePolicy.ABANDON,
        staticSummary: literalMarkdown(`${describe(terms)} of ${serve.name} on ${node}`),
      });
      return { started: true };
    } catch (err) {
      if (!alreadyStarted(err)) throw err;
    }
    const again = attempt < LEASE_START_ATTEMPTS && patched(PATCHES.leaseStartedAgainWhenClosed);
    let told: T;
    try {
      told = await tell(workflowId);
    } catch (err) {
      if (again && !isCancellation(err)) continue;
      throw err;
    }
    return { told };
  }
}

/**
 * The acquisition's hand-over: its serve now runs, so its lease starts, as a workflow of its own
 * that outlives the acquisition. A lease of the serve that still runs (its serve was brought down
 * by hand, then acquired again) is renewed instead, under this acquisition and its terms. Why
 * there is none, when there is none: the serve runs on either way.
 */
export async function startLease(
  node: string,
  serve: ServeSpec,
  holder: string,
  request: LeaseRequest,
  log: StepLog,
): Promise<{ lease?: NonNullable<AcquireResult['lease']>; notApplied?: LeaseTermsNotApplied }> {
  log.begin('lease');
  const seconds = request.kind === 'fixed' ? request.seconds : serve.idleTtlS;
  const notStarted = (why: string, words: string) => {
    log.record('lease', words);
    return { notApplied: { asked: request, why: `${askedWords(request)} not applied: ${why}`, serveStays: true } };
  };
  if (seconds === undefined) {
    const why = `${serve.name} declares no idle_ttl_s, so an idle lease has no time to live`;
    return notStarted(why, `no lease: ${why}; it stays up until serves down`);
  }
  const workflowId = workflowIds.lease(node, serve.name);
  const terms: Terms = { holder, kind: request.kind, seconds };
  try {
    await startOrTell(node, serve, terms, (id) => getExternalWorkflowHandle(id).signal(renewLeaseSignal, terms));
  } catch (err) {
    // A cancelled acquisition is undone like at any other step, not completed with no lease.
    if (isCancellation(err) && patched(PATCHES.leaseStartCancellable)) throw err;
    // The serve runs either way: a lease that could not start is said, not a reason to stop it.
    const why = `the lease could not be started (${rootCause(err).message})`;
    return notStarted(why, `not started (${rootCause(err).message}): ${serve.name} stays up until serves down`);
  }
  log.record('lease', `${describe(terms)} (${workflowId})`);
  return { lease: { workflowId, kind: request.kind, seconds } };
}

function askedWords(request: LeaseRequest): string {
  return request.kind === 'fixed' ? `lease of ${formatDuration(request.seconds * 1000)}` : 'idle lease';
}

/**
 * Another caller's terms for the serve's lease, held by `holder` (the run the ledger says holds
 * the serve running): a lease is started when none runs, else the one that runs is asked to last
 * at least these terms (leaseAtLeastUpdate: never shorter, its kind kept), and answers whether it
 * did: one already expiring does not, and its serve goes down as planned. The lease's bring-down
 * then takes the serve only from `holder`. A router's idle terms only extend: the lease that runs
 * for `holder` lasts at least them, and none is started or moved (the Update marked extendOnly).
 * What happened, or why nothing could (`notApplied`).
 */
export async function leaseAtLeast(
  node: string,
  serve: ServeSpec,
  holder: string,
  request: LeaseRequest,
  log: StepLog,
): Promise<{ lease?: NonNullable<AcquireResult['lease']>; notApplied?: LeaseTermsNotApplied }> {
  log.begin('lease');
  const seconds = request.kind === 'fixed' ? request.seconds : serve.idleTtlS;
  const asked = askedWords(request);
  const refuse = (why: string, state?: LeaseTermsNotApplied['leaseState']) => {
    const words = `${asked} not applied: ${why}`;
    log.record('lease', words);
    // A lease already expiring (or ended) takes the serve down; any other refusal leaves it up as it was.
    const goesDown = state === 'expiring' || state === 'ended';
    return { notApplied: { asked: request, why: words, ...(state ? { leaseState: state } : {}), serveStays: !goesDown } };
  };
  if (seconds === undefined) return refuse(`${serve.name} declares no idle_ttl_s, so an idle lease has no time to live`);
  // Not a run's token (a reservation reconciled from a container): a lease could not fence its bring-down to it.
  const run = parseHolder(holder);
  if (!run) return refuse(`${serve.name} is held by '${holder}', no run a lease's bring-down could be fenced to`);
  // Idle terms are the router's own (no caller asked for them): they never put a serve that an
  // operator brought up outside an acquisition (`serves up NAME`, a restore) under a lease that
  // would bring it down once idle. Explicit terms (lease_s, --lease) still do: their caller asked.
  if (request.kind === 'idle' && run.workflowId !== workflowIds.acquire(node, serve.name)) {
    return refuse(`${serve.name} is held by ${holder}, not by an acquisition: the router's idle lease is not put on a serve brought up by hand`);
  }
  const workflowId = workflowIds.lease(node, serve.name);
  const terms: Terms = { holder, kind: request.kind, seconds };
  let done: { started: true } | { told: LeaseAtLeastAnswer | undefined };
  try {
    // The router's idle terms make the lease that runs for `holder` last longer and start none: a
    // serve its first caller acquired without a lease (`serves up NAME --evict`) stays up until
    // serves down, whatever the router's requests. Runs from before started one here (their
    // history has the StartChildWorkflowExecution), or told the one that ran, renewing another run's.
    done =
      request.kind === 'idle' && patched(PATCHES.idleTermsOnlyExtend)
        ? { told: await askLease(workflowId, { ...terms, extendOnly: true }) }
        : // An \`ended\` answer is not taken as a lease to start again: the lease may have ended by
          // taking this holder's serve down, and the caller is told it does not stay.
          await startOrTell(node, serve, terms, (id) => tellAtLeast(id, terms));
  } catch (err) {
    if (isCancellation(err)) throw err;
    return refuse(`the lease could not be reached (${rootCause(err).message})`);
  }
  if ('told' in done && done.told?.applied === false) {
    const { state, why } = done.told;
    return refuse(notAppliedWhy(workflowId, serve.name, holder, state, why), state);
  }
  const how = 'started' in done ? 'started' : 'at-least';
  log.record(
    'lease',
    how === 'started'
      ? `${describe(terms)}, held by ${holder} (${workflowId})`
      : `${workflowId} runs: asked to last at least ${formatDuration(seconds * 1000)} from now (never shorter, its kind kept)`,
  );
  return { lease: { workflowId, kind: request.kind, seconds, how } };
}

/** Why the lease did not take the terms, as the caller is told it. */
function notAppliedWhy(
  workflowId: string,
  serve: string,
  holder: string,
  state: Extract<LeaseAtLeastAnswer, { applied: false }>['state'],
  why: string,
): string {
  switch (state) {
    case 'expiring':
      return leaseExpiring(workflowId, why, serve);
    case 'ended':
      return `${workflowId} ended as the terms reached it (${why}): ${serve} may be down already; ask again`;
    case 'none':
      return `no lease runs for ${serve} (${why}), and the router's idle terms start none: ${serve} stays up as its operator left it, until serves down`;
    case 'not-this-holder':
      return (
        `${workflowId} runs for another run (${why}), not for ${holder}, which holds ${serve} now: the router's idle terms move no lease, ` +
        `and ${serve} stays up as its operator left it, until serves down (that lease's end finds it no longer its own)`
      );
  }
}

/**
 * Asks the running lease to last at least `terms` and what it did. Runs from before the Update
 * signalled, unanswered, and took the terms as applied (the finding this fixes: an expiring lease
 * ignored them while the acquisition said otherwise).
 */
async function tellAtLeast(workflowId: string, terms: Terms): Promise<LeaseAtLeastAnswer | undefined> {
  if (patched(PATCHES.leaseAtLeastAnswered)) return askLease(workflowId, terms);
  await getExternalWorkflowHandle(workflowId).signal(leaseAtLeastSignal, terms);
  return undefined;
}

/** The lease's answer to the terms (leaseAtLeastUpdate, by the leaseAtLeast activity: a workflow cannot send an Update). */
function askLease(workflowId: string, terms: Terms): Promise<LeaseAtLeastAnswer> {
  // Its own id, made here (deterministic on replay): an activity retried sends the same Update, answered once.
  return act.leaseAtLeast({ workflowId, terms, updateId: `${workflowInfo().runId}/at-least/${uuid4()}` });
}
