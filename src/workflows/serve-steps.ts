// The steps every way of starting a serve shares once its MiB are admitted: start → health →
// identity → running. Bring-up, acquisition and restore differ only in how they got the MiB.
import { ApplicationFailure, patched, proxyActivities, setHandler, workflowInfo } from '@temporalio/workflow';
import { progressQuery } from '../shared/messages';
import type { StepRecord } from '../shared/messages';
import { Failure } from '../shared/failures';
import type { Activities } from '../activities';
import type { DrainResult, ResolvedServe, StopResult } from '../shared/contracts';
import type { ServeSpec } from '../domain/types';
import type { LedgerState } from '../domain/ledger';
import { formatMeasuredDelta } from '../domain/physical';
import { cancelHint } from '../domain/fence';
import { containerOps, quick, routerOps, stopOptions, waitFor } from './options';
import type { Saga } from './saga';

export type { StepRecord } from '../shared/messages';

/** The operation's steps as they complete; the `progress` query lets a CLI print them live. */
export class StepLog {
  readonly steps: StepRecord[] = [];
  /** The step under way, named in the error if it fails. */
  current = 'resolve';

  constructor() {
    setHandler(progressQuery, () => this.steps);
  }

  begin(step: string): void {
    this.current = step;
  }

  record(step: string, outcome: string): void {
    this.steps.push({ step, at: new Date().toISOString(), outcome });
  }
}

const act = proxyActivities<Activities>(quick);
const containers = proxyActivities<Activities>(containerOps);
/** The router's admin calls (quiesce, readmit), shared by every workflow that takes a tier out or back. */
export const router = proxyActivities<Activities>(routerOps);

/** Graceful stop and removal of the serve's container, bounded by its own stop timeout. */
export function stopServe(node: string, serve: ServeSpec): Promise<StopResult> {
  return proxyActivities<Activities>(stopOptions(serve.stopTimeoutS)).stopServeContainer({ node, serve: serve.name, timeoutS: serve.stopTimeoutS });
}

export const DEFAULT_DRAIN_TIMEOUT_S = 120;

/** Waits until nothing is in flight to the serve (its tier at the router, and vLLM), up to timeoutS. */
export function drainFor(tier: string | undefined, serve: ServeSpec, timeoutS: number): Promise<DrainResult> {
  return proxyActivities<Activities>(waitFor(timeoutS)).drainServe({ tier, serve, deadlineEpochMs: Date.now() + timeoutS * 1000 });
}

export interface StartedServe {
  containerId: string;
  observedModels: string[];
  /** Set when the tier had been quiesced and the router let it back into rotation. */
  readmittedTier?: string;
  /** nvidia-smi's device used after health minus before start, where a probe works. */
  measuredDeltaMib?: number;
  ledger: LedgerState;
}

/** Registers the container's removal with the saga as soon as the container exists. */
export async function startAdmittedServe(resolved: ResolvedServe, saga: Saga, log: StepLog): Promise<StartedServe> {
  const { workflowId, runId } = workflowInfo();
  const { node, serve, gpu } = resolved;

  const gpuBefore = await act.measureGpu({ uuid: gpu.uuid });

  log.begin('start');
  // Registered first: a start that created the container before it failed or was cancelled must
  // not leave it running once the reservation is released. Removing an absent one is a no-op.
  saga.add('remove container', () => stopServe(node, serve));
  const started = await containers.startServeContainer(resolved);
  log.record('start', `container ${started.containerName} ${started.created ? 'created' : 'already running'}${started.gpuPinned ? `, pinned to ${gpu.uuid}` : ''}`);

  // Serves recorded before api existed are openai.
  const api = serve.api ?? 'openai';
  log.begin('health');
  const deadlineEpochMs = Date.now() + serve.startTimeoutS * 1000;
  const health = await proxyActivities<Activities>(waitFor(serve.startTimeoutS)).waitHealthy({ node, serve, deadlineEpochMs });
  log.record('health', api === 'none' ? `${health.url} stayed running (api none: no HTTP to probe)` : `200 from ${health.url} after ${health.probes} probes`);

  log.begin('identity');
  let observedModels: string[] = [];
  if (api === 'openai') {
    observedModels = (await act.verifyIdentity({ serve })).observed;
    log.record('identity', `observed '${serve.servedModelName}'`);
  } else {
    log.record('identity', `not checked: an api ${api} serve reports no model`);
  }

  let measuredDeltaMib: number | undefined;
  if (gpuBefore) {
    const gpuAfter = await act.measureGpu({ uuid: gpu.uuid });
    if (gpuAfter) {
      measuredDeltaMib = gpuAfter.usedMib - gpuBefore.usedMib;
      // Concurrent bring-ups on the same GPU blur this figure; it is evidence, not a gate.
      log.record('measure', formatMeasuredDelta(serve.name, measuredDeltaMib, serve.vramMib).line);
    }
  }

  let readmittedTier: string | undefined;
  if (serve.routerTier) {
    log.begin('readmit');
    const tier = serve.routerTier;
    // Registered first: once the guarded readmit may have acted, clients may reach the serve. If
    // the run still fails (its reservation lost at `running`, a cancel mid-readmit), the tier must
    // answer 503 again, not 502 from a removed container. Quiescing a quiesced tier is a no-op.
    if (patched('requiesce-on-compensate')) saga.add(`quiesce tier ${tier}`, () => router.quiesceIfRouted({ tier }));
    const r = await router.readmitIfQuiesced({ tier });
    if (r.action === 'readmitted') readmittedTier = tier;
    log.record(
      'readmit',
      r.action === 'readmitted'
        ? `router readmitted tier ${serve.routerTier}: health and identity passed (observed '${r.observedModel ?? '?'}')`
        : r.action === 'already-active'
          ? `tier ${serve.routerTier} already in rotation`
          : 'no router configured on this worker',
    );
  }

  log.begin('running');
  const ledger = await act.ledgerSetPhase({
    node,
    gpu,
    args: { serve: serve.name, phase: 'running', holder: `${workflowId}/${runId}`, ...(measuredDeltaMib !== undefined && measuredDeltaMib > 0 ? { measuredMib: measuredDeltaMib } : {}) },
    updateId: `${workflowId}/${runId}/running`,
  });
  log.record('running', 'reservation marked running');
  return { containerId: started.containerId, observedModels, readmittedTier, measuredDeltaMib, ledger };
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
  const container = await act.inspectServe({ node, serve });
  if (held.phase === 'running' && container?.running) {
    log.record('admit', 'already running');
    return { containerId: container.id, message: `${op}: already running, nothing changed` };
  }
  const busy = `${op}: ${held.holder} holds its reservation (${held.phase}${container ? `, container ${container.status}` : ', no container yet'}), an operation still under way; nothing changed. `;
  throw ApplicationFailure.create({
    type: Failure.ServeBusy,
    message:
      held.phase === 'running'
        ? `${op}: the ledger holds it running (${held.holder}) but ${container ? `its container is ${container.status}` : 'it has no container'}; nothing changed. ` +
          `\`gpures serves down ${serve}\` clears it, then bring it up again`
        : held.phase === 'stopping'
          ? `${busy}It is being brought down: bring it up again once that has ended (\`gpures serves down ${serve}\` takes over a bring-down that died)`
          : held.phase === 'evicting'
            ? `${busy}It is being evicted: bring it up again once the eviction has ended, or cancel it to keep it up: ${cancelHint(held.holder)}`
          : `${busy}Wait for it to end, or cancel it: ${cancelHint(held.holder)} (\`gpures serves down ${serve}\` cancels it too)`,
    nonRetryable: true,
  });
}
