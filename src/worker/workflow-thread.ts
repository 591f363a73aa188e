// A workflow thread of a gpures worker: the SDK's own (workflow-worker-thread), with the promise
// hook for stack traces replaced by the lazy one first (lazy-stack-traces.ts). The main thread
// starts this file where the SDK would start its own (workflow-threads.ts) and hears from it which
// hook runs, once the SDK has installed it.
import { workerData } from 'node:worker_threads';
import type { MessagePort } from 'node:worker_threads';
import { installLazyStackTraces } from './lazy-stack-traces';
import type { ThreadReport } from './lazy-stack-traces';
import { workflowThreadFiles } from './workflow-threads';

const port = (workerData as { gpuresThreadReport?: MessagePort } | undefined)?.gpuresThreadReport;
const report = (r: ThreadReport): void => {
  port?.postMessage(r);
  port?.close();
};
try {
  installLazyStackTraces(report);
} catch (err) {
  // Whatever went wrong, the SDK's thread runs as shipped, with its own hook.
  report({ installed: false, why: `the lazy hook could not be put in place: ${(err as Error).message}` });
}
// The main thread starts this file only where it found the SDK's.
const sdkThread = workflowThreadFiles()?.sdk;
if (!sdkThread) throw new Error("the SDK's workflow thread file is not where SDK 1.24 keeps it");
// eslint-disable-next-line @typescript-eslint/no-require-imports -- the SDK's thread runs as its own module, after the hook is replaced
require(sdkThread);
