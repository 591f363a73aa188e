// serves up NAME: admit → room → start → health → identity → measure → readmit → running. An admission
// the ledger denies starts nothing; a failure after admission removes the container and releases
// the MiB once the container is seen gone (a removal that failed keeps them). Every way up shares the steps from start on (startServe): an acquisition and a restore
// differ only in how they got the MiB.
import { ApplicationFailure, isCancellation, patched, workflowInfo } from '@temporalio/workflow';
import type { GpuReading, ResolvedServe } from '../shared/contracts';
import { denialMessage, formatLedger, withoutReservation } from '../domain/ledger';
import { evictionOutlook } from '../domain/eviction';
import { slotAfter } from '../domain/start-slot';
import type { Victim } from '../domain/eviction';
import type { LedgerState } from '../domain/ledger';
import { formatMeasuredDelta, measuredHow, RECENT_READING_MS } from '../domain/physical';
import type { OwnDraw } from '../domain/physical';
import { noRoomMessage, roomLine } from '../domain/start-room';
import type { StartRoom } from '../domain/start-room';
import { cancelHint, holderOf } from '../domain/fence';
import type { OwnContainer } from '../domain/fence';
import { Failure } from '../shared/failures';
import { admission, eviction, sleeping, start } from '../shared/wording';
import { admittedSleep } from '../domain/sleep';
import type { SleepLevel } from '../domain/sleep';
import { PATCHES } from './patches';
import { act, containers, ledgerUpdates, reads, roomReads, router, waiting } from './proxies';
import { failAndCompensate, rootCause, Saga, whole } from './saga';
import { checkInput } from './input';
import { awaitedLater, disowned, giveBackWhenDown, REMOVE_CONTAINER, stopServe } from './steps';
import { StepLog } from './step-log';
import { giveStartSlot, renewStartSlot, slotHeld, takeStartSlot } from './start-slot';
import type { BringUpInput, BringUpResult } from '../shared/operations';

/** This run's fencing token. */
function runHolder(): string {
  const { workflowId, runId } = workflowInfo();
  return holderOf(workflowId, runId);
}

/** What a bring-up's admission and an acquisition ask the ledger for the serve, as the manifest declares it. */
export function admitArgs({ serve, gpu }: ResolvedServe, holder: string) {
  return { serve: serve.name, vramMib: serve.vramMib, class: serve.class, holder, gpu, minResidencyS: serve.minResidencyS, ...admittedSleep(serve) };
}

