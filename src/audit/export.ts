// `gpures audit export`: a workflow's history from the server, written as the JSON every Temporal
// tool reads, so it can be kept as evidence, rendered by `audit report` and replayed by
// `audit replay` against later workflow code with no server at all.
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Client } from '@temporalio/client';
import { historyIdentity } from './events';
import type { HistoryJson } from './events';
import { historyJson, safeFileName } from './history';

export interface ExportedHistory {
  workflowId: string;
  runId?: string;
  workflowType: string;
  /** RUNNING, COMPLETED, FAILED, … as the server lists it. */
  status?: string;
  events: number;
  /** Where it was written (absent when only returned). */
  file?: string;
}

/** One run's history (the latest run when `runId` is not given). */
export async function fetchHistoryJson(client: Client, workflowId: string, runId?: string): Promise<HistoryJson> {
  const history = await client.workflow.getHandle(workflowId, runId).fetchHistory();
  return historyJson(history);
}

function writeJson(file: string, h: HistoryJson): void {
  mkdirSync(dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(h, null, 2)}\n`);
}

export async function exportWorkflow(
  client: Client,
  workflowId: string,
  opts: { runId?: string; file?: string } = {},
): Promise<{ exported: ExportedHistory; history: HistoryJson }> {
  const history = await fetchHistoryJson(client, workflowId, opts.runId);
  const id = historyIdentity(history, workflowId);
  if (opts.file) writeJson(opts.file, history);
  return { exported: { workflowId, runId: id.runId, workflowType: id.workflowType, events: id.events, ...(opts.file ? { file: opts.file } : {}) }, history };
}

/**
 * Every execution a visibility query matches (`WorkflowType = 'acquireWorkflow'`,
 * `TaskQueue = 'gpures.primary-node'`, …), one file each in `dir`, named from the workflow id.
 * A workflow id met twice (an earlier run of the same operation) gets its run id in the name.
 */
export async function exportQuery(client: Client, query: string, dir: string): Promise<ExportedHistory[]> {
  mkdirSync(dir, { recursive: true });
  const used = new Set<string>();
  const out: ExportedHistory[] = [];
  for await (const wf of client.workflow.list({ query })) {
    const base = safeFileName(wf.workflowId);
    let name = `${base}.json`;
    if (used.has(name)) name = `${base}@${wf.runId}.json`;
    used.add(name);
    const file = join(dir, name);
    const history = await fetchHistoryJson(client, wf.workflowId, wf.runId);
    writeJson(file, history);
    out.push({ workflowId: wf.workflowId, runId: wf.runId, workflowType: wf.type, status: wf.status.name, events: history.events.length, file });
  }
  return out;
}
