// The steps a serve going down takes, whoever takes it down: an eviction's victim and a
// bring-down both drain the tier's requests, then stop the container within its stop timeout.
import type { DrainResult } from '../shared/contracts';
import type { ServeSpec } from '../domain/types';
import { stopping, waiting } from './proxies';

export const DEFAULT_DRAIN_TIMEOUT_S = 120;
/** How long nvidia-smi may take to show a stopped victim's VRAM back. */
export const DEFAULT_RELEASE_TIMEOUT_S = 30;
/**
 * How long vLLM's /sleep may take: a level-1 sleep copies the weights to host RAM ("3–6 s" for large
 * models in vLLM's own figures); past this the victim is stopped instead.
 */
export const DEFAULT_SLEEP_TIMEOUT_S = 60;

/** Waits until nothing is in flight to the serve (its tier at the router, and vLLM), up to timeoutS. */
export function drainFor(tier: string | undefined, serve: ServeSpec, timeoutS: number): Promise<DrainResult> {
  return waiting(timeoutS).drainServe({ tier, serve, deadlineEpochMs: Date.now() + timeoutS * 1000 });
}

/** Graceful stop and removal of the serve's container, bounded by its own stop timeout. */
export function stopServe(node: string, serve: { name: string; stopTimeoutS: number }) {
  return stopping(serve.stopTimeoutS).stopServeContainer({ node, serve: serve.name, timeoutS: serve.stopTimeoutS });
}
