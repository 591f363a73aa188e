// Two costs the SDK's replayer (Worker.runReplayHistories, SDK 1.24) pays for a live worker's
// needs that a replay has none of. Together they were half of a recorded history's replay here
// (docs/performance.md, Audit replay); without them the replay is the same: the same workflow
// code, the same activations from the SDK core, the same errors with the same source-mapped stacks.
//
// - A promise hook that records a stack trace for every promise a workflow creates (the SDK's own
//   included), only to answer the `__stack_trace` query of a running workflow. A replay is never
//   queried. The SDK runs without it where the hook is unavailable (Bun), and so does this: its
//   handlers are marked installed before the replayer installs them, with the stack-trace
//   rewriting that maps a workflow error's stack to its sources installed as the SDK would, and
//   unmarked after the last replay.
// - A watchdog thread started for every call into a workflow's V8 context, to enforce a timeout
//   that a replay worker (debug mode) sets to 2^32 - 1 ms, 49.7 days: it never fires in a
//   process's life, yet node:vm starts and joins a thread for it on each of about 42 calls a
//   history (nodejs/node#10453, #47739). While replays run, a call with that timeout is made
//   without it; any other timeout is kept.
//
// Both reach into what the SDK does not export, for the pinned version in package.json; where it
// is not found as expected, nothing changes and the replay pays the costs as before
// (test/replay-costs.test.ts fails then, so an SDK upgrade is not silently slower).
import { Script } from 'node:vm';
import { sdkWorkflowHandlers } from '../worker/sdk-workflow-handlers';
import type { SdkWorkflowHandlers } from '../worker/sdk-workflow-handlers';

/** The isolate timeout the SDK gives a debug-mode worker (worker-options: '4294967295ms'). */
export const DEBUG_MODE_ISOLATE_TIMEOUT_MS = 4294967295;

type RunInContext = (this: Script, context: object, options?: { timeout?: number } & Record<string, unknown>) => unknown;

/** Replays under way in this process; the two costs are skipped while it is above 0. */
let replaysRunning = 0;
/** What was in place before, while replays run. */
let saved: { runInContext: RunInContext; wrapper: RunInContext; marked?: SdkWorkflowHandlers } | undefined;

/**
 * From the first replay under way to the last: the SDK's handlers marked installed without the
 * stack-trace hook (unless installed already), and calls into a V8 context with the debug-mode
 * timeout made without it. After the last, both are put back, so a debug-mode worker started later
 * in the same process gets its hook and its timeout as the SDK gives them.
 */
function enter(): void {
  if (replaysRunning++ > 0) return;
  const handlers = sdkWorkflowHandlers();
  const marked = handlers && !handlers.installed ? handlers : undefined;
  if (marked) {
    marked.overridePrepareStackTrace();
    marked.installed = true;
  }
  const proto = Script.prototype as unknown as { runInContext: RunInContext };
  const underlying = proto.runInContext;
  const wrapper: RunInContext = function (this: Script, context, options) {
    // Checked on each call: a wrapper another patch put back after the last replay changes nothing.
    if (replaysRunning === 0 || options?.timeout !== DEBUG_MODE_ISOLATE_TIMEOUT_MS) return underlying.call(this, context, options);
    const rest = { ...options };
    delete rest.timeout;
    return underlying.call(this, context, rest);
  };
  proto.runInContext = wrapper;
  saved = { runInContext: underlying, wrapper, marked };
}

function leave(): void {
  if (--replaysRunning > 0 || !saved) return;
  const proto = Script.prototype as unknown as { runInContext: RunInContext };
  // Another patch laid over ours meanwhile stays; ours then passes every call through.
  if (proto.runInContext === saved.wrapper) proto.runInContext = saved.runInContext;
  // The SDK installs its handlers again (with the hook) when a live debug-mode worker needs them.
  if (saved.marked) saved.marked.installed = false;
  saved = undefined;
}

/** Runs `replay` without the two costs above. */
export async function withoutLiveWorkerCosts<T>(replay: () => Promise<T>): Promise<T> {
  enter();
  try {
    return await replay();
  } finally {
    leave();
  }
}
