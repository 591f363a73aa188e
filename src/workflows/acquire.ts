// On-demand acquisition: if the serve fits it is a bring-up; if not and eviction was asked,
// the ledger picks victims and holds their MiB for this acquirer, then for each victim:
// quiesce its tier → drain → stop (or sleep) → confirm the VRAM came back → hand the MiB over → start.
import { ApplicationFailure, CancellationScope, isCancellation, patched, setHandler, workflowInfo } from '@temporalio/workflow';
import type { GpuReading, ResolvedServe, ServeProcesses, VramReleaseResult } from '../shared/contracts';
import type { ServeSpec } from '../domain/types';
import { RECENT_READING_MS } from '../domain/physical';
import { residualSeen } from '../domain/sleep';
import { heldNowMib } from '../domain/vram-release';
import type { SleepLevel } from '../domain/sleep';
import { denialMessage, formatLedger } from '../domain/ledger';
import type { LedgerState } from '../domain/ledger';
import { evictionOutlook, heldForAcquirers, victimTookMib } from '../domain/eviction';
import type { EvictionOutlook, Victim } from '../domain/eviction';
import { joinLeaseSignal } from '../shared/messages';
import type { AcquireDecision } from '../shared/messages';
import { holderOf } from '../domain/fence';
import { Failure } from '../shared/failures';
import { admission, eviction, sleeping } from '../shared/wording';
import { admitArgs, alreadyHeld, checkRoom, readRoom, roomVerdict, startServe, wakeOrRestart } from './bring-up';
import { PATCHES } from './patches';
import { act, ledgerUpdates, preflightReads, reads, router, STOP_ACTIVITY_MARGIN_S, waiting } from './proxies';
import { takeStartSlot } from './start-slot';
import { evictionHoldS } from '../domain/start-slot';
import type { EvictionHoldBounds } from '../domain/start-slot';
import { abandonAndCompensate, failAndCompensate, rootCause, Saga, whole } from './saga';
import { RunAbandon } from './abandon';
import { callerOf } from '../domain/abandon';
import { checkInput } from './input';
import { leaseAtLeast, startLease } from './lease';
import { formatDuration, leaseRequestProblem } from '../domain/lease';
import {
  DEFAULT_DRAIN_TIMEOUT_S,
  DEFAULT_RELEASE_TIMEOUT_S,
  DEFAULT_SLEEP_TIMEOUT_S,
  awaitedLater,
  drainFor,
  giveBackWhenDown,
  readmitOwnQuiesce,
  STOP_SLEEPER,
  stopServe,
} from './steps';
import { StepLog } from './step-log';
import { tagVictims } from './run-tags';
import { ACQUISITION_HANDLERS } from '../shared/handler-descriptions';
import type { AcquireInput, AcquireResult, LeaseRequest, LeaseTermsNotApplied, VictimRecord } from '../shared/operations';

