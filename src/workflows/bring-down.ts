// serves down NAME: take the serve in the ledger → quiesce → drain → stop → release (→ restore).
// Down of a serve already down succeeds and says so; down of a serve another operation is
// bringing up cancels that operation first (its compensations give the serve back), then completes.
import { ApplicationFailure, CancellationScope, isCancellation, patched, workflowInfo } from '@temporalio/workflow';
import type { DrainResult, GpuReading, OperationEnd, QuiesceMarks, ServeProcesses, StopResult, TierState } from '../shared/contracts';
import { formatLedger, setAsideBy } from '../domain/ledger';
import type { LedgerState } from '../domain/ledger';
import type { GpuSpec, ServeSpec } from '../domain/types';
import { cancelHint, holderOf, holderProblem } from '../domain/fence';
import { oneOf } from '../domain/inputs';
import type { StopDecision } from '../domain/fence';
import { Failure } from '../shared/failures';
import type { LedgerReleaseResult } from '../shared/messages';
import { bringDown, eviction, failure, take } from '../shared/wording';
import { PATCHES } from './patches';
import { act, ledgerUpdates, READ_ONCE_S, reads, readsOnce, router, STOP_ACTIVITY_MARGIN_S, waiting } from './proxies';
import { restoreEvicted, restoreNote } from './restore';
import { rootCause, Saga, whole } from './saga';
import { checkInput } from './input';
import { DEFAULT_DRAIN_TIMEOUT_S, DEFAULT_RELEASE_TIMEOUT_S, drainFor, readmitOwnQuiesce, stopServe } from './steps';
import { slotHeld, takeStartSlot } from './start-slot';
import { StepLog } from './step-log';
import { BRING_DOWN_REASONS } from '../shared/operations';
import type { BringDownInput, BringDownReason, BringDownResult, RestoreRecord } from '../shared/operations';

/** How long the operation holding the serve may take to end once cancelled: its compensations stop a container and readmit a tier. */
export const OPERATION_END_TIMEOUT_S = 300;
/** Take, end the holder, take again (taking over if it ended holding the serve): more holders in between is a fight, not a race, and is refused. */
const MAX_TAKE_ATTEMPTS = 4;

/** The tier a bring-down quiesced, and its quiesce's mark (none from a quiesce that failed after acting). */
interface Quiesced {
  tier?: string;
  mark?: string;
}

/** One bring-down: what its steps share. */
interface Down {
  node: string;
  gpu: GpuSpec;
  serve: ServeSpec;
  holder: string;
  log: StepLog;
  /** Runs from before fencing released whatever was held, under whatever operation held it. */
  fenced: boolean;
  /** Why it goes down, for its tier's quiesce to tell the router. */
  reason: BringDownReason;
}

