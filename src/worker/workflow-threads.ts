// The SDK starts its workflow threads itself (SDK 1.24 threaded-vm: `new Worker(<its thread
// file>)`, no options), so the lazy stack-trace hook (lazy-stack-traces.ts) reaches them this way:
// while a gpures worker is created, the worker_threads Worker the SDK constructs starts
// workflow-thread.ts in its thread file's stead, which replaces the hook and then runs the SDK's
// file. Any other thread starts as asked, and the constructor is put back once no creation is
// under way. Where the SDK's thread file is not where SDK 1.24 keeps it, nothing is swapped.
import { MessageChannel } from 'node:worker_threads';
import type { MessagePort, Worker as ThreadWorker, WorkerOptions as ThreadOptions } from 'node:worker_threads';
import type { ThreadReport } from './lazy-stack-traces';

export type { ThreadReport } from './lazy-stack-traces';

/**
 * The SDK's workflow thread file as its threaded-vm names it, and ours (one directory up from both
 * the compiled worker and the CLI's bundle, dist/src/cli): resolved when a worker is created, not
 * as every CLI command loads this module. Undefined where the SDK's is not where SDK 1.24 keeps it.
 */
let threadFiles: { sdk: string; ours: string } | null | undefined;
export function workflowThreadFiles(): { sdk: string; ours: string } | undefined {
  if (threadFiles === undefined) {
    try {
      threadFiles = { sdk: require.resolve('@temporalio/worker/lib/workflow/workflow-worker-thread'), ours: require.resolve('../worker/workflow-thread') };
    } catch {
      threadFiles = null;
    }
  }
  return threadFiles ?? undefined;
}

/**
 * How long a thread's report may trail the worker's creation: the thread posts it as the SDK
 * installs its handlers, before it answers the SDK's init, which the creation waits for.
 */
const REPORT_WAIT_MS = 1000;

type ThreadClass = typeof ThreadWorker;
// The module object the SDK reads `Worker` from at the call (its compiled `require("node:worker_threads")`).
// eslint-disable-next-line @typescript-eslint/no-require-imports -- the module object itself, which an import would copy
const threads = require('node:worker_threads') as { Worker: ThreadClass };

/** The threads started while one creation is under way: each one's port and its report, once sent. */
type Collector = { port: MessagePort; report: Promise<ThreadReport> }[];

let swapped: { original: ThreadClass; ours: ThreadClass } | undefined;
const collectors = new Set<Collector>();

function threadClass(original: ThreadClass): ThreadClass {
  return class GpuresWorkflowThread extends original {
    constructor(filename: string | URL, options?: ThreadOptions) {
      const files = workflowThreadFiles();
      if (!files || filename !== files.sdk || options?.workerData !== undefined || collectors.size === 0) {
        super(filename, options);
        return;
      }
      const { port1, port2 } = new MessageChannel();
      super(files.ours, { ...options, workerData: { gpuresThreadReport: port2 }, transferList: [port2] });
      const report = new Promise<ThreadReport>((resolve) => port1.once('message', resolve));
      // A thread that dies before it reports leaves nothing waiting on it.
      port1.unref();
      for (const c of collectors) c.push({ port: port1, report });
    }
  };
}

/**
 * Runs `create` (a Worker.create) with the SDK's workflow threads started by workflow-thread.ts;
 * once it is done, `onReport` hears each thread's report of its hook, or that no thread started
 * through it (the SDK started them otherwise, or runs none: debug mode).
 */
export async function withLazyStackTraces<T>(create: () => Promise<T>, onReport: (report: ThreadReport) => void): Promise<T> {
  if (!workflowThreadFiles()) {
    onReport({ installed: false, why: "the SDK's workflow thread file is not where SDK 1.24 keeps it" });
    return create();
  }
  const collector: Collector = [];
  if (collectors.size === 0) {
    const original = threads.Worker;
    swapped = { original, ours: threadClass(original) };
    threads.Worker = swapped.ours;
  }
  collectors.add(collector);
  let created: T;
  try {
    created = await create();
  } finally {
    collectors.delete(collector);
    if (collectors.size === 0 && swapped) {
      // A constructor another patch laid over ours meanwhile stays; ours then passes every call through.
      if (threads.Worker === swapped.ours) threads.Worker = swapped.original;
      swapped = undefined;
    }
  }
  if (!collector.length)
    onReport({ installed: false, why: "no workflow thread started through gpures' entry (the SDK started its threads otherwise, or runs none)" });
  const late: ThreadReport = {
    installed: false,
    why: `the workflow thread did not say which stack-trace hook it runs within ${REPORT_WAIT_MS} ms of the worker's creation`,
  };
  let timer: NodeJS.Timeout | undefined;
  const waited = new Promise<ThreadReport>((resolve) => (timer = setTimeout(() => resolve(late), REPORT_WAIT_MS)));
  const reports = await Promise.all(collector.map(({ report }) => Promise.race([report, waited])));
  clearTimeout(timer);
  for (const { port } of collector) port.close();
  for (const report of reports) onReport(report);
  return created;
}