export async function acquireWorkflow(input: AcquireInput): Promise<AcquireResult> {
  checkInput(input, {
    booleans: ['evict', 'force'],
    seconds: ['drainTimeoutS', 'releaseTimeoutS'],
    other: { lease: leaseRequestProblem, trigger: (v) => (callerOf(v) ? undefined : "'router', 'operator' or 'cli'") },
  });
  const { workflowId, runId } = workflowInfo();
  const holder = holderOf(workflowId, runId);
  const op = `serves up ${input.serve}${input.evict ? ' --evict' : ''}`;
  const log = new StepLog();
  const joins = new JoinedLeases(input.lease, log);
  const abandon = new RunAbandon(input.serve, input.trigger, log);
  setHandler(
    joinLeaseSignal,
    (request, caller) => {
      abandon.joined(caller);
      joins.take(request);
    },
    { description: ACQUISITION_HANDLERS.joinLease },
  );

  const resolved = await reads().resolveServe({ serve: input.serve });
  const { node, serve, gpu } = resolved;
  const base = { serve: serve.name, gpuRole: gpu.role, vramMib: serve.vramMib };

  log.begin('admit');
  const before = await reads().ledgerSnapshot({ node, gpu });
  const ledgerBefore = formatLedger(before);
  const { decision, ledger, wasAsleep } = await whole(PATCHES.admitWhole, () =>
    ledgerUpdates().ledgerAcquire({
      node,
      args: { ...admitArgs(resolved, holder), evict: Boolean(input.evict) },
      updateId: `${holder}/acquire`,
    }),
  );
  log.ledgerSaid(ledger);
  if (decision.decision !== 'admitted' && decision.decision !== 'evicting') abandon.close();
  if (decision.decision === 'denied') {
    const hint = admission.evictionHint(gpu.role, deniedOutlook(decision, ledger, Boolean(input.evict)), Boolean(input.evict));
    log.record('admit', admission.short(decision.shortfallMib, hint));
    throw ApplicationFailure.create({
      type: Failure.AdmissionDenied,
      message: `${denialMessage(decision)}${hint}`,
      nonRetryable: true,
      details: [{ ...decision, ledger: ledgerBefore, steps: log.steps }],
    });
  }
  if (decision.decision === 'already-held') {
    const held = await alreadyHeld(node, serve.name, decision, op, log);
    // The serve is up under another run: the terms asked go to its lease, fenced to that run.
    // Runs from before this completed here, the terms dropped.
    const asked = joins.all();
    const leased =
      asked.length > 0 && patched(PATCHES.leaseOnAlreadyRunning) ? await joins.apply(0, (r) => leaseAtLeast(node, serve, decision.holder, r, log)) : {};
    return {
      ...base,
      outcome: 'already-running',
      // "nothing changed" no longer holds once a lease was asked of it.
      message: leased.lease || leased.leaseNotApplied ? `${op}: already running${leaseWords(leased)}` : held.message,
      ...leased,
      containerId: held.containerId,
      victims: [],
      ledgerBefore,
      ledgerAfter: ledgerBefore,
      steps: log.steps,
    };
  }

  const saga = new Saga();
  // Histories recorded before sleep mode existed acquired no sleeping serve, and replay without it.
  const asleep = wasAsleep !== undefined && patched(PATCHES.wakeOnRestore) ? wasAsleep : undefined;
  // A sleeper's process holds its residual: given up, its admission goes, and so must the process,
  // first (compensations run last-added first): released before it, its MiB could be admitted to
  // another serve while the process still holds them. Runs from before this released first.
  // Once a wake or a cold start has named the run's own container, only that one: the name may by
  // then be another run's (a start refused and its removal failed, a reservation lost at running).
  const stopSleeper = () => saga.add(STOP_SLEEPER, () => stopServe(node, serve, saga.own ? { own: saga.own } : {}));
  const stopBeforeRelease = asleep !== undefined && patched(PATCHES.sleeperStoppedBeforeRelease);
  let withdrawSleeperStop = asleep !== undefined && !stopBeforeRelease ? stopSleeper() : undefined;
  const planned = decision.decision === 'evicting' ? decision.victims : [];
  const evicting: Eviction = {
    node,
    acquirer: resolved,
    input,
    holder,
    saga,
    log,
    abandon,
    stopped: [],
    slept: {},
    sleptHolding: {},
    planned,
    resolvedVictims: new Map(),
  };
  if (decision.decision === 'admitted') {
    log.record('admit', admission.admitted(serve.vramMib, decision.freeAfterMib));
    saga.add('release reservation', () =>
      giveBackWhenDown(node, serve.name, saga, () =>
        act.ledgerRelease({ node, gpu, args: { serve: serve.name, holder, quiet: true }, updateId: `${holder}/compensate-release` }),
      ),
    );
  } else {
    const victimNames = decision.victims.map((v) => v.serve);
    log.record('plan', admission.plan(victimNames, decision.reason));
    // Kept whole while the acquirer's container runs: its victims then leave the eviction when `serves down` takes it over.
    saga.add('abort eviction', () => giveBackWhenDown(node, serve.name, saga, () => abortEviction(evicting, decision.victims)));
    await tagVictims(victimNames, op);
  }
  if (stopBeforeRelease) withdrawSleeperStop = stopSleeper();

  try {
    return await abandon.run(async () => {
      const victims: VictimRecord[] = [];
      if (decision.decision === 'evicting') {
        // The card's room as it will be once the victims are down, before any is touched: a process
        // outside the ledger that no eviction makes room beside refuses the acquisition here, not
        // at the start, its victims down for nothing. Since room-read-local it is read beside the
        // preflight (asked first: runs from before ask the others in their order, the preflight's
        // step between them).
        if (patched(PATCHES.roomReadLocal) && patched(PATCHES.evictionPreflight) && patched(PATCHES.roomBeforeEviction)) {
          await preflightBesideRoom(evicting, decision.victims);
        } else {
          // Histories recorded before the preflight existed replay without it.
          if (patched(PATCHES.evictionPreflight)) await preflight(evicting, decision.victims);
          // Runs from before room-before-eviction read the room at the start only.
          if (patched(PATCHES.roomBeforeEviction)) await checkRoom(resolved, log, { evicting: decision.victims });
        }
        for (const v of decision.victims) victims.push(await evictVictim(evicting, v));
      }
      // Each victim's VRAM was seen back (or its sleep's residual) on a reading queried after it went down.
      const baseline = victims.length > 0 ? { maxAgeMs: RECENT_READING_MS, ...listedAfterStops(victims) } : {};
      // A wake or its cold start whose fence refused: the sleeper (or the container started under
      // its name since) is not this acquisition's, and neither is stopping it.
      const notOurs = () => {
        if (withdrawSleeperStop && patched(PATCHES.wakeRefusedLeavesSleeper)) withdrawSleeperStop();
      };
      abandon.commit(`${asleep !== undefined ? 'wake' : 'start'} of ${serve.name}`);
      const started = asleep !== undefined ? await wakeOrRestart(resolved, asleep, saga, log, notOurs) : await startServe(resolved, saga, log, baseline);
      const sleepers = victims.filter((v) => v.sleep && !v.sleep.fellBack).map((v) => v.serve);
      const evicted = victims.map((v) => v.serve).filter((v) => !sleepers.includes(v));
      const ownStart = input.lease ? await startLease(node, serve, holder, input.lease, log) : undefined;
      const own = ownStart?.lease;
      // Terms of callers that joined this run (none in the recorded histories): each made to hold.
      const joined = joins.all().length > (input.lease ? 1 : 0) && patched(PATCHES.leaseJoinsHonoured);
      const leased = withNotApplied(
        ownStart?.notApplied,
        joined ? await joins.apply(input.lease ? 1 : 0, (r) => leaseAtLeast(node, serve, holder, r, log)) : {},
      );
      const lease = leased.lease ?? own;
      abandon.close();
      return {
        ...base,
        outcome: 'started',
        message:
          `${op}: running, ${serve.vramMib} MiB committed on '${gpu.role}'${evicted.length ? `; evicted ${evicted.join(', ')}` : ''}` +
          (sleepers.length ? `; put to sleep ${sleepers.join(', ')}` : '') +
          (own ? `; ${own.kind === 'idle' ? 'idle lease' : 'lease'} ${formatDuration(own.seconds * 1000)} (${own.workflowId})` : '') +
          leaseWords(leased),
        ...(lease ? { lease } : {}),
        ...(leased.leaseNotApplied ? { leaseNotApplied: leased.leaseNotApplied, leaseTermsNotApplied: leased.leaseTermsNotApplied } : {}),
        evictionReason: decision.decision === 'evicting' ? decision.reason : undefined,
        victims,
        containerId: started.containerId,
        observedModels: started.observedModels,
        measuredDeltaMib: started.measuredDeltaMib,
        ledgerBefore,
        ledgerAfter: formatLedger(started.ledger),
        steps: log.steps,
      };
    });
  } catch (err) {
    abandon.close();
    const victimsDown = eviction.victimsDown([...evicting.stopped, ...Object.keys(evicting.slept)]);
    if (abandon.abandonedAt !== undefined && isCancellation(err)) throw await abandonAndCompensate(op, abandon.abandonedAt, saga, log, victimNames(decision));
    throw await failAndCompensate(op, err, saga, log, victimsDown);
  }
}

