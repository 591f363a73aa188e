// `gpures worker` stopped (SIGTERM) while a bring-up's local step waits on its ledger Update. A
// stopping worker polls no workflow task, the ledger's included, so that Update is never answered
// there: before the stop was its own, the worker waited out the step's five attempts of 30 s
// (165 s measured here, past systemd's 90 s, which then SIGKILLs). Now the step ends first, while
// the worker still polls; one held past LOCAL_STEPS_END_MS is left, named, WORKER_STOP_MS after the
// signal, and the node's next worker finishes the bring-up (the step runs again with the same update
// id). Separate processes: the workers (gpures worker over the simulated box's runtime), the sim
// serves, the router, the test sampling the box (the serves' processes, the ledger).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { OperationOutcome } from '../src/client/operations';
import { ledgerSnapshots, serveUp } from '../src/client/operations';
import { containerName } from '../src/domain/serve';
import { LOCAL_STEPS_END_MS, WORKER_STOP_MS } from '../src/worker/stop';
import type { TestServe } from './support/box';
import type { WorkerProcess } from './support/cli';
import { startSimWorkerBox } from './support/sim-worker-box';
import type { SimWorkerBox } from './support/sim-worker-box';

const GPU = { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 };
const SERVES: TestServe[] = [
  { name: 'fast', vram_mib: 14336, router_tier: 'fast-local' },
  { name: 'vision', vram_mib: 12288, router_tier: 'vision-local' },
];
/** Longer than the bound and the stop's own margin; far under the 165 s of the unbounded stop. */
const EXIT_WITHIN_MS = WORKER_STOP_MS + 15_000;

type Exit = { code: number | null; signal: string | null };

describe('a worker stopped under a local ledger step', () => {
  let b: SimWorkerBox;
  let worker: WorkerProcess | undefined;

  before(async () => {
    b = await startSimWorkerBox('wstop', GPU, SERVES);
  });
  after(async () => {
    await worker?.stop();
    await b?.close();
  });

  /**
   * `serves up SERVE` on a worker whose first phase change (the bring-up's `running`, a local
   * step) is held `holdMs`; SIGTERM once it is held. Returns the time to the worker's exit, how it
   * exited, and the bring-up still to end.
   */
  async function stopUnderHeldStep(serve: string, holdMs: number) {
    const held = await b.startWorker(['--hold-phase-ms', String(holdMs)]);
    worker = held;
    const exited = new Promise<Exit>((r) => held.child.once('exit', (code, signal) => r({ code, signal })));
    const up = serveUp(b.temporal.client, b.node, serve);
    // Not left unhandled while the case fails before it awaits it.
    up.catch(() => undefined);
    const heldLine = new RegExp(`phase running of ${serve} held`);
    for (let i = 0; i < 600 && !heldLine.test(held.stderr()); i++) await new Promise((r) => setTimeout(r, 50));
    assert.match(held.stderr(), heldLine, 'the bring-up reached its `running` step');
    const began = Date.now();
    held.child.kill('SIGTERM');
    // SIGKILL only past the bound asserted, so that a hang fails on its time, not on a kill.
    const kill = setTimeout(() => held.child.kill('SIGKILL'), 200_000);
    const how = await exited;
    clearTimeout(kill);
    const tookMs = Date.now() - began;
    const said = held
      .stderr()
      .split('\n')
      .filter((l) => l.startsWith('worker: stopped'));
    console.log(`  ${serve}, its step held ${holdMs} ms: SIGTERM to exit ${tookMs} ms (${how.code ?? how.signal}); the worker said: ${JSON.stringify(said)}`);
    return { held, how, tookMs, up };
  }

  /** The serve's process on the box and the ledger's reservations, sampled after the bring-up. */
  async function onTheBox(serve: string, outcome: OperationOutcome<unknown>) {
    assert.ok(outcome.ok, !outcome.ok ? outcome.message : '');
    const c = await b.box.runtime.inspect(containerName(b.node, serve));
    const [ledger] = await ledgerSnapshots(b.temporal.client, b.manifest);
    const reservations = ledger?.reservations.map((r) => `${r.serve} ${r.phase}`).sort();
    console.log(`  after: ${serve} ${c?.running ? 'running' : 'not running'} on the box; ledger ${JSON.stringify(reservations)}`);
    return { running: c?.running === true, reservations };
  }

  test('a step that ends within its wait ends before the shutdown: the bring-up completes on that worker, which exits 0', { timeout: 120_000 }, async () => {
    const holdMs = LOCAL_STEPS_END_MS / 3;
    const r = await stopUnderHeldStep('vision', holdMs);
    assert.deepEqual(r.how, { code: 0, signal: null }, r.held.stderr());
    assert.ok(r.tookMs >= holdMs - 100 && r.tookMs < WORKER_STOP_MS, `the worker took ${r.tookMs} ms to stop`);
    assert.doesNotMatch(r.held.stderr(), /stopped with work left/);
    // The bring-up ended before the worker did; the ledger is read once a worker answers it again.
    const outcome = await r.up;
    worker = await b.startWorker();
    assert.deepEqual(await onTheBox('vision', outcome), { running: true, reservations: ['vision running'] });
    await worker.stop();
  });

  test('a step held past its wait is left, named, within the bound; the next worker brings the serve up', { timeout: 240_000 }, async () => {
    const r = await stopUnderHeldStep('fast', LOCAL_STEPS_END_MS + 2_000);
    assert.ok(r.tookMs < EXIT_WITHIN_MS, `the worker took ${r.tookMs} ms to stop`);
    assert.deepEqual(r.how, { code: 1, signal: null }, 'the worker was killed, or exited as if clean');
    assert.match(r.held.stderr(), /still in flight after \d+ s of stopping: ledgerSetPhase of serves-up\/\S+\/fast /);
    // The operation is not failed by the stop: the next worker runs its step again and finishes it.
    worker = await b.startWorker();
    assert.deepEqual(await onTheBox('fast', await r.up), { running: true, reservations: ['fast running', 'vision running'] });
  });

  test('with nothing in flight, stops at once and exits 0', async () => {
    assert.ok(worker, 'the previous case left its second worker running');
    const idle = worker;
    const exited = new Promise<Exit>((r) => idle.child.once('exit', (code, signal) => r({ code, signal })));
    const began = Date.now();
    idle.child.kill('SIGTERM');
    const how = await exited;
    const tookMs = Date.now() - began;
    console.log(`  SIGTERM to exit, idle: ${tookMs} ms (${how.code ?? how.signal})`);
    assert.deepEqual(how, { code: 0, signal: null }, idle.stderr());
    assert.ok(tookMs < LOCAL_STEPS_END_MS, `the idle worker took ${tookMs} ms to stop`);
    assert.doesNotMatch(idle.stderr(), /stopped with work left/);
  });
});
