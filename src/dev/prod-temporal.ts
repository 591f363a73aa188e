// A production-shaped Temporal on this machine: PostgreSQL 15 (src/dev/postgres.ts) and
// temporal-server 1.29.1 with its SQL schemas, all on loopback, state in one directory. Started
// and stopped by scripts/temporal-prod.sh (src/dev/prod-temporal-main.ts) and by the durability
// tests (test/support/prod-temporal.ts). The binaries and schemas are scripts/lib.sh's
// temporal_server_bins cache; the `temporal` role's password lives in a 0600 file and reaches the
// sql tool by environment and the server by its 0600 config file, never a command line.
import { execFile, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { appendFileSync, closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { waitForServer } from './dev-server';
import { ensureNamespace } from './prod-temporal-namespace';
import { checkPorts, dynamicConfigYaml, portsFrom, SERVER_ENV, serverConfigYaml } from './prod-temporal-config';
import type { ProdTemporalPorts } from './prod-temporal-config';
import { initCluster, makeStateDir, postgresCluster, postgresPid, startPostgres, stopPostgres } from './postgres';
import type { PostgresCluster } from './postgres';
import { processAlive } from '../adapters/host-process';
import { withStartLock } from './start-lock';
import { cacheDir, cachedTemporalServerDir, DEV_SERVER, PROD_TEMPORAL } from './toolchain';

export type { ProdTemporalPorts } from './prod-temporal-config';

const run = promisify(execFile);
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** $GPURES_CACHE/temporal-prod; as root /var/lib/gpures/temporal-prod, since the postgres user cannot pass through /root. */
export function defaultStateDir(env: NodeJS.ProcessEnv = process.env): string {
  return process.getuid?.() === 0 && !env['GPURES_CACHE'] ? '/var/lib/gpures/temporal-prod' : join(cacheDir(env), 'temporal-prod');
}

export interface ProdTemporalOptions {
  stateDir: string;
  /** Every port; else `port` / `pgPort` (the command's), else the ports of the last start, else the defaults. */
  ports?: ProdTemporalPorts;
  port?: number;
  pgPort?: number;
  /** temporal-server, temporal-sql-tool and schema/; default GPURES_TEMPORAL_SERVER_DIR, else the set-up's cache. */
  serverDir?: string;
}

export interface ProdTemporalStatus {
  postgres?: { pid: number; port: number };
  server?: { pid: number; address: string };
  stateDir: string;
}

export class ProdTemporal {
  readonly namespace = DEV_SERVER.namespace;
  readonly postgres: PostgresCluster;
  readonly serverLog: string;
  readonly schemaLog: string;
  private readonly serverDir: string;
  private readonly pidFile: string;

  private constructor(
    readonly stateDir: string,
    readonly ports: ProdTemporalPorts,
    serverDir: string,
  ) {
    this.serverDir = serverDir;
    this.postgres = postgresCluster(stateDir, ports.postgres);
    this.serverLog = join(stateDir, 'temporal-server.log');
    this.schemaLog = join(stateDir, 'schema.log');
    this.pidFile = join(stateDir, 'temporal-server.pid');
  }

  static open(opts: ProdTemporalOptions): ProdTemporal {
    const stored = readPorts(opts.stateDir);
    const ports =
      opts.ports ??
      (opts.port === undefined && opts.pgPort === undefined && stored
        ? stored
        : portsFrom(opts.port ?? stored?.frontend ?? PROD_TEMPORAL.port, opts.pgPort ?? stored?.postgres ?? PROD_TEMPORAL.pgPort));
    checkPorts(ports);
    const serverDir = opts.serverDir ?? (process.env['GPURES_TEMPORAL_SERVER_DIR'] || cachedTemporalServerDir());
    return new ProdTemporal(opts.stateDir, ports, serverDir);
  }

  get address(): string {
    return `${PROD_TEMPORAL.ip}:${this.ports.frontend}`;
  }

  status(): ProdTemporalStatus {
    const pg = postgresPid(this.postgres);
    const server = this.serverPid();
    const stored = readPorts(this.stateDir) ?? this.ports;
    return {
      stateDir: this.stateDir,
      ...(pg ? { postgres: { pid: pg, port: stored.postgres } } : {}),
      ...(server ? { server: { pid: server, address: `${PROD_TEMPORAL.ip}:${stored.frontend}` } } : {}),
    };
  }

  /**
   * Everything, idempotently: initdb and the schemas on first use, then PostgreSQL, the server, the
   * namespace. Says what it did. One start at a time per state directory: a second one waits
   * (saying so through `waiting`), then finds it running.
   */
  async start(waiting?: (note: string) => void): Promise<{ alreadyRunning: boolean; notes: string[] }> {
    makeStateDir(this.stateDir);
    return withStartLock(this.stateDir, () => this.startLocked(), waiting);
  }

  private async startLocked(): Promise<{ alreadyRunning: boolean; notes: string[] }> {
    const now = this.status();
    if (now.server && now.postgres) return { alreadyRunning: true, notes: [`running: ${describe(now)}`] };
    const stored = readPorts(this.stateDir);
    if ((now.server || now.postgres) && stored && JSON.stringify(stored) !== JSON.stringify(this.ports))
      throw new Error(`partly running on other ports (${describe(now)}): scripts/temporal-prod.sh stop --dir ${this.stateDir} first`);
    const notes: string[] = [];
    writeFileSync(join(this.stateDir, 'ports.json'), `${JSON.stringify(this.ports, null, 2)}\n`);
    const password = this.password();
    if (await initCluster(this.postgres, password)) notes.push(`PostgreSQL cluster initialised in ${this.postgres.dataDir}`);
    const pg = await startPostgres(this.postgres);
    notes.push(`PostgreSQL (pid ${pg}) on ${PROD_TEMPORAL.ip}:${this.ports.postgres}, log ${this.postgres.log}`);
    for (const db of ['temporal', 'temporal_visibility'] as const) await this.applySchema(db, password);
    notes.push(`schemas of temporal and temporal_visibility up to date (log ${this.schemaLog})`);
    if (!now.server) notes.push(...(await this.startServer()));
    return { alreadyRunning: false, notes };
  }

  /** temporal-server on the same store and ports, detached (it outlives the command), until its frontend answers. */
  async startServer(): Promise<string[]> {
    const running = this.serverPid();
    if (running) throw new Error(`temporal-server is already running (pid ${running})`);
    const configDir = join(this.stateDir, 'config');
    mkdirSync(configDir, { recursive: true, mode: 0o700 });
    const dynamicConfig = join(this.stateDir, 'dynamicconfig.yaml');
    writeFileSync(dynamicConfig, dynamicConfigYaml());
    writeFileSync(join(configDir, `${SERVER_ENV}.yaml`), serverConfigYaml(this.ports, this.password(), dynamicConfig), { mode: 0o600 });
    const log = openSync(this.serverLog, 'a', 0o600);
    appendFileSync(log, `\n=== ${new Date().toISOString()}: temporal-server starting ===\n`);
    const args = ['--root', this.stateDir, '--config', 'config', '--env', SERVER_ENV, '--allow-no-auth', 'start'];
    const child = spawn(this.bin('temporal-server'), args, { cwd: this.stateDir, detached: true, stdio: ['ignore', log, log] });
    closeSync(log);
    child.unref();
    // A spawn failure is reported below from the missing pid, not as an unhandled 'error' event.
    child.once('error', () => undefined);
    if (!child.pid) throw new Error(`cannot run ${this.bin('temporal-server')}: see ${this.serverLog}`);
    writeFileSync(this.pidFile, `${child.pid}\n`);
    try {
      await this.waitForFrontend(child, 120_000);
      const notes = [`temporal-server (pid ${child.pid}) on ${this.address}, log ${this.serverLog}`];
      notes.push(...(await ensureNamespace(this.address, this.namespace)));
      return notes;
    } catch (err) {
      // Detached, it would outlive the failed start and hold the ports the next start needs.
      await this.killServer();
      throw err;
    }
  }

  /** kill -9: a crash, no orderly shutdown; resolves once the process is gone. */
  async killServer(): Promise<void> {
    const pid = this.serverPid();
    if (!pid) return;
    process.kill(pid, 'SIGKILL');
    await waitGone(pid, 10_000, 'temporal-server');
    rmSync(this.pidFile, { force: true });
  }

  /** SIGTERM (the server leaves its membership ring and closes its shards), SIGKILL after 30 s. */
  async stopServer(): Promise<boolean> {
    const pid = this.serverPid();
    if (!pid) return false;
    process.kill(pid, 'SIGTERM');
    try {
      await waitGone(pid, 30_000, 'temporal-server');
    } catch {
      process.kill(pid, 'SIGKILL');
      await waitGone(pid, 10_000, 'temporal-server');
    }
    rmSync(this.pidFile, { force: true });
    return true;
  }

  async stop(): Promise<{ server: boolean; postgres: boolean }> {
    const server = await this.stopServer();
    const postgres = await stopPostgres(this.postgres, 'fast');
    return { server, postgres };
  }

  /** pg_ctl stop -m immediate (a crash: recovery replays the WAL at the next start), `downMs` later start again. */
  async restartPostgres(downMs = 3000): Promise<void> {
    await stopPostgres(this.postgres, 'immediate');
    await sleep(downMs);
    await startPostgres(this.postgres);
  }

  private bin(name: 'temporal-server' | 'temporal-sql-tool'): string {
    const path = join(this.serverDir, name);
    if (!existsSync(path))
      throw new Error(`no ${path}: run scripts/setup.sh --test (it builds temporal-server ${PROD_TEMPORAL.serverTag} into ${this.serverDir})`);
    return path;
  }

  /** The `temporal` role's password: random on first start, then read back from its 0600 file. */
  private password(): string {
    const file = join(this.stateDir, 'temporal-password');
    if (existsSync(file)) return readFileSync(file, 'utf8').trim();
    const password = randomBytes(24).toString('hex');
    writeFileSync(file, `${password}\n`, { mode: 0o600, flag: 'wx' });
    return password;
  }

  private serverPid(): number | undefined {
    let pid: number;
    try {
      pid = Number(readFileSync(this.pidFile, 'utf8').trim());
    } catch {
      return undefined;
    }
    if (!(pid > 0) || !processAlive(pid)) return undefined;
    // A stale pid file whose number now belongs to another process is not our server.
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('temporal-server') ? pid : undefined;
    } catch {
      return undefined;
    }
  }

  /** create-database and setup-schema -v 0.0 once (a marker file records it), update-schema at every start (idempotent). */
  private async applySchema(db: 'temporal' | 'temporal_visibility', password: string): Promise<void> {
    const env = {
      PATH: process.env['PATH'] ?? '',
      SQL_HOST: PROD_TEMPORAL.ip,
      SQL_PORT: String(this.ports.postgres),
      SQL_USER: 'temporal',
      SQL_PASSWORD: password,
      SQL_PLUGIN: PROD_TEMPORAL.sqlPlugin,
      SQL_DATABASE: db,
    };
    const tool = async (args: string[], tolerate?: RegExp) => {
      appendFileSync(this.schemaLog, `\n=== ${new Date().toISOString()}: temporal-sql-tool ${args.join(' ')} (${db}) ===\n`, { mode: 0o600 });
      try {
        const { stdout, stderr } = await run(this.bin('temporal-sql-tool'), args, { env, timeout: 120_000 });
        appendFileSync(this.schemaLog, stdout + stderr);
      } catch (err) {
        const e = err as { stdout?: string; stderr?: string; message: string };
        const out = `${e.stdout ?? ''}${e.stderr ?? ''}`;
        appendFileSync(this.schemaLog, out || e.message);
        if (tolerate?.test(out)) return;
        throw new Error(`temporal-sql-tool ${args[0]} for ${db} failed: see ${this.schemaLog}`);
      }
    };
    const marker = join(this.stateDir, `schema-${db}.created`);
    if (!existsSync(marker)) {
      await tool(['create-database', '--defaultdb', 'postgres'], /already exists/);
      await tool(['setup-schema', '-v', '0.0']);
      writeFileSync(marker, `${new Date().toISOString()}\n`);
    }
    const versioned = join(this.serverDir, 'schema', db === 'temporal' ? 'temporal' : 'visibility', 'versioned');
    if (!existsSync(versioned)) throw new Error(`no ${versioned}: run scripts/setup.sh --test`);
    await tool(['update-schema', '-d', versioned]);
  }

  private async waitForFrontend(child: ChildProcess, timeoutMs: number): Promise<void> {
    try {
      await waitForServer(this.address, child, timeoutMs, 'temporal-server');
    } catch (err) {
      throw new Error(`${(err as Error).message}: see ${this.serverLog}`);
    }
  }
}

function readPorts(stateDir: string): ProdTemporalPorts | undefined {
  try {
    return JSON.parse(readFileSync(join(stateDir, 'ports.json'), 'utf8')) as ProdTemporalPorts;
  } catch {
    return undefined;
  }
}

async function waitGone(pid: number, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (processAlive(pid)) {
    if (Date.now() > deadline) throw new Error(`${what} (pid ${pid}) still running after ${timeoutMs / 1000} s`);
    await sleep(50);
  }
}

export function describe(s: ProdTemporalStatus): string {
  const parts = [
    s.postgres ? `PostgreSQL pid ${s.postgres.pid} on ${PROD_TEMPORAL.ip}:${s.postgres.port}` : 'PostgreSQL stopped',
    s.server ? `temporal-server pid ${s.server.pid} on ${s.server.address}` : 'temporal-server stopped',
  ];
  return `${parts.join(', ')} (state ${s.stateDir})`;
}