export async function bringDownWorkflow(input: BringDownInput): Promise<BringDownResult> {
  checkInput(input, { booleans: ['restore'], seconds: ['drainTimeoutS'], other: { onlyIfHeldBy: holderProblem, downReason: oneOf(BRING_DOWN_REASONS) } });
  const { workflowId, runId } = workflowInfo();
  const holder = holderOf(workflowId, runId);
  const log = new StepLog();

  const { node, serve, gpu } = await reads().resolveServe({ serve: input.serve });
  // Since take-answers the take says the ledger before it: no snapshot is read first.
  const answered = patched(PATCHES.takeAnswers);
  const read = answered ? undefined : await reads().ledgerSnapshot({ node, gpu });
  const down: Down = { node, gpu, serve, holder, log, fenced: patched(PATCHES.bringDownFenced), reason: input.downReason ?? 'operator-down' };
  const ended: OperationEnd[] = [];
  const saga = new Saga();
  const asks: TakeAsks = answered ? { saga, ...(down.fenced && !serve.routerTier && patched(PATCHES.stopTakesSlot) ? { slot: stopSlot(serve) } : {}) } : {};
  const taken = down.fenced ? await takeServe(down, ended, input.onlyIfHeldBy, asks) : undefined;
  const before = read ?? asks.before ?? (await reads().ledgerSnapshot({ node, gpu }));
  if (taken?.decision === 'not-held') {
    return {
      serve: serve.name,
      outcome: 'left-alone',
      message: `serves down ${serve.name}: ${take.notHeld(serve.name, input.onlyIfHeldBy ?? '?', taken)}`,
      gpuRole: gpu.role,
      releasedMib: 0,
      restored: [],
      ledgerBefore: formatLedger(before),
      ledgerAfter: formatLedger(before),
      steps: log.steps,
    };
  }
  const withdrawLetGo = taken ? saga.add('let go of the serve', () => letGo(down, taken)) : undefined;
  // The tier this run quiesced and its quiesce's mark, once the quiesce has landed.
  const quiesced: Quiesced = {};

  // An evicted or sleeping serve answers nothing and its tier is quiesced already: nothing to drain.
  const setAside = taken?.decision === 'evicted' || (taken?.decision === 'taken' && taken.from === 'sleeping');
  let drain: DrainResult | undefined;
  let stop: StopResult;
  let release: LedgerReleaseResult;
  /** Its memory seen back after the stop (or why not), where it held the start slot for it. */
  let back: string | undefined;
  try {
    // An acquisition's victims taken over go back into rotation once the let-go is registered: a
    // victim gone from the manifest, or a cancel, then gives the serve back instead of leaving it
    // held as stopping by an ended run.
    if (taken?.readmitLater) await readmitVictims(taken.readmitLater, log, taken.quiesceMarks);
    if (serve.routerTier && !setAside) drain = await quiesceAndDrain(down, serve.routerTier, input.drainTimeoutS ?? DEFAULT_DRAIN_TIMEOUT_S, quiesced);
    // The stop frees memory on the card, which fails another serve's start profiling there as much
    // as memory taken: it waits for the GPU's start slot. An evicted serve's container is down already.
    const before = down.fenced && taken?.decision !== 'evicted' && patched(PATCHES.stopTakesSlot) ? await slotBeforeStop(down, saga, quiesced) : undefined;
    // Fenced, a stop once issued is seen through to its release: cancelled in between, the serve
    // would stay held as stopping by a closed run, its container gone.
    [stop, release, back] = down.fenced ? await CancellationScope.nonCancellable(() => stopAndRelease(down, before)) : await stopAndRelease(down);
  } catch (err) {
    // Cancelled, the run ends Cancelled as it was. Failed, it names its step and the cause, as a
    // bring-up does: rethrown as it came, an activity's failure read "Activity task failed" and the
    // operator never saw the router's 401 under it.
    if (isCancellation(err)) {
      await saga.compensate();
      throw err;
    }
    // The stop's fence refused: a ledger restarted since the take holds the serve running for
    // another run, and it was not stopped. The hold is not this run's to let go (refused), and the
    // serve it drained runs on: its tier goes back into rotation, lifting only this run's quiesce.
    // Runs from before the stop's fence never met a refusal here.
    if (log.current === 'stop' && rootCause(err).type === Failure.ReservationLost && patched(PATCHES.stopRefusedReadmits)) {
      withdrawLetGo?.();
      const { tier, mark } = quiesced;
      if (tier !== undefined) saga.add(`readmit tier ${tier}`, () => readmitOwnQuiesce(tier, serve.name, mark));
    }
    throw await failedDown(down, err, saga);
  }
  const reserved = release.released && release.vramMib > 0;
  log.record('release', bringDown.released(reserved ? release.vramMib : undefined, taken?.decision === 'evicted') + (back !== undefined ? `; ${back}` : ''));
  // Its tier still says its eviction's quiesce, "retry later": the serve is down now, for good.
  if (setAside && serve.routerTier && patched(PATCHES.setAsideSaysWhy)) await sayWhyDown(down, serve.routerTier);

  // Fenced, the ledger is read after the release: an acquisition this bring-down cancelled may
  // have stopped victims since the first read, and they are to come back too.
  // Once the stop has landed the restore is seen through too, cancelled or not: a cancel passed on
  // to a victim's bring-up made it give back its reservation, and the victim, neither running nor
  // evicted for this serve any more, was restored by nothing after.
  const restoreIt = () => restoreEvicted(node, gpu, serve.name, down.fenced ? release.ledger : before, log);
  const restoreWhole = input.restore && patched(PATCHES.restoreWhole);
  const { restored, ledgerAfter } = input.restore ? await (restoreWhole ? CancellationScope.nonCancellable(restoreIt) : restoreIt()) : { restored: [] };
  // Cancelled past the stop, the run completes all the same: what it did stands, and a Cancelled
  // close would say it had not, so its message says the cancel was not taken.
  const cancelAfterStop = down.fenced && CancellationScope.current().consideredCancelled ? bringDown.cancelAfterStop(Boolean(input.restore)) : '';
  if (cancelAfterStop) log.record('cancel', cancelAfterStop);

  // A first stop attempt refused by a ledger started afresh, the serve found down (its container
  // exited, left on the box, nothing held for it): nothing was stopped, and the result says so.
  const wasDown =
    (stop.stop !== 'stopped' && stop.remove === 'absent' && !reserved) ||
    (stop.stop !== 'stopped' && stop.downAfterRefusal !== undefined && !reserved && patched(PATCHES.foundDownNothingStopped));
  const cancelled = ended.filter((e) => e.outcome === 'cancelled');
  return {
    serve: serve.name,
    outcome: cancelled.length && wasDown ? 'cancelled' : wasDown || taken?.decision === 'evicted' ? 'already-stopped' : 'stopped',
    ...(ended.length ? { ended } : {}),
    message:
      downMessage({
        cancelled,
        serve: serve.name,
        gpuRole: gpu.role,
        taken,
        ended,
        wasDown,
        reservedMib: reserved ? release.vramMib : undefined,
        restore: Boolean(input.restore),
        restored,
        afterRelease: release.ledger,
      }) +
      restoreNote(restored) +
      (cancelAfterStop ? `; ${cancelAfterStop}` : ''),
    gpuRole: gpu.role,
    releasedMib: release.vramMib,
    drain,
    restored,
    ledgerBefore: formatLedger(before),
    ledgerAfter: formatLedger(ledgerAfter ?? release.ledger),
    steps: log.steps,
  };
}

