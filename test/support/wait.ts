// Polling for tests: a condition that is not met in time fails loudly, naming what it waited for,
// rather than letting the test go on and fail later on a confusing assertion.

import { snapshotQuery } from '../../src/shared/messages';

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Polls fn until it returns a value other than undefined, or fails after timeoutMs. */
export async function waitFor<T>(what: string, fn: () => Promise<T | undefined>, timeoutMs = 10_000, intervalMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v !== undefined) return v;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last instanceof Error ? `: ${last.message}` : ''}`);
    await sleep(intervalMs);
  }
}

/** Polls cond until it holds, or fails after timeoutMs. */
export async function waitUntil(what: string, cond: () => boolean | Promise<boolean>, timeoutMs = 10_000, intervalMs = 20): Promise<void> {
  await waitFor(what, async () => ((await cond()) ? true : undefined), timeoutMs, intervalMs);
}

/**
 * Until a ledger started afresh has reconciled with the box: before, it refuses every Update
 * (LedgerReconciling), so a test that sends Updates straight to the workflow, not through
 * LedgerClient (which waits itself), waits for it first.
 */
export async function untilReconciled(ledger: { query(def: typeof snapshotQuery): Promise<{ reconciling?: boolean }> }, timeoutMs = 60_000): Promise<void> {
  await waitUntil('the ledger reconciled with the box', async () => !(await ledger.query(snapshotQuery)).reconciling, timeoutMs, 100);
}