export async function bringUpWorkflow(input: BringUpInput): Promise<BringUpResult> {
  checkInput(input, {});
  const { workflowId, runId } = workflowInfo();
  // The run, not just the id: a later `serves up` of the same serve reuses the workflow id.
  const holder = holderOf(workflowId, runId);
  const log = new StepLog();

  const resolved = await reads().resolveServe({ serve: input.serve });
  const { node, serve, gpu } = resolved;
  const base = { serve: serve.name, gpuRole: gpu.role, vramMib: serve.vramMib };

  log.begin('admit');
  // Since admit-takes-slot the admission takes the start slot too where the serve starts cold: the take is one round trip fewer.
  const slotAsked = patched(PATCHES.admitTakesSlot) ? { startSlot: { startTimeoutS: serve.startTimeoutS } } : {};
  const admit = await whole(PATCHES.admitWhole, () =>
    ledgerUpdates().ledgerAdmit({
      node,
      args: { ...admitArgs(resolved, holder), ...slotAsked },
      updateId: `${holder}/admit`,
    }),
  );
  const { decision } = admit;
  log.ledgerSaid(admit.ledger);
  // Without what this run took: its reservation, and the start slot its admission took with it.
  const ledgerBefore = formatLedger(
    decision.decision === 'admitted' ? slotAfter(withoutReservation(admit.ledger, serve.name), { step: 'give', holder }) : admit.ledger,
  );
  if (decision.decision === 'denied') {
    log.record('admit', admission.overBudget(decision.shortfallMib));
    throw ApplicationFailure.create({
      type: Failure.AdmissionDenied,
      // Workflow time: the same instant on replay.
      message: denialMessage(decision) + admission.bringUpHint(evictionOutlook(admit.ledger, serve.vramMib, Date.now())),
      nonRetryable: true,
      details: [{ ...decision, ledger: ledgerBefore, steps: log.steps }],
    });
  }
  if (decision.decision === 'already-held') {
    const held = await alreadyHeld(node, serve.name, decision, `serves up ${serve.name}`, log);
    return {
      ...base,
      outcome: 'already-running',
      message: held.message,
      containerId: held.containerId,
      ledgerBefore,
      ledgerAfter: ledgerBefore,
      steps: log.steps,
    };
  }
  const restoring = Boolean(admit.wasEvicted);
  log.record('admit', admission.admitted(serve.vramMib, decision.freeAfterMib, restoring));

  const saga = new Saga();
  const release = (keepAsleep: boolean) =>
    act.ledgerRelease({
      node,
      gpu,
      args: { serve: serve.name, holder, quiet: true, ...(keepAsleep ? { keepAsleep } : {}) },
      updateId: `${holder}/compensate-release`,
    });
  // A sleeper not woken yet sleeps on, holding its residual: put back asleep, with no wait for its container to stop.
  saga.add('release reservation', () => (saga.sleeperUntouched ? release(true) : giveBackWhenDown(node, serve.name, saga, () => release(false))));
  // Taken by the admission: held as a take's (the start's takeStartSlot finds it held), given back by the saga's done-step.
  if (admit.startSlot?.taken) slotHeld(resolved, holder, saga, true);
  try {
    // Histories recorded before sleep mode existed restore no sleeping serve, and replay without it.
    const asleep = admit.wasAsleep !== undefined && patched(PATCHES.wakeOnRestore) ? admit.wasAsleep : undefined;
    const started = asleep !== undefined ? await wakeOrRestart(resolved, asleep, saga, log) : await startServe(resolved, saga, log);
    const readmitted = started.readmittedTier ? `; tier ${started.readmittedTier} readmitted (identity '${serve.servedModelName}')` : '';
    const how = started.restoredBy === 'wake' ? ` by waking (${started.wakeMs ?? 0} ms)` : started.restoredBy === 'cold-start' ? ' by a cold start' : '';
    return {
      ...base,
      outcome: restoring ? 'restored' : 'started',
      ...(started.restoredBy ? { restoredBy: started.restoredBy } : {}),
      message: `serves up ${serve.name}: ${restoring ? `restored${how}` : 'running'}, ${serve.vramMib} MiB committed on '${gpu.role}'${readmitted}`,
      containerId: started.containerId,
      observedModels: started.observedModels,
      readmittedTier: started.readmittedTier,
      measuredDeltaMib: started.measuredDeltaMib,
      ledgerBefore,
      ledgerAfter: formatLedger(started.ledger),
      steps: log.steps,
    };
  } catch (err) {
    throw await failAndCompensate(`serves up ${serve.name}${restoring ? ' (restore)' : ''}`, err, saga, log);
  }
}

export interface StartedServe {
  containerId: string;
  observedModels: string[];
  /** Set when the tier had been quiesced and the router let it back into rotation. */
  readmittedTier?: string;
  /** nvidia-smi's device used after health minus before start, where a probe works. */
  measuredDeltaMib?: number;
  ledger: LedgerState;
  /** For a serve that slept: woken, or started cold (the fallback). */
  restoredBy?: 'wake' | 'cold-start';
  /** How long the wake took. */
  wakeMs?: number;
}