/**
 * A routed serve goes down like an eviction's victim: its tier answers 503 from now on (until a
 * bring-up's guarded readmit), and requests in flight finish before the stop. Past the drain
 * timeout the stop goes ahead: the operator asked for the serve to go down.
 */
async function quiesceAndDrain({ serve, log, reason }: Down, tier: string, drainTimeoutS: number, quiesced: Quiesced): Promise<DrainResult | undefined> {
  // Set once the quiesce is known: a cancel during it (before quiesceWhole) readmits unguarded, as before marks.
  let q: TierState | null | undefined;
  try {
    log.begin('quiesce');
    // The router is told why, so a client is not told to retry a serve nobody brings back.
    const why = patched(PATCHES.bringDownSaysWhy) ? { why: { reason, serve: serve.name } } : {};
    // Asked with no `own`, the quiesce is never left alone: a tier state, or null with no router.
    q = (await whole(PATCHES.quiesceWhole, () => router.quiesceIfRouted({ tier, ...why }))) as TierState | null;
    if (!q) return undefined;
    quiesced.tier = tier;
    if (q.quiesceMark !== undefined) quiesced.mark = q.quiesceMark;
    log.record('quiesce', eviction.quiesced(tier, q.inFlight));
    log.begin('drain');
    const drain = await drainFor(tier, serve, drainTimeoutS);
    log.record('drain', bringDown.drained(drain, drainTimeoutS));
    return drain;
  } catch (err) {
    // Cancelled before the stop: the serve still runs, so its tier goes back into rotation
    // (left quiesced, a later `serves up` would find it running and never readmit it).
    if (isCancellation(err) && patched(PATCHES.bringDownCancelReadmits)) {
      try {
        // Only this run's quiesce (its mark): once let go, the serve runs in the ledger, and an
        // eviction of it may quiesce the tier before a late attempt of this readmit reaches the router.
        const quiesceMark = q?.quiesceMark;
        const r = await CancellationScope.nonCancellable(() => router.readmitIfQuiesced({ tier, ...(quiesceMark !== undefined ? { quiesceMark } : {}) }));
        log.record('quiesce', r.action === 'quiesced-since' ? bringDown.cancelLeftQuiesced(tier, serve.name) : bringDown.cancelReadmitted(tier, serve.name));
      } catch (readmitErr) {
        log.record('quiesce', bringDown.cancelReadmitFailed(tier, rootCause(readmitErr).message));
      }
    }
    throw err;
  }
}

