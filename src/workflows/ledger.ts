// The ledger of one GPU as an entity workflow. Updates run one at a time on the workflow's
// single thread, so concurrent admissions are serialized and each decision lands in history.
// Its life: reconcile with the box (a first run only) → answer updates → continue-as-new.
import {
  allHandlersFinished,
  ApplicationFailure,
  CancellationScope,
  condition,
  continueAsNew,
  getExternalWorkflowHandle,
  patched,
  setHandler,
  sleep,
  workflowInfo,
} from '@temporalio/workflow';
import type { LedgerState, LedgerTotals, Reservation } from '../domain/ledger';
import {
  activeReservation,
  admittedFromOf,
  applyAdmit,
  backAsleep,
  heldAsleepMib,
  decideAdmit,
  emptyLedger,
  findReservation,
  setAside,
  totals,
  victimsOf,
  withoutReservation,
  withPhase,
} from '../domain/ledger';
import { applyEvictionAborted, applyEvictionPlan, applyVictimReleased, planEviction, toVictim } from '../domain/eviction';
import { applyStop, decideStop, fenceProblem, fenceStepProblem, operationUnderWay, ownRunningAtStart, pendingSleeperMib } from '../domain/fence';
import type { GpuSpec } from '../domain/types';
import { ledgerUpdateProblems } from '../domain/ledger-requests';
import { decideStartSlot, slotAfter } from '../domain/start-slot';
import { lastTold, NO_SLOT_WAITERS, SLOT_TOLD_ASK_MS, waiterGone, waiterRefused, waiterTook, waiterToTell, waiterToTellNext } from '../domain/slot-waiters';
import type { SlotWaiters } from '../domain/slot-waiters';
import type { StartSlotDecision } from '../domain/start-slot';
import type { LedgerUpdateName } from '../domain/ledger-requests';
import { Failure, Transient } from '../shared/failures';
import {
  abortEvictionUpdate,
  acquireUpdate,
  admitUpdate,
  beginStopUpdate,
  fenceUpdate,
  releaseUpdate,
  setPhaseUpdate,
  snapshotQuery,
  startSlotFreedSignal,
  startSlotUpdate,
  victimReleasedUpdate,
} from '../shared/messages';
import type {
  AcquireDecision,
  LedgerAbortArgs,
  LedgerAcquireArgs,
  LedgerAcquireAnswer,
  LedgerAdmitAnswer,
  LedgerAdmitArgs,
  LedgerChangeAnswer,
  LedgerFenceArgs,
  LedgerPhaseArgs,
  LedgerReleaseAnswer,
  LedgerReleaseArgs,
  LedgerStartSlotArgs,
  LedgerStopAnswer,
  LedgerStopArgs,
  LedgerVictimArgs,
} from '../shared/messages';
import { reconciling } from './proxies';
import { reconciledOf } from '../domain/reconcile';
import type { Reconciled } from '../domain/reconcile';
import { checkLedgerInput } from './input';
import { PATCHES } from './patches';
import { LEDGER_HANDLERS } from '../shared/handler-descriptions';

export interface LedgerInput {
  node: string;
  gpu: GpuSpec;
  /** Carried across continue-as-new. */
  state?: LedgerState;
  /** Continue-as-new once history passes this many events (the server may suggest it sooner). */
  maxHistoryEvents?: number;
  /** Carried across continue-as-new since slot-wakes-first: the runs waiting for the start slot, told in turn. */
  slotWaiters?: SlotWaiters;
  /** Since slot-told-bounded: how long a told waiter has to take the slot before the next is told too (SLOT_TOLD_ASK_MS when not set). */
  slotToldAskMs?: number;
}

