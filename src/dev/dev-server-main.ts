// `scripts/temporal-dev.sh`: a local Temporal dev server in the foreground, for humans (the tests
// and the demo start their own through startDevServer). The script resolves the CLI (TEMPORAL_CLI)
// and builds dist/ first; this parses the options, logs where it listens, and runs the CLI until
// it exits, passing its exit status on.
import { spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { parseArgs } from 'node:util';
import { DEV_SERVER } from './toolchain';
import { devServerArgs, temporalCliPath } from './dev-server';
import { die, log } from './log';

const USAGE = `Runs a local Temporal dev server (temporal server start-dev) in the foreground, for humans.
The tests start their own from TypeScript.

usage: scripts/temporal-dev.sh [--ui] [--db-filename FILE] [--port N] [--ui-port N] [-- START-DEV-ARGS...]
  --ui               serve the Web UI (default: headless)
  --db-filename F    persist state in the SQLite file F (default: in memory, lost on exit)
  --port N           frontend gRPC port (default: $PORT or ${DEV_SERVER.port})
  --ui-port N        Web UI port (default: $UI_PORT or port + 1000)
Binds ${DEV_SERVER.ip} only. Connect with TEMPORAL_ADDRESS=${DEV_SERVER.ip}:<port> TEMPORAL_NAMESPACE=${DEV_SERVER.namespace}.
`;

interface Options {
  ui: boolean;
  port: number;
  uiPort: number;
  dbFilename?: string;
  extra: string[];
}

function usage(code: number): never {
  process.stderr.write(USAGE);
  process.exit(code);
}

function parseOptions(argv: string[], env: NodeJS.ProcessEnv): Options {
  let parsed;
  try {
    parsed = parseArgs({
      args: argv,
      allowPositionals: true,
      tokens: true,
      options: {
        ui: { type: 'boolean' },
        'db-filename': { type: 'string' },
        port: { type: 'string' },
        'ui-port': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    });
  } catch {
    usage(2);
  }
  if (parsed.values.help) usage(0);
  // Everything after `--` goes to start-dev unchanged; a bare word before it is a mistake.
  const terminator = parsed.tokens.findIndex((t) => t.kind === 'option-terminator');
  const before = terminator < 0 ? parsed.tokens : parsed.tokens.slice(0, terminator);
  if (before.some((t) => t.kind === 'positional')) usage(2);
  const extra = terminator < 0 ? [] : parsed.tokens.slice(terminator + 1).flatMap((t) => (t.kind === 'positional' ? [t.value] : []));

  const portText = parsed.values.port ?? (env['PORT'] || String(DEV_SERVER.port));
  if (!/^[0-9]+$/.test(portText)) die(`invalid port: ${portText}`);
  const port = Number(portText);
  const uiPortText = parsed.values['ui-port'] || env['UI_PORT'] || undefined;
  if (uiPortText !== undefined && !/^[0-9]+$/.test(uiPortText)) die(`invalid UI port: ${uiPortText}`);
  const uiPort = uiPortText === undefined ? port + 1000 : Number(uiPortText);
  const dbFilename = parsed.values['db-filename'] || undefined;
  return { ui: parsed.values.ui ?? false, port, uiPort, dbFilename, extra };
}

function main(): void {
  const opts = parseOptions(process.argv.slice(2), process.env);
  const cli = temporalCliPath();
  if (opts.dbFilename) mkdirSync(dirname(opts.dbFilename), { recursive: true });
  const args = [...devServerArgs({ port: opts.port, uiPort: opts.ui ? opts.uiPort : undefined, dbFilename: opts.dbFilename }), ...opts.extra];
  const state = opts.dbFilename ? `, state in ${opts.dbFilename}` : '';
  if (opts.ui) log(`Temporal dev server on ${DEV_SERVER.ip}:${opts.port}, Web UI http://${DEV_SERVER.ip}:${opts.uiPort}${state}`);
  else log(`Temporal dev server on ${DEV_SERVER.ip}:${opts.port} (headless)${state}`);

  const child = spawn(cli, args, { stdio: 'inherit' });
  // As if the script had exec'd the CLI: a signal aimed at this process is passed on, and node waits
  // for the CLI to shut down. A terminal's Ctrl-C reaches the CLI twice (same process group), which
  // it takes as one: it keeps its interrupt handler until it has stopped.
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => child.kill(signal));
  child.once('error', (err) => die(`cannot run ${cli}: ${err.message}`));
  child.once('exit', (code, signal) => {
    if (signal) {
      process.removeAllListeners(signal);
      process.kill(process.pid, signal);
    } else process.exit(code ?? 1);
  });
}

main();