/**
 * A serve set aside (evicted, or asleep) went down without a quiesce of this run's: its tier was
 * quiesced by its eviction, which said no reason, so the router told its clients to retry later
 * though this down dropped its restore link and nothing brings it back. Once the serve is down, the
 * tier is quiesced again saying why (quiesce is idempotent: only the reason changes, and its mark).
 * Whole, as the restore after it: a cancel past the stop is not taken. A failure is said in the
 * step's line and the down stands: the serve is down all the same, its tier quiesced as it was.
 */
async function sayWhyDown({ serve, log, reason }: Down, tier: string): Promise<void> {
  log.begin('quiesce');
  try {
    const q = await CancellationScope.nonCancellable(() => router.quiesceIfRouted({ tier, why: { reason, serve: serve.name } }));
    if (q) log.record('quiesce', bringDown.toldWhy(tier, reason));
  } catch (err) {
    log.record('quiesce', bringDown.whyNotTold(tier, rootCause(err).message));
  }
}

/**
 * Before the stop of a serve whose container runs: the GPU's start slot, waited for while a start
 * (or another stop) holds it, then the reading the release check compares with (null where the
 * worker reads no GPU). A wait past its bound, or cancelled, leaves the serve running: its tier,
 * quiesced for the drain, is readmitted (registered before the wait, withdrawn once the slot is
 * held), and the take is let go. Held, the slot goes back with the release (the ledger's release by
 * this run frees it), or by the saga's done-step where the run fails before that.
 */
async function slotBeforeStop(down: Down, saga: Saga, quiesced: Quiesced): Promise<BeforeStop> {
  const { node, gpu, serve, holder, log } = down;
  if (!(await reads().inspectServe({ node, serve: serve.name }))?.running) return undefined;
  const { tier, mark } = quiesced;
  const withdrawReadmit = tier !== undefined ? saga.add(`readmit tier ${tier}`, () => readmitOwnQuiesce(tier, serve.name, mark)) : undefined;
  await takeStartSlot(down, holder, saga, log, {
    doing: 'stopping',
    holdS: stopSlot(serve).holdS,
    waitingTo: `stop ${serve.name}`,
    notDone: `${serve.name} was not stopped${tier !== undefined ? ` (tier ${tier} readmitted)` : ''}; bring it down again once that has ended`,
  });
  // The slot is held from here: the operator's step line says the stop is under way, not the drain.
  log.begin('stop');
  // An operator asked for the serve to go down: nvidia-smi failing here leaves the release unchecked, not the serve up.
  const reading = await readsOnce()
    .readBeforeStop({ node, serve: serve.name, gpuUuid: gpu.uuid })
    .catch((err: unknown) => {
      if (isCancellation(err)) throw err;
      return { unread: rootCause(err).message };
    });
  // From here the stop runs whole (nonCancellable): the tier stays quiesced for it.
  withdrawReadmit?.();
  return reading ?? undefined;
}