export async function ledgerWorkflow(input: LedgerInput): Promise<void> {
  checkLedgerInput(input);
  const ledger = new GpuLedger(input.state ?? emptyLedger(input.node, input.gpu), input.state !== undefined, input.slotWaiters, input.slotToldAskMs);
  const { whenReady } = ledger;
  // Before the handlers: setting one runs the Updates that came with the run's start, a give among them.
  ledger.carriedWaiters();

  const said = LEDGER_HANDLERS;
  setHandler(snapshotQuery, ledger.snapshot, { description: said.snapshot });
  setHandler(admitUpdate, whenReady(ledger.admit), { validator: ledger.validateAdmit, description: said.admit });
  setHandler(acquireUpdate, whenReady(ledger.acquire), { validator: ledger.validateAcquire, description: said.acquire });
  setHandler(victimReleasedUpdate, whenReady(ledger.victimReleased), { validator: ledger.validateVictimReleased, description: said.victimReleased });
  setHandler(abortEvictionUpdate, whenReady(ledger.abortEviction), { validator: ledger.validateAbort, description: said.abortEviction });
  setHandler(beginStopUpdate, whenReady(ledger.beginStop), { validator: ledger.validateStop, description: said.beginStop });
  setHandler(fenceUpdate, whenReady(ledger.fence), { validator: ledger.validateFence, description: said.fence });
  setHandler(setPhaseUpdate, whenReady(ledger.setPhase), { validator: ledger.validateSetPhase, description: said.setPhase });
  setHandler(releaseUpdate, whenReady(ledger.release), { validator: ledger.validateRelease, description: said.release });
  setHandler(startSlotUpdate, whenReady(ledger.startSlot), { validator: ledger.validateStartSlot, description: said.startSlot });

  if (!ledger.ready) {
    // A ledger started afresh (first use, or after its workflow was terminated) would otherwise
    // believe the GPU empty while serves run on it: take the running, labelled containers.
    const found = await reconciling.reconcileLedger({ node: input.node, gpuRole: input.gpu.role });
    ledger.reconciled(reconciledOf(found));
  }

  const maxHistoryEvents = input.maxHistoryEvents ?? 2000;
  await condition(() => workflowInfo().continueAsNewSuggested || workflowInfo().historyLength >= maxHistoryEvents);
  // Finish in-flight updates first so none is lost across the run boundary.
  await condition(allHandlersFinished);
  await continueAsNew<typeof ledgerWorkflow>(nextInput(input, ledger));
}

/**
 * The next run's input: the state, and the runs waiting for the start slot, which would otherwise
 * poll until asked again. The queue goes without its `told`: a signal sent as this run closes may
 * be dropped with it (the server records no failure for a closed target), and the next run's first
 * give tells the first waiter again instead of passing it over as one that never asked. Since
 * slot-told-bounded, with how many times each was told without asking (`unanswered`: a waiter told
 * twice is dropped whichever runs told it), not whom it told since the give (the next run tells
 * from the first, as at a give).
 */
function nextInput(input: LedgerInput, ledger: GpuLedger): LedgerInput {
  const next: LedgerInput = { ...input, state: ledger.state };
  delete next.slotWaiters;
  const { queue, unanswered } = ledger.slotWaiters;
  return queue.length ? { ...next, slotWaiters: { queue, ...(unanswered ? { unanswered } : {}) } } : next;
}

/**
 * An admission's word that the serve slept, and the level to wake it from: the one it was put to
 * sleep at; when not known (taken from the box by a fresh ledger), 2, whose wake reloads the
 * weights, right after either. Empty for a serve that did not sleep.
 */
function wokenFrom(r: Reservation | undefined): { wasAsleep?: 1 | 2 } {
  return asleepWord(admittedFromOf(r));
}

/** The same word from what an admission found, for its retry: the level, or nothing. */
function asleepWord(from: Reservation['admittedFrom']): { wasAsleep?: 1 | 2 } {
  return from?.asleepAt !== undefined ? { wasAsleep: from.asleepAt } : {};
}

function invalid(message: string): never {
  throw ApplicationFailure.create({ type: 'InvalidLedgerRequest', message, nonRetryable: true });
}

/** Before anything else, ready or not: an argument the handler cannot take is refused out of history. */
function checkShape(update: LedgerUpdateName, arg: unknown): void {
  const problems = ledgerUpdateProblems(update, arg);
  if (problems.length) invalid(problems.join('; '));
}