/**
 * Where every victim was stopped (none put to sleep): the last stop, after which a process
 * listing shows what their going left on the card (the release wait's last one, read just before).
 */
function listedAfterStops(victims: VictimRecord[]): { listedAfterEpochMs?: number } {
  const stops = victims.map((v) => v.stopIssuedAtEpochMs);
  return stops.every((at) => at !== undefined) ? { listedAfterEpochMs: Math.max(...stops) } : {};
}

function victimNames(decision: AcquireDecision): string[] {
  return decision.decision === 'evicting' ? decision.victims.map((v) => v.serve) : [];
}

/** One acquisition's eviction: what each victim's steps need, and the victims stopped so far. */
interface Eviction {
  node: string;
  acquirer: ResolvedServe;
  input: AcquireInput;
  holder: string;
  saga: Saga;
  log: StepLog;
  /** Told before a step an abandon would not undo (a victim's stop or sleep). */
  abandon: RunAbandon;
  /** Victims whose container this run stopped: they stay evicted whatever happens next. */
  stopped: string[];
  /** Victims this run put to sleep, by level: they stay asleep whatever happens next. */
  slept: Record<string, SleepLevel>;
  /** What a victim asleep holds until nvidia-smi shows its VRAM back: its whole reservation, or the residual seen above its declared one. */
  sleptHolding: Record<string, number>;
  /** Every victim the ledger planned: the start slot's bound counts them all. */
  planned: Victim[];
  /** Each victim's manifest entry as this run resolved it, once (since victims-resolved-once: the slot's bound resolved them again). */
  resolvedVictims: Map<string, ServeSpec>;
}

