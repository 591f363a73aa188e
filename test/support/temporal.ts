// A real Temporal dev server for the tests: reuses TEMPORAL_TEST_ADDRESS when the test script
// started one, otherwise starts the CLI built by scripts/setup.sh and stops it at exit.
import { Client, Connection } from '@temporalio/client';
import { startDevServer } from '../../src/dev/dev-server';
import { DEV_SERVER } from '../../src/dev/toolchain';
export { freePort, temporalCliPath } from '../../src/dev/dev-server';
import { bundleWorkflowCode, DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { workflowCodeOptions } from '../../src/worker/workflow-code';

import { loadWorkflowBundle } from '../../src/worker/prebuilt-bundle';
import { temporalInterceptors } from '../../src/client/connection';
import type { WorkflowBundleWithSourceMap } from '@temporalio/worker';

export interface TestTemporal {
  address: string;
  client: Client;
  nativeConnection: NativeConnection;
  close(): Promise<void>;
}

let shared: Promise<TestTemporal> | undefined;
let runtimeInstalled = false;

/** Once per process, before the first NativeConnection: expected failures (denials, timeouts) are logged by the worker as warnings: keep test output readable. */
export function installTestRuntime(): void {
  if (!runtimeInstalled) Runtime.install({ logger: new DefaultLogger(process.env['GPURES_TEST_LOG'] === 'debug' ? 'DEBUG' : 'ERROR') });
  runtimeInstalled = true;
}

export function testTemporal(): Promise<TestTemporal> {
  shared ??= (async () => {
    installTestRuntime();
    const server = process.env['TEMPORAL_TEST_ADDRESS'] ? undefined : await startDevServer();
    const address = server?.address ?? process.env['TEMPORAL_TEST_ADDRESS'] ?? '';
    const connection = await Connection.connect({ address, interceptors: temporalInterceptors() });
    const nativeConnection = await NativeConnection.connect({ address });
    return {
      address,
      client: new Client({ connection, namespace: DEV_SERVER.namespace }),
      nativeConnection,
      async close() {
        await nativeConnection.close();
        await connection.close();
        await server?.stop();
        shared = undefined;
      },
    };
  })();
  return shared;
}

let bundle: Promise<WorkflowBundleWithSourceMap> | undefined;

/** The build's bundle, or bundled once per test process: webpack is the slow part of starting a worker. */
export function workflowBundle(): Promise<WorkflowBundleWithSourceMap> {
  bundle ??= loadWorkflowBundle(quietLogger);
  return bundle;
}

/** The worker's workflows bundled with interceptor modules of a test's beside their own (a few seconds of webpack). */
export function workflowBundleWith(interceptorModules: string[]): Promise<WorkflowBundleWithSourceMap> {
  const options = workflowCodeOptions(quietLogger);
  return bundleWorkflowCode({ ...options, workflowInterceptorModules: [...(options.workflowInterceptorModules ?? []), ...interceptorModules] });
}

const quietLogger = {
  log: () => undefined,
  trace: () => undefined,
  debug: () => undefined,
  info: () => undefined,
  warn: (m: string) => console.warn(m),
  error: (m: string) => console.error(m),
};
