// A gpures worker for tests and benchmarks: createGpuresWorker on the test dev server with the
// per-process workflow bundle, already running, and one call to shut it down.
import type { Worker } from '@temporalio/worker';
import type { ManifestSource } from '../../src/adapters/manifest/port';
import { createGpuresWorker, fileManifest } from '../../src/worker/worker';
import type { GpuresWorkerOptions } from '../../src/worker/worker';
import { workflowBundle, workflowBundleWith } from './temporal';
import type { TestTemporal } from './temporal';

export interface TestWorkerOptions extends Omit<GpuresWorkerOptions, 'connection' | 'client' | 'namespace' | 'manifest' | 'workflowBundle'> {
  temporal: TestTemporal;
  /** A manifest file's path, or any ManifestSource. */
  manifest: string | ManifestSource;
  /** Workflow interceptor modules of the test's, bundled beside the worker's own (default: the build's bundle). */
  workflowInterceptorModules?: string[];
}

export interface TestWorker {
  worker: Worker;
  /** Shuts the worker down and waits for it to finish; later calls wait for the same shutdown. */
  stop: () => Promise<void>;
}

/** Creates the worker for `opts.node` on the default namespace and starts it polling. */
export async function startTestWorker(opts: TestWorkerOptions): Promise<TestWorker> {
  const { temporal, manifest, workflowInterceptorModules, ...rest } = opts;
  const worker = await createGpuresWorker({
    ...rest,
    connection: temporal.nativeConnection,
    client: temporal.client,
    namespace: 'default',
    manifest: typeof manifest === 'string' ? fileManifest(manifest) : manifest,
    workflowBundle: await (workflowInterceptorModules ? workflowBundleWith(workflowInterceptorModules) : workflowBundle()),
  });
  const running = worker.run();
  let stopped: Promise<void> | undefined;
  return {
    worker,
    stop: () =>
      (stopped ??= (async () => {
        worker.shutdown();
        await running;
      })()),
  };
}
