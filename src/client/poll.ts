// Waiting on a Temporal server to come round (a frontend answering, a namespace or search
// attributes it has just registered): the server gives no event for these, so the caller asks
// again until it says yes, and a wait that runs out names what it waited for and the last refusal.

/**
 * Calls `attempt` every `intervalMs` until it answers true; its errors count as "not yet" and the
 * last one is named when `timeoutMs` runs out. `abort` is asked before each attempt: an error it
 * returns ends the wait at once (e.g. the process being waited on has exited).
 */
export async function pollUntil(
  what: string,
  timeoutMs: number,
  attempt: () => Promise<boolean>,
  opts: { intervalMs?: number; abort?: () => Error | undefined } = {},
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    const aborted = opts.abort?.();
    if (aborted) throw aborted;
    try {
      if (await attempt()) return;
      last = undefined;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`${what} not within ${timeoutMs / 1000} s${last instanceof Error ? `: ${last.message}` : ''}`);
    await new Promise((r) => setTimeout(r, opts.intervalMs ?? 250));
  }
}
