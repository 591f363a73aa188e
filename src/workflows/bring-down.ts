// serves down NAME: take the serve in the ledger → quiesce → drain → stop → release. Down of a
// serve already down succeeds and says so; down of a serve another operation is bringing up
// cancels that operation first (its compensations give the serve back), then completes.
import { ApplicationFailure, CancellationScope, executeChild, isCancellation, patched, proxyActivities, workflowInfo } from '@temporalio/workflow';
import { workflowIds } from '../shared/messages';
import { bringUpWorkflow } from './bring-up';
import { checkInput, rootCause, Saga, whole } from './saga';
import type { Activities } from '../activities';
import type { OperationEnd } from '../shared/contracts';
import { formatLedger } from '../domain/ledger';
import type { GpuSpec, ServeSpec } from '../domain/types';
import { cancelHint, holderOf } from '../domain/fence';
import type { StopDecision } from '../domain/fence';
import { Failure } from '../shared/failures';
import { quick, waitFor } from './options';
import type { DrainResult } from '../shared/contracts';
import { DEFAULT_DRAIN_TIMEOUT_S, drainFor, router, StepLog, stopServe } from './serve-steps';
import type { StopResult } from '../shared/contracts';
import type { LedgerReleaseResult } from '../shared/messages';
import type { StepRecord } from './serve-steps';

export interface BringDownInput {
  serve: string;
  /** Then bring back the serves evicted for this one (each a bring-up: health, identity, guarded readmit). */
  restore?: boolean;
  /** How long requests in flight to its tier may take before the stop; default 120 s. */
  drainTimeoutS?: number;
}

export interface RestoreRecord {
  serve: string;
  workflowId: string;
  ok: boolean;
  message: string;
  observedModels?: string[];
}

export interface BringDownResult {
  serve: string;
  /** cancelled: an operation was bringing the serve up; it was cancelled and gave back what it took. */
  outcome: 'stopped' | 'already-stopped' | 'cancelled';
  /** Operations that held the serve and were ended first. */
  ended?: OperationEnd[];
  message: string;
  gpuRole: string;
  releasedMib: number;
  /** The drain before the stop, for a serve behind the router. */
  drain?: DrainResult;
  restored: RestoreRecord[];
  ledgerBefore: string[];
  ledgerAfter: string[];
  steps: StepRecord[];
}

const act = proxyActivities<Activities>(quick);

/** How long the operation holding the serve may take to end once cancelled: its compensations stop a container and readmit a tier. */
export const OPERATION_END_TIMEOUT_S = 300;
/** Take, end the holder, take again (taking over if it ended holding the serve): more holders in between is a fight, not a race, and is refused. */
const MAX_TAKE_ATTEMPTS = 4;