/** Image, nvidia-smi and every victim's readmit path are checked before any victim is touched. */
async function preflight({ acquirer, log }: Eviction, victims: Victim[]): Promise<void> {
  log.begin('preflight');
  const pre = await preflightReads().preflightEviction({ acquirer: acquirer.serve.name, gpuUuid: acquirer.gpu.uuid, victims: victims.map((v) => v.serve) });
  log.record('preflight', eviction.preflight(pre));
}

/**
 * The preflight and the room before any victim is touched, read at once (both read-only, local
 * steps of one workflow task), their outcomes taken in order: a failed preflight is what the run
 * tells, whatever the room said, as when the room was read after it.
 */
async function preflightBesideRoom({ acquirer, log }: Eviction, victims: Victim[]): Promise<void> {
  log.begin('preflight');
  const pre = preflightReads().preflightEviction({ acquirer: acquirer.serve.name, gpuUuid: acquirer.gpu.uuid, victims: victims.map((v) => v.serve) });
  const room = awaitedLater(readRoom(acquirer, { evicting: victims }));
  log.record('preflight', eviction.preflight(await pre));
  log.begin('room');
  roomVerdict(acquirer, log, await room);
}

/**
 * The compensation: which victims are down is read from the box, not assumed (a stop may have
 * acted before it failed). Those stay evicted; the others go back to running; the held MiB are let go.
 */
async function abortEviction({ node, acquirer, holder, slept, sleptHolding }: Eviction, victims: Victim[]) {
  const down: string[] = [];
  for (const v of victims) if (!(await reads().inspectServe({ node, serve: v.serve }))?.running) down.push(v.serve);
  // Asleep and not since stopped: it stays asleep, its residual held (or more, until its VRAM was seen back).
  const asleep = Object.fromEntries(Object.entries(slept).filter(([serve]) => !down.includes(serve)));
  const holding = Object.fromEntries(Object.entries(sleptHolding).filter(([serve]) => Object.hasOwn(asleep, serve)));
  return act.ledgerAbortEviction({
    node,
    gpu: acquirer.gpu,
    args: {
      acquirer: acquirer.serve.name,
      stopped: down,
      holder,
      quiet: true,
      ...(Object.keys(asleep).length ? { slept: asleep } : {}),
      ...(Object.keys(holding).length ? { sleptHoldingMib: holding } : {}),
    },
    updateId: `${holder}/compensate-abort`,
  });
}

/**
 * quiesce its tier → drain → stop (or sleep, for a victim evicted by sleeping, with stop as the
 * fallback) → confirm the VRAM came back → hand its MiB to the acquirer.
 */