/**
 * A ledger still reconciling accepts no Update: one accepted now would wait in the workflow for
 * Docker and be applied whenever it answered, though its caller (an operation's step, bounded to
 * its attempts) may have given up and ended meanwhile; a reservation admitted, victims marked
 * evicting or a serve taken stopping for a run that is over. Refused, nothing is in history and
 * nothing can land later: LedgerClient waits for the reconcile and sends the same Update again.
 */
function reconcilingRefusal(update: LedgerUpdateName): never {
  throw ApplicationFailure.create({
    type: Transient.LedgerReconciling,
    message: `${update} refused: the ledger is reconciling with the box (Docker), and decides nothing until it has`,
    nonRetryable: false,
  });
}

function lost(message: string): never {
  throw ApplicationFailure.create({ type: Failure.ReservationLost, message, nonRetryable: true });
}

/**
 * The state and the handlers. Validators reject before an update is accepted (nothing lands in
 * history); handlers decide with the pure domain functions and replace the state. Every member
 * is an arrow property, so it can be handed to setHandler as it is.
 */
class GpuLedger {
  /**
   * Runs refused the start slot that asked to be told when it is given back (their workflow ids,
   * the longest waiting first). Carried across continue-as-new since slot-wakes-first; runs from
   * before forgot them there, and the waiters fell back to their polls.
   */
  slotWaiters: SlotWaiters;
  /** Since slot-told-bounded, while the slot is free and a told run has not taken it: the timer after which the next is told too. */
  private askTimer: CancellationScope | undefined;

  constructor(
    public state: LedgerState,
    /** A first run (never a continuation) learns what already runs before it decides anything. */
    public ready: boolean,
    carried: SlotWaiters | undefined,
    /** See LedgerInput's slotToldAskMs. */
    private readonly toldAskMs = SLOT_TOLD_ASK_MS,
  ) {
    this.slotWaiters = carried ?? NO_SLOT_WAITERS;
  }

  reconciled({ reservations, lostRunUnread, startSlot }: Reconciled): void {
    // The lost run's start slot, where its holder still runs: a start profiling on the card stays protected.
    this.state = { ...this.state, reservations, ...(lostRunUnread ? { lostRunUnread } : {}), ...(startSlot ? { startSlot } : {}) };
    this.ready = true;
  }

  /**
   * Updates wait for the reconcile: none is accepted before it now (reconcilingRefusal), but
   * histories recorded before that hold some, and replay them here (a validator does not run on
   * replay). After it each runs to completion without yielding. Once ready
   * the handler is called as it is: every promise a workflow makes costs the SDK a stack trace
   * (its promise hook), and this is the ledger's hottest path. The SDK then validates, accepts and
   * runs each update of an activation in turn, so a validator sees what the updates before it
   * decided, and refuses (out of history) as it would one sent alone.
   */
  whenReady =
    <A, R>(handler: (arg: A) => R) =>
    (arg: A): R | Promise<R> =>
      this.ready ? this.handle(handler, arg) : condition(() => this.ready).then(() => this.handle(handler, arg));

  /**
   * An update's decision, then the run(s) waiting for the start slot told if it has just been given
   * back: every way a holder ends (src/domain/start-slot.ts's HolderEnd) is some update's, so the
   * check is here once rather than in each.
   */
  private handle<A, R>(handler: (arg: A) => R, arg: A): R {
    const held = this.state.startSlot !== undefined;
    const r = handler(arg);
    if (held && this.state.startSlot === undefined && this.slotWaiters.queue.length) this.wakeSlotWaiters();
    // Taken: the told run's turn to ask is over (it took it, or another asker did and it keeps its place).
    else if (!held && this.state.startSlot !== undefined) this.stopAskTimer();
    return r;
  }

  /**
   * A continuation whose slot is free with waiters carried: the run before may have told one as it
   * closed (a signal the server may drop with it) or been waiting for one to ask, its timer gone
   * with it. Told now, as at a give, rather than left to their polls.
   */
  carriedWaiters(): void {
    if (this.state.startSlot === undefined && this.slotWaiters.queue.length && patched(PATCHES.slotToldBounded)) this.tellInTurn(true);
  }

