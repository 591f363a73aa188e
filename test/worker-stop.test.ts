// `gpures worker` stopped (SIGTERM) while a bring-up's local step waits on its ledger Update. A
// stopping worker polls no workflow task, the ledger's included, so that Update is never answered
// here: before the stop was bounded, the worker waited out the step's five attempts of 30 s (166 s,
// past systemd's 90 s, which then SIGKILLs). Now it stops within its bound, says which step it
// left, and the node's next worker finishes the bring-up (the step runs again with the same update
// id). Separate processes: the workers (gpures worker over the simulated box's runtime), the sim
// serve, the router, the test sampling the box (fast's process, the ledger).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ledgerSnapshots, serveUp } from '../src/client/operations';
import { containerName } from '../src/domain/serve';
import { WORKER_STOP_MS } from '../src/worker/stop';
import type { TestServe } from './support/box';
import type { WorkerProcess } from './support/cli';
import { startSimWorkerBox } from './support/sim-worker-box';
import type { SimWorkerBox } from './support/sim-worker-box';

const GPU = { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 };
const SERVES: TestServe[] = [{ name: 'fast', vram_mib: 14336, router_tier: 'fast-local' }];
/** Longer than the bound and the stop's own margin; far under the 166 s of the unbounded stop. */
const EXIT_WITHIN_MS = WORKER_STOP_MS + 15_000;

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

  test('stops within its bound naming the step it left, and the next worker brings the serve up', { timeout: 240_000 }, async () => {
    const held = await b.startWorker(['--hold-phase-ms', '2000']);
    worker = held;
    const exited = new Promise<{ code: number | null; signal: string | null }>((r) => held.child.once('exit', (code, signal) => r({ code, signal })));
    const up = serveUp(b.temporal.client, b.node, 'fast');
    for (let i = 0; i < 600 && !/phase running of fast held/.test(held.stderr()); i++) await new Promise((r) => setTimeout(r, 50));
    assert.match(held.stderr(), /phase running of fast held/, 'the bring-up reached its `running` step');
    const began = Date.now();
    held.child.kill('SIGTERM');
    // SIGKILL only past the bound asserted below, so that a hang fails on its time, not on a kill.
    const kill = setTimeout(() => held.child.kill('SIGKILL'), 200_000);
    const how = await exited;
    clearTimeout(kill);
    const tookMs = Date.now() - began;
    const said = held
      .stderr()
      .split('\n')
      .filter((l) => l.startsWith('worker: stopped'))
      .join('\n');
    console.log(`  SIGTERM to exit: ${tookMs} ms (${how.code ?? how.signal}); the worker said:\n  ${said}`);
    assert.ok(tookMs < EXIT_WITHIN_MS, `the worker took ${tookMs} ms to stop`);
    assert.deepEqual(how, { code: 1, signal: null }, 'the worker was killed, or exited as if clean');
    assert.match(held.stderr(), /still in flight after \d+ s of stopping: ledgerSetPhase of serves-up\/\S+/);

    // The operation is not failed by the stop: the next worker runs its step again and finishes it.
    worker = await b.startWorker();
    const outcome = await up;
    assert.ok(outcome.ok, !outcome.ok ? outcome.message : '');
    const onBox = await b.box.runtime.inspect(containerName(b.node, 'fast'));
    const [ledger] = await ledgerSnapshots(b.temporal.client, b.manifest);
    const reservations = ledger?.reservations.map((r) => `${r.serve} ${r.phase}`);
    console.log(`  after: fast ${onBox?.running ? 'running' : 'not running'} on the box; ledger ${JSON.stringify(reservations)}`);
    assert.equal(onBox?.running, true);
    assert.deepEqual(reservations, ['fast running']);
  });

  test('with nothing in flight, stops at once and exits 0', async () => {
    assert.ok(worker, 'the previous case left its second worker running');
    const idle = worker;
    const exited = new Promise<{ code: number | null; signal: string | null }>((r) => idle.child.once('exit', (code, signal) => r({ code, signal })));
    const began = Date.now();
    idle.child.kill('SIGTERM');
    const how = await exited;
    const tookMs = Date.now() - began;
    console.log(`  SIGTERM to exit, idle: ${tookMs} ms (${how.code ?? how.signal})`);
    assert.deepEqual(how, { code: 0, signal: null }, idle.stderr());
    assert.ok(tookMs < WORKER_STOP_MS, `the idle worker took ${tookMs} ms to stop`);
    assert.doesNotMatch(idle.stderr(), /stopped with work left/);
  });
});