/** The start slot a stop asks for: what a start waiting for it counts, the reading before it, the stop's activity bound and the release check. */
function stopSlot(serve: ServeSpec): { startTimeoutS: number; holdS: number } {
  return { startTimeoutS: serve.startTimeoutS, holdS: READ_ONCE_S + serve.stopTimeoutS + STOP_ACTIVITY_MARGIN_S + DEFAULT_RELEASE_TIMEOUT_S };
}

/** The GPU's reading before a stop that holds the start slot, with the serve's own processes on it, or why it was not read. */
type BeforeStop = (GpuReading & { processes: ServeProcesses }) | { unread: string } | undefined;

/**
 * Once the stop has landed, while the start slot is held: nvidia-smi shows the serve's memory
 * back (by its own processes, where they were read), so the next start's profiling and room
 * reading see it gone. Not seen within the release timeout, the serve is down all the same: said
 * in the release's line, and the slot goes back with the release. `downAtEpochMs`: when the stop
 * saw the container down and started a process listing, which the wait's first reading takes up.
 */
async function vramBack({ serve, gpu }: Down, before: NonNullable<BeforeStop>, downAtEpochMs?: number): Promise<string> {
  if ('unread' in before) return `; its memory not read before the stop (${before.unread}): its release not checked`;
  const ownMib = before.processes.onGpu.reduce((sum, p) => sum + (p.usedMib ?? 0), 0);
  try {
    const v = await waiting(DEFAULT_RELEASE_TIMEOUT_S).confirmVramReleased({
      gpuUuid: gpu.uuid,
      victim: serve.name,
      usedBeforeMib: before.usedMib,
      expectedMib: ownMib > 0 ? ownMib : serve.vramMib,
      deadlineEpochMs: Date.now() + DEFAULT_RELEASE_TIMEOUT_S * 1000,
      own: before.processes,
      // Activity input only (replay compares none): the listing the stop started may be the first reading.
      ...(downAtEpochMs !== undefined ? { listedAfterEpochMs: downAtEpochMs } : {}),
    });
    return eviction.vramBack(v, gpu.uuid);
  } catch (err) {
    if (isCancellation(err)) throw err;
    return rootCause(err).message;
  }
}

async function stopAndRelease(down: Down, before?: BeforeStop): Promise<[StopResult, LedgerReleaseResult, string?]> {
  const { node, gpu, serve, holder, log, fenced } = down;
  log.begin('stop');
  // Fenced: only while the ledger holds the serve stopping for this run (its take). Where the
  // release wait follows (its memory read before), the stop starts nvidia-smi's process listing as
  // the container is down, beside its removal, the workflow task and the wait's dispatch, as a
  // victim's stop does: activity input only, the same command with it or without.
  const listWhenDown = before !== undefined && !('unread' in before);
  const st = await stopServe(node, serve, { ...(fenced ? { fence: gpu } : {}), ...(listWhenDown ? { listWhenDown } : {}) });
  log.record('stop', eviction.stopped(st));
  log.begin('release');
  // Its memory seen back before the release, which gives the start slot back with the reservation.
  const back = before && st.stop === 'stopped' ? await vramBack(down, before, st.downAtEpochMs) : undefined;
  // The fenced release names this run: the ledger gives up only what this bring-down took.
  const rel = await ledgerUpdates().ledgerRelease({ node, gpu, args: { serve: serve.name, ...(fenced ? { holder } : {}) }, updateId: `${holder}/release` });
  log.ledgerSaid(rel.ledger);
  return [st, rel, back];
}

/** The failure a bring-down ends with: its step, the cause the operator can act on, what was undone. */
async function failedDown({ serve, log }: Down, err: unknown, saga: Saga): Promise<ApplicationFailure> {
  const cause = rootCause(err);
  const step = log.current;
  log.record(step, `failed: ${cause.message}`);
  await saga.compensate();
  return ApplicationFailure.create({
    type: cause.type,
    message: failure.failed(`serves down ${serve.name}`, step, cause.message, saga.compensated, '', saga.failed),
    nonRetryable: true,
    cause: err instanceof Error ? err : undefined,
    details: [{ step, steps: log.steps }],
  });
}

