// The ledger's last decisions, as its history keeps them: each update it accepted (admit,
// acquire, setPhase, beginStop, release, victimReleased, abortEviction, a fence it refused) with
// the line `gpures audit report` prints for it. A history is read again only when it has grown.
import type { Client } from '@temporalio/client';
import { fetchHistoryJson } from '../audit/export';
import { collect } from '../audit/report/collect';
import { fenceUpdate, workflowIds } from '../shared/messages';

export interface LedgerDecision {
  gpuRole: string;
  /** The update's name: admit, acquire, setPhase, release, ... */
  update: string;
  /** When the ledger accepted it (ISO), where the history says. */
  at?: string;
  /** One line, as `gpures audit report` prints it; a rejection starts `rejected:`. */
  summary: string;
}

/** How many of each ledger's latest decisions are kept: the page shows the newest few. */
export const DECISIONS_KEPT = 20;

interface Cached {
  runId: string;
  length: number;
  decisions: LedgerDecision[];
}

/** One reader per API process: the cache spares refetching a history that has not changed. */
export class LedgerDecisions {
  private readonly cache = new Map<string, Cached>();

  constructor(private readonly client: Client) {}

  /** The latest decisions of the GPU's ledger (its current run: continue-as-new starts afresh), newest first. */
  async latest(node: string, gpuRole: string): Promise<LedgerDecision[]> {
    const workflowId = workflowIds.ledger(node, gpuRole);
    const d = await this.client.workflow.getHandle(workflowId).describe();
    const length = d.historyLength;
    const cached = this.cache.get(workflowId);
    if (cached && cached.runId === d.runId && cached.length === length) return cached.decisions;
    const { updates } = collect(await fetchHistoryJson(this.client, workflowId, d.runId), workflowId);
    // A fence that passed changed nothing (the run still holds its serve): only a lost one is news.
    const decisions = updates
      .filter((u) => u.name !== fenceUpdate.name || u.failure !== undefined)
      .slice(-DECISIONS_KEPT)
      .reverse()
      .map((u) => ({ gpuRole, update: u.name, ...(u.acceptedAt ? { at: u.acceptedAt } : {}), summary: u.summary }));
    this.cache.set(workflowId, { runId: d.runId, length, decisions });
    return decisions;
  }
}
