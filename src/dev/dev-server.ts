// The Temporal CLI's dev server, started for the demo and the tests: the CLI is built from its
// Go module by scripts/setup.sh (no binary download works here) and found in the cache.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { Connection } from '@temporalio/client';
import type { Env } from '../config/env';
import { devServerEnv } from '../config/env';
import { DEV_SERVER_SEARCH_ATTRIBUTE_FLAGS } from '../client/search-attributes';

export const TEMPORAL_CLI_TAG = 'v1.5.1';

/**
 * The flags the project relies on; scripts/temporal-dev.sh passes the same. history.maxInFlightUpdates
 * is left at its default (10) like a production server's: LedgerClient bounds the ledger's updates itself.
 */
export const DEV_SERVER_FLAGS = [
  '--dynamic-config-value', 'frontend.enableServerVersionCheck=false',
  '--dynamic-config-value', 'frontend.enableExecuteMultiOperation=true',
  '--dynamic-config-value', 'frontend.enableUpdateWorkflowExecution=true',
  ...DEV_SERVER_SEARCH_ATTRIBUTE_FLAGS,
  // The dev server has one history shard, and its transfer queue (which hands every workflow and
  // activity task to matching) loads at most 20 times a second by default: past a burst of 20,
  // each step of a serial workflow waited ~45 ms for the limiter.
  '--dynamic-config-value', 'history.transferProcessorMaxPollRPS=1000',
];

export function temporalCliPath(env: Env = process.env): string {
  const { temporalCli, cacheDir } = devServerEnv(env);
  const candidates = [temporalCli, join(cacheDir, `temporal-cli-${TEMPORAL_CLI_TAG}`, 'temporal')].filter((p): p is string => Boolean(p));
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

export async function waitForServer(address: string, child: ChildProcess | undefined, timeoutMs: number): Promise<void> {
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

export interface DevServer {
  address: string;
  uiUrl?: string;
  stop(): Promise<void>;
}

/** Starts `temporal server start-dev` on free loopback ports; with `ui`, its web UI too. */
export async function startDevServer(opts: { ui?: boolean; port?: number; uiPort?: number } = {}): Promise<DevServer> {
  const port = opts.port ?? (await freePort());
  const uiPort = opts.ui ? (opts.uiPort ?? (await freePort())) : undefined;
  const address = `127.0.0.1:${port}`;
  const args = ['server', 'start-dev', '--ip', '127.0.0.1', '--port', String(port), '--log-level', 'error', ...DEV_SERVER_FLAGS];
  if (uiPort) args.push('--ui-port', String(uiPort));
  else args.push('--headless');
  const child = spawn(temporalCliPath(), args, { stdio: ['ignore', 'ignore', 'inherit'] });
  const kill = () => child.kill('SIGKILL');
  process.once('exit', kill);
  await waitForServer(address, child, 60_000);
  return {
    address,
    uiUrl: uiPort ? `http://127.0.0.1:${uiPort}` : undefined,
    async stop() {
      process.removeListener('exit', kill);
      if (child.exitCode !== null) return;
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    },
  };
}