async function evictVictim(e: Eviction, planned: Victim): Promise<VictimRecord> {
  const { node, acquirer, input, holder, saga, log } = e;
  const { gpu } = acquirer;
  // A victim after the first was resolved by the slot's take, where it counted its stop timeout.
  const victim = e.resolvedVictims.get(planned.serve) ?? (await reads().resolveServe({ serve: planned.serve })).serve;
  e.resolvedVictims.set(planned.serve, victim);
  const tier = victim.routerTier;
  const record: VictimRecord = { serve: victim.name, vramMib: victim.vramMib, tier, inFlightAtStop: 0, wasRunning: true };

  let withdrawReadmit = () => undefined as void;
  if (tier) {
    log.begin(`quiesce ${victim.name}`);
    // Registered first: a quiesce that acted before it failed must still be undone.
    // The readmit lifts only this run's quiesce (its mark): once the ledger has the victim running
    // again, an eviction or a bring-down of it may quiesce the tier, and a readmit that reaches the
    // router late (a timed-out attempt) must leave that. A quiesce that failed after acting returns
    // no mark: the readmit is then unguarded, as before marks, rather than leave a running serve out
    // of rotation with nothing to bring it back.
    const quiesced: { mark?: string } = {};
    withdrawReadmit = saga.add(`readmit tier ${tier}`, () => readmitOwnQuiesce(tier, victim.name, quiesced.mark));
    const q = await whole(PATCHES.quiesceWhole, () => router.quiesceTier({ tier }));
    quiesced.mark = q.quiesceMark;
    record.inFlightAtQuiesce = q.inFlight;
    log.record(`quiesce ${victim.name}`, eviction.quiesced(tier, q.inFlight));
  }

  // Read while the victim still holds its VRAM, before the drain: the stop then follows the last
  // response with nothing else in between.
  const container = await reads().inspectServe({ node, serve: victim.name });
  record.wasRunning = Boolean(container?.running);
  // The victim's VRAM does not move until its stop: the stream's latest reading will do. Its own
  // processes on the GPU, which confirm its release where another serve starting or stopping on
  // the card during the drain moves the whole GPU's reading as much, are read by the drain, beside
  // its wait (a process query is a spawn of nvidia-smi, 100-300 ms).
  const gpuRead = record.wasRunning ? await reads().readGpu({ uuid: gpu.uuid, maxAgeMs: RECENT_READING_MS }) : undefined;
  const tookMib = victimTookMib(planned, victim.vramMib);
  // Histories recorded before sleep mode existed have no victim that sleeps, and replay without it.
  // The level is chosen before the drain, so the sleep follows the last response as a stop would.
  const sleep = planned.sleep && gpuRead && patched(PATCHES.evictBySleep) ? await planSleep(e, victim.name, planned.sleep, record) : undefined;

  log.begin(`drain ${victim.name}`);
  const drainTimeoutS = input.drainTimeoutS ?? DEFAULT_DRAIN_TIMEOUT_S;
  const { processes, ...drain } = await drainFor(tier, victim, drainTimeoutS, gpuRead ? { node, gpuUuid: gpu.uuid } : undefined);
  record.drain = drain;
  const gpuBefore: GpuBefore | undefined = gpuRead && { ...gpuRead, ...(processes ? { processes } : {}) };
  if (!drain.drained && !input.force) {
    throw ApplicationFailure.create({
      type: Failure.DrainTimeout,
      message: eviction.drainTimeout(victim.name, drain, drainTimeoutS),
      nonRetryable: true,
      details: [drain],
    });
  }
  log.record(`drain ${victim.name}`, drain.drained ? eviction.drained(drain) : eviction.forced(drain, drainTimeoutS));
  record.inFlightAtStop = drain.routerInFlightAtEnd;

  // The first stop (or sleep) frees memory on the card: from here to its own start's measure no
  // other start profiles there. Waited for while a start holds it; past the bound nothing is
  // stopped, and the saga readmits the victim's tier and aborts the eviction.
  await takeSlotToEvict(e, victim.name);
  // Asleep, it answers no request, and only a restore's wake and guarded readmit bring it back.
  if (sleep && gpuBefore) e.abandon.commit(`the sleep of ${victim.name}`);
  const asleep = sleep && gpuBefore ? await sleepVictim(e, victim, sleep, tookMib, gpuBefore, record, withdrawReadmit) : undefined;
  if (!asleep) {
    e.abandon.commit(`the stop of ${victim.name}`);
    log.begin(`stop ${victim.name}`);
    // Fenced: only while the ledger holds the victim evicting for this run (a ledger restarted
    // since the plan holds it running, and the stop is refused: the saga readmits its tier).
    // Where the release wait follows, its first listing is started as the container goes down.
    const stop = await stopServe(node, victim, { fence: gpu, ...(gpuBefore ? { listWhenDown: true } : {}) });
    // The victim is down: readmitting its tier would route to nothing, and it stays evicted.
    withdrawReadmit();
    e.stopped.push(victim.name);
    // A sleep that gave up is over once the stop has landed.
    delete e.slept[victim.name];
    delete e.sleptHolding[victim.name];
    record.stopIssuedAtEpochMs = stop.issuedAtEpochMs;
    log.record(`stop ${victim.name}`, eviction.stopped(stop));

    log.begin(`release ${victim.name}`);
    if (gpuBefore) {
      record.vram = await confirmReleased(e, victim.name, gpuBefore, tookMib, 0, stop.downAtEpochMs);
      log.record(`release ${victim.name}`, eviction.vramBack(record.vram, gpu.uuid));
    } else {
      log.record(`release ${victim.name}`, eviction.notRunning);
    }
  }
  // Names this run: only the eviction that holds the victim hands its MiB over.
  const args = {
    victim: victim.name,
    acquirer: acquirer.serve.name,
    holder,
    ...(asleep ? { asleepAt: asleep.level, ...(asleep.residualSeenMib !== undefined ? { residualSeenMib: asleep.residualSeenMib } : {}) } : {}),
  };
  log.ledgerSaid(await ledgerUpdates().ledgerVictimReleased({ node, gpu, args, updateId: `${holder}/victim-released/${victim.name}` }));
  return record;
}