  private wakeSlotWaiters(): void {
    if (!patched(PATCHES.slotFreedSignal)) return;
    if (patched(PATCHES.slotWakesFirst)) {
      if (patched(PATCHES.slotToldBounded)) this.tellInTurn(true);
      else this.tellFirstWaiter();
      return;
    }
    // Not awaited: the update answers now, and a waiter that has ended since is nobody's concern.
    for (const id of this.slotWaiters.queue)
      getExternalWorkflowHandle(id)
        .signal(startSlotFreedSignal)
        .catch(() => undefined);
    this.slotWaiters = NO_SLOT_WAITERS;
  }

  /**
   * Before slot-told-bounded: the longest waiting is told, and only it: the others keep waiting,
   * each told in turn at a later give.
   */
  private tellFirstWaiter(): void {
    const { waiters, tell } = waiterToTell(this.slotWaiters);
    this.slotWaiters = waiters;
    if (tell !== undefined)
      this.signalWaiter(
        tell,
        () => this.slotWaiters.told === tell,
        () => this.tellFirstWaiter(),
      );
  }

  /**
   * The one signal both sides send: not awaited, but one that fails (its run has closed) takes the
   * waiter out and, where it was its turn, passes the turn on while the slot is still free; where
   * another asker has taken it, that one's give will.
   */
  private signalWaiter(id: string, itsTurn: () => boolean, passTurn: () => void): void {
    getExternalWorkflowHandle(id)
      .signal(startSlotFreedSignal)
      .catch(() => {
        const turn = itsTurn();
        this.slotWaiters = waiterGone(this.slotWaiters, id);
        if (turn && this.state.startSlot === undefined) passTurn();
      });
  }

  /** The told run's time to ask is over: the slot was taken, or the next is told. */
  private stopAskTimer(): void {
    this.askTimer?.cancel();
    this.askTimer = undefined;
  }

  /**
   * Since slot-told-bounded, the one place its rules (waiterToTellNext) are applied: at a give
   * (`given`), the first waiting is told; while the slot stays free, the next is told too each
   * SLOT_TOLD_ASK_MS (or the input's slotToldAskMs) the last told has not taken it, or at once
   * where its signal failed (its run has closed). A timer of workflow time, cancelled when the slot
   * is taken (handle), and gone with the run at a continue-as-new (the next run tells its carried
   * waiters: carriedWaiters).
   */
  private tellInTurn(given: boolean): void {
    this.stopAskTimer();
    const { waiters, tell } = waiterToTellNext(this.slotWaiters, given);
    this.slotWaiters = waiters;
    if (tell === undefined) return;
    this.signalWaiter(
      tell,
      () => lastTold(this.slotWaiters) === tell,
      () => this.tellInTurn(false),
    );
    const timer = new CancellationScope({ cancellable: true });
    this.askTimer = timer;
    timer
      .run(() => sleep(this.toldAskMs))
      .then(
        () => {
          if (this.askTimer === timer && this.state.startSlot === undefined) this.tellInTurn(false);
        },
        // Cancelled: the slot was taken, or another was told since.
        () => undefined,
      );
  }

  /** Every validator's first check: the shape, then a ledger that has the box's truth (see reconcilingRefusal). */
  private accept(update: LedgerUpdateName, arg: unknown): void {
    checkShape(update, arg);
    if (!this.ready) reconcilingRefusal(update);
  }

  snapshot = (): LedgerState => (this.ready ? this.state : { ...this.state, reconciling: true });

  /** Every answer carries the totals after its decision (see LedgerAnswer). */
  private brief = <T extends object>(a: T): T & { totals: LedgerTotals } => ({ ...a, totals: totals(this.state) });
  /** An answer an operation records the ledger from: the whole state after the decision too (see LedgerAnswer). */
  private answer = <T extends object>(a: T, quiet = false): T & { totals: LedgerTotals; ledger: LedgerState } => {
    const answered = { ...this.brief(a), ledger: this.state };
    // A lost run that could not be read is told to the first operation answered that shows it (its
    // step log says it), and then only listed; a compensation's answer (quiet) shows it to no one.
    const unread = this.state.lostRunUnread;
    if (unread && !unread.told && !quiet) this.state = { ...this.state, lostRunUnread: { ...unread, told: true } };
    return answered;
  };
  private change = (serve: string, quiet?: boolean): LedgerChangeAnswer => this.answer({ serve }, quiet);

