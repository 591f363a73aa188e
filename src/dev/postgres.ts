// The PostgreSQL 15 cluster under the production-shaped Temporal (src/dev/prod-temporal.ts): Debian's
// binaries, a data directory of its own, loopback only, scram passwords. PostgreSQL refuses to run
// as root, so as root every pg_* binary runs as the `postgres` user, on a data directory it owns.
import { execFile } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, readFileSync, readlinkSync, realpathSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import { processAlive } from '../adapters/host-process';
import { PROD_TEMPORAL } from './toolchain';

const run = promisify(execFile);

/** The user PostgreSQL runs as: `postgres` when we are root, else ourselves. */
interface PgUser {
  uid: number;
  gid: number;
}

export interface PostgresCluster {
  /** Owned by the PostgreSQL user: data/ and postgres.log. */
  dir: string;
  dataDir: string;
  log: string;
  port: number;
}

export function postgresCluster(stateDir: string, port: number): PostgresCluster {
  const dir = join(stateDir, 'postgres');
  return { dir, dataDir: join(dir, 'data'), log: join(dir, 'postgres.log'), port };
}

async function pgUser(): Promise<PgUser | undefined> {
  if (process.getuid?.() !== 0) return undefined;
  let line: string;
  try {
    line = (await run('getent', ['passwd', 'postgres'])).stdout;
  } catch {
    throw new Error(`PostgreSQL refuses to run as root and there is no 'postgres' user: install ${PROD_TEMPORAL.postgresBin} (apt-get install postgresql-15)`);
  }
  const [, , uid, gid] = line.trim().split(':');
  return { uid: Number(uid), gid: Number(gid) };
}

/** Every ancestor of `path` must be searchable by the PostgreSQL user, or postgres cannot reach its data directory. */
function assertReachable(path: string, user: PgUser): void {
  for (let dir = dirname(path); ; dir = dirname(dir)) {
    const st = statSync(dir);
    const ok = st.mode & 0o001 || (st.uid === user.uid && st.mode & 0o100) || (st.gid === user.gid && st.mode & 0o010);
    if (!ok)
      throw new Error(
        `${dir} is not searchable by the postgres user (uid ${user.uid}), so it cannot reach ${path}: choose a state directory outside it (--dir)`,
      );
    if (dir === dirname(dir)) return;
  }
}

function pgBin(name: string): string {
  const bin = join(PROD_TEMPORAL.postgresBin, name);
  if (!existsSync(bin)) throw new Error(`no ${bin}: run scripts/setup.sh --test (it installs postgresql-15)`);
  return bin;
}

/** Runs a pg_* binary as the PostgreSQL user, argument array, no shell; a failure names the log to read. */
async function pg(name: string, args: string[], cluster: PostgresCluster, user: PgUser | undefined, timeoutMs = 120_000): Promise<string> {
  try {
    const { stdout } = await run(pgBin(name), args, {
      cwd: cluster.dir,
      timeout: timeoutMs,
      ...(user ?? {}),
      env: { PATH: process.env['PATH'] ?? '', LANG: 'C.UTF-8' },
    });
    return stdout;
  } catch (err) {
    const e = err as { stderr?: string; stdout?: string; message: string };
    throw new Error(`${name} ${args[0] ?? ''} failed: ${(e.stderr || e.stdout || e.message).trim()} (log: ${cluster.log})`);
  }
}

function own(path: string, user: PgUser | undefined): void {
  if (user) chownSync(path, user.uid, user.gid);
}

/**
 * initdb on first use: the bootstrap superuser is `temporal` with `password`, scram for every
 * connection, no Unix socket. Its password reaches initdb through a 0600 file it owns, removed after.
 */