/**
 * Before the first victim's stop or sleep (since stop-takes-slot): the GPU's start slot, held
 * through the acquirer's own start (which finds it held) until measured. What a start waiting for
 * it counts is every victim's stop and release check, the later victims' drains and the start:
 * the victims are read from the manifest for their stop timeouts.
 */
async function takeSlotToEvict({ acquirer, input, holder, saga, log, planned, resolvedVictims }: Eviction, first: string): Promise<void> {
  if (saga.startSlot.held || !patched(PATCHES.stopTakesSlot)) return;
  // Runs from before resolved every victim here again, the first just resolved by its own eviction included.
  const once = patched(PATCHES.victimsResolvedOnce);
  const victims: EvictionHoldBounds['victims'] = [];
  for (const v of planned) {
    const spec = (once ? resolvedVictims.get(v.serve) : undefined) ?? (await reads().resolveServe({ serve: v.serve })).serve;
    if (once) resolvedVictims.set(v.serve, spec);
    victims.push({ stopTimeoutS: spec.stopTimeoutS, sleeps: v.sleep !== undefined });
  }
  const holdS = evictionHoldS({
    victims,
    drainTimeoutS: input.drainTimeoutS ?? DEFAULT_DRAIN_TIMEOUT_S,
    releaseTimeoutS: input.releaseTimeoutS ?? DEFAULT_RELEASE_TIMEOUT_S,
    sleepTimeoutS: DEFAULT_SLEEP_TIMEOUT_S,
    stopMarginS: STOP_ACTIVITY_MARGIN_S,
    startTimeoutS: acquirer.serve.startTimeoutS,
  });
  await takeStartSlot(acquirer, holder, saga, log, {
    doing: 'evicting',
    holdS,
    waitingTo: `evict ${first}`,
    notDone: `no victim was stopped and ${acquirer.serve.name} was not started; bring it up again once that has ended`,
  });
}

/**
 * nvidia-smi shows `expectedMib` back on the acquirer's GPU, against the reading taken before the
 * drain: by the victim's own processes there where that reading saw them, keeping at most keepMib.
 */
function confirmReleased(
  { acquirer, input }: Eviction,
  victim: string,
  before: GpuBefore,
  expectedMib: number,
  keepMib: number,
  /** When the stop saw the victim down (its result's; absent in results recorded before, and after a sleep). */
  downAtEpochMs?: number,
): Promise<VramReleaseResult> {
  const releaseTimeoutS = input.releaseTimeoutS ?? DEFAULT_RELEASE_TIMEOUT_S;
  return waiting(releaseTimeoutS).confirmVramReleased({
    gpuUuid: acquirer.gpu.uuid,
    victim,
    usedBeforeMib: before.usedMib,
    expectedMib,
    deadlineEpochMs: Date.now() + releaseTimeoutS * 1000,
    // Runs recorded before carry none (their readings had none): the whole GPU confirms theirs.
    ...(before.processes ? { own: before.processes } : {}),
    ...(keepMib > 0 ? { keepMib } : {}),
    // Activity input only (replay compares none): the listing the stop started may be its first reading.
    ...(downAtEpochMs !== undefined ? { listedAfterEpochMs: downAtEpochMs } : {}),
  });
}

/** The victim's GPU reading before the drain, with its own processes there (read by the drain). */
type GpuBefore = GpuReading & { processes?: ServeProcesses };

/** How a victim evicted by sleeping sleeps now: at the level planned, keeping its declared residual. */
type SleepPlan = NonNullable<Victim['sleep']>;

/**
 * The level the victim sleeps at (the node's host-RAM budget may take level 1 to 2), or undefined
 * when it cannot be had (the manifest now says stop, a ledger did not answer): it is stopped then.
 */
async function planSleep({ log }: Eviction, victim: string, declared: SleepPlan, record: VictimRecord): Promise<SleepPlan | undefined> {
  try {
    const plan = await act.planSleep({ serve: victim });
    record.sleep = { level: plan.level, residualDeclaredMib: declared.residualMib, ...(plan.fellBack ? { levelFellBack: plan.fellBack } : {}) };
    return { level: plan.level, residualMib: declared.residualMib };
  } catch (err) {
    if (isCancellation(err)) throw err;
    const why = rootCause(err).message;
    record.sleep = { level: declared.level, residualDeclaredMib: declared.residualMib, fellBack: why };
    log.record(`sleep ${victim}`, sleeping.fallBack(victim, why));
    return undefined;
  }
}