/**
 * The compensation, failed or cancelled before the stop: the hold is let go as the box stands. A
 * serve that still runs and was running is running again; one whose container is down is
 * released, and so is one the ledger held no reservation of (its container runs as it found it,
 * and the next serves up adopts it); one this run took over still starting keeps its MiB
 * committed until the next serves down.
 */
async function letGo({ node, gpu, serve, holder }: Down, taken: StopDecision) {
  const c = await reads().inspectServe({ node, serve: serve.name });
  if (c?.running && taken.decision === 'taken' && taken.from === 'running') {
    return act.ledgerSetPhase({ node, gpu, args: { serve: serve.name, phase: 'running', holder, quiet: true }, updateId: `${holder}/compensate-running` });
  }
  // Before, a stray's 0 MiB hold stayed with the ended run, and every serves up of it was refused as busy.
  const heldNothing = taken.decision === 'absent' && patched(PATCHES.letGoOfNothing);
  if (!c?.running || heldNothing)
    return act.ledgerRelease({ node, gpu, args: { serve: serve.name, holder, quiet: true }, updateId: `${holder}/compensate-release` });
  return undefined;
}

function downMessage(o: {
  /** The holders this bring-down cancelled (they gave back what they took). */
  cancelled: OperationEnd[];
  serve: string;
  gpuRole: string;
  taken: StopDecision | undefined;
  ended: OperationEnd[];
  wasDown: boolean;
  reservedMib: number | undefined;
  restore: boolean;
  restored: RestoreRecord[];
  /** The ledger as the release answered it, before any restore. */
  afterRelease: LedgerState;
}): string {
  const taken = o.taken;
  // A run that ended still holding the serve (cancelled too, when its container's removal failed) was taken over, not given back.
  const tookOver = taken?.decision === 'taken' ? o.ended.find((e) => e.holder === taken.previousHolder) : undefined;
  const cancelled = o.cancelled.filter((e) => e !== tookOver);
  const notes = [
    cancelled.length ? `cancelled ${cancelled.map((e) => e.holder).join(', ')} (it gave back what it took)` : '',
    tookOver ? `took over the hold of ${tookOver.holder}, which had ended ${tookOver.closedAs ?? ''} without giving it back` : '',
  ]
    .filter(Boolean)
    .join('; ');
  if (taken?.decision === 'evicted') {
    return `serves down ${o.serve}: already stopped (evicted for ${taken.evictedFor ?? 'another serve'}); it stays down and is no longer restored with it`;
  }
  // The runs it cancelled or took over gave back their own MiB, not their victims: those they had
  // stopped or put to sleep stay so, unless restored, and the operator is told which and how back.
  const endedRuns = [...cancelled, ...(tookOver ? [tookOver] : [])].map((e) => e.holder);
  const restoredNow = (serve: string) => o.restored.some((r) => r.serve === serve && r.ok);
  const left = setAsideBy(o.afterRelease, endedRuns)
    .map((r) => `; ${bringDown.victimLeft(r.serve, r.phase === 'sleeping', restoredNow(r.serve))}`)
    .join('');
  if (o.wasDown && notes) return `serves down ${o.serve}: ${notes}; nothing was left running${left}`;
  if (o.wasDown)
    return o.restore && o.restored.length
      ? `serves down ${o.serve}: was not running, nothing to stop`
      : `serves down ${o.serve}: already stopped, nothing changed`;
  return `serves down ${o.serve}: ${notes ? `${notes}; ` : ''}stopped${o.reservedMib !== undefined ? `, ${o.reservedMib} MiB released on '${o.gpuRole}'` : ''}${left}`;
}

