// One answer at a time for what an unauthenticated scrape or probe would otherwise redo on every
// request (a ledger reading, the SDK core's metrics text, Temporal's health): callers while it runs
// share the one under way, never a second beside it (an older answer ending later would overwrite
// a newer one), and its value serves the callers of the next `ttlMs` after it ends.

/** `fn` behind a single flight and a cache of `ttlMs` from its end; a rejection is shared by its callers, not cached. */
export function singleFlight<T>(fn: () => Promise<T>, ttlMs: number): () => Promise<T> {
  let inFlight: Promise<T> | undefined;
  let last: { at: number; value: T } | undefined;
  return () => {
    if (inFlight) return inFlight;
    if (last && Date.now() - last.at <= ttlMs) return Promise.resolve(last.value);
    const p = fn()
      .then((value) => {
        last = { at: Date.now(), value };
        return value;
      })
      .finally(() => {
        inFlight = undefined;
      });
    inFlight = p;
    return p;
  };
}