/**
 * sleep → nvidia-smi confirms all but the residual came back. Returns how it sleeps, or undefined
 * when the sleep gave up (refused, or freed too little within the release timeout: vLLM's sleep
 * leaks) and the victim is to be stopped instead; the figures are in the record and the log.
 * `asleep` runs as soon as the sleep has landed (the tier must not be readmitted to a sleeper).
 */
async function sleepVictim(
  e: Eviction,
  victim: ServeSpec,
  planned: SleepPlan,
  tookMib: number,
  before: GpuBefore,
  record: VictimRecord,
  asleep: () => void,
): Promise<{ level: SleepLevel; residualSeenMib?: number } | undefined> {
  const { log, node, acquirer } = e;
  const step = `sleep ${victim.name}`;
  log.begin(step);
  // What the sleep should give back: what it took less what it keeps asleep.
  const expectedMib = Math.max(0, tookMib - planned.residualMib);
  const sleepRecord = (record.sleep ??= { level: planned.level, residualDeclaredMib: planned.residualMib });
  try {
    // Whole: a cancel must not leave it unknown whether the victim sleeps.
    const slept = await CancellationScope.nonCancellable(() =>
      waiting(DEFAULT_SLEEP_TIMEOUT_S).sleepServe({ node, gpu: acquirer.gpu, serve: victim, level: planned.level, timeoutS: DEFAULT_SLEEP_TIMEOUT_S }),
    );
    asleep();
    // Until a stop has landed it sleeps: an abort leaves it asleep, not running. Until nvidia-smi
    // shows its VRAM back it holds all of it: a leaking sleep (vLLM #32714) keeps gigabytes.
    e.slept[victim.name] = planned.level;
    e.sleptHolding[victim.name] = victim.vramMib;
    sleepRecord.waitedMs = slept.waitedMs;
    if (slept.issuedAtEpochMs !== undefined) sleepRecord.issuedAtEpochMs = slept.issuedAtEpochMs;
    log.record(step, `${sleeping.slept(slept)}${sleepRecord.levelFellBack ? ` (${sleepRecord.levelFellBack})` : ''}`);
    log.begin(`release ${victim.name}`);
    record.vram = await confirmReleased(e, victim.name, before, expectedMib, planned.residualMib);
  } catch (err) {
    if (isCancellation(err)) throw err;
    // Its fence refused: the victim is not this acquisition's (a ledger started afresh took it as
    // running), and a stop in its place would be unfenced. Runs from before this fell back to one.
    if (rootCause(err).type === Failure.ReservationLost && patched(PATCHES.sleepRefusedFails)) throw err;
    const why = rootCause(err).message;
    sleepRecord.fellBack = why;
    log.record(step, sleeping.fallBack(victim.name, why));
    return undefined;
  }
  const seen = residualSeen(tookMib, record.vram.releasedMib, planned.residualMib, heldNowMib(record.vram));
  sleepRecord.residualSeenMib = seen.mib;
  if (seen.aboveDeclared) e.sleptHolding[victim.name] = seen.mib;
  else delete e.sleptHolding[victim.name];
  log.record(
    `release ${victim.name}`,
    eviction.vramBack(record.vram, acquirer.gpu.uuid) + (seen.aboveDeclared ? `; ${sleeping.residualAbove(victim.name, seen.mib, planned.residualMib)}` : ''),
  );
  // Above the declaration, the ledger holds what the box shows.
  return { level: planned.level, ...(seen.aboveDeclared ? { residualSeenMib: seen.mib } : {}) };
}

/**
 * With --evict the ledger tried and says why it could not; without, what --evict would do,
 * from the ledger it answered with (workflow time: the same instant on replay).
 */
function deniedOutlook(decision: Extract<AcquireDecision, { decision: 'denied' }>, ledger: LedgerState, evict: boolean): EvictionOutlook {
  if (decision.residency?.length) return { kind: 'resident', windows: decision.residency };
  if (!evict) return evictionOutlook(ledger, decision.vramMib, Date.now());
  return { kind: 'short', evictableMib: decision.evictableMib ?? 0, held: heldForAcquirers(ledger) };
}