/** What a take asks of the ledger besides the serve, since take-answers (none before). */
interface TakeAsks {
  /** The run's saga, which gives back a start slot taken with the serve. Set: the first take answers the ledger before it. */
  saga?: Saga;
  /** The stop's start slot, asked with the serve where nothing comes between them (no tier to drain). */
  slot?: { startTimeoutS: number; holdS: number };
  /** The ledger before the first take, as it answered. */
  before?: LedgerState;
}

/**
 * Takes the serve in the ledger for this bring-down. An operation still bringing it up (a
 * bring-up, an acquisition, a restore) is cancelled and waited out: its compensations remove its
 * container and release its MiB, and only then does this one go on. Another bring-down of it
 * (one started from the UI under another id) is waited for, not cancelled. A run that ended
 * without giving the serve back has its hold taken over, named in the update; an acquisition's
 * victims leave its eviction then, as the box has them. A serve being evicted by an acquisition
 * still running is refused: that acquisition is stopping it.
 */
async function takeServe(
  down: Down,
  ended: OperationEnd[],
  onlyIfHeldBy: string | undefined,
  asks: TakeAsks,
): Promise<StopDecision & { readmitLater?: string[]; quiesceMarks?: QuiesceMarks }> {
  const { node, gpu, serve, holder, log } = down;
  // The holder's own compensations stop this serve's container: they get its stop timeout and more.
  const endTimeoutS = Math.max(OPERATION_END_TIMEOUT_S, serve.stopTimeoutS + 180);
  let takeOver: { takeOverFrom: string; victimsDown: string[] } | undefined;
  let victimsUp: string[] = [];
  for (let attempt = 1; ; attempt++) {
    log.begin('take');
    // The quiesce each victim still running is under, read before the take: once taken they run
    // again in the ledger, and an eviction or a bring-down of one may quiesce its tier before this
    // run readmits it; that quiesce is theirs, and the readmit leaves it (readmitVictims).
    const quiesceMarks = takeOver && victimsUp.length && patched(PATCHES.victimReadmitMarked) ? await router.quiesceMarks({ serves: victimsUp }) : undefined;
    // Since take-answers: the first take answers the ledger before it, and one that takes nothing over takes the stop's slot too.
    const asked = { ...(asks.saga && attempt === 1 ? { answerLedger: true } : {}), ...(asks.slot && !takeOver ? { stopSlot: asks.slot } : {}) };
    // Whole: a take that landed is known, so its compensation (let go) is registered and runs.
    const decision = await CancellationScope.nonCancellable(() =>
      ledgerUpdates().ledgerBeginStop({
        node,
        gpu,
        args: { serve: serve.name, holder, class: serve.class, ...(takeOver ?? {}), ...(onlyIfHeldBy !== undefined ? { onlyIfHeldBy } : {}), ...asked },
        updateId: `${holder}/take/${attempt}`,
      }),
    );
    if (asked.answerLedger) asks.before = decision.ledgerBefore;
    if (decision.slot?.taken && asks.saga) slotHeld(down, holder, asks.saga, patched(PATCHES.stopTakesSlot));
    if (decision.decision === 'taken') {
      log.record('take', take.taken(serve.name, decision.from, takeOver?.takeOverFrom));
      // Runs from before the compensation covered it readmit the victims here, before it is registered.
      const victims = decision.victimsRunning ?? [];
      if (victims.length && !patched(PATCHES.takeReadmitsCompensated)) await readmitVictims(victims, log);
      else if (victims.length) return { ...decision, readmitLater: victims, ...(quiesceMarks ? { quiesceMarks } : {}) };
      return decision;
    }
    if (decision.decision === 'absent') {
      log.record('take', take.absent(serve.name));
      return decision;
    }
    if (decision.decision === 'not-held') {
      log.record('take', take.notHeld(serve.name, onlyIfHeldBy ?? '?', decision));
      return decision;
    }
    if (decision.decision === 'evicted') {
      log.record('take', take.evicted(serve.name, decision.evictedFor));
      return decision;
    }
    const op = decision.operation;
    const end = ended.find((e) => e.holder === op.holder);
    if (end && end.outcome !== 'running') {
      // It has ended and still holds the serve: take its hold over, with its victims as the box has them.
      const { down: victimsDown, asleep: victimsAsleep, up } = await victimsSetAside(node, gpu, serve.name);
      victimsUp = up;
      log.record('take', take.takingOver(op, end.closedAs, serve.name, victimsDown, victimsAsleep));
      takeOver = { takeOverFrom: op.holder, victimsDown, ...(victimsAsleep.length ? { victimsAsleep } : {}) };
      continue;
    }
    const mode = op.phase === 'evicting' ? 'status' : op.phase === 'stopping' ? 'wait' : 'cancel';
    if (attempt < MAX_TAKE_ATTEMPTS) {
      log.record('take', take.ending(op, serve.name, mode));
      log.begin(mode === 'cancel' ? 'cancel' : 'wait');
      const e = await waiting(endTimeoutS).endOperation({ holder: op.holder, timeoutS: endTimeoutS, mode });
      if (e.outcome !== 'running') {
        ended.push(e);
        log.record(mode === 'cancel' ? 'cancel' : 'wait', take.ended(op, e));
        continue;
      }
    }
    const why = take.why(op, attempt);
    log.record('take', `refused: ${why}`);
    throw ApplicationFailure.create({
      type: Failure.ServeBusy,
      message: take.refusal(
        serve.name,
        why,
        ended.map((e) => e.holder),
        cancelHint(op.holder),
      ),
      nonRetryable: true,
      details: [{ operation: op, steps: log.steps }],
    });
  }
}