/**
 * start → health → identity → measure → readmit → running, for a serve whose MiB are admitted.
 * Registers the container's removal with the saga as soon as the container may exist.
 * `baseline.maxAgeMs`: how old the baseline reading may be; by default one queried now, since
 * memory freed just before (a stop) shows with a lag. An eviction that saw its victims' VRAM back
 * on a fresh reading passes RECENT_READING_MS: the latest reading is that one or newer; and its
 * last victim's stop as `listedAfterEpochMs`: the room check's process listing may be its release
 * wait's, queried after that stop (readStartRoom).
 */
export async function startServe(
  resolved: ResolvedServe,
  saga: Saga,
  log: StepLog,
  baseline: { maxAgeMs?: number; listedAfterEpochMs?: number } = {},
  /** Told when the start's fence refuses, beside this function's own removal being withdrawn (a wake's removal, an acquisition's stop of its sleeper). */
  alsoNotOurs?: () => void,
): Promise<StartedServe> {
  const { node, serve, gpu } = resolved;
  // Before the room check: the card is read for room and baseline with no other start on it.
  await takeStartSlot(resolved, runHolder(), saga, log);
  const gpuBefore = await roomToStart(resolved, log, baseline);

  log.begin('start');
  // Registered first: a start that created the container before it failed or was cancelled must
  // not leave it running once the reservation is released. Removing an absent one is a no-op.
  // Only the run's own: labelled with its holder until the start answers its id (a container of
  // another run's under the name, started while this one lost its reservation, is left alone).
  const own: OwnContainer = { holder: runHolder() };
  saga.own = own;
  const removal = saga.add(REMOVE_CONTAINER, () => stopServe(node, serve, { own }));
  const started = await containers.startServeContainer(resolved).catch((err: unknown) => {
    // Its fence refused: the container under the name may be the run's the ledger holds the serve
    // for, and a removal by name would take it away (the step removed its own by id).
    if (rootCause(err).type === Failure.ReservationLost && disowned(saga)) {
      removal();
      alsoNotOurs?.();
    }
    throw err;
  });
  own.id = started.containerId;
  log.record('start', start.started(started, gpu.uuid));
  return serveReady(resolved, started.containerId, gpuBefore?.usedMib, saga, log);
}

/**
 * The GPU's reading before a cold start (the measured delta's baseline) and, since
 * start-room-checked, the card's physical room for it: what the ledger commits on the GPU, this
 * serve included, plus what is held outside the ledger, against the card's total. Short, the
 * start is refused before anything is created (GpuRoomShort), and the saga gives back what the
 * run took. Runs from before read the baseline alone, and replay that way.
 */
async function roomToStart(
  resolved: ResolvedServe,
  log: StepLog,
  { maxAgeMs, listedAfterEpochMs }: { maxAgeMs?: number; listedAfterEpochMs?: number },
): Promise<GpuReading | null> {
  const age = maxAgeMs !== undefined ? { maxAgeMs } : {};
  if (!patched(PATCHES.startRoomChecked)) return reads().measureGpu({ uuid: resolved.gpu.uuid, ...age });
  // In the activity's input only (replay compares no input): runs from before list the processes afresh.
  return (await checkRoom(resolved, log, { ...age, ...(listedAfterEpochMs !== undefined ? { listedAfterEpochMs } : {}) }))?.reading ?? null;
}

/**
 * The `room` step: the card's room read (readStartRoom), a shortfall refused with GpuRoomShort.
 * Null where no nvidia-smi on this worker reads the GPU (not checked, and said so). `evicting`:
 * an acquisition's planned victims, the room read before any of them is touched.
 */
export async function checkRoom(
  resolved: ResolvedServe,
  log: StepLog,
  more: { maxAgeMs?: number; evicting?: Victim[]; listedAfterEpochMs?: number },
): Promise<{ reading: GpuReading; room: StartRoom } | null> {
  log.begin('room');
  return roomVerdict(resolved, log, await readRoom(resolved, more));
}