type Leased = Pick<AcquireResult, 'lease' | 'leaseNotApplied' | 'leaseTermsNotApplied'>;

/** What the terms did, with terms that could not be applied before them (the run's own, whose lease could not start). */
function withNotApplied(first: LeaseTermsNotApplied | undefined, leased: Leased): Leased {
  if (!first) return leased;
  return { ...leased, leaseNotApplied: [first.why, ...(leased.leaseNotApplied ?? [])], leaseTermsNotApplied: [first, ...(leased.leaseTermsNotApplied ?? [])] };
}

/**
 * The lease terms of every caller of this run: its own (the input's) and those of the POSTs and
 * `serves up --lease` that joined it (USE_EXISTING keeps the first caller's input; the others
 * send theirs with joinLeaseSignal). A caller that started the run sends its own terms too
 * (signalWithStart): the first signal equal to the input's is those.
 */
class JoinedLeases {
  private readonly joined: LeaseRequest[] = [];
  private signalled = false;

  constructor(
    private readonly own: LeaseRequest | undefined,
    private readonly log: StepLog,
  ) {}

  take(request: LeaseRequest): void {
    const first = !this.signalled;
    this.signalled = true;
    const problem = leaseRequestProblem(request);
    if (problem) {
      this.log.record('lease', `terms of a caller that joined ignored: they must be ${problem}`);
      return;
    }
    if (first && this.own && sameTerms(request, this.own)) return;
    this.joined.push(request);
  }

  /** The input's terms, then each joined one in the order they came. */
  all(): LeaseRequest[] {
    return [...(this.own ? [this.own] : []), ...this.joined];
  }

  /**
   * Applies the terms from `from` on, those that come meanwhile too (a signal that lands while the
   * run is about to complete is delivered before it does): the last lease, and what was not applied.
   */
  async apply(
    from: number,
    each: (r: LeaseRequest) => Promise<{ lease?: NonNullable<AcquireResult['lease']>; notApplied?: LeaseTermsNotApplied }>,
  ): Promise<Leased> {
    const out: Leased = {};
    // A flood of joiners (a POST each) would cost the run, and the lease, an activity and an Update
    // each: the terms waiting are folded to those that can matter (runs from before applied each).
    const folded = patched(PATCHES.leaseJoinsFolded);
    for (let i = from; i < this.all().length;) {
      const waiting = this.all().slice(i);
      const batch = folded ? foldedTerms(waiting) : waiting.slice(0, 1);
      i += folded ? waiting.length : 1;
      for (const request of batch) {
        const r = await each(request);
        if (r.lease) out.lease = r.lease;
        if (r.notApplied) {
          (out.leaseNotApplied ??= []).push(r.notApplied.why);
          (out.leaseTermsNotApplied ??= []).push(r.notApplied);
        }
      }
    }
    return out;
  }
}

/**
 * Terms to apply one after the other, folded: the first as it is (it may start the lease, and sets
 * its kind), then of the others the longest fixed one, if longer than the first, and one idle,
 * unless the first is idle. Each is applied as "at least, from now": a shorter one applied
 * before or with a longer one adds nothing.
 */
function foldedTerms(waiting: LeaseRequest[]): LeaseRequest[] {
  const [first, ...rest] = waiting;
  if (!first) return [];
  const fixed = rest.reduce<number>((m, r) => (r.kind === 'fixed' ? Math.max(m, r.seconds) : m), 0);
  return [
    first,
    ...(fixed > (first.kind === 'fixed' ? first.seconds : 0) ? [{ kind: 'fixed' as const, seconds: fixed }] : []),
    ...(first.kind !== 'idle' && rest.some((r) => r.kind === 'idle') ? [{ kind: 'idle' as const }] : []),
  ];
}

function sameTerms(a: LeaseRequest, b: LeaseRequest): boolean {
  return a.kind === b.kind && (a.kind === 'idle' || (b.kind === 'fixed' && a.seconds === b.seconds));
}

/** What the joined terms did, for the run's message. */
function leaseWords({ lease, leaseNotApplied }: Leased): string {
  const held = lease?.how === 'at-least' ? `; ${lease.workflowId} asked to last at least ${formatDuration(lease.seconds * 1000)} from now (never shorter)` : '';
  const started =
    lease?.how === 'started' ? `; ${lease.kind === 'idle' ? 'idle lease' : 'lease'} ${formatDuration(lease.seconds * 1000)} (${lease.workflowId})` : '';
  return held + started + (leaseNotApplied ?? []).map((w) => `; ${w}`).join('');
}
