// The SDK starts its workflow threads itself (SDK 1.24 threaded-vm: `new Worker(<its thread
// file>)`, no options), so the lazy stack-trace hook (lazy-stack-traces.ts) reaches them this way:
// while a gpures worker is created, the worker_threads Worker the SDK constructs starts
// workflow-thread.ts in its thread file's stead, which replaces the hook and then runs the SDK's
// file. Any other thread starts as asked, and the constructor is put back once no creation is
// under way. Where the SDK's thread file is not where SDK 1.24 keeps it, nothing is swapped.
import { MessageChannel } from 'node:worker_threads';
import type { Worker as ThreadWorker, WorkerOptions as ThreadOptions } from 'node:worker_threads';
import type { installLazyStackTraces } from './lazy-stack-traces';

/** What a workflow thread says of its hook as it starts. */
export type ThreadReport = ReturnType<typeof installLazyStackTraces>;

function resolved(id: string): string | undefined {
  try {
    return require.resolve(id);
  } catch {
    return undefined;
  }
}

/** The SDK's workflow thread, as its threaded-vm names it. */
export const SDK_WORKFLOW_THREAD = resolved('@temporalio/worker/lib/workflow/workflow-worker-thread');
/** Ours, one directory up from both the compiled worker and the CLI's bundle (dist/src/cli). */
const GPURES_WORKFLOW_THREAD = require.resolve('../worker/workflow-thread');

type ThreadClass = typeof ThreadWorker;
// The module object the SDK reads `Worker` from at the call (its compiled `require("node:worker_threads")`).
// eslint-disable-next-line @typescript-eslint/no-require-imports -- the module object itself, which an import would copy
const threads = require('node:worker_threads') as { Worker: ThreadClass };

let creating = 0;
let swapped: { original: ThreadClass; ours: ThreadClass } | undefined;
const listeners = new Set<(report: ThreadReport) => void>();

function threadClass(original: ThreadClass): ThreadClass {
  return class GpuresWorkflowThread extends original {
    constructor(filename: string | URL, options?: ThreadOptions) {
      if (filename !== SDK_WORKFLOW_THREAD || options?.workerData !== undefined || listeners.size === 0) {
        super(filename, options);
        return;
      }
      const { port1, port2 } = new MessageChannel();
      const heard = [...listeners];
      port1.once('message', (report: ThreadReport) => {
        port1.close();
        for (const l of heard) l(report);
      });
      // A thread that dies before it reports leaves nothing waiting on it.
      port1.unref();
      super(GPURES_WORKFLOW_THREAD, { ...options, workerData: { gpuresThreadReport: port2 }, transferList: [port2] });
    }
  };
}

/**
 * Runs `create` (a Worker.create) with the SDK's workflow threads started by workflow-thread.ts;
 * `onReport` hears each thread's report of its hook.
 */
export async function withLazyStackTraces<T>(create: () => Promise<T>, onReport: (report: ThreadReport) => void): Promise<T> {
  if (!SDK_WORKFLOW_THREAD) {
    onReport({ installed: false, why: "the SDK's workflow thread file is not where SDK 1.24 keeps it" });
    return create();
  }
  if (creating++ === 0) {
    const original = threads.Worker;
    swapped = { original, ours: threadClass(original) };
    threads.Worker = swapped.ours;
  }
  listeners.add(onReport);
  try {
    return await create();
  } finally {
    listeners.delete(onReport);
    if (--creating === 0 && swapped) {
      // A constructor another patch laid over ours meanwhile stays; ours then passes every call through.
      if (threads.Worker === swapped.ours) threads.Worker = swapped.original;
      swapped = undefined;
    }
  }
}