/**
 * The victims of this serve's acquisition whose containers are down, and those evicted by sleeping
 * that sleep (the acquisition ended between their sleep and its hand-over), read from the box.
 */
async function victimsSetAside(node: string, gpu: GpuSpec, acquirer: string): Promise<{ down: string[]; asleep: string[]; up: string[] }> {
  const l = await reads().ledgerSnapshot({ node, gpu });
  const down: string[] = [];
  const asleep: string[] = [];
  const up: string[] = [];
  for (const r of l.reservations) {
    if (r.phase !== 'evicting' || r.evictedFor !== acquirer) continue;
    if (!(await reads().inspectServe({ node, serve: r.serve }))?.running) down.push(r.serve);
    // At a level not known here: its wake reloads the weights, which is right after either.
    else if (r.sleep && (await act.serveAsleep({ serve: r.serve }))) asleep.push(r.serve);
    else up.push(r.serve);
  }
  return { down, asleep, up };
}

/**
 * Victims back to running after their acquisition was taken over: their tiers go back into
 * rotation through the guard, each lifting only the quiesce it was under at the take (its mark):
 * a quiesce made since is an eviction's or a bring-down's of the victim, which drains and stops it.
 */
async function readmitVictims(victims: string[], log: StepLog, marks: QuiesceMarks = {}): Promise<void> {
  for (const v of victims) {
    const { serve } = await reads().resolveServe({ serve: v });
    if (!serve.routerTier) continue;
    const tier = serve.routerTier;
    const m = marks[v];
    // Not known which quiesce it was under: lifting one someone made since would be worse than a
    // running serve out of rotation until its next serves up.
    if (m && 'unread' in m) {
      log.record('take', take.victimReadmitFailed(v, tier, `its quiesce mark could not be read before the take (${m.unread}); left quiesced`));
      continue;
    }
    const quiesceMark = m?.mark;
    try {
      const r = await router.readmitIfQuiesced({ tier, ...(quiesceMark !== undefined ? { quiesceMark } : {}) });
      log.record('take', r.action === 'quiesced-since' ? take.victimLeftQuiesced(v, tier) : take.victimReadmitted(v, tier, r.action));
    } catch (err) {
      log.record('take', take.victimReadmitFailed(v, tier, rootCause(err).message));
    }
  }
}
