// The operator's verbs as calls on Temporal: each starts (or joins) a workflow with a
// deterministic id and returns data; printing and exit codes belong to the CLI.
import type { Client } from '@temporalio/client';
import { WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import type { LedgerState } from '../domain/ledger';
import type { Manifest } from '../domain/types';
import { progressQuery, taskQueueFor, workflowIds } from '../shared/messages';
import type { StepRecord } from '../shared/messages';
import { followSteps } from './follow';
import { operationSearchAttributes } from './search-attributes';
import type { BringDownResult } from '../workflows/bring-down';
import type { BringUpResult } from '../workflows/bring-up';
import type { AcquireInput, AcquireResult } from '../workflows/acquire';
import { LedgerClient } from '../adapters/ledger/ledger-client';

export type OperationOutcome<R> =
  | { serve: string; workflowId: string; runId: string; ok: true; result: R }
  | { serve: string; workflowId: string; runId: string; ok: false; failureType: string; message: string; details?: unknown };

function describeFailure(err: unknown): { failureType: string; message: string; details?: unknown } {
  if (err instanceof WorkflowFailedError && err.cause instanceof ApplicationFailure) {
    return { failureType: err.cause.type ?? 'Error', message: err.cause.message, details: err.cause.details?.[0] };
  }
  if (err instanceof WorkflowFailedError && err.cause) return { failureType: err.cause.name, message: err.cause.message };
  throw err;
}

/**
 * A cancelled operation carries no message of its own: what it did is its last step, the
 * compensation it ran (a `serves down` of the same serve cancels a bring-up, as does the UI).
 */
async function describeCancellation(err: unknown, steps: () => Promise<StepRecord[]>): Promise<{ failureType: string; message: string } | undefined> {
  if (!(err instanceof WorkflowFailedError && err.cause instanceof CancelledFailure)) return undefined;
  const last = (await steps().catch(() => [] as StepRecord[])).filter((s) => s.step === 'compensate').pop();
  return { failureType: 'CancelledFailure', message: `${last?.outcome ?? 'cancelled'} (cancelled by a serves down of it, or from the UI)` };
}

async function runOperation<R>(
  client: Client,
  node: string,
  workflowType: 'bringUpWorkflow' | 'bringDownWorkflow' | 'acquireWorkflow',
  workflowId: string,
  serve: string,
  input: Record<string, unknown> = { serve },
  summary = `${workflowType === 'bringDownWorkflow' ? 'serves down' : 'serves up'} ${serve}`,
  onStep?: (step: StepRecord) => void,
): Promise<OperationOutcome<R>> {
  const operation = summary.split(' ').slice(0, 2).join(' ');
  const typedSearchAttributes = await operationSearchAttributes(client, node, serve, operation);
  // USE_EXISTING: a repeated trigger joins the running operation instead of starting another.
  const handle = await client.workflow.start(workflowType, {
    ...(typedSearchAttributes ? { typedSearchAttributes } : {}),
    workflowId,
    taskQueue: taskQueueFor(node),
    args: [input],
    workflowIdConflictPolicy: 'USE_EXISTING',
    // What the Temporal UI lists for the run, in the operator's words.
    staticSummary: `${summary} on ${node}`,
  });
  const result = handle.result();
  const follower = onStep ? followSteps(() => handle.query(progressQuery), onStep) : undefined;
  await follower?.until(result);
  let outcome: OperationOutcome<R>;
  // The run this call started or joined: a workflow id names every run of the operation on that serve.
  const runId = handle.firstExecutionRunId;
  try {
    outcome = { serve, workflowId, runId, ok: true, result: (await result) as R };
  } catch (err) {
    outcome = { serve, workflowId, runId, ok: false, ...(await describeCancellation(err, () => handle.query(progressQuery))) ?? describeFailure(err) };
  }
  // The steps the last poll did not see: a quick operation may finish between two polls.
  const steps = outcome.ok ? (outcome.result as { steps?: StepRecord[] }).steps : (outcome.details as { steps?: StepRecord[] } | undefined)?.steps;
  if (steps) follower?.report(steps);
  return outcome;
}

export function serveUp(client: Client, node: string, serve: string, onStep?: (step: StepRecord) => void): Promise<OperationOutcome<BringUpResult>> {
  return runOperation(client, node, 'bringUpWorkflow', workflowIds.bringUp(node, serve), serve, { serve }, undefined, onStep);
}

export function serveDown(
  client: Client,
  node: string,
  serve: string,
  opts: { restore?: boolean; onStep?: (step: StepRecord) => void } = {},
): Promise<OperationOutcome<BringDownResult>> {
  const summary = `serves down ${serve}${opts.restore ? ' --restore' : ''}`;
  return runOperation(client, node, 'bringDownWorkflow', workflowIds.bringDown(node, serve), serve, { serve, restore: Boolean(opts.restore) }, summary, opts.onStep);
}

export function serveAcquire(client: Client, node: string, input: AcquireInput, onStep?: (step: StepRecord) => void): Promise<OperationOutcome<AcquireResult>> {
  const summary = `serves up ${input.serve}${input.evict ? ' --evict' : ''}${input.force ? ' --force' : ''}`;
  return runOperation(client, node, 'acquireWorkflow', workflowIds.acquire(node, input.serve), input.serve, { ...input }, summary, onStep);
}

export async function ledgerSnapshots(client: Client, manifest: Manifest): Promise<LedgerState[]> {
  const ledger = new LedgerClient(client);
  return Promise.all(manifest.gpus.map((gpu) => ledger.snapshot(manifest.node, gpu)));
}
