// A production-shaped Temporal for the tests (src/dev/prod-temporal.ts): PostgreSQL 15 and
// temporal-server on free loopback ports, its state in a temp dir of this test process, removed at
// close. Like testTemporal(), one per process; unlike it, the server and the store can be crashed.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { ProdTemporal } from '../../src/dev/prod-temporal';
import { SERVER_PORT_NAMES } from '../../src/dev/prod-temporal-config';
import type { ProdTemporalPorts } from '../../src/dev/prod-temporal-config';
import { freeLowPorts } from './low-ports';
import { installTestRuntime } from './temporal';
import type { TestTemporal } from './temporal';

export interface ProductionTemporal extends TestTemporal {
  namespace: string;
  /** Every port of the server: the frontend's and its other services'. */
  ports: ProdTemporalPorts;
  /** kill -9 of the temporal-server process, waits for it to be gone. */
  killServer(): Promise<void>;
  /** Starts it again on the same store and ports, resolves when it answers. */
  startServer(): Promise<void>;
  /** pg_ctl stop -m immediate, wait `downMs` (default 3000), start. */
  restartPostgres(opts?: { downMs?: number }): Promise<void>;
}

async function freePorts(): Promise<ProdTemporalPorts> {
  const [postgres = 0, ...server] = await freeLowPorts(1 + SERVER_PORT_NAMES.length);
  const ports = { postgres } as ProdTemporalPorts;
  SERVER_PORT_NAMES.forEach((name, i) => (ports[name] = server[i] ?? 0));
  return ports;
}

let shared: Promise<ProductionTemporal> | undefined;

export function productionTemporal(): Promise<ProductionTemporal> {
  shared ??= (async () => {
    installTestRuntime();
    const stateDir = mkdtempSync(join(tmpdir(), 'gpures-prod-temporal-'));
    const t = ProdTemporal.open({ stateDir, ports: await freePorts() });
    // A test process that dies leaves neither a server nor a postmaster behind (SIGQUIT: its immediate shutdown).
    const kill = () => {
      const s = t.status();
      if (s.server) process.kill(s.server.pid, 'SIGKILL');
      if (s.postgres) process.kill(s.postgres.pid, 'SIGQUIT');
    };
    process.once('exit', kill);
    await t.start();
    const connection = await Connection.connect({ address: t.address });
    const nativeConnection = await NativeConnection.connect({ address: t.address });
    return {
      address: t.address,
      namespace: t.namespace,
      ports: t.ports,
      client: new Client({ connection, namespace: t.namespace }),
      nativeConnection,
      killServer: () => t.killServer(),
      startServer: async () => void (await t.startServer()),
      restartPostgres: (opts = {}) => t.restartPostgres(opts.downMs),
      async close() {
        await nativeConnection.close();
        await connection.close();
        await t.stop();
        process.removeListener('exit', kill);
        rmSync(stateDir, { recursive: true, force: true });
        shared = undefined;
      },
    };
  })();
  return shared;
}