export async function bringDownWorkflow(input: BringDownInput): Promise<BringDownResult> {
  checkInput(input, { booleans: ['restore'], seconds: ['drainTimeoutS'] });
  const { workflowId, runId } = workflowInfo();
  const holder = holderOf(workflowId, runId);
  const log = new StepLog();
  const record = (step: string, outcome: string) => log.record(step, outcome);

  const { node, serve, gpu } = await act.resolveServe({ serve: input.serve });
  const before = await act.ledgerSnapshot({ node, gpu });
  // Runs from before fencing released whatever was held, under whatever operation held it.
  const fenced = patched('bring-down-fenced');
  const ended: OperationEnd[] = [];
  const taken = fenced ? await takeServe(node, gpu, serve, holder, log, ended) : undefined;
  const saga = new Saga();
  if (taken) {
    // Failed or cancelled before its stop: the hold is let go as the box stands. A serve that
    // still runs and was running is running again; one whose container is down is released; one
    // this run took over still starting keeps its MiB committed until the next serves down.
    saga.add('let go of the serve', async () => {
      const c = await act.inspectServe({ node, serve: serve.name });
      if (c?.running && taken.decision === 'taken' && taken.from === 'running') {
        return act.ledgerSetPhase({ node, gpu, args: { serve: serve.name, phase: 'running', holder }, updateId: `${holder}/compensate-running` });
      }
      if (!c?.running) return act.ledgerRelease({ node, gpu, args: { serve: serve.name, holder }, updateId: `${holder}/compensate-release` });
      return undefined;
    });
  }

  // A routed serve goes down like an eviction's victim: its tier answers 503 from now on (until a
  // bring-up's guarded readmit), and requests in flight finish before the stop. Past the drain
  // timeout the stop goes ahead: the operator asked for the serve to go down.
  let drain: DrainResult | undefined;
  const tier = serve.routerTier;
  // An evicted serve is down and its tier quiesced already: nothing to drain.
  if (tier && taken?.decision !== 'evicted') {
    try {
      const q = await whole('quiesce-whole', () => router.quiesceIfRouted({ tier }));
      if (q) {
        record('quiesce', `tier ${tier} quiesced with ${q.inFlight} in flight`);
        const drainTimeoutS = input.drainTimeoutS ?? DEFAULT_DRAIN_TIMEOUT_S;
        drain = await drainFor(tier, serve, drainTimeoutS);
        record('drain', drain.drained ? `drained after ${drain.waitedMs} ms` : `not drained within ${drainTimeoutS} s (${drain.routerInFlightAtEnd} in flight); stopping anyway`);
      }
    } catch (err) {
      // Cancelled before the stop: the serve still runs, so its tier goes back into rotation
      // (left quiesced, a later `serves up` would find it running and never readmit it).
      if (isCancellation(err) && patched('bring-down-cancel-readmits')) {
        try {
          await CancellationScope.nonCancellable(() => router.readmitIfQuiesced({ tier }));
          record('quiesce', `cancelled before the stop: tier ${tier} readmitted, ${serve.name} still running`);
        } catch (readmitErr) {
          record('quiesce', `cancelled before the stop; readmit of tier ${tier} failed: ${rootCause(readmitErr).message}`);
        }
      }
      await saga.compensate();
      throw err;
    }
  }

  let stop: StopResult;
  let release: LedgerReleaseResult;
  try {
    // Fenced, a stop once issued is seen through to its release: cancelled in between, the serve
    // would stay held as stopping by a closed run, its container gone.
    const stopAndRelease = async (): Promise<[StopResult, LedgerReleaseResult]> => {
      const st = await stopServe(node, serve);
      record('stop', `container ${st.containerName}: ${st.stop}, ${st.remove}`);
      // The fenced release names this run: the ledger gives up only what this bring-down took.
      const rel = await act.ledgerRelease({ node, gpu, args: { serve: serve.name, ...(fenced ? { holder } : {}) }, updateId: `${workflowId}/${runId}/release` });
      return [st, rel];
    };
    [stop, release] = fenced ? await CancellationScope.nonCancellable(stopAndRelease) : await stopAndRelease();
  } catch (err) {
    await saga.compensate();
    throw err;
  }
  const reserved = release.released && release.vramMib > 0;
  record('release', reserved ? `released ${release.vramMib} MiB` : taken?.decision === 'evicted' ? 'held no MiB (evicted)' : 'held no reservation');

  const restored: RestoreRecord[] = [];
  let ledgerAfter = release.ledger;
  if (input.restore) {
    // Fenced, the ledger is read after the release: an acquisition this bring-down cancelled may
    // have stopped victims since the first read, and they are to come back too.
    const victims = (fenced ? release.ledger : before).reservations.filter((r) => r.phase === 'evicted' && r.evictedFor === serve.name).map((r) => r.serve);
    for (const victim of victims) {
      const workflowId = workflowIds.bringUp(node, victim);
      try {
        const r = await executeChild(bringUpWorkflow, { workflowId, args: [{ serve: victim }] });
        restored.push({ serve: victim, workflowId, ok: true, message: r.message, observedModels: r.observedModels });
      } catch (err) {
        // One victim that cannot come back must not keep the others down.
        restored.push({ serve: victim, workflowId, ok: false, message: rootCause(err).message });
      }
      record('restore', restored[restored.length - 1]?.message ?? '');
    }
    if (victims.length) ledgerAfter = await act.ledgerSnapshot({ node, gpu });
    else record('restore', `no serve was evicted for ${serve.name}`);
  }

  const wasDown = stop.stop !== 'stopped' && stop.remove === 'absent' && !reserved;
  const restoredNote = restored.length
    ? `; restore: ${restored.map((r) => `${r.serve} ${r.ok ? 'restored' : `failed (${r.message})`}`).join(', ')}`
    : '';
  const cancelled = ended.filter((e) => e.outcome === 'cancelled');
  const tookOver = taken?.decision === 'taken' ? ended.find((e) => e.holder === taken.previousHolder && e.outcome !== 'cancelled') : undefined;
  const notes = [
    cancelled.length ? `cancelled ${cancelled.map((e) => e.holder).join(', ')} (it gave back what it took)` : '',
    tookOver ? `took over the hold of ${tookOver.holder}, which had ended ${tookOver.closedAs ?? ''} without giving it back` : '',
  ]
    .filter(Boolean)
    .join('; ');
  let message: string;
  if (taken?.decision === 'evicted') {
    message = `serves down ${serve.name}: already stopped (evicted for ${taken.evictedFor ?? 'another serve'}); it stays down and is no longer restored with it`;
  } else if (wasDown && notes) {
    message = `serves down ${serve.name}: ${notes}; nothing was left running`;
  } else if (wasDown) {
    message = input.restore && restored.length ? `serves down ${serve.name}: was not running, nothing to stop` : `serves down ${serve.name}: already stopped, nothing changed`;
  } else {
    message = `serves down ${serve.name}: ${notes ? `${notes}; ` : ''}stopped${reserved ? `, ${release.vramMib} MiB released on '${gpu.role}'` : ''}`;
  }
  return {
    serve: serve.name,
    outcome: cancelled.length && wasDown ? 'cancelled' : wasDown || taken?.decision === 'evicted' ? 'already-stopped' : 'stopped',
    ...(ended.length ? { ended } : {}),
    message: message + restoredNote,
    gpuRole: gpu.role,
    releasedMib: release.vramMib,
    drain,
    restored,
    ledgerBefore: formatLedger(before),
    ledgerAfter: formatLedger(ledgerAfter),
    steps: log.steps,
  };
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
async function takeServe(node: string, gpu: GpuSpec, serve: ServeSpec, holder: string, log: StepLog, ended: OperationEnd[]): Promise<StopDecision> {
  // The holder's own compensations stop this serve's container: they get its stop timeout and more.
  const endTimeoutS = Math.max(OPERATION_END_TIMEOUT_S, serve.stopTimeoutS + 180);
  let takeOver: { takeOverFrom: string; victimsDown: string[] } | undefined;
  for (let attempt = 1; ; attempt++) {
    log.begin('take');
    // Whole: a take that landed is known, so its compensation (let go) is registered and runs.
    const decision = await CancellationScope.nonCancellable(() =>
      act.ledgerBeginStop({ node, gpu, args: { serve: serve.name, holder, class: serve.class, ...(takeOver ?? {}) }, updateId: `${holder}/take/${attempt}` }),
    );
    if (decision.decision === 'taken') {
      log.record('take', `${serve.name} held for this bring-down (was ${decision.from}${takeOver ? `, taken over from ${takeOver.takeOverFrom}, which had ended` : ''})`);
      await readmitVictims(decision.victimsRunning ?? [], log);
      return decision;
    }
    if (decision.decision === 'absent') {
      log.record('take', `${serve.name} holds no reservation; held for this bring-down while a stray container is stopped`);
      return decision;
    }
    if (decision.decision === 'evicted') {
      log.record('take', `${serve.name} was evicted for ${decision.evictedFor ?? '?'}: it stays down, off that serve's restore list`);
      return decision;
    }
    const op = decision.operation;
    const end = ended.find((e) => e.holder === op.holder);
    if (end && end.outcome !== 'running') {
      // It has ended and still holds the serve: take its hold over, with its victims as the box has them.
      const victimsDown = await victimsDownFor(node, gpu, serve.name);
      log.record('take', `${op.holder} (${op.phase}) ended ${end.closedAs ?? ''} without giving ${serve.name} back: taking it over${victimsDown.length ? `; its victims ${victimsDown.join(', ')} are down` : ''}`);
      takeOver = { takeOverFrom: op.holder, victimsDown };
      continue;
    }
    const mode = op.phase === 'evicting' ? 'status' : op.phase === 'stopping' ? 'wait' : 'cancel';
    if (attempt < MAX_TAKE_ATTEMPTS) {
      log.record('take', `${op.holder} holds ${serve.name} (${op.phase}): ${mode === 'cancel' ? 'cancelling it' : mode === 'wait' ? 'waiting for it' : 'asking whether it still runs'}`);
      log.begin(mode === 'cancel' ? 'cancel' : 'wait');
      const e = await proxyActivities<Activities>(waitFor(endTimeoutS)).endOperation({ holder: op.holder, timeoutS: endTimeoutS, mode });
      if (e.outcome !== 'running') {
        ended.push(e);
        log.record(
          mode === 'cancel' ? 'cancel' : 'wait',
          e.outcome === 'cancelled' ? `${op.holder} (${op.phase}) cancelled; it ended after ${e.waitedMs} ms` : `${op.holder} (${op.phase}) ended ${e.closedAs ?? ''} after ${e.waitedMs} ms`,
        );
        continue;
      }
    }
    const why =
      op.phase === 'evicting'
        ? `it is being evicted for ${op.evictedFor ?? '?'} by ${op.holder}, which stops it unless its drain times out`
        : `${op.holder} holds it (${op.phase}) after ${attempt} attempts to take it`;
    log.record('take', `refused: ${why}`);
    throw ApplicationFailure.create({
      type: Failure.ServeBusy,
      message: `serves down ${serve.name}: ${why}; ${ended.length ? `ended meanwhile: ${ended.map((e) => e.holder).join(', ')}` : 'nothing changed'}. To keep it up instead, cancel that operation: ${cancelHint(op.holder)}`,
      nonRetryable: true,
      details: [{ operation: op, steps: log.steps }],
    });
  }
}

/** The victims of this serve's acquisition whose containers are down, read from the box. */
async function victimsDownFor(node: string, gpu: GpuSpec, acquirer: string): Promise<string[]> {
  const l = await act.ledgerSnapshot({ node, gpu });
  const down: string[] = [];
  for (const r of l.reservations) {
    if (r.phase === 'evicting' && r.evictedFor === acquirer && !(await act.inspectServe({ node, serve: r.serve }))?.running) down.push(r.serve);
  }
  return down;
}

/** Victims back to running after their acquisition was taken over: their tiers go back into rotation through the guard. */
async function readmitVictims(victims: string[], log: StepLog): Promise<void> {
  for (const v of victims) {
    const { serve } = await act.resolveServe({ serve: v });
    if (!serve.routerTier) continue;
    const tier = serve.routerTier;
    try {
      const r = await router.readmitIfQuiesced({ tier });
      log.record('take', `${v} still runs: tier ${tier} ${r.action}`);
    } catch (err) {
      log.record('take', `${v} still runs; readmit of tier ${tier} failed: ${rootCause(err).message}`);
    }
  }
}
