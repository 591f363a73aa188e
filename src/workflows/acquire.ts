// On-demand acquisition: if the serve fits it is a bring-up; if not and eviction was asked,
// the ledger picks victims and holds their MiB for this acquirer, then for each victim:
// quiesce its tier → drain → stop → confirm the VRAM came back → hand the MiB over → start.
import { ApplicationFailure, patched, proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { DrainResult, ResolvedServe, VramReleaseResult } from '../shared/contracts';
import { denialMessage, formatLedger } from '../domain/ledger';
import type { Victim } from '../domain/eviction';
import { holderOf } from '../domain/fence';
import { Failure } from '../shared/failures';
import { quick, waitFor } from './options';
import { checkInput, failAndCompensate, Saga, whole } from './saga';
import { alreadyHeld, DEFAULT_DRAIN_TIMEOUT_S, drainFor, router, startAdmittedServe, StepLog, stopServe } from './serve-steps';
import type { StepRecord } from './serve-steps';

export interface AcquireInput {
  serve: string;
  /** Evict evictable serves on the same GPU when the serve does not fit. */
  evict?: boolean;
  /** Stop victims even when their drain times out. */
  force?: boolean;
  /** Per victim; default 120 s. */
  drainTimeoutS?: number;
  /** How long nvidia-smi may take to show a victim's VRAM back; default 30 s. */
  releaseTimeoutS?: number;
}

export interface VictimRecord {
  serve: string;
  vramMib: number;
  tier?: string;
  inFlightAtQuiesce?: number;
  drain?: DrainResult;
  inFlightAtStop: number;
  wasRunning: boolean;
  stopIssuedAtEpochMs?: number;
  vram?: VramReleaseResult;
}

export interface AcquireResult {
  serve: string;
  outcome: 'started' | 'already-running';
  message: string;
  gpuRole: string;
  vramMib: number;
  evictionReason?: string;
  victims: VictimRecord[];
  containerId?: string;
  observedModels?: string[];
  measuredDeltaMib?: number;
  ledgerBefore: string[];
  ledgerAfter: string[];
  steps: StepRecord[];
}

const act = proxyActivities<Activities>(quick);

export async function acquireWorkflow(input: AcquireInput): Promise<AcquireResult> {
  checkInput(input, { booleans: ['evict', 'force'], seconds: ['drainTimeoutS', 'releaseTimeoutS'] });
  const { workflowId, runId } = workflowInfo();
  const op = `serves up ${input.serve}${input.evict ? ' --evict' : ''}`;
  const log = new StepLog();
  const ids = (what: string) => `${workflowId}/${runId}/${what}`;

  const resolved = await act.resolveServe({ serve: input.serve });
  const { node, serve, gpu } = resolved;
  const base = { serve: serve.name, gpuRole: gpu.role, vramMib: serve.vramMib };
  const holder = holderOf(workflowId, runId);

  log.begin('admit');
  const before = await act.ledgerSnapshot({ node, gpu });
  const ledgerBefore = formatLedger(before);
  const { decision } = await whole('admit-whole', () =>
    act.ledgerAcquire({
      node,
      args: { serve: serve.name, vramMib: serve.vramMib, class: serve.class, holder, gpu, evict: Boolean(input.evict) },
      updateId: ids('acquire'),
    }),
  );

  if (decision.decision === 'denied') {
    const hint =
      decision.evictableMib !== undefined
        ? `; evictable serves on '${gpu.role}' hold only ${decision.evictableMib} MiB`
        : input.evict
          ? ''
          : ' (add --evict to evict evictable serves)';
    log.record('admit', `denied: short by ${decision.shortfallMib} MiB${hint}`);
    throw ApplicationFailure.create({
      type: Failure.AdmissionDenied,
      message: `${denialMessage(decision)}${hint}`,
      nonRetryable: true,
      details: [{ ...decision, ledger: ledgerBefore, steps: log.steps }],
    });
  }
  if (decision.decision === 'already-held') {
    const held = await alreadyHeld(node, serve.name, decision, op, log);
    return { ...base, outcome: 'already-running', message: held.message, containerId: held.containerId, victims: [], ledgerBefore, ledgerAfter: ledgerBefore, steps: log.steps };
  }

  const saga = new Saga();
  const victims: VictimRecord[] = [];
  const stopped: string[] = [];
  let evictionReason: string | undefined;

  if (decision.decision === 'admitted') {
    log.record('admit', `admitted ${serve.vramMib} MiB, free after ${decision.freeAfterMib} MiB`);
    saga.add('release reservation', () => act.ledgerRelease({ node, gpu, args: { serve: serve.name, holder }, updateId: ids('compensate-release') }));
  } else {
    evictionReason = decision.reason;
    log.record('plan', `victims ${decision.victims.map((v) => v.serve).join(', ')}: ${decision.reason}`);
    // Which victims are down is read from the box, not assumed: a stop may have acted before it
    // failed. Those stay evicted; the others go back to running; the held MiB are let go.
    const planned = decision.victims.map((v) => v.serve);
    saga.add('abort eviction', async () => {
      const down: string[] = [];
      for (const v of planned) if (!(await act.inspectServe({ node, serve: v }))?.running) down.push(v);
      return act.ledgerAbortEviction({ node, gpu, args: { acquirer: serve.name, stopped: down, holder }, updateId: ids('compensate-abort') });
    });
  }

  try {
    if (decision.decision === 'evicting') {
      // Histories recorded before the preflight existed replay without it.
      if (patched('eviction-preflight')) {
        log.begin('preflight');
        const pre = await router.preflightEviction({ acquirer: serve.name, gpuUuid: gpu.uuid, victims: decision.victims.map((v) => v.serve) });
        const tiers = pre.tiers.map((t) => `, tier ${t.tier} can readmit ${t.serve}`).join('');
        const smi = pre.gpu ? `nvidia-smi reads ${pre.gpu.uuid} (${pre.gpu.usedMib} of ${pre.gpu.totalMib} MiB used)` : 'no victim running (no VRAM to confirm)';
        log.record('preflight', `image ${pre.image} present, ${smi}${tiers}`);
      }
      for (const v of decision.victims) {
        victims.push(await evictVictim(node, v, resolved, input, saga, log, ids, stopped));
      }
    }
    const started = await startAdmittedServe(resolved, saga, log);
    const evicted = victims.map((v) => v.serve);
    return {
      ...base,
      outcome: 'started',
      message: `${op}: running, ${serve.vramMib} MiB committed on '${gpu.role}'${evicted.length ? `; evicted ${evicted.join(', ')}` : ''}`,
      evictionReason,
      victims,
      containerId: started.containerId,
      observedModels: started.observedModels,
      measuredDeltaMib: started.measuredDeltaMib,
      ledgerBefore,
      ledgerAfter: formatLedger(started.ledger),
      steps: log.steps,
    };
  } catch (err) {
    const down = stopped.length ? `; victims now down: ${stopped.join(', ')} (restore with gpures serves up ${stopped.join(' ')})` : '';
    throw await failAndCompensate(op, err, saga, log, down);
  }
}

async function evictVictim(
  node: string,
  planned: Victim,
  acquirer: ResolvedServe,
  input: AcquireInput,
  saga: Saga,
  log: StepLog,
  ids: (what: string) => string,
  stopped: string[],
): Promise<VictimRecord> {
  const { serve: victim } = await act.resolveServe({ serve: planned.serve });
  const gpu = acquirer.gpu;
  const tier = victim.routerTier;
  const record: VictimRecord = { serve: victim.name, vramMib: victim.vramMib, tier, inFlightAtStop: 0, wasRunning: true };

  let withdrawReadmit = () => undefined as void;
  if (tier) {
    log.begin(`quiesce ${victim.name}`);
    // Registered first: a quiesce that acted before it failed must still be undone.
    withdrawReadmit = saga.add(`readmit tier ${tier}`, () => router.readmitIfQuiesced({ tier }));
    const q = await whole('quiesce-whole', () => router.quiesceTier({ tier }));
    record.inFlightAtQuiesce = q.inFlight;
    log.record(`quiesce ${victim.name}`, `tier ${tier} quiesced with ${q.inFlight} in flight`);
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
  if (!drain.drained) {
    const still = `${drain.routerInFlightAtEnd} in flight at the router${drain.vllmRunningAtEnd !== null ? `, ${drain.vllmRunningAtEnd} running in vLLM` : ''}`;
    if (!input.force) {
      throw ApplicationFailure.create({ type: Failure.DrainTimeout, message: `${victim.name} did not drain within ${drainTimeoutS} s (${still})`, nonRetryable: true, details: [drain] });
    }
    log.record(`drain ${victim.name}`, `not drained within ${drainTimeoutS} s (${still}); stopping anyway (--force)`);
  } else {
    log.record(`drain ${victim.name}`, `drained after ${drain.waitedMs} ms (${drain.routerInFlightAtStart} in flight at start)`);
  }
  record.inFlightAtStop = drain.routerInFlightAtEnd;

  log.begin(`stop ${victim.name}`);
  const stop = await stopServe(node, victim);
  // The victim is down: readmitting its tier would route to nothing, and it stays evicted.
  withdrawReadmit();
  stopped.push(victim.name);
  record.stopIssuedAtEpochMs = stop.issuedAtEpochMs;
  log.record(`stop ${victim.name}`, `container ${stop.containerName}: ${stop.stop}, ${stop.remove}`);

  log.begin(`release ${victim.name}`);
  if (gpuBefore) {
    const releaseTimeoutS = input.releaseTimeoutS ?? 30;
    record.vram = await proxyActivities<Activities>(waitFor(releaseTimeoutS)).confirmVramReleased({
      gpuUuid: gpu.uuid,
      victim: victim.name,
      usedBeforeMib: gpuBefore.usedMib,
      // What it was seen to take when it came up, else its reservation: a serve reserved with
      // headroom gives back less than it reserved.
      expectedMib: Math.min(planned.measuredMib ?? victim.vramMib, victim.vramMib),
      deadlineEpochMs: Date.now() + releaseTimeoutS * 1000,
    });
    log.record(`release ${victim.name}`, `nvidia-smi: ${record.vram.releasedMib} MiB back on ${gpu.uuid} (used ${record.vram.usedBeforeMib} → ${record.vram.usedAfterMib} MiB)`);
  } else {
    log.record(`release ${victim.name}`, 'container was not running: its VRAM counts as released');
  }
  // Names this run: only the eviction that holds the victim hands its MiB over.
  const { workflowId, runId } = workflowInfo();
  await act.ledgerVictimReleased({ node, gpu, args: { victim: victim.name, acquirer: acquirer.serve.name, holder: holderOf(workflowId, runId) }, updateId: ids(`victim-released/${victim.name}`) });
  return record;
}
