// On-demand acquisition: if the serve fits it is a bring-up; if not and eviction was asked,
// the ledger picks victims and holds their MiB for this acquirer, then for each victim:
// quiesce its tier → drain → stop → confirm the VRAM came back → hand the MiB over → start.
import { ApplicationFailure, patched, workflowInfo } from '@temporalio/workflow';
import type { ResolvedServe } from '../shared/contracts';
import { denialMessage, formatLedger } from '../domain/ledger';
import type { LedgerState } from '../domain/ledger';
import { evictionOutlook, heldForAcquirers } from '../domain/eviction';
import type { EvictionOutlook, Victim } from '../domain/eviction';
import type { AcquireDecision } from '../shared/messages';
import { holderOf } from '../domain/fence';
import { Failure } from '../shared/failures';
import { admission, eviction } from '../shared/wording';
import { alreadyHeld, startServe } from './bring-up';
import { PATCHES } from './patches';
import { act, router, waiting } from './proxies';
import { failAndCompensate, Saga, whole } from './saga';
import { checkInput } from './input';
import { startLease } from './lease';
import { formatDuration, leaseRequestProblem } from '../domain/lease';
import { DEFAULT_DRAIN_TIMEOUT_S, DEFAULT_RELEASE_TIMEOUT_S, drainFor, stopServe } from './steps';
import { StepLog } from './step-log';
import type { AcquireInput, AcquireResult, VictimRecord } from '../shared/operations';

export async function acquireWorkflow(input: AcquireInput): Promise<AcquireResult> {
  checkInput(input, { booleans: ['evict', 'force'], seconds: ['drainTimeoutS', 'releaseTimeoutS'], other: { lease: leaseRequestProblem } });
  const { workflowId, runId } = workflowInfo();
  const holder = holderOf(workflowId, runId);
  const op = `serves up ${input.serve}${input.evict ? ' --evict' : ''}`;
  const log = new StepLog();

  const resolved = await act.resolveServe({ serve: input.serve });
  const { node, serve, gpu } = resolved;
  const base = { serve: serve.name, gpuRole: gpu.role, vramMib: serve.vramMib };

  log.begin('admit');
  const before = await act.ledgerSnapshot({ node, gpu });
  const ledgerBefore = formatLedger(before);
  const { decision, ledger } = await whole(PATCHES.admitWhole, () =>
    act.ledgerAcquire({
      node,
      args: { serve: serve.name, vramMib: serve.vramMib, class: serve.class, holder, gpu, evict: Boolean(input.evict), minResidencyS: serve.minResidencyS },
      updateId: `${holder}/acquire`,
    }),
  );
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
    return {
      ...base,
      outcome: 'already-running',
      message: held.message,
      containerId: held.containerId,
      victims: [],
      ledgerBefore,
      ledgerAfter: ledgerBefore,
      steps: log.steps,
    };
  }

  const saga = new Saga();
  const evicting: Eviction = { node, acquirer: resolved, input, holder, saga, log, stopped: [] };
  if (decision.decision === 'admitted') {
    log.record('admit', admission.admitted(serve.vramMib, decision.freeAfterMib));
    saga.add('release reservation', () => act.ledgerRelease({ node, gpu, args: { serve: serve.name, holder }, updateId: `${holder}/compensate-release` }));
  } else {
    log.record(
      'plan',
      admission.plan(
        decision.victims.map((v) => v.serve),
        decision.reason,
      ),
    );
    saga.add('abort eviction', () => abortEviction(evicting, decision.victims));
  }

  try {
    const victims: VictimRecord[] = [];
    if (decision.decision === 'evicting') {
      // Histories recorded before the preflight existed replay without it.
      if (patched(PATCHES.evictionPreflight)) await preflight(evicting, decision.victims);
      for (const v of decision.victims) victims.push(await evictVictim(evicting, v));
    }
    const started = await startServe(resolved, saga, log);
    const evicted = victims.map((v) => v.serve);
    const lease = input.lease ? await startLease(node, serve, holder, input.lease, log) : undefined;
    return {
      ...base,
      outcome: 'started',
      message:
        `${op}: running, ${serve.vramMib} MiB committed on '${gpu.role}'${evicted.length ? `; evicted ${evicted.join(', ')}` : ''}` +
        (lease ? `; ${lease.kind === 'idle' ? 'idle lease' : 'lease'} ${formatDuration(lease.seconds * 1000)} (${lease.workflowId})` : ''),
      ...(lease ? { lease } : {}),
      evictionReason: decision.decision === 'evicting' ? decision.reason : undefined,
      victims,
      containerId: started.containerId,
      observedModels: started.observedModels,
      measuredDeltaMib: started.measuredDeltaMib,
      ledgerBefore,
      ledgerAfter: formatLedger(started.ledger),
      steps: log.steps,
    };
  } catch (err) {
    throw await failAndCompensate(op, err, saga, log, eviction.victimsDown(evicting.stopped));
  }
}

