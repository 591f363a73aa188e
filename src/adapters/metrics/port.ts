// What activities report to the worker's metrics (src/worker/metrics.ts implements it): the
// waits of an eviction, as they ended. Optional in ActivityDeps: tests and replay need none.
export interface ActivityMetrics {
  /** A drain that ended: drained, or at its deadline (timeout); its length from the first attempt's start. */
  drainEnded(e: { tier?: string; drained: boolean; waitedMs: number }): void;
  /** A wait for a victim's VRAM to come back on the GPU that ended: released, or not within its deadline. */
  vramReleaseEnded(e: { released: boolean; waitedMs: number }): void;
}
