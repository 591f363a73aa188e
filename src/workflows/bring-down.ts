// serves down NAME: graceful stop, then release. Down of a serve already down succeeds and says so.
import { proxyActivities, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { formatLedger } from '../domain/ledger';
import { containerOps, quick } from './options';
import type { StepRecord } from './serve-steps';

export interface BringDownInput {
  serve: string;
}

export interface BringDownResult {
  serve: string;
  outcome: 'stopped' | 'already-stopped';
  message: string;
  gpuRole: string;
  releasedMib: number;
  ledgerBefore: string[];
  ledgerAfter: string[];
  steps: StepRecord[];
}

const act = proxyActivities<Activities>(quick);

export async function bringDownWorkflow(input: BringDownInput): Promise<BringDownResult> {
  const { workflowId, runId } = workflowInfo();
  const steps: StepRecord[] = [];
  const record = (step: string, outcome: string) => steps.push({ step, at: new Date().toISOString(), outcome });

  const { node, serve, gpu } = await act.resolveServe({ serve: input.serve });
  const before = await act.ledgerSnapshot({ node, gpu });
  const stop = await proxyActivities<Activities>({ ...containerOps, startToCloseTimeout: `${serve.stopTimeoutS + 60}s` }).stopServeContainer({
    node,
    serve: serve.name,
    timeoutS: serve.stopTimeoutS,
  });
  record('stop', `container ${stop.containerName}: ${stop.stop}, ${stop.remove}`);
  const release = await act.ledgerRelease({ node, gpu, args: { serve: serve.name }, updateId: `${workflowId}/${runId}/release` });
  record('release', release.released ? `released ${release.vramMib} MiB` : 'held no reservation');

  const wasDown = stop.stop !== 'stopped' && stop.remove === 'absent' && !release.released;
  return {
    serve: serve.name,
    outcome: wasDown ? 'already-stopped' : 'stopped',
    message: wasDown
      ? `serves down ${serve.name}: already stopped, nothing changed`
      : `serves down ${serve.name}: stopped${release.released ? `, ${release.vramMib} MiB released on '${gpu.role}'` : ''}`,
    gpuRole: gpu.role,
    releasedMib: release.vramMib,
    ledgerBefore: formatLedger(before),
    ledgerAfter: formatLedger(release.ledger),
    steps,
  };
}