/** The room check's reading (readStartRoom), through the proxy its run asks for. */
export function readRoom(
  { node, serve, gpu }: ResolvedServe,
  more: { maxAgeMs?: number; evicting?: Victim[]; listedAfterEpochMs?: number },
): Promise<{ reading: GpuReading; room: StartRoom } | null> {
  return roomReads().readStartRoom({ node, gpu, serve: serve.name, ...more });
}

/** The `room` step's outcome for a reading: recorded, or refused with GpuRoomShort. */
export function roomVerdict(
  { serve, gpu }: ResolvedServe,
  log: StepLog,
  checked: { reading: GpuReading; room: StartRoom } | null,
): { reading: GpuReading; room: StartRoom } | null {
  if (!checked) {
    log.record('room', start.roomNotChecked(gpu.uuid));
    return null;
  }
  if (checked.room.shortMib > 0) {
    throw ApplicationFailure.create({
      type: Failure.GpuRoomShort,
      message: noRoomMessage(checked.room, serve.vramMib),
      nonRetryable: true,
      details: [checked.room],
    });
  }
  log.record('room', roomLine(checked.room));
  return checked;
}

/**
 * A restore of a serve put to sleep: wake → health → identity → readmit → running, in seconds
 * where a cold start takes a model load. Falls back to a cold restart (stop, then startServe) when
 * its container is gone, the GPU lacks the room the wake needs, or the wake fails.
 */
export async function wakeOrRestart(
  resolved: ResolvedServe,
  level: SleepLevel,
  saga: Saga,
  log: StepLog,
  /** Told when the wake's fence refuses, beside this function's own compensation being withdrawn (an acquisition's stop of its sleeper). */
  alsoNotOurs?: () => void,
): Promise<StartedServe> {
  const { node, serve } = resolved;
  log.begin('wake');
  const container = await reads().inspectServe({ node, serve: serve.name });
  if (!container?.running) {
    log.record('wake', sleeping.notAsleep(serve.name, container?.status ?? 'gone'));
    return { ...(await startServe(resolved, saga, log, {}, alsoNotOurs)), restoredBy: 'cold-start' };
  }
  // Registered first: a wake that fails past its fallback must not leave the process holding its residual.
  // By its id: the sleeper is labelled with the run that started it, and is this run's to wake.
  const own: OwnContainer = { holder: runHolder(), id: container.id };
  saga.own = own;
  const removal = () => saga.add(REMOVE_CONTAINER, () => stopServe(node, serve, { own }));
  // A wake allocates on the card as a start does: one at a time, its room read with none beside it.
  // Since sleeper-kept-until-woken the removal is registered once the slot is taken: a restore
  // cancelled (or refused StartSlotBusy) while it waits leaves its sleeper asleep, put back so.
  const slotFirst = patched(PATCHES.startSlot) && patched(PATCHES.sleeperKeptUntilWoken);
  let withdrawRemoval = slotFirst ? undefined : removal();
  saga.sleeperUntouched = slotFirst;
  await takeStartSlot(resolved, own.holder, saga, log);
  if (slotFirst) {
    saga.sleeperUntouched = false;
    withdrawRemoval = removal();
  }
  const notOurs = () => {
    withdrawRemoval?.();
    alsoNotOurs?.();
  };
  const woke = await wake(
    resolved,
    level,
    () => {
      notOurs();
      disowned(saga);
    },
    log,
  );
  if (woke.ok) return { ...(await serveReady(resolved, container.id, undefined, saga, log)), restoredBy: 'wake', wakeMs: woke.waitedMs };
  log.record('wake', sleeping.coldRestart(serve.name, woke.why));
  log.begin('stop');
  // The sleeper by its id: not whatever runs under the name by now.
  log.record('stop', eviction.stopped(await stopServe(node, serve, { own })));
  // The cold start runs under the slot the wake took: its since renewed, so waiters wait out this start too.
  await renewStartSlot(resolved, own.holder, saga);
  // Its cold start's fence refusing withdraws the wake's removal too: it is by the same name.
  return { ...(await startServe(resolved, saga, log, {}, notOurs)), restoredBy: 'cold-start' };
}