  // ---- admit and acquire ------------------------------------------------------------------------

  private checkAdmit(update: 'admit' | 'acquire', req: LedgerAdmitArgs): void {
    checkShape(update, req);
    if (req.gpu.role !== this.state.gpuRole) invalid(`${update} ${req.serve}: gpu role '${req.gpu.role}' sent to the ledger of '${this.state.gpuRole}'`);
    if (!this.ready) reconcilingRefusal(update);
  }

  validateAdmit = (req: LedgerAdmitArgs): void => this.checkAdmit('admit', req);
  validateAcquire = (req: LedgerAcquireArgs): void => this.checkAdmit('acquire', req);

  admit = (req: LedgerAdmitArgs): LedgerAdmitAnswer => {
    const retry = this.admitOrRecognise(req, req.startSlot);
    if (retry) return retry;
    const before = findReservation(this.state, req.serve);
    const wasEvicted = before !== undefined && setAside(before);
    const decision = this.decide(req);
    if (decision.decision === 'admitted') this.state = applyAdmit(this.state, req, 'admitted', wasEvicted ? 'restore' : 'bring-up');
    const slot = decision.decision === 'admitted' ? this.slotWithAdmit(req, req.startSlot, wokenFrom(before)) : {};
    return this.answer({ decision, wasEvicted, ...wokenFrom(before), ...slot });
  };

  /**
   * An admission that asks for it (a bring-up's) takes the GPU's start slot with it where its serve
   * starts cold: the take its run would send next, one Update fewer, answered as that take would be
   * (held by another run, the run waits for it as before). Not for a sleeper: its restore wakes it,
   * and takes the slot by its own (its sleeper left asleep while it waits).
   */
  private slotWithAdmit(req: LedgerAdmitArgs, asked: LedgerAdmitArgs['startSlot'], woken: { wasAsleep?: 1 | 2 }): { startSlot?: StartSlotDecision } {
    if (!asked || woken.wasAsleep !== undefined) return {};
    const { decision, state } = decideStartSlot(
      this.state,
      { serve: req.serve, holder: req.holder, take: true, startTimeoutS: asked.startTimeoutS },
      Date.now(),
    );
    this.state = state;
    return { startSlot: decision };
  }

  acquire = (req: LedgerAcquireArgs): LedgerAcquireAnswer => {
    const retry = this.admitOrRecognise(req);
    if (retry) return retry;
    const held = activeReservation(this.state, req.serve);
    if (held?.phase === 'pending' && held.holder === req.holder) {
      const victims = victimsOf(this.state, req.serve).map(toVictim);
      const decision: AcquireDecision = {
        decision: 'evicting',
        serve: req.serve,
        vramMib: req.vramMib,
        shortfallMib: 0,
        victims,
        reason: 'retry of a planned eviction',
      };
      // A sleeper's acquisition retried (after a continue-as-new too): still told it wakes, not starts.
      return this.answer({ decision, ...asleepWord(held.admittedFrom) });
    }
    // A sleeper acquired is woken, not started: say so, and count its residual as held already.
    const woken = wokenFrom(findReservation(this.state, req.serve));
    const admit = this.decide(req);
    if (admit.decision !== 'denied') {
      if (admit.decision === 'admitted') this.state = applyAdmit(this.state, req, 'admitted', 'acquisition');
      return this.answer({ decision: admit, ...woken });
    }
    if (!req.evict) return this.answer({ decision: admit });
    // Workflow time: the same instant when this update replays.
    const plan = planEviction(this.state, req.vramMib - heldAsleepMib(this.state, req.serve), Date.now());
    if (plan.kind === 'impossible') {
      return this.answer({ decision: { ...admit, evictableMib: plan.evictableMib } });
    }
    if (plan.kind === 'resident') {
      return this.answer({ decision: { ...admit, residency: plan.windows, retryAfterS: plan.retryAfterS } });
    }
    if (plan.kind === 'fits') {
      this.state = applyAdmit(this.state, req, 'admitted', 'acquisition');
      const decision: AcquireDecision = { decision: 'admitted', serve: req.serve, vramMib: req.vramMib, freeAfterMib: totals(this.state).freeMib };
      return this.answer({ decision, ...woken });
    }
    this.state = applyEvictionPlan(this.state, req, plan.victims);
    const decision: AcquireDecision = {
      decision: 'evicting',
      serve: req.serve,
      vramMib: req.vramMib,
      shortfallMib: plan.shortfallMib,
      victims: plan.victims,
      reason: plan.reason,
    };
    return this.answer({ decision, ...woken });
  };

