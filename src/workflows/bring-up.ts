// serves up NAME: admit → start → health → identity → running. An admission the ledger denies
// starts nothing; a failure after admission removes the container and releases the MiB.
import { ApplicationFailure, proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { denialMessage, formatLedger } from '../domain/ledger';
import { Failure } from '../shared/failures';
import { containerOps, quick, waitFor } from './options';
import { rootCause, Saga } from './saga';

export interface BringUpInput {
  serve: string;
}

export interface StepRecord {
  step: string;
  at: string;
  outcome: string;
}

export interface BringUpResult {
  serve: string;
  outcome: 'started' | 'already-running';
  message: string;
  gpuRole: string;
  vramMib: number;
  containerId?: string;
  observedModels?: string[];
  ledgerBefore: string[];
  ledgerAfter: string[];
  steps: StepRecord[];
}

const act = proxyActivities<Activities>(quick);
const containers = proxyActivities<Activities>(containerOps);

export async function bringUpWorkflow(input: BringUpInput): Promise<BringUpResult> {
  const { workflowId, runId } = workflowInfo();
  const steps: StepRecord[] = [];
  const record = (step: string, outcome: string) => steps.push({ step, at: new Date().toISOString(), outcome });

  const resolved = await act.resolveServe({ serve: input.serve });
  const { node, serve, gpu } = resolved;
  const base = { serve: serve.name, gpuRole: gpu.role, vramMib: serve.vramMib };

  const admit = await act.ledgerAdmit({
    node,
    // The run, not just the id: a later `serves up` of the same serve reuses the workflow id.
    args: { serve: serve.name, vramMib: serve.vramMib, class: serve.class, holder: `${workflowId}/${runId}`, gpu },
    updateId: `${workflowId}/${runId}/admit`,
  });
  const { decision } = admit;
  const ledgerBefore = formatLedger(
    decision.decision === 'admitted' ? { ...admit.ledger, reservations: admit.ledger.reservations.filter((r) => r.serve !== serve.name) } : admit.ledger,
  );

  if (decision.decision === 'denied') {
    record('admit', `denied: over budget by ${decision.shortfallMib} MiB`);
    throw ApplicationFailure.create({
      type: Failure.AdmissionDenied,
      message: denialMessage(decision),
      nonRetryable: true,
      details: [{ ...decision, ledger: ledgerBefore }],
    });
  }

  if (decision.decision === 'already-held') {
    const container = await act.inspectServe({ node, serve: serve.name });
    if (decision.phase === 'running' && container?.running) {
      record('admit', 'already running');
      return { ...base, outcome: 'already-running', message: `serves up ${serve.name}: already running, nothing changed`, containerId: container.id, ledgerBefore, ledgerAfter: ledgerBefore, steps };
    }
    throw ApplicationFailure.create({
      type: Failure.ServeBusy,
      message: `serves up ${serve.name}: its reservation is held by ${decision.holder} (${decision.phase}); nothing changed`,
      nonRetryable: true,
    });
  }
  record('admit', `admitted ${serve.vramMib} MiB, free after ${decision.freeAfterMib} MiB`);

  const saga = new Saga();
  saga.add('release reservation', () =>
    act.ledgerRelease({ node, gpu, args: { serve: serve.name }, updateId: `${workflowId}/${runId}/compensate-release` }),
  );
  let step = 'start';
  try {
    const started = await containers.startServeContainer(resolved);
    saga.add('remove container', () => containers.stopServeContainer({ node, serve: serve.name, timeoutS: serve.stopTimeoutS }));
    record('start', `container ${started.containerName} ${started.created ? 'created' : 'already running'}${started.gpuPinned ? `, pinned to ${gpu.uuid}` : ''}`);

    step = 'health';
    const deadlineEpochMs = Date.now() + serve.startTimeoutS * 1000;
    const health = await proxyActivities<Activities>(waitFor(serve.startTimeoutS)).waitHealthy({ node, serve, deadlineEpochMs });
    record('health', `200 from ${health.url} after ${health.probes} probes`);

    step = 'identity';
    const identity = await act.verifyIdentity({ serve });
    record('identity', `observed '${serve.servedModelName}'`);

    step = 'running';
    const ledger = await act.ledgerSetPhase({ node, gpu, args: { serve: serve.name, phase: 'running' }, updateId: `${workflowId}/${runId}/running` });
    record('running', 'reservation marked running');
    return {
      ...base,
      outcome: 'started',
      message: `serves up ${serve.name}: running, ${serve.vramMib} MiB committed on '${gpu.role}'`,
      containerId: started.containerId,
      observedModels: identity.observed,
      ledgerBefore,
      ledgerAfter: formatLedger(ledger),
      steps,
    };
  } catch (err) {
    const cause = rootCause(err);
    record(step, `failed: ${cause.message}`);
    await saga.compensate();
    throw ApplicationFailure.create({
      type: cause.type,
      message: `serves up ${serve.name} failed at ${step}: ${cause.message}; compensated: ${saga.compensated.join(', ') || 'nothing'}`,
      nonRetryable: true,
      cause: err instanceof Error ? err : undefined,
      details: [{ step, steps }],
    });
  }
}