/** The wake itself, where the GPU has the room for it: woken, or why not (the restore then starts cold). */
async function wake(
  resolved: ResolvedServe,
  level: SleepLevel,
  notOurs: () => void,
  log: StepLog,
): Promise<{ ok: true; waitedMs: number } | { ok: false; why: string }> {
  const { node, serve, gpu } = resolved;
  const short = await wakeProblem(resolved, level);
  if (short) return { ok: false, why: short };
  try {
    const deadlineEpochMs = Date.now() + serve.startTimeoutS * 1000;
    const woke = await waiting(serve.startTimeoutS).wakeServe({ node, gpu, serve, level, deadlineEpochMs });
    log.record('wake', sleeping.woke(woke));
    return { ok: true, waitedMs: woke.waitedMs };
  } catch (err) {
    if (isCancellation(err)) throw err;
    // Its fence refused: the serve is not this run's, and neither is its container.
    if (rootCause(err).type === Failure.ReservationLost) {
      notOurs();
      throw err;
    }
    return { ok: false, why: rootCause(err).message };
  }
}

/**
 * Why waking would fail for want of room: the GPU must have free what the sleep gave back (a
 * co-located wake hit OOM in vLLM #47654). A stop frees the residual and whatever the sleep leaked.
 */
async function wakeProblem({ serve, gpu }: ResolvedServe, level: SleepLevel): Promise<string | undefined> {
  const reading = await reads().measureGpu({ uuid: gpu.uuid });
  const needMib = serve.vramMib - (serve.sleep?.residualMib ?? 0);
  if (!reading || reading.freeMib >= needMib) return undefined;
  return `nvidia-smi shows ${reading.freeMib} MiB free on ${gpu.uuid}; waking from level ${level} needs ${needMib} MiB`;
}

/** health → identity → measure → readmit → running, for a serve whose container runs. */
async function serveReady(resolved: ResolvedServe, containerId: string, usedBeforeMib: number | undefined, saga: Saga, log: StepLog): Promise<StartedServe> {
  const holder = runHolder();
  const { node, serve, gpu } = resolved;
  // Serves recorded before api existed are openai.
  const api = serve.api ?? 'openai';

  log.begin('health');
  // A cold start is measured by its own processes once healthy: their listing is started as it answers.
  const health = await waiting(serve.startTimeoutS).waitHealthy({
    node,
    serve,
    deadlineEpochMs: Date.now() + serve.startTimeoutS * 1000,
    ...(usedBeforeMib !== undefined ? { listWhenHealthy: true } : {}),
  });
  log.record('health', start.healthy(api, health));

  // Healthy, it has taken its memory: since ready-steps-overlapped its own processes are read
  // beside the identity check, which changes nothing on the card (a wake's delta is only what its
  // sleep gave back: not measured). Runs from before read them after it.
  const overlapped = usedBeforeMib !== undefined && patched(PATCHES.readyStepsOverlapped);
  // Awaited by the measure: a failed identity check is what the run tells meanwhile.
  const ownRead = overlapped && patched(PATCHES.measureOwnFirst) ? awaitedLater(readOwnProcesses(resolved, health.healthyAtEpochMs)) : undefined;

  log.begin('identity');
  const observedModels = api === 'openai' ? (await act.verifyIdentity({ serve })).observed : [];
  log.record('identity', start.identity(api, serve.servedModelName));

  const measuredDeltaMib = usedBeforeMib !== undefined ? await measureDelta(resolved, usedBeforeMib, log, ownRead, health.healthyAtEpochMs) : undefined;
  // The next start may go once this one is measured: given back beside the readmit and `running`,
  // which do not touch the slot (runs from before gave it back first). Since slot-given-with-running,
  // with no readmit to wait for, by `running` itself: one Update fewer, given at the same point.
  const withRunning = !serve.routerTier && saga.startSlot.held && patched(PATCHES.slotGivenWithRunning);
  const given = overlapped && !withRunning ? awaitedLater(giveStartSlot(resolved, holder, saga)) : undefined;
  if (!overlapped && !withRunning) await giveStartSlot(resolved, holder, saga);
  const readmittedTier = serve.routerTier ? await readmit(resolved, serve.routerTier, saga, log) : undefined;

  log.begin('running');
  const measured = measuredDeltaMib !== undefined && measuredDeltaMib > 0 ? { measuredMib: measuredDeltaMib } : {};
  const ledgerAfter = await ledgerUpdates().ledgerSetPhase({
    node,
    gpu,
    args: { serve: serve.name, phase: 'running', holder, ...measured, ...(withRunning ? { giveStartSlot: true } : {}) },
    updateId: `${holder}/running`,
  });
  // A ledger that kept it (built before giveStartSlot: workers roll forward together) is given it by its own Update.
  if (withRunning && ledgerAfter.startSlot?.holder === holder) await giveStartSlot(resolved, holder, saga);
  else if (withRunning) saga.startSlot.held = false;
  await given;
  log.ledgerSaid(ledgerAfter);
  log.record('running', start.running);
  return { containerId, observedModels, readmittedTier, measuredDeltaMib, ledger: ledgerAfter };
}

