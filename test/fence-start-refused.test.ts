// A run whose start fence is refused leaves alone the container another run started under the
// serve's name: run A is admitted and held at its start fence, its ledger is lost (terminated), a
// fresh ledger admits run B of the same serve and B starts its container, then A's fence is let
// through and refused (ReservationLost). The start step removes only a container of A's own (by
// id); A's saga used to stop and remove by name (REMOVE_CONTAINER), taking away B's running
// container, which the ledger holds for B. The box is read before and after A ends: the
// container's id and holder label, and the serves running with the MiB their labels reserve.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { exportWorkflow } from '../src/audit/export';
import { LedgerClient } from '../src/adapters/ledger/ledger-client';
import { findReservation } from '../src/domain/ledger';
import { containerName, LABEL } from '../src/domain/serve';
import { taskQueueFor, workflowIds } from '../src/shared/messages';
import { startSimTestBox } from './support/sim';
import type { SimTestBox } from './support/sim';
import { waitUntil } from './support/wait';
import { LedgerStepGate } from './support/fence-gate';
import { putToSleep, SLEEP_GPU, SLEEPER_SERVES } from './support/sleeper';

const GPU = { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 };
/** The operations that start a serve: its workflow, its CLI id and the holder's prefix. */
interface Operation {
  workflow: 'bringUpWorkflow' | 'acquireWorkflow';
  id: (node: string, serve: string) => string;
  prefix: string;
}
const BRING_UP: Operation = { workflow: 'bringUpWorkflow', id: workflowIds.bringUp, prefix: 'serves-up' };
const ACQUIRE: Operation = { workflow: 'acquireWorkflow', id: workflowIds.acquire, prefix: 'acquire' };
/** Where A's histories go when set (how start-refused-*.json in test/histories were recorded). */
const SAVE_DIR = process.env['GPURES_SAVE_HISTORIES'];

