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
import { ledgerSnapshots, serveAcquire, serveUp } from '../src/client/operations';
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
  { name: 'tiny', vram_mib: 1000, class: 'on-demand' },
  { name: 'mini', vram_mib: 300 },
];
/** Longer than the bound and the stop's own margin; far under the 165 s of the unbounded stop. */
const EXIT_WITHIN_MS = WORKER_STOP_MS + 15_000;

describe('a worker stopped under a local ledger step', () => {
  let b: SimWorkerBox;
  /** Every worker started, stopped after the cases whatever way they ended: one left running would answer the next case's held Update. */
  const workers: WorkerProcess[] = [];
  const startWorker = async (extra: string[] = []) => {
    const w = await b.startWorker(extra);
    workers.push(w);
    return w;
  };

  before(async () => {
    b = await startSimWorkerBox('wstop', GPU, SERVES);
  });
  after(async () => {
    for (const w of workers) await w.stop();
    await b?.close();
  });

  /**
   * `operation` on a worker whose first call of the ledger's `method` (of that fence step) is held
   * `holdMs`; SIGTERM once it is held. Returns the time to the worker's exit, how it exited, and
   * the operation still to end.
   */
  async function stopUnderHeldStep<T>(
    hold: 'setPhase' | 'snapshot' | 'fence:started',
    holdMs: number,
    operation: () => Promise<OperationOutcome<T>>,
    whileHeld: () => Promise<void> = () => Promise.resolve(),
  ) {
    const method = hold.split(':')[0] ?? hold;
    const held = await startWorker(['--hold-ledger', `${hold}:${holdMs}`]);
    const op = operation();
    // Not left unhandled while the case fails before it awaits it.
    op.catch(() => undefined);
    const heldLine = new RegExp(`ledger ${method} held`);
    for (let i = 0; i < 600 && !heldLine.test(held.stderr()); i++) await new Promise((r) => setTimeout(r, 50));
    assert.match(held.stderr(), heldLine, `the operation reached its ${method}`);
    await whileHeld();
    const began = Date.now();
    held.child.kill('SIGTERM');
    // SIGKILL only past the bound asserted, so that a hang fails on its time, not on a kill.
    const kill = setTimeout(() => held.child.kill('SIGKILL'), EXIT_WITHIN_MS + 5_000);
    const how = await held.exited;
    clearTimeout(kill);
    const tookMs = Date.now() - began;
    const said = held
      .stderr()
      .split('\n')
      .filter((l) => /^worker: SIG|worker: stopped/.test(l));
    console.log(`  ${method} held ${holdMs} ms: SIGTERM to exit ${tookMs} ms (${how.code ?? how.signal}); the worker said: ${JSON.stringify(said)}`);
    return { held, how, tookMs, op };
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

  /** The line the worker writes as its shutdown begins, once its local steps have ended. */
  const QUIET_LINE = /^worker: SIGTERM: no local step or workflow task for \d+ ms; shutting down/m;

  test('a step that ends within its wait ends before the shutdown: the bring-up completes on that worker, which exits 0', { timeout: 120_000 }, async () => {
    const r = await stopUnderHeldStep('setPhase', LOCAL_STEPS_END_MS / 3, () => serveUp(b.temporal.client, b.node, 'vision'));
    assert.deepEqual(r.how, { code: 0, signal: null }, r.held.stderr());
    assert.ok(r.tookMs < WORKER_STOP_MS, `the worker took ${r.tookMs} ms to stop`);
    assert.match(r.held.stderr(), QUIET_LINE);
    assert.doesNotMatch(r.held.stderr(), /stopped with work left/);
    // The bring-up ended before the worker did; the ledger is read once a worker answers it again.
    const outcome = await r.op;
    const next = await startWorker();
    assert.deepEqual(await onTheBox('vision', outcome), { running: true, reservations: ['vision running'] });
    await next.stop();
  });

  test(
    'a step whose workflow asks for its next one (a ledger Update) as it ends: that one is sent before the shutdown begins; exit 0, the next worker finishes',
    { timeout: 120_000 },
    async () => {
      // The acquisition's ledgerSnapshot, then ms later its ledgerAcquire: the shutdown must not begin in between.
      const r = await stopUnderHeldStep('snapshot', LOCAL_STEPS_END_MS / 3, () => serveAcquire(b.temporal.client, b.node, { serve: 'tiny' }));
      const err = r.held.stderr();
      const acquireAt = err.indexOf('fleet-worker: ledger acquire');
      const shutdownAt = err.search(QUIET_LINE);
      assert.ok(acquireAt >= 0 && shutdownAt > acquireAt, `the acquire was not sent before the shutdown began:\n${err}`);
      assert.deepEqual(r.how, { code: 0, signal: null }, err);
      assert.ok(r.tookMs < WORKER_STOP_MS, `the worker took ${r.tookMs} ms to stop`);
      const next = await startWorker();
      assert.deepEqual(await onTheBox('tiny', await r.op), { running: true, reservations: ['tiny running', 'vision running'] });
      await next.stop();
    },
  );

  test('a step held past its wait is left, named, within the bound; the next worker brings the serve up', { timeout: 120_000 }, async () => {
    const r = await stopUnderHeldStep('setPhase', LOCAL_STEPS_END_MS + 2_000, () => serveUp(b.temporal.client, b.node, 'fast'));
    assert.ok(r.tookMs < EXIT_WITHIN_MS, `the worker took ${r.tookMs} ms to stop`);
    assert.deepEqual(r.how, { code: 1, signal: null }, 'the worker was killed, or exited as if clean');
    assert.match(r.held.stderr(), /^worker: SIGTERM: local steps still running after 3 s: ledgerSetPhase of serves-up\/\S+\/fast; shutting down/m);
    assert.match(r.held.stderr(), /still in flight after \d+ s of stopping: ledgerSetPhase of serves-up\/\S+\/fast /);
    // The operation is not failed by the stop: the next worker runs its step again and finishes it.
    const next = await startWorker();
    assert.deepEqual(await onTheBox('fast', await r.op), { running: true, reservations: ['fast running', 'tiny running', 'vision running'] });
    await next.stop();
  });

  test(
    'a container start cancelled by the stop after its container was made keeps it, without asking the ledger (which no stopping worker answers): exit 0, the next worker adopts it',
    { timeout: 120_000 },
    async () => {
      // The start's second fence (after the container is made) is held: the shutdown's cancel reaches
      // the step there. Asked whose the serve is, the ledger's query (12 s) would outlast the bound.
      let madeBefore: Awaited<ReturnType<typeof b.box.runtime.inspect>>;
      const r = await stopUnderHeldStep(
        'fence:started',
        2_000,
        () => serveUp(b.temporal.client, b.node, 'mini'),
        async () => {
          madeBefore = await b.box.runtime.inspect(containerName(b.node, 'mini'));
        },
      );
      assert.deepEqual(r.how, { code: 0, signal: null }, r.held.stderr());
      assert.ok(r.tookMs < WORKER_STOP_MS, `the worker took ${r.tookMs} ms to stop`);
      assert.ok(madeBefore, 'the container was not made before the stop');
      console.log(`  mini's container ${madeBefore.id}, made before the stop`);
      const kept = await b.box.runtime.inspect(containerName(b.node, 'mini'));
      assert.equal(kept?.id, madeBefore.id, 'the stopped worker removed the container it made');
      const next = await startWorker();
      assert.deepEqual(await onTheBox('mini', await r.op), { running: true, reservations: ['fast running', 'mini running', 'tiny running', 'vision running'] });
      const after = await b.box.runtime.inspect(containerName(b.node, 'mini'));
      assert.equal(after?.id, madeBefore.id, 'the next worker made another container instead of adopting it');
      await next.stop();
    },
  );

  test('with nothing in flight, stops at once and exits 0', { timeout: 60_000 }, async () => {
    const idle = await startWorker();
    const began = Date.now();
    idle.child.kill('SIGTERM');
    const how = await idle.exited;
    const tookMs = Date.now() - began;
    console.log(`  SIGTERM to exit, idle: ${tookMs} ms (${how.code ?? how.signal})`);
    assert.deepEqual(how, { code: 0, signal: null }, idle.stderr());
    assert.ok(tookMs < LOCAL_STEPS_END_MS, `the idle worker took ${tookMs} ms to stop`);
    assert.match(idle.stderr(), QUIET_LINE);
    assert.doesNotMatch(idle.stderr(), /stopped with work left/);
  });
});