/** What the serve was seen to take: evidence, not a gate (concurrent bring-ups on the same GPU blur it). */
async function measureDelta(
  resolved: ResolvedServe,
  usedBeforeMib: number,
  log: StepLog,
  ownRead?: Promise<OwnDraw>,
  healthyAtEpochMs?: number,
): Promise<number | undefined> {
  log.begin('measure');
  // Since measure-own-first, its own processes are asked first and the whole GPU read only where
  // they cannot say: the reading was an nvidia-smi spawn (or a local activity on the stream) whose
  // figure went unused whenever they could. Runs from before read the GPU first, and replay that way.
  if (ownRead || patched(PATCHES.measureOwnFirst)) {
    const own = await (ownRead ?? readOwnProcesses(resolved, healthyAtEpochMs));
    if ('mib' in own) return measuredLine(resolved, own.mib, own, log);
    const gpuAfter = await gpuAfterHealth(resolved, log);
    return gpuAfter ? measuredLine(resolved, gpuAfter.usedMib - usedBeforeMib, own, log) : undefined;
  }
  const gpuAfter = await gpuAfterHealth(resolved, log);
  if (!gpuAfter) return undefined;
  // Since start-slot, by its own processes where they can say: a whole-GPU delta counts whatever
  // else moved on the card meanwhile (a stop, a process outside the ledger).
  const own = patched(PATCHES.startSlot) ? await readOwnProcesses(resolved, healthyAtEpochMs) : undefined;
  return measuredLine(resolved, own && 'mib' in own ? own.mib : gpuAfter.usedMib - usedBeforeMib, own, log);
}

/**
 * The serve's own draw by its processes on its GPU (docker top against nvidia-smi's listing), or
 * why they cannot say. `healthyAtEpochMs` (its health check's result; absent in results recorded
 * before): the listing that check started as the serve answered will do. Activity input only.
 */
function readOwnProcesses({ node, serve, gpu }: ResolvedServe, healthyAtEpochMs?: number): Promise<OwnDraw> {
  return act.measureOwnProcesses({
    node,
    serve: serve.name,
    gpuUuid: gpu.uuid,
    ...(healthyAtEpochMs !== undefined ? { listedAfterEpochMs: healthyAtEpochMs } : {}),
  });
}

