// The operator's verbs as calls on Temporal: each starts (or joins) a workflow with a
// deterministic id and returns data; printing and exit codes belong to the CLI.
import type { Client } from '@temporalio/client';
import { WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { LedgerState } from '../domain/ledger';
import type { Manifest } from '../domain/types';
import { taskQueueFor, workflowIds } from '../shared/messages';
import type { BringDownResult } from '../workflows/bring-down';
import type { BringUpResult } from '../workflows/bring-up';
import type { AcquireInput, AcquireResult } from '../workflows/acquire';
import { LedgerClient } from './ledger-client';

export type OperationOutcome<R> =
  | { serve: string; workflowId: string; ok: true; result: R }
  | { serve: string; workflowId: string; ok: false; failureType: string; message: string; details?: unknown };

function describeFailure(err: unknown): { failureType: string; message: string; details?: unknown } {
  if (err instanceof WorkflowFailedError && err.cause instanceof ApplicationFailure) {
    return { failureType: err.cause.type ?? 'Error', message: err.cause.message, details: err.cause.details?.[0] };
  }
  if (err instanceof WorkflowFailedError && err.cause) return { failureType: err.cause.name, message: err.cause.message };
  throw err;
}

async function runOperation<R>(
  client: Client,
  node: string,
  workflowType: 'bringUpWorkflow' | 'bringDownWorkflow' | 'acquireWorkflow',
  workflowId: string,
  serve: string,
  input: Record<string, unknown> = { serve },
  summary = `${workflowType === 'bringDownWorkflow' ? 'serves down' : 'serves up'} ${serve}`,
): Promise<OperationOutcome<R>> {
  // USE_EXISTING: a repeated trigger joins the running operation instead of starting another.
  const handle = await client.workflow.start(workflowType, {
    workflowId,
    taskQueue: taskQueueFor(node),
    args: [input],
    workflowIdConflictPolicy: 'USE_EXISTING',
    // What the Temporal UI lists for the run, in the operator's words.
    staticSummary: `${summary} on ${node}`,
  });
  try {
    return { serve, workflowId, ok: true, result: (await handle.result()) as R };
  } catch (err) {
    return { serve, workflowId, ok: false, ...describeFailure(err) };
  }
}

export function serveUp(client: Client, node: string, serve: string): Promise<OperationOutcome<BringUpResult>> {
  return runOperation(client, node, 'bringUpWorkflow', workflowIds.bringUp(node, serve), serve);
}

export function serveDown(client: Client, node: string, serve: string, opts: { restore?: boolean } = {}): Promise<OperationOutcome<BringDownResult>> {
  return runOperation(client, node, 'bringDownWorkflow', workflowIds.bringDown(node, serve), serve, { serve, restore: Boolean(opts.restore) }, `serves down ${serve}${opts.restore ? ' --restore' : ''}`);
}

export function serveAcquire(client: Client, node: string, input: AcquireInput): Promise<OperationOutcome<AcquireResult>> {
  return runOperation(client, node, 'acquireWorkflow', workflowIds.acquire(node, input.serve), input.serve, { ...input }, `serves up ${input.serve}${input.evict ? ' --evict' : ''}${input.force ? ' --force' : ''}`);
}

export async function ledgerSnapshots(client: Client, manifest: Manifest): Promise<LedgerState[]> {
  const ledger = new LedgerClient(client);
  return Promise.all(manifest.gpus.map((gpu) => ledger.snapshot(manifest.node, gpu)));
}
