// A node's worker as its own process (the fleet test, the sleep kill test, the stop retry test):
// `gpures worker` (runWorker, configured by its environment) with the simulated box's runtime
// instead of Docker, so its serves are processes it starts in its own network namespace, where
// Docker-published ports (on the host's loopback) would not be.
//   node dist/test/support/fleet-worker.js --manifest FILE --state DIR
//     [--kill-after-stop SERVE [--kill-after-ms N] [--stop-fence-delay-ms N]] [--hold-ledger METHOD:N]
// --kill-after-stop: the worker SIGKILLs itself N ms (default 0: at once) after it has issued the
// stop of SERVE (its SIGTERM sent), before the stop's answer; --stop-fence-delay-ms holds each stop
// fence that long first, as a busy ledger does (past 2 s, the attempt's periodic heartbeat goes out
// before the stop and the `issued` one after it waits out the 2 s throttle). --hold-ledger holds the
// worker's first call of that ledger method (setPhase, snapshot: a local step's) N ms before it is
// sent, and says so.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import type { Client } from '@temporalio/client';
import type { ContainerRuntime } from '../../src/adapters/containers/port';
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

function slowStopFence(client: Client, delayMs: number): LedgerPort {
  const real = new LedgerClient(client);
  return Object.assign(Object.create(real) as LedgerClient, {
    fence: async (...args: Parameters<LedgerPort['fence']>) => {
      if (args[2].step === 'stop') await new Promise((r) => setTimeout(r, delayMs));
      return real.fence(...args);
    },
  });
}

/** The first call of `method` waits `holdMs` (after a line saying so) before it is sent; later ones go at once. */
function heldFirstCall(client: Client, method: keyof LedgerPort, holdMs: number): LedgerPort {
  const real = new LedgerClient(client);
  let held = false;
  const call = (...args: unknown[]) => (real[method] as (...a: unknown[]) => Promise<unknown>).apply(real, args);
  return Object.assign(Object.create(real) as LedgerClient, {
    [method]: async (...args: unknown[]) => {
      if (!held) {
        held = true;
        process.stderr.write(`fleet-worker: ledger ${method} held ${holdMs} ms\n`);
        await new Promise((r) => setTimeout(r, holdMs));
      }
      return call(...args);
    },
  });
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
    },
  });
  if (!values.manifest || !values.state) throw new Error('usage: fleet-worker --manifest FILE --state DIR');
  const parsed = parseManifest(readFileSync(values.manifest, 'utf8'), values.manifest);
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.errors));
  const node = parsed.manifest.node;
  const sim = new SimRuntime({ stateDir: values.state });
  const killOn = values['kill-after-stop'];
  const runtime = killOn ? new DiesAfterStop(sim, containerName(node, killOn), Number(values['kill-after-ms'] ?? 0)) : sim;
  const fenceDelay = Number(values['stop-fence-delay-ms'] ?? 0);
  const [holdMethod, holdMs] = (values['hold-ledger'] ?? '').split(':');
  const ledger =
    fenceDelay > 0
      ? (client: Client) => slowStopFence(client, fenceDelay)
      : holdMethod
        ? (client: Client) => heldFirstCall(client, holdMethod as keyof LedgerPort, Number(holdMs))
        : undefined;
  await runWorker({ manifestPath: values.manifest, node, gpus: 'off', runtime, ...(ledger ? { ledger } : {}) });
}

main().catch((err: unknown) => {
  process.stderr.write(`fleet-worker: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