/** One acquisition's eviction: what each victim's steps need, and the victims stopped so far. */
interface Eviction {
  node: string;
  acquirer: ResolvedServe;
  input: AcquireInput;
  holder: string;
  saga: Saga;
  log: StepLog;
  /** Victims whose container this run stopped: they stay evicted whatever happens next. */
  stopped: string[];
}

/** Image, nvidia-smi and every victim's readmit path are checked before any victim is touched. */
async function preflight({ acquirer, log }: Eviction, victims: Victim[]): Promise<void> {
  log.begin('preflight');
  const pre = await router.preflightEviction({ acquirer: acquirer.serve.name, gpuUuid: acquirer.gpu.uuid, victims: victims.map((v) => v.serve) });
  log.record('preflight', eviction.preflight(pre));
}

/**
 * The compensation: which victims are down is read from the box, not assumed (a stop may have
 * acted before it failed). Those stay evicted; the others go back to running; the held MiB are let go.
 */
async function abortEviction({ node, acquirer, holder }: Eviction, victims: Victim[]) {
  const down: string[] = [];
  for (const v of victims) if (!(await act.inspectServe({ node, serve: v.serve }))?.running) down.push(v.serve);
  return act.ledgerAbortEviction({
    node,
    gpu: acquirer.gpu,
    args: { acquirer: acquirer.serve.name, stopped: down, holder },
    updateId: `${holder}/compensate-abort`,
  });
}

/** quiesce its tier → drain → stop → confirm the VRAM came back → hand its MiB to the acquirer. */
async function evictVictim(e: Eviction, planned: Victim): Promise<VictimRecord> {
  const { node, acquirer, input, holder, saga, log } = e;
  const { gpu } = acquirer;
  const { serve: victim } = await act.resolveServe({ serve: planned.serve });
  const tier = victim.routerTier;
  const record: VictimRecord = { serve: victim.name, vramMib: victim.vramMib, tier, inFlightAtStop: 0, wasRunning: true };

  let withdrawReadmit = () => undefined as void;
  if (tier) {
    log.begin(`quiesce ${victim.name}`);
    // Registered first: a quiesce that acted before it failed must still be undone.
    withdrawReadmit = saga.add(`readmit tier ${tier}`, () => router.readmitIfQuiesced({ tier }));
    const q = await whole(PATCHES.quiesceWhole, () => router.quiesceTier({ tier }));
    record.inFlightAtQuiesce = q.inFlight;
    log.record(`quiesce ${victim.name}`, eviction.quiesced(tier, q.inFlight));
  }

  // Read while the victim still holds its VRAM, before the drain: the stop then follows the last
  // response with nothing else in between.
  const container = await act.inspectServe({ node, serve: victim.name });
  record.wasRunning = Boolean(container?.running);
  const gpuBefore = record.wasRunning ? await act.readGpu({ uuid: gpu.uuid }) : undefined;

  log.begin(`drain ${victim.name}`);
  const drainTimeoutS = input.drainTimeoutS ?? DEFAULT_DRAIN_TIMEOUT_S;
  const drain = await drainFor(tier, victim, drainTimeoutS);
  record.drain = drain;
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

  log.begin(`stop ${victim.name}`);
  const stop = await stopServe(node, victim);
  // The victim is down: readmitting its tier would route to nothing, and it stays evicted.
  withdrawReadmit();
  e.stopped.push(victim.name);
  record.stopIssuedAtEpochMs = stop.issuedAtEpochMs;
  log.record(`stop ${victim.name}`, eviction.stopped(stop));

  log.begin(`release ${victim.name}`);
  if (gpuBefore) {
    const releaseTimeoutS = input.releaseTimeoutS ?? DEFAULT_RELEASE_TIMEOUT_S;
    record.vram = await waiting(releaseTimeoutS).confirmVramReleased({
      gpuUuid: gpu.uuid,
      victim: victim.name,
      usedBeforeMib: gpuBefore.usedMib,
      // What it was seen to take when it came up, else its reservation: a serve reserved with
      // headroom gives back less than it reserved.
      expectedMib: Math.min(planned.measuredMib ?? victim.vramMib, victim.vramMib),
      deadlineEpochMs: Date.now() + releaseTimeoutS * 1000,
    });
    log.record(`release ${victim.name}`, eviction.vramBack(record.vram, gpu.uuid));
  } else {
    log.record(`release ${victim.name}`, eviction.notRunning);
  }
  // Names this run: only the eviction that holds the victim hands its MiB over.
  const args = { victim: victim.name, acquirer: acquirer.serve.name, holder };
  await act.ledgerVictimReleased({ node, gpu, args, updateId: `${holder}/victim-released/${victim.name}` });
  return record;
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
