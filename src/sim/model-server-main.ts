// The simulated vLLM server as a process: `node dist/src/sim/model-server-main.js --model M
// --served-model-name N --host H --port P [...]` (the arguments vllmCommand produces), tuned by
// SIM_* environment variables (see optionsFromEnv). SimRuntime runs one per "container".
import { closeSync, writeFileSync, writeSync } from 'node:fs';
import { optionsFromEnv, parseVllmArgs, startModelServer } from './model-server';

function log(line: string): void {
  process.stderr.write(`${new Date().toISOString()} sim-vllm[${process.pid}]: ${line}\n`);
}

/** Where SimRuntime wants the exit code written (it cannot wait for a process it did not spawn). */
function recordExit(code: number): void {
  const file = process.env['SIM_EXIT_CODE_FILE'];
  if (!file) return;
  try {
    writeFileSync(file, JSON.stringify({ id: process.env['SIM_CONTAINER_ID'] ?? '', exitCode: code }), { flag: 'wx' });
  } catch {
    // Someone (the runtime) already recorded it, or the state directory is gone: nothing to add.
  }
}

/** SimRuntime passes a pipe (SIM_READY_FD) and waits on it until the port is bound. */
function tellListening(): void {
  const fd = Number(process.env['SIM_READY_FD']);
  if (!Number.isInteger(fd) || fd < 3) return;
  try {
    writeSync(fd, 'listening\n');
    closeSync(fd);
  } catch {
    // Nobody waits any more (the runtime gave up or went away).
  }
}

function exit(code: number): never {
  recordExit(code);
  process.exit(code);
}

async function main(): Promise<void> {
  const exitAtStart = process.env['SIM_EXIT_AT_START'];
  if (exitAtStart && !['0', 'false', 'no'].includes(exitAtStart)) {
    log('SIM_EXIT_AT_START is set: exiting with code 3');
    exit(3);
  }
  const options = optionsFromEnv(parseVllmArgs(process.argv.slice(2)), process.env);
  const server = await startModelServer({ ...options, log });
  tellListening();
  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    log(`${signal}: not accepting new connections; draining ${server.inFlight()} in-flight request(s) (up to ${options.drainTimeoutMs} ms)`);
    void server.shutdown().then((drained) => {
      log(drained ? 'drained; exiting' : `drain timed out with ${server.inFlight()} request(s) in flight; exiting`);
      exit(0);
    });
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

main().catch((err: unknown) => {
  log(`fatal: ${err instanceof Error ? err.message : String(err)}`);
  exit(1);
});
