// A node's worker as its own process (the fleet test, the sleep kill test, the stop retry test):
// `gpures worker` (runWorker, configured by its environment) with the simulated box's runtime
// instead of Docker, so its serves are processes it starts in its own network namespace, where
// Docker-published ports (on the host's loopback) would not be.
//   node dist/test/support/fleet-worker.js --manifest FILE --state DIR
//     [--kill-after-stop SERVE [--kill-after-ms N] [--stop-fence-delay-ms N]] [--hold-ledger METHOD[:STEP]:N]
// --kill-after-stop: the worker SIGKILLs itself N ms (default 0: at once) after it has issued the
// stop of SERVE (its SIGTERM sent), before the stop's answer; --stop-fence-delay-ms holds each stop
// fence that long first, as a busy ledger does (past 2 s, the attempt's periodic heartbeat goes out
// before the stop and the `issued` one after it waits out the 2 s throttle). --hold-ledger
// METHOD[:STEP]:N holds the worker's first call of that ledger method (of that fence step: start,
// started, stop) N ms before it is sent, and says each ledger call as it is made.
//     [--hold-start SERVE:FILE] [--allow-second-worker]
// --hold-start: the worker's first start of SERVE's container waits until FILE exists (at most
// 30 s) before Docker is asked, and says when it is held, when its step is cancelled (and whether
// by the worker's stop) and when it goes on. --allow-second-worker: gpures worker's flag.
import { existsSync, readFileSync } from 'node:fs';
import { Context } from '@temporalio/activity';
import { parseArgs } from 'node:util';
import type { Client } from '@temporalio/client';
import type { ContainerRuntime, ContainerSpec } from '../../src/adapters/containers/port';
import { LedgerClient } from '../../src/adapters/ledger/ledger-client';
import type { LedgerPort } from '../../src/adapters/ledger/port';
import { parseManifest } from '../../src/config/manifest';
import { containerName } from '../../src/domain/serve';
import { SimRuntime } from '../../src/sim/runtime';
import { runWorker } from '../../src/worker/main';
import { DelegatingRuntime } from './delegating-runtime';

/** Issues the stop of `name` and dies `afterMs` later, the stop unanswered. */
class DiesAfterStop extends DelegatingRuntime {
  constructor(
    real: ContainerRuntime,
    private readonly name: string,
    private readonly afterMs: number,
  ) {
    super(real);
  }
  override async stop(name: string, timeoutS: number, onlyId?: string) {
    if (name !== this.name) return this.real.stop(name, timeoutS, onlyId);
    // SimRuntime.stop sends its SIGTERM before its first await.
    void this.real.stop(name, timeoutS, onlyId).catch(() => undefined);
    process.stderr.write(`fleet-worker: stop of ${name} issued; killed in ${this.afterMs} ms\n`);
    if (this.afterMs > 0) await new Promise((r) => setTimeout(r, this.afterMs));
    process.kill(process.pid, 'SIGKILL');
    return new Promise<never>(() => undefined);
  }
}

/** Holds the first start of `name` until `file` exists (at most 30 s), saying on stderr what its step meets meanwhile. */
class StartHeldUntilFile extends DelegatingRuntime {
  private held = false;
  constructor(
    real: ContainerRuntime,
    private readonly name: string,
    private readonly file: string,
  ) {
    super(real);
  }
  override async ensureRunning(spec: ContainerSpec) {
    if (spec.name !== this.name || this.held) return this.real.ensureRunning(spec);
    this.held = true;
    const ctx = Context.current();
    process.stderr.write(`fleet-worker: start of ${spec.name} held\n`);
    ctx.cancelled.catch(() =>
      process.stderr.write(`fleet-worker: start of ${spec.name} cancelled${ctx.cancellationDetails?.workerShutdown ? ' by the worker stop' : ''}\n`),
    );
    const until = Date.now() + 30_000;
    while (!existsSync(this.file) && Date.now() < until) await new Promise((r) => setTimeout(r, 20));
    process.stderr.write(`fleet-worker: start of ${spec.name} goes on\n`);
    return this.real.ensureRunning(spec);
  }
}

