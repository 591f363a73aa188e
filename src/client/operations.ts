// The operator's verbs as calls on Temporal: each starts (or joins) a workflow with a
// deterministic id and returns data; printing and exit codes belong to the CLI.
import type { Client } from '@temporalio/client';
import type { LedgerState } from '../domain/ledger';
import { formatDuration } from '../domain/lease';
import type { Manifest } from '../domain/types';
import { progressQuery, workflowIds } from '../shared/messages';
import type { StepRecord } from '../shared/messages';
import { followOperation, startOperation } from './start-operation';
import type { Settled } from './start-operation';
import type { AcquireInput, AcquireResult, BringDownResult, BringUpResult } from '../shared/operations';
import { LedgerClient } from '../adapters/ledger/ledger-client';

export type OperationOutcome<R> = { serve: string; workflowId: string; runId: string } & Settled<R>;

/**
 * A cancelled operation carries no message of its own: what it did is its last step, the
 * compensation it ran (a `serves down` of the same serve cancels a bring-up, as does the UI).
 */
function describeCancellation(steps: readonly StepRecord[]): string {
  const last = steps.filter((s) => s.step === 'compensate').pop();
  return `${last?.outcome ?? 'cancelled'} (cancelled by a serves down of it, or from the UI)`;
}

interface ServeOperation {
  workflowType: 'bringUpWorkflow' | 'bringDownWorkflow' | 'acquireWorkflow';
  workflowId: string;
  serve: string;
  input: Record<string, unknown>;
  /** The command line as the operator typed it. */
  summary: string;
}

async function runOperation<R>(client: Client, node: string, op: ServeOperation, onStep?: (step: StepRecord) => void): Promise<OperationOutcome<R>> {
  const { workflowId, serve } = op;
  const start = { workflowType: op.workflowType, workflowId, node, input: op.input, summary: `${op.summary} on ${node}`, onConflict: 'join' as const };
  const handle = await startOperation(client, start);
  // The run this call started or joined: a workflow id names every run of the operation on that serve.
  const runId = handle.firstExecutionRunId;
  const following = { readSteps: () => handle.query(progressQuery), onStep, cancelled: describeCancellation };
  const settled = await followOperation(handle as { result(): Promise<R> }, following);
  return { serve, workflowId, runId, ...settled };
}

export function serveUp(client: Client, node: string, serve: string, onStep?: (step: StepRecord) => void): Promise<OperationOutcome<BringUpResult>> {
  const op = { workflowType: 'bringUpWorkflow', workflowId: workflowIds.bringUp(node, serve), serve, input: { serve }, summary: `serves up ${serve}` } as const;
  return runOperation(client, node, op, onStep);
}

export function serveDown(
  client: Client,
  node: string,
  serve: string,
  opts: { restore?: boolean; onStep?: (step: StepRecord) => void } = {},
): Promise<OperationOutcome<BringDownResult>> {
  const summary = `serves down ${serve}${opts.restore ? ' --restore' : ''}`;
  const input = { serve, restore: Boolean(opts.restore) };
  return runOperation(client, node, { workflowType: 'bringDownWorkflow', workflowId: workflowIds.bringDown(node, serve), serve, input, summary }, opts.onStep);
}

export function serveAcquire(client: Client, node: string, input: AcquireInput, onStep?: (step: StepRecord) => void): Promise<OperationOutcome<AcquireResult>> {
  const lease = input.lease?.kind === 'fixed' ? ` --lease ${formatDuration(input.lease.seconds * 1000)}` : input.lease ? ' (idle lease)' : '';
  const summary = `serves up ${input.serve}${input.evict ? ' --evict' : ''}${input.force ? ' --force' : ''}${lease}`;
  const op = { workflowType: 'acquireWorkflow', workflowId: workflowIds.acquire(node, input.serve), serve: input.serve, input: { ...input }, summary } as const;
  return runOperation(client, node, op, onStep);
}

export async function ledgerSnapshots(client: Client, manifest: Manifest): Promise<LedgerState[]> {
  const ledger = new LedgerClient(client);
  return Promise.all(manifest.gpus.map((gpu) => ledger.snapshot(manifest.node, gpu)));
}