  /** Shared by admit and acquire: adopt the manifest's figures, recognise a retry (an admit's with its slot), then decide. */
  private admitOrRecognise(req: LedgerAdmitArgs, slotAsked?: LedgerAdmitArgs['startSlot']): LedgerAdmitAnswer | undefined {
    // The manifest is the source of truth for capacity and reserve; adopt what the caller read.
    this.state = { ...this.state, gpuUuid: req.gpu.uuid, capacityMib: req.gpu.capacityMib, reserveMib: req.gpu.reserveMib };
    const held = activeReservation(this.state, req.serve);
    if (held && held.holder === req.holder && held.phase !== 'pending') {
      // A retry of an admission that already happened (possibly in a previous run): answered as
      // it was, a restore and a wake included.
      const from = held.admittedFrom;
      const slot = this.slotWithAdmit(req, slotAsked, asleepWord(from));
      return this.answer({
        decision: { decision: 'admitted' as const, serve: req.serve, vramMib: held.vramMib, freeAfterMib: totals(this.state).freeMib },
        ...(from ? { wasEvicted: from.evicted } : {}),
        ...asleepWord(from),
        ...slot,
      });
    }
    return undefined;
  }

  /** An admission of a serve some operation holds names that operation, a victim's acquirer included. */
  private decide(req: LedgerAdmitArgs) {
    const decision = decideAdmit(this.state, req);
    if (decision.decision !== 'already-held') return decision;
    const held = activeReservation(this.state, req.serve);
    const op = held ? operationUnderWay(this.state, held) : undefined;
    return op ? { ...decision, holder: op.holder } : decision;
  }

  // ---- an eviction's victims --------------------------------------------------------------------

  /** Only the acquisition that holds a victim hands its MiB over. Runs from before fencing name no holder. */
  private victimProblem({ victim, holder }: LedgerVictimArgs): string | undefined {
    if (holder === undefined) return undefined;
    const r = findReservation(this.state, victim);
    if (r?.phase !== 'evicting') return undefined;
    return fenceProblem(this.state, victim, holder, ['evicting']);
  }

  validateVictimReleased = (args: LedgerVictimArgs): void => {
    this.accept('victimReleased', args);
    const problem = this.victimProblem(args);
    if (problem) lost(`victimReleased: ${problem}`);
  };

  victimReleased = (args: LedgerVictimArgs): LedgerChangeAnswer => {
    const problem = this.victimProblem(args);
    if (problem) lost(`victimReleased: ${problem}`);
    this.state = applyVictimReleased(this.state, args.victim, args.acquirer, args.asleepAt, args.residualSeenMib);
    return this.change(args.victim);
  };

  validateAbort = (args: LedgerAbortArgs): void => this.accept('abortEviction', args);

  abortEviction = ({ acquirer, stopped, slept, sleptHoldingMib, holder, quiet }: LedgerAbortArgs): LedgerChangeAnswer => {
    // An acquisition that failed at its start gives back its slot here, as a release does: its
    // compensation is this abort, never a release. Runs since stop-takes-slot give it back by one
    // step of their own once compensated (the saga's); this stays for the runs from before.
    this.state = slotAfter(this.state, { step: 'abortEviction', holder });
    // The acquirer's reservation belongs to another run by now (a bring-down took it over): its eviction is not ours to end.
    const held = activeReservation(this.state, acquirer);
    if (holder !== undefined && held !== undefined && held.holder !== holder) return this.change(acquirer, quiet);
    this.state = applyEvictionAborted(this.state, acquirer, stopped, slept, sleptHoldingMib);
    return this.change(acquirer, quiet);
  };

