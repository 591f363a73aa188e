// The Temporal CLI's dev server, started for the demo and the tests, and in the foreground by
// scripts/temporal-dev.sh (src/dev/dev-server-main.ts): the CLI is built from its Go module by
// scripts/setup.sh (no binary download works here) and found in the cache.
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createServer } from 'node:net';
import { Connection } from '@temporalio/client';
import type { Env } from '../config/env';
import { devServerEnv } from '../config/env';
import { pollUntil } from '../client/poll';
import { DEV_SERVER_SEARCH_ATTRIBUTE_FLAGS } from '../client/search-attributes';
import { cachedTemporalCli, DEV_SERVER } from './toolchain';

export { TEMPORAL_CLI_TAG } from './toolchain';

/**
 * The flags the project relies on (config/toolchain.json's dynamic config, our search attributes).
 * history.maxInFlightUpdates is left at its default (10) like a production server's: LedgerClient
 * bounds the ledger's updates itself.
 */
export const DEV_SERVER_FLAGS = [...DEV_SERVER.dynamicConfig.flatMap((setting) => ['--dynamic-config-value', setting]), ...DEV_SERVER_SEARCH_ATTRIBUTE_FLAGS];

export interface DevServerArgs {
  port: number;
  /** Serve the web UI on this port; headless without it. */
  uiPort?: number;
  /** Persist state in this SQLite file; in memory without it. */
  dbFilename?: string;
}

/** `temporal server start-dev …` on loopback only, with the project's flags. */
export function devServerArgs(opts: DevServerArgs): string[] {
  const args = ['server', 'start-dev', '--ip', DEV_SERVER.ip, '--port', String(opts.port), '--log-level', DEV_SERVER.logLevel, ...DEV_SERVER_FLAGS];
  if (opts.uiPort) args.push('--ui-port', String(opts.uiPort));
  else args.push('--headless');
  if (opts.dbFilename) args.push('--db-filename', opts.dbFilename);
  return args;
}

export function temporalCliPath(env: Env = process.env): string {
  const candidates = [devServerEnv(env).temporalCli, cachedTemporalCli(env)].filter((p): p is string => Boolean(p));
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

/** A server process that ended before its frontend answered. */
export class ServerExitedError extends Error {}

/**
 * Until the frontend at `address` answers (a server, dev or production-shaped, that its own start
 * gives no event for); a `child` that exits meanwhile ends the wait at once, naming `what`.
 */
export async function waitForServer(address: string, child: ChildProcess | undefined, timeoutMs: number, what = 'temporal dev server'): Promise<void> {
  const exited = () =>
    child && (child.exitCode !== null || child.signalCode !== null)
      ? new ServerExitedError(`${what} exited (${child.exitCode ?? child.signalCode}) during start-up`)
      : undefined;
  const answers = async () => {
    const c = await Connection.connect({ address, connectTimeout: '1s' });
    try {
      await c.workflowService.getSystemInfo({});
      return true;
    } finally {
      await c.close();
    }
  };
  await pollUntil(`${what} answering on ${address}`, timeoutMs, answers, { abort: exited });
}

export interface DevServer {
  address: string;
  namespace: string;
  uiUrl?: string;
  stop(): Promise<void>;
}

/** How many times a server on ports found free is started: another process may bind one first. */
const DEV_SERVER_STARTS = 3;

/**
 * Starts `temporal server start-dev` on free loopback ports; with `ui`, its web UI too. A port
 * found free can be taken before the server binds it, and the server then exits at once
 * ("address already in use"): on ports it chose itself, it starts again on others.
 */
export async function startDevServer(opts: { ui?: boolean; port?: number; uiPort?: number } = {}): Promise<DevServer> {
  const portsGiven = opts.port !== undefined && (!opts.ui || opts.uiPort !== undefined);
  for (let start = 1; ; start++) {
    try {
      return await startDevServerOnce(opts);
    } catch (err) {
      if (!(err instanceof ServerExitedError) || portsGiven || start >= DEV_SERVER_STARTS) throw err;
    }
  }
}

async function startDevServerOnce(opts: { ui?: boolean; port?: number; uiPort?: number }): Promise<DevServer> {
  const port = opts.port ?? (await freePort());
  const uiPort = opts.ui ? (opts.uiPort ?? (await freePort())) : undefined;
  const address = `${DEV_SERVER.ip}:${port}`;
  const child = spawn(temporalCliPath(), devServerArgs({ port, uiPort }), { stdio: ['ignore', 'ignore', 'inherit'] });
  const kill = () => child.kill('SIGKILL');
  process.once('exit', kill);
  try {
    await waitForServer(address, child, 60_000);
  } catch (err) {
    process.removeListener('exit', kill);
    kill();
    throw err;
  }
  return {
    address,
    namespace: DEV_SERVER.namespace,
    uiUrl: uiPort ? `http://${DEV_SERVER.ip}:${uiPort}` : undefined,
    async stop() {
      process.removeListener('exit', kill);
      if (child.exitCode !== null) return;
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    },
  };
}
