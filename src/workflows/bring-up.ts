// serves up NAME: admit → start → health → identity → running. An admission the ledger denies
// starts nothing; a failure after admission removes the container and releases the MiB.
import { ApplicationFailure, proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { denialMessage, formatLedger, withoutReservation } from '../domain/ledger';
import { Failure } from '../shared/failures';
import { quick } from './options';
import { checkInput, failAndCompensate, Saga, whole } from './saga';
import { alreadyHeld, startAdmittedServe, StepLog } from './serve-steps';
import type { StepRecord } from './serve-steps';

export interface BringUpInput {
  serve: string;
}

export interface BringUpResult {
  serve: string;
  /** restored: the serve had been evicted and came back through the guarded readmit. */
  outcome: 'started' | 'restored' | 'already-running';
  message: string;
  gpuRole: string;
  vramMib: number;
  containerId?: string;
  observedModels?: string[];
  measuredDeltaMib?: number;
  readmittedTier?: string;
  ledgerBefore: string[];
  ledgerAfter: string[];
  steps: StepRecord[];
}

const act = proxyActivities<Activities>(quick);

export async function bringUpWorkflow(input: BringUpInput): Promise<BringUpResult> {
  checkInput(input, {});
  const { workflowId, runId } = workflowInfo();
  const log = new StepLog();

  const resolved = await act.resolveServe({ serve: input.serve });
  const { node, serve, gpu } = resolved;
  const base = { serve: serve.name, gpuRole: gpu.role, vramMib: serve.vramMib };

  log.begin('admit');
  const admit = await whole('admit-whole', () =>
    act.ledgerAdmit({
      node,
      // The run, not just the id: a later `serves up` of the same serve reuses the workflow id.
      args: { serve: serve.name, vramMib: serve.vramMib, class: serve.class, holder: `${workflowId}/${runId}`, gpu },
      updateId: `${workflowId}/${runId}/admit`,
    }),
  );
  const { decision } = admit;
  const ledgerBefore = formatLedger(decision.decision === 'admitted' ? withoutReservation(admit.ledger, serve.name) : admit.ledger);

  if (decision.decision === 'denied') {
    log.record('admit', `denied: over budget by ${decision.shortfallMib} MiB`);
    throw ApplicationFailure.create({
      type: Failure.AdmissionDenied,
      message: denialMessage(decision),
      nonRetryable: true,
      details: [{ ...decision, ledger: ledgerBefore, steps: log.steps }],
    });
  }

  if (decision.decision === 'already-held') {
    const held = await alreadyHeld(node, serve.name, decision, `serves up ${serve.name}`, log);
    return { ...base, outcome: 'already-running', message: held.message, containerId: held.containerId, ledgerBefore, ledgerAfter: ledgerBefore, steps: log.steps };
  }
  const restoring = Boolean(admit.wasEvicted);
  log.record('admit', `admitted ${serve.vramMib} MiB${restoring ? ' (restoring an evicted serve)' : ''}, free after ${decision.freeAfterMib} MiB`);

  const saga = new Saga();
  saga.add('release reservation', () =>
    act.ledgerRelease({ node, gpu, args: { serve: serve.name, holder: `${workflowId}/${runId}` }, updateId: `${workflowId}/${runId}/compensate-release` }),
  );
  try {
    const started = await startAdmittedServe(resolved, saga, log);
    return {
      ...base,
      outcome: restoring ? 'restored' : 'started',
      message: `serves up ${serve.name}: ${restoring ? 'restored' : 'running'}, ${serve.vramMib} MiB committed on '${gpu.role}'${
        started.readmittedTier ? `; tier ${started.readmittedTier} readmitted (identity '${serve.servedModelName}')` : ''
      }`,
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