  // ---- fences: a bring-down's take, a start's checks ----------------------------------------------

  validateStop = (args: LedgerStopArgs): void => this.accept('beginStop', args);

  beginStop = (req: LedgerStopArgs): LedgerStopAnswer => {
    const before = this.state;
    const decision = decideStop(this.state, req);
    // Asked only where it decides: a sleeper acquired and taken over before its victims were down.
    const sleeperTaken = decision.decision === 'taken' && pendingSleeperMib(findReservation(this.state, req.serve)) !== undefined;
    const victimsAsleep = decision.decision === 'taken' && req.takeOverFrom !== undefined && (req.victimsAsleep ?? []).length > 0;
    this.state = applyStop(this.state, req, decision, {
      pendingAsleepKeepsResidual: sleeperTaken && patched(PATCHES.takenSleeperKeepsResidual),
      asleepVictimsHeldWhole: victimsAsleep && patched(PATCHES.takenVictimAsleepHeldWhole),
    });
    // The run taken over has ended (its caller showed it): the start slot it held goes with it, an
    // acquisition ended between its first victim's stop and its start. Asked only where it decides.
    const freed = slotAfter(this.state, { step: 'beginStop', taken: decision.decision === 'taken', takeOverFrom: req.takeOverFrom });
    if (freed !== this.state && patched(PATCHES.takeOverFreesSlot)) this.state = freed;
    // Asked by bring-downs since take-answers (in the request, so older histories replay as they
    // were): the stop's start slot in the same Update, and the ledger before and after in the answer.
    const slot =
      req.stopSlot && decision.decision === 'taken'
        ? this.decideSlot({ serve: req.serve, holder: req.holder, take: true, doing: 'stopping', ...req.stopSlot })
        : undefined;
    const answer = this.brief({ ...decision, ...(slot ? { slot } : {}) });
    // Quiet: the bring-down says the ledger's note from its release's answer, as before.
    return req.answerLedger ? { ...answer, ledger: this.state, ledgerBefore: before } : answer;
  };

  validateFence = (args: LedgerFenceArgs): void => {
    this.accept('fence', args);
    // A start finding its own run's container running is accepted here: the handler decides it, by its patch.
    const problem = fenceStepProblem(this.state, args, true);
    if (problem) lost(problem);
  };

  fence = (args: LedgerFenceArgs) => {
    // Asked only where it decides: a start retried after a restart found its own container running.
    const own = ownRunningAtStart(this.state, args.serve, args.holder, args.step) && patched(PATCHES.startFindsOwnRunning);
    const problem = fenceStepProblem(this.state, args, own);
    if (problem) lost(problem);
    return this.brief({ serve: args.serve, phase: findReservation(this.state, args.serve)?.phase ?? ('admitted' as const) });
  };

  // ---- phase and release --------------------------------------------------------------------------

  private phaseCheck(args: LedgerPhaseArgs): void {
    const { serve, holder } = args;
    const held = findReservation(this.state, serve);
    if (!held) invalid(`setPhase: '${serve}' holds no reservation on '${this.state.gpuRole}'`);
    if (holder !== undefined && held.holder !== holder && !letGoAgain(held, args))
      invalid(`setPhase: the reservation of '${serve}' is held by ${held.holder}, not ${holder}`);
  }

  validateSetPhase = (args: LedgerPhaseArgs): void => {
    this.accept('setPhase', args);
    this.phaseCheck(args);
  };

  setPhase = (args: LedgerPhaseArgs): LedgerChangeAnswer => {
    this.phaseCheck(args);
    const held = findReservation(this.state, args.serve);
    if (letGoAgain(held, args)) return this.change(args.serve, args.quiet);
    // A bring-down that lets go of a serve it took from running (its stop failed, or it was
    // cancelled) gives the hold back to the run it took it from: a lease whose expiry it was
    // tries again, and finds the serve still its own.
    const from = held?.phase === 'stopping' && args.phase === 'running' ? held.takenFrom : undefined;
    const holder = from?.phase === 'running' && patched(PATCHES.letGoRestoresHolder) ? from.holder : undefined;
    this.state = withPhase(this.state, args.serve, args.phase, args.measuredMib, Date.now(), holder);
    // A start measured with no readmit left gives its start slot back by its `running`, as its own give would.
    if (args.giveStartSlot) this.state = slotAfter(this.state, { step: 'give', holder: args.holder });
    return this.change(args.serve, args.quiet);
  };