export async function initCluster(cluster: PostgresCluster, password: string): Promise<boolean> {
  const user = await pgUser();
  mkdirSync(cluster.dir, { recursive: true, mode: 0o700 });
  own(cluster.dir, user);
  if (user) assertReachable(cluster.dataDir, user);
  if (existsSync(join(cluster.dataDir, 'PG_VERSION'))) return false;
  rmSync(cluster.dataDir, { recursive: true, force: true });
  const pwfile = join(cluster.dir, '.initdb-password');
  writeFileSync(pwfile, `${password}\n`, { mode: 0o600 });
  own(pwfile, user);
  try {
    await pg(
      'initdb',
      ['-D', cluster.dataDir, '-U', 'temporal', `--pwfile=${pwfile}`, '--auth=scram-sha-256', '-E', 'UTF8', '--locale=C.UTF-8'],
      cluster,
      user,
    );
  } finally {
    rmSync(pwfile, { force: true });
  }
  const conf = join(cluster.dataDir, 'postgresql.conf');
  writeFileSync(conf, `${readFileSync(conf, 'utf8')}\n# gpures: loopback, port and limits, rewritten at each start\ninclude_if_exists = 'gpures.conf'\n`);
  return true;
}

/**
 * Whether the postmaster of this data directory runs, and its pid (postmaster.pid's first line).
 * After a crash or a reboot the file stays and its pid may be another process's: only a postgres
 * whose working directory is this data directory (the postmaster chdirs into it) counts.
 */
export function postgresPid(cluster: PostgresCluster): number | undefined {
  let text: string;
  try {
    text = readFileSync(join(cluster.dataDir, 'postmaster.pid'), 'utf8');
  } catch {
    return undefined;
  }
  const pid = Number(text.split('\n')[0]);
  if (!(pid > 0) || !processAlive(pid)) return undefined;
  try {
    const argv0 = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0] ?? '';
    return argv0.endsWith('postgres') && readlinkSync(`/proc/${pid}/cwd`) === realpathSync(cluster.dataDir) ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** pg_ctl start -w on the configured port (the port is written to gpures.conf, so a new --pg-port takes effect). */
export async function startPostgres(cluster: PostgresCluster): Promise<number> {
  const user = await pgUser();
  const running = postgresPid(cluster);
  if (running) return running;
  const settings = [
    `listen_addresses = '${PROD_TEMPORAL.ip}'`,
    `port = ${cluster.port}`,
    // TCP only: the Unix socket's default directory belongs to Debian's own cluster.
    `unix_socket_directories = ''`,
    // temporal-server's four services each keep a pool (persistence.*.maxConns) and the sql tool adds its own.
    `max_connections = 200`,
    `password_encryption = 'scram-sha-256'`,
  ];
  const conf = join(cluster.dataDir, 'gpures.conf');
  writeFileSync(conf, `${settings.join('\n')}\n`, { mode: 0o600 });
  own(conf, user);
  if (!existsSync(cluster.log)) writeFileSync(cluster.log, '', { mode: 0o600 });
  own(cluster.log, user);
  await pg('pg_ctl', ['start', '-D', cluster.dataDir, '-l', cluster.log, '-w', '-t', '60', '-s'], cluster, user);
  const pid = postgresPid(cluster);
  if (!pid) throw new Error(`PostgreSQL did not stay up on ${PROD_TEMPORAL.ip}:${cluster.port}: see ${cluster.log}`);
  return pid;
}

/** pg_ctl stop: `fast` (roll back sessions, checkpoint) for an orderly stop, `immediate` for a crash the next start recovers from. */
export async function stopPostgres(cluster: PostgresCluster, mode: 'fast' | 'immediate' = 'fast'): Promise<boolean> {
  if (!postgresPid(cluster)) return false;
  await pg('pg_ctl', ['stop', '-D', cluster.dataDir, '-m', mode, '-w', '-t', '60', '-s'], cluster, await pgUser());
  return true;
}

/** The state directory: 0700, or 0711 as root so that the postgres user may pass through it to its own subdirectory. */
export function makeStateDir(stateDir: string): void {
  mkdirSync(stateDir, { recursive: true, mode: 0o700 });
  chmodSync(stateDir, process.getuid?.() === 0 ? 0o711 : 0o700);
}
