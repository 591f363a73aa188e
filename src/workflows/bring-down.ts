// serves down NAME: graceful stop, then release. Down of a serve already down succeeds and says so.
import { CancellationScope, executeChild, isCancellation, patched, proxyActivities, workflowInfo } from '@temporalio/workflow';
import { workflowIds } from '../shared/messages';
import { bringUpWorkflow } from './bring-up';
import { checkInput, rootCause, whole } from './saga';
import type { Activities } from '../activities';
import { formatLedger } from '../domain/ledger';
import { quick } from './options';
import type { DrainResult } from '../activities/eviction';
import { DEFAULT_DRAIN_TIMEOUT_S, drainFor, router, StepLog, stopServe } from './serve-steps';
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
  outcome: 'stopped' | 'already-stopped';
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

export async function bringDownWorkflow(input: BringDownInput): Promise<BringDownResult> {
  checkInput(input, { booleans: ['restore'], seconds: ['drainTimeoutS'] });
  const { workflowId, runId } = workflowInfo();
  const log = new StepLog();
  const record = (step: string, outcome: string) => log.record(step, outcome);

  const { node, serve, gpu } = await act.resolveServe({ serve: input.serve });
  const before = await act.ledgerSnapshot({ node, gpu });

  // A routed serve goes down like an eviction's victim: its tier answers 503 from now on (until a
  // bring-up's guarded readmit), and requests in flight finish before the stop. Past the drain
  // timeout the stop goes ahead: the operator asked for the serve to go down.
  let drain: DrainResult | undefined;
  const tier = serve.routerTier;
  if (tier) {
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
      throw err;
    }
  }

  const stop = await stopServe(node, serve);
  record('stop', `container ${stop.containerName}: ${stop.stop}, ${stop.remove}`);
  const release = await act.ledgerRelease({ node, gpu, args: { serve: serve.name }, updateId: `${workflowId}/${runId}/release` });
  record('release', release.released ? `released ${release.vramMib} MiB` : 'held no reservation');

  const restored: RestoreRecord[] = [];
  let ledgerAfter = release.ledger;
  if (input.restore) {
    const victims = before.reservations.filter((r) => r.phase === 'evicted' && r.evictedFor === serve.name).map((r) => r.serve);
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

  const wasDown = stop.stop !== 'stopped' && stop.remove === 'absent' && !release.released;
  const restoredNote = restored.length
    ? `; restore: ${restored.map((r) => `${r.serve} ${r.ok ? 'restored' : `failed (${r.message})`}`).join(', ')}`
    : '';
  return {
    serve: serve.name,
    outcome: wasDown ? 'already-stopped' : 'stopped',
    message:
      (wasDown
        ? `serves down ${serve.name}: already stopped, nothing changed`
        : `serves down ${serve.name}: stopped${release.released ? `, ${release.vramMib} MiB released on '${gpu.role}'` : ''}`) + restoredNote,
    gpuRole: gpu.role,
    releasedMib: release.vramMib,
    drain,
    restored,
    ledgerBefore: formatLedger(before),
    ledgerAfter: formatLedger(ledgerAfter),
    steps: log.steps,
  };
}