/** The whole GPU's reading once the serve is healthy; null where none is read, undefined once said not measured. */
async function gpuAfterHealth({ serve, gpu }: ResolvedServe, log: StepLog): Promise<GpuReading | null | undefined> {
  try {
    // Healthy, it has taken its memory (vLLM allocates before /health answers): the latest reading will do.
    return await reads().measureGpu({ uuid: gpu.uuid, maxAgeMs: RECENT_READING_MS });
  } catch (err) {
    // nvidia-smi failing now (a driver hiccup, its timeout) must not throw away a serve that is
    // healthy and the model it loaded: the delta is said not measured. Runs before this failed.
    if (isCancellation(err) || !patched(PATCHES.measureNotAGate)) throw err;
    log.record('measure', start.notMeasured(serve.name, rootCause(err).message));
    return undefined;
  }
}

function measuredLine({ serve }: ResolvedServe, delta: number, own: OwnDraw | undefined, log: StepLog): number {
  log.record('measure', formatMeasuredDelta(serve.name, delta, serve.vramMib, measuredHow(own)).line);
  return delta;
}

/** The guarded readmit: the router lets the tier back only after its own health and identity checks. */
async function readmit({ node, serve }: ResolvedServe, tier: string, saga: Saga, log: StepLog): Promise<string | undefined> {
  log.begin('readmit');
  // Registered first: once the guarded readmit may have acted, clients may reach the serve. If
  // the run still fails (its reservation lost at `running`, a cancel mid-readmit), the tier must
  // answer 503 again, not 502 from a removed container. Quiescing a quiesced tier is a no-op.
  // Unless the serve's container is another run's by then: the tier serves that run's, and is left alone.
  const own = saga.own ? { ...saga.own, node, serve: serve.name } : undefined;
  if (patched(PATCHES.requiesceOnCompensate)) saga.add(`quiesce tier ${tier}`, () => router.quiesceIfRouted({ tier, ...(own ? { own } : {}) }));
  const r = await router.readmitIfQuiesced({ tier });
  log.record('readmit', start.readmit(tier, r));
  return r.action === 'readmitted' ? tier : undefined;
}

/**
 * A serve the ledger already holds: running with its container up is "already running, nothing
 * changed" (returns the container id); anything else is busy, and says how to clear it.
 */
export async function alreadyHeld(
  node: string,
  serve: string,
  held: { phase: string; holder: string },
  op: string,
  log: StepLog,
): Promise<{ containerId: string; message: string }> {
  const container = await reads().inspectServe({ node, serve });
  if (held.phase === 'running' && container?.running) {
    log.record('admit', admission.alreadyRunning);
    return { containerId: container.id, message: `${op}: already running, nothing changed` };
  }
  throw ApplicationFailure.create({ type: Failure.ServeBusy, message: busyMessage(op, serve, held, container), nonRetryable: true });
}

function busyMessage(op: string, serve: string, held: { phase: string; holder: string }, container: { status: string } | null | undefined): string {
  if (held.phase === 'running') {
    return (
      `${op}: the ledger holds it running (${held.holder}) but ` +
      `${container ? `its container is ${container.status}` : 'it has no container'}; nothing changed. ` +
      `\`gpures serves down ${serve}\` clears it, then bring it up again`
    );
  }
  const busy =
    `${op}: ${held.holder} holds its reservation (${held.phase}${container ? `, container ${container.status}` : held.phase === 'stopping' || held.phase === 'evicting' ? ', no container' : ', no container yet'}), ` +
    'an operation still under way; nothing changed. ';
  if (held.phase === 'stopping')
    return `${busy}It is being brought down: bring it up again once that has ended (\`gpures serves down ${serve}\` takes over a bring-down that died)`;
  if (held.phase === 'evicting')
    return `${busy}It is being evicted: bring it up again once the eviction has ended, or cancel it to keep it up: ${cancelHint(held.holder)}`;
  return `${busy}Wait for it to end, or cancel it: ${cancelHint(held.holder)} (\`gpures serves down ${serve}\` cancels it too)`;
}