/**
 * The worker's ledger with each call held `holdFor(method, args)` ms before it is sent; with
 * `told`, each call is said on stderr (`fleet-worker: ledger METHOD`, `… held N ms`) as it is made.
 */
function heldLedger(client: Client, holdFor: (method: string, args: unknown[]) => number, told: boolean): LedgerPort {
  return new Proxy(new LedgerClient(client), {
    get(target, prop, receiver) {
      const value: unknown = Reflect.get(target, prop, receiver);
      if (typeof value !== 'function' || typeof prop !== 'string') return value;
      const call = (args: unknown[]): unknown => (value as (...a: unknown[]) => unknown).apply(target, args);
      return (...args: unknown[]) => {
        const ms = holdFor(prop, args);
        if (told) process.stderr.write(`fleet-worker: ledger ${prop}${ms > 0 ? ` held ${ms} ms` : ''}\n`);
        return ms > 0 ? new Promise((r) => setTimeout(r, ms)).then(() => call(args)) : call(args);
      };
    },
  });
}

/** A call's fence step (fence(node, gpu, { step }, id)), where it is one. */
const fenceStep = (method: string, args: unknown[]) => (method === 'fence' ? (args[2] as { step?: string } | undefined)?.step : undefined);

/** --hold-ledger METHOD[:STEP]:MS: the first call of METHOD (of that fence step) held MS ms. */
function holdFirst(spec: string): (method: string, args: unknown[]) => number {
  const parts = spec.split(':');
  const ms = Number(parts.at(-1));
  const [method, step] = parts.length === 3 ? parts : [parts[0]];
  if (!method || !Number.isFinite(ms) || ms <= 0) throw new Error(`--hold-ledger ${spec}: expected METHOD[:STEP]:MS`);
  let held = false;
  return (m, args) => {
    if (held || m !== method || (step !== undefined && fenceStep(m, args) !== step)) return 0;
    held = true;
    return ms;
  };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      manifest: { type: 'string' },
      state: { type: 'string' },
      'kill-after-stop': { type: 'string' },
      'kill-after-ms': { type: 'string' },
      'stop-fence-delay-ms': { type: 'string' },
      'hold-ledger': { type: 'string' },
      'hold-start': { type: 'string' },
      'allow-second-worker': { type: 'boolean' },
    },
  });
  if (!values.manifest || !values.state) throw new Error('usage: fleet-worker --manifest FILE --state DIR');
  const parsed = parseManifest(readFileSync(values.manifest, 'utf8'), values.manifest);
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.errors));
  const node = parsed.manifest.node;
  const sim = new SimRuntime({ stateDir: values.state });
  const killOn = values['kill-after-stop'];
  const at = values['hold-start']?.indexOf(':') ?? -1;
  const [heldServe, holdFile] = at > 0 ? [values['hold-start']?.slice(0, at), values['hold-start']?.slice(at + 1)] : [];
  if (values['hold-start'] && (!heldServe || !holdFile)) throw new Error(`--hold-start ${values['hold-start']}: expected SERVE:FILE`);
  const runtime = killOn
    ? new DiesAfterStop(sim, containerName(node, killOn), Number(values['kill-after-ms'] ?? 0))
    : heldServe && holdFile
      ? new StartHeldUntilFile(sim, containerName(node, heldServe), holdFile)
      : sim;
  const fenceDelay = Number(values['stop-fence-delay-ms'] ?? 0);
  const hold = values['hold-ledger'];
  if (fenceDelay > 0 && hold) throw new Error('--stop-fence-delay-ms and --hold-ledger are not taken together');
  const ledger =
    fenceDelay > 0
      ? (client: Client) => heldLedger(client, (m, args) => (fenceStep(m, args) === 'stop' ? fenceDelay : 0), false)
      : hold
        ? (client: Client) => heldLedger(client, holdFirst(hold), true)
        : undefined;
  await runWorker({
    manifestPath: values.manifest,
    node,
    gpus: 'off',
    runtime,
    allowSecondWorker: values['allow-second-worker'] === true,
    ...(ledger ? { ledger } : {}),
  });
}

main().catch((err: unknown) => {
  process.stderr.write(`fleet-worker: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
