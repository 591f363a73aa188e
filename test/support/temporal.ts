// A real Temporal dev server for the tests: reuses TEMPORAL_TEST_ADDRESS when the test script
// started one, otherwise starts the CLI built by scripts/setup.sh and stops it at exit.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { bundleWorkflowCode } from '@temporalio/worker';
import type { WorkflowBundleWithSourceMap } from '@temporalio/worker';

export function temporalCliPath(): string {
  const candidates = [
    process.env['TEMPORAL_CLI'],
    join(process.env['GPURES_CACHE'] ?? join(homedir(), '.cache', 'gpu-reservations'), 'temporal-cli-v1.5.1', 'temporal'),
  ].filter((p): p is string => Boolean(p));
  const found = candidates.find((p) => existsSync(p));
  if (!found) throw new Error(`no Temporal CLI at ${candidates.join(' or ')}: run scripts/setup.sh first`);
  return found;
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      const port = typeof addr === 'object' && addr ? addr.port : 0;
      srv.close(() => resolve(port));
    });
  });
}

async function waitForServer(address: string, child: ChildProcess | undefined, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let lastErr: unknown;
  while (Date.now() < deadline) {
    if (child && child.exitCode !== null) throw new Error(`temporal dev server exited with ${child.exitCode}`);
    try {
      const c = await Connection.connect({ address, connectTimeout: '1s' });
      await c.workflowService.getSystemInfo({});
      await c.close();
      return;
    } catch (err) {
      lastErr = err;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
  throw new Error(`temporal dev server at ${address} not up within ${timeoutMs} ms: ${String(lastErr)}`);
}

export interface TestTemporal {
  address: string;
  client: Client;
  nativeConnection: NativeConnection;
  close(): Promise<void>;
}

let shared: Promise<TestTemporal> | undefined;

/** The dev-server flags the project relies on; scripts/temporal-dev.sh passes the same. */
export const DEV_SERVER_FLAGS = [
  '--dynamic-config-value', 'frontend.enableServerVersionCheck=false',
  '--dynamic-config-value', 'frontend.enableExecuteMultiOperation=true',
  '--dynamic-config-value', 'frontend.enableUpdateWorkflowExecution=true',
];

export function testTemporal(): Promise<TestTemporal> {
  shared ??= (async () => {
    // Expected failures (denials, timeouts) are logged by the worker as warnings: keep test output readable.
    Runtime.install({ logger: new DefaultLogger(process.env['GPURES_TEST_LOG'] === 'debug' ? 'DEBUG' : 'ERROR') });
    let address = process.env['TEMPORAL_TEST_ADDRESS'];
    let child: ChildProcess | undefined;
    if (!address) {
      const port = await freePort();
      address = `127.0.0.1:${port}`;
      child = spawn(
        temporalCliPath(),
        ['server', 'start-dev', '--headless', '--ip', '127.0.0.1', '--port', String(port), '--log-level', 'error', ...DEV_SERVER_FLAGS],
        { stdio: ['ignore', 'ignore', 'inherit'] },
      );
      process.once('exit', () => child?.kill('SIGKILL'));
    }
    await waitForServer(address, child, 60_000);
    const connection = await Connection.connect({ address });
    const nativeConnection = await NativeConnection.connect({ address });
    return {
      address,
      client: new Client({ connection, namespace: 'default' }),
      nativeConnection,
      async close() {
        await nativeConnection.close();
        await connection.close();
        if (child) {
          child.kill('SIGTERM');
          await new Promise((r) => child?.once('exit', r));
        }
        shared = undefined;
      },
    };
  })();
  return shared;
}

let bundle: Promise<WorkflowBundleWithSourceMap> | undefined;

/** Bundled once per test process: webpack is the slow part of starting a worker. */
export function workflowBundle(): Promise<WorkflowBundleWithSourceMap> {
  bundle ??= bundleWorkflowCode({ workflowsPath: require.resolve('../../src/workflows'), logger: quietLogger });
  return bundle;
}

const quietLogger = {
  log: () => undefined,
  trace: () => undefined,
  debug: () => undefined,
  info: () => undefined,
  warn: (m: string) => console.warn(m),
  error: (m: string) => console.error(m),
};
