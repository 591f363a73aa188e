// A lease's report reads two facts from more than its input and its own ledger reads: its term as
// it ended (extensions and at-least terms move the expiry the input gave) and the ledger after
// its bring-down (the lease's own reads of the ledger all come before the bring-down it starts).
import { formatDuration } from '../../domain/lease';
import type { Collected } from './collect';
import { num, obj, path, strs } from './read';

/** The expiry the lease's last answered Update gave (an extend's view, an at-least's `view`). */
function lastExpiry(c: Collected): number | undefined {
  let at: number | undefined;
  for (const u of c.updates) {
    if (u.failure) continue;
    const e = num(obj(u.result)?.['expiresAtEpochMs']) ?? num(path(u.result, 'view', 'expiresAtEpochMs'));
    if (e !== undefined) at = e;
  }
  return at ?? num(path(c.input, 'clock', 'notBeforeEpochMs'));
}

/**
 * The header's term: as granted, and, when a fixed lease ended with a longer one (extended, or
 * lasting at least another caller's terms), what it was extended to, from its start.
 */
export function leaseOperation(c: Collected): string {
  if (c.id.workflowType !== 'leaseWorkflow') return c.operation;
  const seconds = num(path(c.input, 'seconds'));
  const expiry = lastExpiry(c);
  const startedAt = num(path(c.input, 'clock', 'startedAtEpochMs')) ?? Date.parse(c.events[0]?.eventTime ?? '');
  if (seconds === undefined || expiry === undefined || !Number.isFinite(startedAt)) return c.operation;
  const termMs = expiry - startedAt;
  if (path(c.input, 'kind') === 'idle' || Math.abs(termMs - seconds * 1000) < 1000) return c.operation;
  const to = `${Math.round(termMs / 1000)} s (${formatDuration(termMs)}), until ${new Date(expiry).toISOString()}`;
  return `${c.operation.replace(/ \(\d+ s\)$/, '')} (granted ${seconds} s, extended to ${to})`;
}

/**
 * The ledger after a lease's bring-down: its child's result. undefined when the lease started
 * none (its own last read stands); a line saying so when the bring-down returned no ledger.
 */
export function leaseLedgerAfter(c: Collected): string[] | undefined {
  if (c.id.workflowType !== 'leaseWorkflow') return undefined;
  const downs = c.children.filter((ch) => ch.workflowType === 'bringDownWorkflow' && ch.status !== 'not started');
  const last = downs[downs.length - 1];
  if (!last) return undefined;
  for (const ch of [...downs].reverse()) {
    const after = strs(obj(ch.result)?.['ledgerAfter']);
    if (after) return after;
  }
  return [`none recorded: the lease's bring-down ${last.workflowId} returned no ledger (${last.status})`];
}
