// `scripts/temporal-prod.sh start|stop|status`: the production-shaped Temporal (src/dev/prod-temporal.ts)
// for humans. The script provides the binaries (temporal_server_bins) and dist/; this parses the
// options and says what runs where.
import { parseArgs } from 'node:util';
import { defaultStateDir, describe, ProdTemporal } from './prod-temporal';
import { die, log } from './log';
import { MAX_BASE_PORT, MAX_MEMBERSHIP_PORT, SERVER_PORT_NAMES } from './prod-temporal-config';
import { PROD_TEMPORAL } from './toolchain';

const USAGE = `A production-shaped Temporal on this machine: PostgreSQL 15 and temporal-server ${PROD_TEMPORAL.serverTag}, loopback only.

usage: scripts/temporal-prod.sh start|stop|status [--dir D] [--port N] [--pg-port N]
  start        initialise (first time), start PostgreSQL and the server, create the namespace and search attributes
  stop         the server (SIGTERM), then PostgreSQL (pg_ctl stop -m fast); the state stays in D
  status       what runs, with pids and ports (exit 0 when both run, 3 otherwise)
  --dir D      state directory (default ${defaultStateDir()})
  --port N     frontend gRPC port (at most ${MAX_BASE_PORT}); the server's other ports are the eight after it
               (default ${PROD_TEMPORAL.port}, or the last start's)
  --pg-port N  PostgreSQL port (default ${PROD_TEMPORAL.pgPort}, or the last start's)
`;

function usage(code: number): never {
  process.stderr.write(USAGE);
  process.exit(code);
}

function port(text: string | undefined, option: string, max = 65535, why = ''): number | undefined {
  if (text === undefined) return undefined;
  if (!/^[0-9]+$/.test(text) || Number(text) < 1024 || Number(text) > max) die(`${option} ${text}: not a port in 1024..${max}${why}`);
  return Number(text);
}

// Named here, where the option is known: past MAX_BASE_PORT, checkPorts could only name the membership port it overflows.
const MEMBERSHIP_LIMIT = ` (the eight server ports after it include membership ports, kept in a smallint: at most ${MAX_MEMBERSHIP_PORT})`;
const portOption = (text: string | undefined) => port(text, '--port', MAX_BASE_PORT, MEMBERSHIP_LIMIT);

async function main(): Promise<void> {
  let parsed;
  try {
    parsed = parseArgs({
      args: process.argv.slice(2),
      allowPositionals: true,
      options: { dir: { type: 'string' }, port: { type: 'string' }, 'pg-port': { type: 'string' }, help: { type: 'boolean', short: 'h' } },
    });
  } catch (err) {
    process.stderr.write(`${(err as Error).message}\n`);
    usage(2);
  }
  if (parsed.values.help) usage(0);
  const [command, ...rest] = parsed.positionals;
  if (!command || rest.length > 0 || !['start', 'stop', 'status'].includes(command)) usage(2);
  const stateDir = parsed.values.dir ?? defaultStateDir();
  const [base, pgPort] = [portOption(parsed.values.port), port(parsed.values['pg-port'], '--pg-port')];
  const last = base === undefined ? undefined : base + SERVER_PORT_NAMES.length - 1;
  if (base !== undefined && last !== undefined && pgPort !== undefined && pgPort >= base && pgPort <= last)
    die(`--pg-port ${pgPort}: one of the server's ports (--port ${base}: ${base}..${last})`);
  const t = ProdTemporal.open({ stateDir, port: base, pgPort });

  if (command === 'status') {
    const s = t.status();
    process.stdout.write(`${describe(s)}\n`);
    const ports = Object.entries(t.ports).map(([name, p]) => `${name} ${p}`);
    process.stdout.write(`ports (${PROD_TEMPORAL.ip}): ${ports.join(', ')}\n`);
    if (s.server) process.stdout.write(`TEMPORAL_ADDRESS=${s.server.address} TEMPORAL_NAMESPACE=${t.namespace}\n`);
    process.exit(s.server && s.postgres ? 0 : 3);
  }
  if (command === 'stop') {
    const { server, postgres } = await t.stop();
    log(`${server ? 'temporal-server stopped' : 'temporal-server was not running'}; ${postgres ? 'PostgreSQL stopped' : 'PostgreSQL was not running'}`);
    return;
  }
  const { alreadyRunning, notes } = await t.start(log);
  for (const n of notes) log(n);
  if (alreadyRunning) log('already running; nothing started');
  process.stdout.write(`TEMPORAL_ADDRESS=${t.status().server?.address ?? t.address} TEMPORAL_NAMESPACE=${t.namespace}\n`);
}

main().catch((err: unknown) => die(err instanceof Error ? err.message : String(err)));