describe('a run whose start fence is refused leaves the container of the run the ledger holds the serve for alone', () => {
  let t: SimTestBox;
  const gate = new LedgerStepGate();

  before(async () => {
    // A holds the start slot at its start fence, and a fresh ledger carries it while A runs
    // (4382fc7), so B would wait for it and never start beside A: made to forget it, as for runs
    // from before the slot (which take none), the fence alone keeps them apart, as these cases show.
    gate.lostSlotForgotten = true;
    t = await startSimTestBox(
      'fence-start-refused',
      [GPU, SLEEP_GPU],
      [
        { name: 'vision', vram_mib: 12288, class: 'evictable', router_tier: 'vision-local' },
        { name: 'fast', vram_mib: 4000, router_tier: 'fast-local', served_model_name: 'fast-model' },
        // sleepy: evicted by sleeping; every wake fails, so its restore starts it cold.
        ...SLEEPER_SERVES,
      ],
      { ledger: (client) => gate.ledger(client) },
    );
  });
  after(async () => {
    gate.openAll();
    await t?.close();
  });

  /** The box's own word: the serve's container (id, running, holder label), and the serves running with the MiB their labels reserve. */
  async function sample(serve: string) {
    const c = await t.box.runtime.inspect(containerName(t.node, serve));
    const up = (await t.box.runtime.list({ [LABEL.node]: t.node })).filter((x) => x.running);
    return {
      container: c ? { id: c.id, running: c.running, holder: c.labels[LABEL.holder] } : null,
      running: up.map((x) => x.labels[LABEL.serve] ?? '?').sort(),
      mib: up.reduce((s, x) => s + Number(x.labels[LABEL.vramMib] ?? 0), 0),
    };
  }

  /** Starts one operation of the serve under its CLI id, as `serves up` (with or without --evict) does. */
  const start = (op: Operation, serve: string) =>
    t.temporal.client.workflow.start(op.workflow, { workflowId: op.id(t.node, serve), taskQueue: taskQueueFor(t.node), args: [{ serve }] });

  /**
   * A is held at its start fence; the ledger is terminated; B runs to completion on the fresh
   * ledger; then A's fence goes through. Returns the box before and after A ends, A's failure,
   * B's holder and what the ledger holds.
   */
  async function refusedBeside(serve: string, aOp: Operation, bOp: Operation, role = GPU.role) {
    const client = t.temporal.client;
    const held = gate.hold(`${aOp.prefix}/${t.node}/${serve}/`);
    const a = await start(aOp, serve);
    await waitUntil(`${aOp.prefix} of ${serve} at its start fence`, () => Promise.resolve(held.reached()), 60_000, 20);
    await client.workflow.getHandle(workflowIds.ledger(t.node, role)).terminate('test: the ledger is lost');
    await (await start(bOp, serve)).result();
    const gpu = t.manifest.gpus.find((g) => g.role === role)!;
    const bHolder = findReservation(await new LedgerClient(client).snapshot(t.node, gpu), serve)?.holder;
    const beforeA = await sample(serve);
    held.open();
    let aSteps: { step: string; outcome: string }[] = [];
    const aFailure = await a.result().then(
      (r) => `completed ${JSON.stringify(r).slice(0, 200)}`,
      (e: Error) => {
        const cause = e.cause as (Error & { details?: { steps?: typeof aSteps }[] }) | undefined;
        aSteps = cause?.details?.[0]?.steps ?? [];
        return cause?.message ?? e.message;
      },
    );
    const afterA = await sample(serve);
    const ledger = await new LedgerClient(client).snapshot(t.node, gpu);
    console.log(`  B (${bHolder}): ${JSON.stringify(beforeA)}`);
    console.log(`  A: ${aFailure}`);
    console.log(`  A steps: ${aSteps.map((x) => `${x.step}: ${x.outcome}`).join(' | ')}`);
    console.log(`  after A: ${JSON.stringify(afterA)}; ledger ${ledger.reservations.map((r) => `${r.serve} ${r.phase} ${r.holder}`).join('; ')}`);
    if (SAVE_DIR) {
      mkdirSync(SAVE_DIR, { recursive: true });
      await exportWorkflow(client, a.workflowId, { runId: a.firstExecutionRunId, file: join(SAVE_DIR, `${aOp.prefix}-${serve}.json`) });
    }
    return { beforeA, afterA, aFailure, aSteps, bHolder, held: findReservation(ledger, serve) };
  }

  const cases = [
    { title: "a bring-up refused at its start fence leaves the acquisition's running container, and says so", serve: 'vision', a: BRING_UP, b: ACQUIRE },
    { title: "an acquisition refused at its start fence leaves the bring-up's running container, and says so", serve: 'fast', a: ACQUIRE, b: BRING_UP },
  ];
  for (const { title, serve, a, b } of cases) {
    test(title, async () => {
      const r = await refusedBeside(serve, a, b);
      assert.ok(r.bHolder?.startsWith(`${b.prefix}/`), `B holds ${serve}: ${r.bHolder}`);
      const c = r.beforeA.container;
      assert.deepEqual(c && { running: c.running, holder: c.holder }, { running: true, holder: r.bHolder });
      assert.match(
        r.aFailure,
        new RegExp(`^serves up ${serve} failed at start: start of ${serve} refused: the reservation of '${serve}' is held by ${b.prefix}/\\S+ \\(running\\)`),
      );
      assert.deepEqual(r.afterA, r.beforeA, "A's compensation left the box as B had it: the same container, running, B's holder label");
      assert.ok(r.afterA.running.includes(serve));
      assert.deepEqual(r.held && { phase: r.held.phase, holder: r.held.holder }, { phase: 'running', holder: r.bHolder });
      // Nothing of A's was undone or kept: its removal by name was withdrawn, and its release waited for no container.
      assert.doesNotMatch(r.aFailure, /remove container|not undone/);
      assert.match(r.aFailure, /compensated: release reservation$/);
    });
  }

  test("a sleeper's restore whose wake fails and whose cold start is refused leaves the acquisition's running container alone", async () => {
    // sleepy sleeps, evicted: its restore is a wake.
    await putToSleep(t);
    const asleep = await sample('sleepy');
    assert.equal(asleep.container?.running, true, 'sleepy sleeps in its container');
    // A (serves up sleepy) wakes it, the wake fails, it stops it and starts cold: held at that start's fence.
    const r = await refusedBeside('sleepy', BRING_UP, ACQUIRE, SLEEP_GPU.role);
    const c = r.beforeA.container;
    const wake = r.aSteps.find((x) => x.step === 'wake')?.outcome;
    assert.match(wake ?? 'no wake step', /^wake of sleepy failed \(.*\): cold restart$/);
    assert.ok(r.bHolder?.startsWith('acquire/'), `B holds sleepy: ${r.bHolder}`);
    assert.notEqual(c?.id, asleep.container?.id, "B's container is its own, started after A stopped the sleeper");
    assert.deepEqual(c && { running: c.running, holder: c.holder }, { running: true, holder: r.bHolder });
    assert.match(
      r.aFailure,
      /^serves up sleepy \(restore\) failed at start: start of sleepy refused: the reservation of 'sleepy' is held by acquire\/\S+ \(running\)/,
    );
    assert.deepEqual(r.afterA, r.beforeA, "A's compensation left the box as B had it: the same container, running, B's holder label");
    assert.deepEqual(r.held && { phase: r.held.phase, holder: r.held.holder }, { phase: 'running', holder: r.bHolder });
    // Neither the wake's removal nor the cold start's was run, and the release waited for no container.
    assert.doesNotMatch(r.aFailure, /remove container|not undone/);
    assert.match(r.aFailure, /compensated: release reservation$/);
  });
});