  /** A release without a holder (a run from before fencing) never takes a serve from under an operation. */
  private releaseCheck({ serve, holder }: LedgerReleaseArgs): void {
    if (!serve) invalid('release: serve is required');
    if (holder !== undefined) return;
    const held = activeReservation(this.state, serve);
    const op = held ? operationUnderWay(this.state, held) : undefined;
    if (op) lost(`release of ${serve} without a holder refused: ${op.holder} holds it (${op.phase})`);
  }

  validateRelease = (args: LedgerReleaseArgs): void => {
    this.accept('release', args);
    this.releaseCheck(args);
  };

  release = (args: LedgerReleaseArgs): LedgerReleaseAnswer => {
    // Again here: a history recorded before reconcilingRefusal may hold an update accepted while the ledger reconciled.
    this.releaseCheck(args);
    const { serve, holder } = args;
    // A run's release (its compensation's, its serve's someone else's or not) gives back its start slot too: its start, or
    // its stop, has ended (a bring-down's release is its give; a failed run's is also the saga's done-step since stop-takes-slot).
    this.state = slotAfter(this.state, { step: 'release', holder });
    const held = activeReservation(this.state, serve);
    if (holder !== undefined) {
      const by = held ? (operationUnderWay(this.state, held)?.holder ?? held.holder) : undefined;
      // Someone else's reservation, or none: a compensation leaves it, and an evicted entry keeps its restore link.
      if (held === undefined || by !== holder) return this.answer({ released: false, vramMib: 0, ...(by !== undefined ? { heldBy: by } : {}) }, args.quiet);
    }
    // A restore whose wake never touched its sleeper: back asleep as its admission found it, its residual still held.
    const asleep = args.keepAsleep ? backAsleep(this.state, serve) : undefined;
    if (asleep) {
      this.state = asleep;
      return this.answer({ released: true, vramMib: (held?.vramMib ?? 0) - heldAsleepMib(asleep, serve) }, args.quiet);
    }
    // An acquirer released mid-eviction: its victims must not stay stuck evicting.
    if (held?.phase === 'pending') this.state = applyEvictionAborted(this.state, serve);
    this.state = withoutReservation(this.state, serve);
    return this.answer({ released: held !== undefined, vramMib: held?.vramMib ?? 0 }, args.quiet);
  };

  // ---- the start slot -----------------------------------------------------------------------------

  validateStartSlot = (args: LedgerStartSlotArgs): void => this.accept('startSlot', args);

  startSlot = (args: LedgerStartSlotArgs) => this.brief(this.decideSlot(args));

  /** Workflow time: the slot's since is the same instant when this update replays. */
  private decideSlot(args: LedgerStartSlotArgs): StartSlotDecision {
    const { decision, state } = decideStartSlot(this.state, args, Date.now());
    this.state = state;
    const wake = args.take ? args.wake : undefined;
    if (wake !== undefined && !decision.taken) this.slotWaiters = waiterRefused(this.slotWaiters, wake);
    // Runs from before kept a waiter that took the slot by its poll, and told it at the next give.
    if (wake !== undefined && decision.taken && this.slotWaiters.queue.includes(wake) && patched(PATCHES.slotWakesFirst))
      this.slotWaiters = waiterTook(this.slotWaiters, wake);
    return decision;
  }
}

/** A bring-down's let-go retried after a continue-as-new (the server's answer to a retry lasts one run): already done. */
function letGoAgain(held: Reservation | undefined, { holder, phase }: LedgerPhaseArgs): boolean {
  return held !== undefined && phase === 'running' && held.phase === 'running' && held.letGoBy === holder;
}
