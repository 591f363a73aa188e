// The ledger entity workflow: validators reject malformed requests before they reach history,
// and continue-as-new carries the reservations over intact.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { WorkflowUpdateFailedError } from '@temporalio/client';
import type { Client } from '@temporalio/client';
import { LedgerClient } from '../src/adapters/ledger/ledger-client';
import { DEV_SERVER_FLAGS } from '../src/dev/dev-server';
import { emptyLedger, totals } from '../src/domain/ledger';
import { slotUpdateId } from '../src/domain/start-slot';
import type { GpuSpec } from '../src/domain/types';
import {
  abortEvictionUpdate,
  acquireUpdate,
  admitUpdate,
  beginStopUpdate,
  releaseUpdate,
  setPhaseUpdate,
  snapshotQuery,
  startSlotUpdate,
  taskQueueFor,
  workflowIds,
} from '../src/shared/messages';
import type { ledgerWorkflow } from '../src/workflows/ledger';
import { renderManifest, startTestBox, uniqueNode } from './support/box';
import type { TestBox } from './support/box';
import { untilReconciled } from './support/wait';

const GPU = { role: 'dark-fast', uuid: 'GPU-x', capacityMib: 32607, reserveMib: 4608 };
// dist/test/ledger-workflow.test.js -> repo root
const ROOT = join(__dirname, '..', '..');

interface Decided {
  update: string;
  serve: string;
  /** What the ledger committed after this decision, from the requests and their answers. */
  committedMib: number;
  outcome: 'admitted' | 'denied' | 'released' | 'not-released' | 'failed' | 'other';
}

const decode = (p: { data?: Uint8Array | null } | null | undefined): unknown => (p?.data ? JSON.parse(Buffer.from(p.data).toString('utf8')) : undefined);

/**
 * Every admit and release decision of a ledger, in the order its history (every run of it)
 * records them, with the MiB it committed after each: from the accepted requests and the
 * answers alone, whatever else a result carries.
 */
async function ledgerDecisions(client: Client, workflowId: string): Promise<Decided[]> {
  const out: Decided[] = [];
  const held = new Map<string, number>();
  let committed = 0;
  const runs: string[] = [];
  for await (const run of client.workflow.list({ query: `WorkflowId = '${workflowId}'` })) runs.unshift(run.runId);
  for (const runId of runs) {
    const requests = new Map<string, { name: string; arg: { serve?: string; vramMib?: number } }>();
    for (const e of (await client.workflow.getHandle(workflowId, runId).fetchHistory()).events ?? []) {
      const accepted = e.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest;
      if (accepted?.meta?.updateId)
        requests.set(accepted.meta.updateId, { name: accepted.input?.name ?? '', arg: decode(accepted.input?.args?.payloads?.[0]) ?? {} });
      const completed = e.workflowExecutionUpdateCompletedEventAttributes;
      if (!completed?.meta?.updateId) continue;
      const req = requests.get(completed.meta.updateId);
      if (!req || (req.name !== 'admit' && req.name !== 'release')) continue;
      const serve = req.arg.serve ?? '?';
      const answer = decode(completed.outcome?.success?.payloads?.[0]) as { decision?: { decision?: string }; released?: boolean } | undefined;
      let outcome: Decided['outcome'] = 'other';
      if (completed.outcome?.failure) outcome = 'failed';
      else if (req.name === 'admit' && answer?.decision?.decision === 'admitted') {
        outcome = 'admitted';
        if (!held.has(serve)) committed += req.arg.vramMib ?? 0;
        held.set(serve, req.arg.vramMib ?? 0);
      } else if (req.name === 'admit') outcome = answer?.decision?.decision === 'denied' ? 'denied' : 'other';
      else if (answer?.released) {
        outcome = 'released';
        committed -= held.get(serve) ?? 0;
        held.delete(serve);
      } else outcome = 'not-released';
      out.push({ update: req.name, serve, committedMib: committed, outcome });
    }
  }
  return out;
}

describe('ledger entity workflow', () => {
  let box: TestBox;
  before(async () => {
    const node = uniqueNode('ledger');
    box = await startTestBox(node, renderManifest(node, [{ role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 }], []));
  });
  after(async () => {
    await box?.close();
  });

  test('continue-as-new keeps every reservation and the next run keeps deciding', async () => {
    const workflowId = workflowIds.ledger(box.node, 'dark-fast');
    const handle = await box.temporal.client.workflow.start<typeof ledgerWorkflow>('ledgerWorkflow', {
      workflowId,
      taskQueue: taskQueueFor(box.node),
      args: [{ node: box.node, gpu: GPU, maxHistoryEvents: 40 }],
    });
    const firstRun = handle.firstExecutionRunId;
    const h = box.temporal.client.workflow.getHandle<typeof ledgerWorkflow>(workflowId);
    await untilReconciled(h);
    for (let i = 0; i < 20; i++) {
      const r = await h.executeUpdate(admitUpdate, { args: [{ serve: `s${i}`, vramMib: 1000, class: 'resident', holder: `h${i}`, gpu: GPU }] });
      assert.equal(r.decision.decision, 'admitted', `s${i}`);
    }
    const released = await h.executeUpdate(releaseUpdate, { args: [{ serve: 's3', holder: 'h3' }] });
    assert.equal(released.vramMib, 1000);
    assert.deepEqual(released.totals, { budgetMib: 27999, committedMib: 19000, heldMib: 0, freeMib: 8999 });
    const d = await h.describe();
    assert.notEqual(d.runId, firstRun, 'the ledger should have continued as new');
    const state = await h.query(snapshotQuery);
    assert.equal(state.reservations.length, 19);
    assert.deepEqual(totals(state), { budgetMib: 27999, committedMib: 19000, heldMib: 0, freeMib: 8999 });
    const denied = await h.executeUpdate(admitUpdate, { args: [{ serve: 'big', vramMib: 9000, class: 'resident', holder: 'hb', gpu: GPU }] });
    assert.deepEqual(denied.decision, { decision: 'denied', serve: 'big', vramMib: 9000, freeMib: 8999, shortfallMib: 1 });
  });

  test('a fresh run reads the run it replaces, not an older one, while the list of runs lags a continue-as-new', async () => {
    // Three runs: an older one, terminated; a newer one that continued as new; its continuation,
    // terminated. The visibility store behind `list` is eventually consistent: right after a
    // continue-as-new and a terminate it may not list the continuation yet, which is simulated here
    // by dropping it from every list (the server's own history is not touched).
    const client = box.temporal.client;
    const gpu = { ...GPU, role: 'lost-run' };
    const workflowId = workflowIds.ledger(box.node, gpu.role);
    const start = (maxHistoryEvents?: number) =>
      client.workflow.start<typeof ledgerWorkflow>('ledgerWorkflow', {
        workflowId,
        taskQueue: taskQueueFor(box.node),
        args: [{ node: box.node, gpu, state: emptyLedger(box.node, gpu), ...(maxHistoryEvents ? { maxHistoryEvents } : {}) }],
      });
    const admit = (serve: string, vramMib: number) =>
      client.workflow
        .getHandle<typeof ledgerWorkflow>(workflowId)
        .executeUpdate(admitUpdate, { args: [{ serve, vramMib, class: 'resident', holder: `h-${serve}`, gpu }] });
    const older = await start();
    await admit('older', 1000);
    await older.terminate('test: the older run');
    const newer = await start(30);
    let last = newer.firstExecutionRunId;
    for (let i = 0; last === newer.firstExecutionRunId; i++) {
      await admit(`s${i}`, 100);
      last = (await client.workflow.getHandle(workflowId).describe()).runId;
    }
    await admit('latest', 200);
    await client.workflow.getHandle(workflowId, last).terminate('test: the run a fresh one replaces');

    const list = client.workflow.list.bind(client.workflow);
    client.workflow.list = (o) => {
      const it = list(o);
      return Object.assign(Object.create(it) as typeof it, {
        async *[Symbol.asyncIterator]() {
          for await (const wf of it) if (wf.runId !== last) yield wf;
        },
      });
    };
    try {
      const lost = await new LedgerClient(client).lostRunState(box.node, gpu.role, '00000000-0000-4000-8000-000000000000', 15_000);
      const serves = lost.read === 'state' ? lost.state.reservations.map((r) => r.serve) : [];
      console.log(`  runs: older ${older.firstExecutionRunId}, newer ${newer.firstExecutionRunId} → ${last} (not listed); read: [${serves.join(', ')}]`);
      assert.ok(serves.includes('latest'), `the fresh run would read an older run: [${serves.join(', ')}]`);
      assert.ok(!serves.includes('older'));
    } finally {
      client.workflow.list = list;
    }
  });

  test('a compensation releases only its own reservation; setPhase by another run is rejected', async () => {
    const h = box.temporal.client.workflow.getHandle<typeof ledgerWorkflow>(workflowIds.ledger(box.node, 'dark-fast'));
    const mine = await h.executeUpdate(admitUpdate, { args: [{ serve: 'owned', vramMib: 10, class: 'resident', holder: 'run-b', gpu: GPU }] });
    assert.equal(mine.decision.decision, 'admitted');
    const stale = await h.executeUpdate(releaseUpdate, { args: [{ serve: 'owned', holder: 'run-a' }] });
    assert.equal(stale.released, false);
    assert.ok((await h.query(snapshotQuery)).reservations.some((r) => r.serve === 'owned' && r.holder === 'run-b'));
    await assert.rejects(
      h.executeUpdate(setPhaseUpdate, { args: [{ serve: 'owned', phase: 'running', holder: 'run-a' }] }),
      (err: unknown) => err instanceof WorkflowUpdateFailedError && /held by run-b, not run-a/.test(String(err.cause?.message)),
    );
    assert.equal(stale.heldBy, 'run-b');
    // Fencing: a release naming no holder never takes a serve from under the operation bringing it up.
    await assert.rejects(
      h.executeUpdate(releaseUpdate, { args: [{ serve: 'owned' }] }),
      (err: unknown) =>
        err instanceof WorkflowUpdateFailedError && /release of owned without a holder refused: run-b holds it \(admitted\)/.test(String(err.cause?.message)),
    );
    const own = await h.executeUpdate(releaseUpdate, { args: [{ serve: 'owned', holder: 'run-b' }] });
    assert.deepEqual([own.released, own.vramMib], [true, 10]);
  });

  test('a bring-down that lets go of a serve it took from running gives the hold back to the run it took it from (a lease retrying its expiry finds it its own)', async () => {
    const h = box.temporal.client.workflow.getHandle<typeof ledgerWorkflow>(workflowIds.ledger(box.node, 'dark-fast'));
    const held = () => h.query(snapshotQuery).then((l) => l.reservations.find((r) => r.serve === 'leased'));
    assert.equal(
      (await h.executeUpdate(admitUpdate, { args: [{ serve: 'leased', vramMib: 10, class: 'on-demand', holder: 'acquire-a', gpu: GPU }] })).decision.decision,
      'admitted',
    );
    await h.executeUpdate(setPhaseUpdate, { args: [{ serve: 'leased', phase: 'running', holder: 'acquire-a' }] });
    const taken = await h.executeUpdate(beginStopUpdate, { args: [{ serve: 'leased', holder: 'down-b', class: 'on-demand' }] });
    assert.equal(taken.decision, 'taken');
    assert.deepEqual([(await held())?.phase, (await held())?.holder], ['stopping', 'down-b']);
    // Its stop failed: the bring-down's let-go puts the serve back to running, under the run it took it from.
    await h.executeUpdate(setPhaseUpdate, { args: [{ serve: 'leased', phase: 'running', holder: 'down-b' }] });
    const back = await held();
    assert.deepEqual([back?.phase, back?.holder, back?.takenFrom], ['running', 'acquire-a', undefined]);
    // The let-go retried after a continue-as-new (a new run: the server no longer answers it from the first) is answered, and changes nothing.
    await h.executeUpdate(setPhaseUpdate, { args: [{ serve: 'leased', phase: 'running', holder: 'down-b' }] });
    assert.deepEqual([(await held())?.phase, (await held())?.holder], ['running', 'acquire-a']);
    // The lease's next try takes it (as acquire-a's), and a plain setPhase keeps its holder.
    await h.executeUpdate(setPhaseUpdate, { args: [{ serve: 'leased', phase: 'running', holder: 'acquire-a' }] });
    assert.equal((await held())?.holder, 'acquire-a');
    const own = await h.executeUpdate(releaseUpdate, { args: [{ serve: 'leased', holder: 'acquire-a' }] });
    assert.deepEqual([own.released, own.vramMib], [true, 10]);
  });

  test("a bring-down's take that asks for the stop's start slot and the ledger: taken with the serve, or who holds it; the ledger before and after it", async () => {
    const h = box.temporal.client.workflow.getHandle<typeof ledgerWorkflow>(workflowIds.ledger(box.node, 'dark-fast'));
    const line = (l: { reservations: { serve: string; phase: string; holder: string }[] } | undefined, serve: string) =>
      l?.reservations.filter((r) => r.serve === serve).map((r) => `${r.phase} ${r.holder}`);
    const slot = { startTimeoutS: 60, holdS: 200 };
    for (const s of ['st1', 'st2']) {
      await h.executeUpdate(admitUpdate, { args: [{ serve: s, vramMib: 10, class: 'resident', holder: `up-${s}`, gpu: GPU }] });
      await h.executeUpdate(setPhaseUpdate, { args: [{ serve: s, phase: 'running', holder: `up-${s}` }] });
    }
    const taken = await h.executeUpdate(beginStopUpdate, { args: [{ serve: 'st1', holder: 'down-st1', answerLedger: true, stopSlot: slot }] });
    assert.deepEqual([taken.decision, taken.slot], ['taken', { taken: true }]);
    assert.deepEqual(line(taken.ledgerBefore, 'st1'), ['running up-st1'], 'the ledger before the take');
    assert.deepEqual(line(taken.ledger, 'st1'), ['stopping down-st1'], 'the ledger after it');
    assert.equal(taken.ledgerBefore?.startSlot, undefined);
    assert.deepEqual([taken.ledger?.startSlot?.holder, taken.ledger?.startSlot?.doing, taken.ledger?.startSlot?.holdS], ['down-st1', 'stopping', 200]);
    // Held by that stop: the next take still takes its serve, and is told who holds the slot; nothing asked, nothing answered.
    const second = await h.executeUpdate(beginStopUpdate, { args: [{ serve: 'st2', holder: 'down-st2', stopSlot: slot }] });
    assert.deepEqual(
      [second.decision, second.slot?.taken, second.slot && 'heldBy' in second.slot ? second.slot.heldBy?.holder : undefined],
      ['taken', false, 'down-st1'],
    );
    assert.deepEqual([second.ledger, second.ledgerBefore], [undefined, undefined]);
    // A take that does not ask (a run from before take-answers; here the same take retried) is answered no slot.
    const plain = await h.executeUpdate(beginStopUpdate, { args: [{ serve: 'st2', holder: 'down-st2' }] });
    assert.equal(plain.slot, undefined);
    // A stop's slot carries its two bounds and nothing else: a wake there would enrol a waiter past the startSlot take's checks.
    await assert.rejects(
      h.executeUpdate(beginStopUpdate, { args: [{ serve: 'st2', holder: 'down-st2', stopSlot: { ...slot, wake: '' } as unknown as typeof slot }] }),
      (err: Error) => /beginStop st2: stopSlot must be .* and nothing else \(got /.test(`${err.message} ${(err.cause as Error | undefined)?.message ?? ''}`),
    );
    // The first stop's release gives it back.
    await h.executeUpdate(releaseUpdate, { args: [{ serve: 'st1', holder: 'down-st1' }] });
    assert.equal((await h.query(snapshotQuery)).startSlot, undefined, "the stop's release left its slot held");
    await h.executeUpdate(releaseUpdate, { args: [{ serve: 'st2', holder: 'down-st2' }] });
  });

  test("an acquisition whose start failed gives its start slot back by its eviction's abort, its only compensation (never a release)", async () => {
    const h = box.temporal.client.workflow.getHandle<typeof ledgerWorkflow>(workflowIds.ledger(box.node, 'dark-fast'));
    assert.equal(
      (await h.executeUpdate(admitUpdate, { args: [{ serve: 'od', vramMib: 10, class: 'on-demand', holder: 'acquire-od', gpu: GPU }] })).decision.decision,
      'admitted',
    );
    const take = await h.executeUpdate(startSlotUpdate, { args: [{ serve: 'od', holder: 'acquire-od', take: true, startTimeoutS: 60 }] });
    assert.equal(take.taken, true);
    assert.equal((await h.query(snapshotQuery)).startSlot?.holder, 'acquire-od');
    // Another run's abort leaves it.
    await h.executeUpdate(abortEvictionUpdate, { args: [{ acquirer: 'od', stopped: [], holder: 'acquire-other' }] });
    assert.equal((await h.query(snapshotQuery)).startSlot?.holder, 'acquire-od');
    await h.executeUpdate(abortEvictionUpdate, { args: [{ acquirer: 'od', stopped: [], holder: 'acquire-od' }] });
    assert.equal((await h.query(snapshotQuery)).startSlot, undefined, 'the failed acquisition still holds the start slot');
    const next = await h.executeUpdate(startSlotUpdate, { args: [{ serve: 'b', holder: 'up-b', take: true, startTimeoutS: 60 }] });
    assert.equal(next.taken, true);
    await h.executeUpdate(startSlotUpdate, { args: [{ serve: 'b', holder: 'up-b', take: false }] });
    await h.executeUpdate(releaseUpdate, { args: [{ serve: 'od', holder: 'acquire-od' }] });
  });

  test("a bring-up's admission takes the start slot with it, and its `running` gives it back: another's admission is told who holds it, a denial takes none", async () => {
    const h = box.temporal.client.workflow.getHandle<typeof ledgerWorkflow>(workflowIds.ledger(box.node, 'dark-fast'));
    const admit = (serve: string, holder: string, vramMib = 10, updateId?: string) =>
      h.executeUpdate(admitUpdate, {
        args: [{ serve, vramMib, class: 'resident', holder, gpu: GPU, startSlot: { startTimeoutS: 60 } }],
        ...(updateId ? { updateId } : {}),
      });
    const a = await admit('cold-a', 'up-a');
    assert.equal(a.decision.decision, 'admitted');
    assert.deepEqual(a.startSlot, { taken: true });
    const slot = (await h.query(snapshotQuery)).startSlot;
    assert.deepEqual([slot?.serve, slot?.holder, slot?.startTimeoutS], ['cold-a', 'up-a', 60]);
    assert.equal(a.ledger?.startSlot?.holder, 'up-a', 'the answer carries the state with the slot taken');
    // Admitted, with the slot another run's: told who holds it (the run then waits as a take does).
    const b = await admit('cold-b', 'up-b');
    assert.equal(b.decision.decision, 'admitted');
    assert.equal(b.startSlot?.taken === false ? b.startSlot.heldBy?.holder : 'taken', 'up-a');
    // Denied: nothing taken, nothing said of the slot.
    const big = await admit('cold-big', 'up-big', 30000);
    assert.equal(big.decision.decision, 'denied');
    assert.equal(big.startSlot, undefined);
    // A retry of the first admission (after a continue-as-new: another update id) is answered the same, its since kept.
    const retried = await admit('cold-a', 'up-a', 10, 'up-a/admit-again');
    assert.deepEqual(retried.startSlot, { taken: true });
    assert.equal((await h.query(snapshotQuery)).startSlot?.sinceMs, slot?.sinceMs);
    // Another run's `running` gives back no slot it does not hold; the holder's does.
    await h.executeUpdate(setPhaseUpdate, { args: [{ serve: 'cold-b', phase: 'running', holder: 'up-b', giveStartSlot: true }] });
    assert.equal((await h.query(snapshotQuery)).startSlot?.holder, 'up-a');
    const running = await h.executeUpdate(setPhaseUpdate, { args: [{ serve: 'cold-a', phase: 'running', holder: 'up-a', giveStartSlot: true }] });
    assert.equal(running.ledger?.startSlot, undefined, 'running with giveStartSlot left the slot held');
    assert.equal((await h.query(snapshotQuery)).reservations.find((r) => r.serve === 'cold-a')?.phase, 'running');
    // An admission without the ask leaves the slot alone (runs from before, acquisitions).
    const plain = await h.executeUpdate(admitUpdate, { args: [{ serve: 'cold-c', vramMib: 10, class: 'resident', holder: 'up-c', gpu: GPU }] });
    assert.equal(plain.startSlot, undefined);
    assert.equal((await h.query(snapshotQuery)).startSlot, undefined);
    for (const [serve, holder] of [
      ['cold-a', 'up-a'],
      ['cold-b', 'up-b'],
      ['cold-c', 'up-c'],
    ] as const)
      await h.executeUpdate(releaseUpdate, { args: [{ serve, holder }] });
  });

  test("the lost-run note is told only by an answer an operation shows: a compensation's (quiet) leaves it untold", async () => {
    const client = box.temporal.client;
    const gpu = { ...GPU, role: 'note' };
    const workflowId = workflowIds.ledger(box.node, gpu.role);
    const lostRunUnread = { why: 'no earlier run of this ledger is listed, yet serves of its GPU run: its history is gone', atMs: 1_000 };
    const h = await client.workflow.start<typeof ledgerWorkflow>('ledgerWorkflow', {
      workflowId,
      taskQueue: taskQueueFor(box.node),
      args: [{ node: box.node, gpu, state: { ...emptyLedger(box.node, gpu), lostRunUnread } }],
    });
    await h.executeUpdate(admitUpdate, { args: [{ serve: 'a', vramMib: 10, class: 'resident', holder: 'h-a', gpu }] });
    assert.equal((await h.query(snapshotQuery)).lostRunUnread?.told, true, 'an admission (its step log shows the note) tells it');
    await h.terminate('test: told');
    // The same note untold, then only compensations' answers.
    const third = await client.workflow.start<typeof ledgerWorkflow>('ledgerWorkflow', {
      workflowId,
      taskQueue: taskQueueFor(box.node),
      args: [
        {
          node: box.node,
          gpu,
          state: {
            ...emptyLedger(box.node, gpu),
            reservations: [{ serve: 'c', vramMib: 10, class: 'resident', phase: 'running', holder: 'h-c' }],
            lostRunUnread,
          },
        },
      ],
    });
    await third.executeUpdate(setPhaseUpdate, { args: [{ serve: 'c', phase: 'running', holder: 'h-c', quiet: true }] });
    await third.executeUpdate(releaseUpdate, { args: [{ serve: 'c', holder: 'h-c', quiet: true }] });
    await third.executeUpdate(abortEvictionUpdate, { args: [{ acquirer: 'c', stopped: [], holder: 'h-c', quiet: true }] });
    const l = await third.query(snapshotQuery);
    console.log(`  after three quiet answers: ${JSON.stringify(l.lostRunUnread)}`);
    assert.equal(l.lostRunUnread?.told, undefined, 'a compensation (which shows nobody) marked the note told');
    await third.terminate('test: done');
  });

  test('a wake falling back to a cold start renews its slot: since moves to the renewal, so a waiter counts its bound from there', async () => {
    const h = box.temporal.client.workflow.getHandle<typeof ledgerWorkflow>(workflowIds.ledger(box.node, 'dark-fast'));
    const w = 'serves-up/n/sv/run-w';
    // The ids a run sends, ask by ask, as start-slot.ts numbers them: take, renew, give.
    let ask = 0;
    const slot = (args: { take: boolean; renew?: boolean }) =>
      h.executeUpdate(startSlotUpdate, {
        args: [{ serve: 'sv', holder: w, startTimeoutS: 60, ...args }],
        updateId: slotUpdateId(w, ask++, args.take),
      });
    assert.equal((await slot({ take: true })).taken, true);
    const took = (await h.query(snapshotQuery)).startSlot?.sinceMs ?? 0;
    await new Promise((r) => setTimeout(r, 1200));
    // A retake without renew keeps since (a retry); the renewal moves it.
    assert.equal((await slot({ take: true })).taken, true);
    assert.equal((await h.query(snapshotQuery)).startSlot?.sinceMs, took);
    assert.equal((await slot({ take: true, renew: true })).taken, true);
    const renewed = (await h.query(snapshotQuery)).startSlot?.sinceMs ?? 0;
    const waiter = await h.executeUpdate(startSlotUpdate, { args: [{ serve: 'b', holder: 'up-b', take: true, startTimeoutS: 60 }] });
    console.log(`  took at ${took}, renewed at ${renewed}; a waiter is told since ${waiter.taken ? '(taken)' : waiter.heldBy?.sinceMs}`);
    assert.ok(renewed >= took + 1000, `since not renewed: ${took} -> ${renewed}`);
    assert.equal(waiter.taken ? undefined : waiter.heldBy?.sinceMs, renewed);
    // Given back, taken and given back again in the same run: each give its own Update, so the second frees it too.
    await slot({ take: false });
    assert.equal((await slot({ take: true })).taken, true);
    await slot({ take: false });
    assert.equal((await h.query(snapshotQuery)).startSlot, undefined, 'the second give of one run was answered from the first');
  });

  test("a sleeper's restore, and its acquisition that evicts, retried after the ledger continued as new: answered as they were, asleep at level 1", async () => {
    // The server answers a retried update from its first answer only within one run: after a
    // continue-as-new the same update id reaches the handler again, and must be told the same.
    const sleeper = {
      serve: 'sv',
      vramMib: 12288,
      class: 'evictable' as const,
      phase: 'sleeping' as const,
      holder: 'old',
      evictedFor: 'x',
      sleep: { level: 1 as const, residualMib: 600 },
      sleptAtLevel: 1 as const,
    };
    const victim = { serve: 'vv', vramMib: 20000, class: 'evictable' as const, phase: 'running' as const, holder: 'vv-run' };
    const cases = [
      { role: 'retry-restore', reservations: [sleeper], update: 'admit', want: ['admitted', true, 1] },
      { role: 'retry-acquire', reservations: [sleeper, victim], update: 'acquire', want: ['evicting', undefined, 1] },
    ] as const;
    for (const c of cases) {
      const gpu = { ...GPU, role: c.role };
      const workflowId = workflowIds.ledger(box.node, gpu.role);
      const state = {
        node: box.node,
        gpuRole: gpu.role,
        gpuUuid: gpu.uuid,
        capacityMib: gpu.capacityMib,
        reserveMib: gpu.reserveMib,
        reservations: [...c.reservations],
      };
      const handle = await box.temporal.client.workflow.start<typeof ledgerWorkflow>('ledgerWorkflow', {
        workflowId,
        taskQueue: taskQueueFor(box.node),
        args: [{ node: box.node, gpu, state, maxHistoryEvents: 30 }],
      });
      const h = box.temporal.client.workflow.getHandle<typeof ledgerWorkflow>(workflowId);
      const req = {
        serve: 'sv',
        vramMib: 12288,
        class: 'evictable' as const,
        holder: `${c.role}-run`,
        gpu,
        sleep: { level: 1 as const, residualMib: 600 },
        evict: true,
      };
      const updateId = `${c.role}-run/admit`;
      const send = () =>
        c.update === 'admit' ? h.executeUpdate(admitUpdate, { args: [req], updateId }) : h.executeUpdate(acquireUpdate, { args: [req], updateId });
      const seen = (a: Awaited<ReturnType<typeof send>>) => [a.decision.decision, 'wasEvicted' in a ? a.wasEvicted : undefined, a.wasAsleep];
      assert.deepEqual(seen(await send()), c.want, `${c.role}: first`);
      for (let i = 0; (await h.describe()).runId === handle.firstExecutionRunId; i++) {
        assert.ok(i < 40, 'the ledger should have continued as new');
        await h.executeUpdate(admitUpdate, { args: [{ serve: `f${i}`, vramMib: 10, class: 'resident', holder: `h${i}`, gpu }] });
      }
      assert.deepEqual(seen(await send()), c.want, `${c.role}: retried after a continue-as-new`);
      await h.terminate('test done');
    }
  });

  test('a malformed admission is rejected by the validator and leaves no decision in history', async () => {
    const h = box.temporal.client.workflow.getHandle<typeof ledgerWorkflow>(workflowIds.ledger(box.node, 'dark-fast'));
    const before = await h.query(snapshotQuery);
    await assert.rejects(
      h.executeUpdate(admitUpdate, { args: [{ serve: 'zero', vramMib: 0, class: 'resident', holder: 'hz', gpu: GPU }] }),
      (err: unknown) =>
        err instanceof WorkflowUpdateFailedError &&
        /admit zero: vramMib must be a whole number of MiB in 1\.\.1048576 \(got 0\)/.test(String(err.cause?.message)),
    );
    await assert.rejects(
      h.executeUpdate(admitUpdate, { args: [{ serve: 'other', vramMib: 10, class: 'resident', holder: 'ho', gpu: { ...GPU, role: 'heavy' } }] }),
      (err: unknown) => err instanceof WorkflowUpdateFailedError && /sent to the ledger of 'dark-fast'/.test(String(err.cause?.message)),
    );
    assert.deepEqual(await h.query(snapshotQuery), before);
  });

  test('an update from the Temporal UI whose argument the handler cannot take is refused by name, and the ledger keeps deciding', async () => {
    const h = box.temporal.client.workflow.getHandle<typeof ledgerWorkflow>(workflowIds.ledger(box.node, 'dark-fast'));
    const before = await h.query(snapshotQuery);
    const { events: eventsBefore } = await h.fetchHistory();
    // By name, with what a form sends: no argument at all, a field missing, a phase or step by hand.
    const refused: [string, unknown[], RegExp][] = [
      [
        'abortEviction',
        [],
        /abortEviction: the argument must be one JSON object with acquirer, stopped, slept, sleptHoldingMib, holder, quiet \(got nothing\)/,
      ],
      [
        'abortEviction',
        [{ acquirer: 'owned', stopped: [], slept: { vision: 2 }, sleptHoldingMib: { vision: -1 } }],
        /abortEviction owned: sleptHoldingMib must be an object of serve name to MiB \(a whole number of MiB in 0\.\.\d+\) \(got/,
      ],
      ['setPhase', [], /setPhase: the argument must be one JSON object/],
      ['victimReleased', [{ victim: 'owned' }], /victimReleased owned: acquirer is required/],
      [
        'admit',
        [{ serve: 'nan', vramMib: 10, class: 'resident', holder: 'hn', gpu: { role: 'dark-fast', uuid: 'GPU-x', reserveMib: 0 } }],
        /admit nan: gpu\.capacityMib: a whole number of MiB in 1\.\.1048576 \(got nothing\)/,
      ],
      ['setPhase', [{ serve: 'owned', phase: 'stopped', holder: 'run-b' }], /setPhase owned: phase must be one of "running" \(got "stopped"\)/],
      ['setPhase', [{ serve: 'owned', phase: 'running' }], /setPhase owned: holder is required/],
      ['beginStop', [{ serve: 'owned', holder: 'hs', victimsDown: 'vision' }], /beginStop owned: victimsDown must be an array of serve names/],
      ['fence', [{ serve: 'owned', holder: 'run-b', step: 'bogus' }], /fence owned: step must be one of "start", "started", "wake", "sleep"/],
      ['acquire', [{ serve: 'acq', vramMib: 10, class: 'on-demand', holder: 'ha', gpu: GPU }], /acquire acq: evict is required/],
    ];
    for (const [name, args, message] of refused) {
      await assert.rejects(
        args.length ? h.executeUpdate(name, { args: [args[0]] }) : h.executeUpdate(name),
        (err: unknown) => err instanceof WorkflowUpdateFailedError && message.test(String(err.cause?.message)),
        `${name} ${JSON.stringify(args)}`,
      );
    }
    // Refused out of history: not one event more, nothing changed, and the next decision is taken.
    assert.equal((await h.fetchHistory()).events?.length, eventsBefore?.length);
    assert.deepEqual(await h.query(snapshotQuery), before);
    const next = await h.executeUpdate(admitUpdate, { args: [{ serve: 'after-refusals', vramMib: 10, class: 'resident', holder: 'hr', gpu: GPU }] });
    assert.equal(next.decision.decision, 'admitted');
    assert.deepEqual((await h.executeUpdate(releaseUpdate, { args: [{ serve: 'after-refusals', holder: 'hr' }] })).released, true);
  });

  test('50 concurrent callers of one ledger on a server left at history.maxInFlightUpdates = 10: every update answered, never over budget', async () => {
    // The project's own servers keep the default limit: the bound must hold without raising it.
    for (const [where, text] of [
      ['src/dev/dev-server.ts DEV_SERVER_FLAGS', DEV_SERVER_FLAGS.join(' ')],
      ['scripts/temporal-dev.sh', readFileSync(join(ROOT, 'scripts', 'temporal-dev.sh'), 'utf8')],
      ['docker-compose.temporal.yml', readFileSync(join(ROOT, 'docker-compose.temporal.yml'), 'utf8')],
    ]) {
      // Comments may name it; no setting may.
      const settings = (text ?? '').split('\n').filter((l) => !/^\s*#/.test(l));
      assert.deepEqual(
        settings.filter((l) => /maxInFlightUpdates/.test(l)),
        [],
        `${where} must leave history.maxInFlightUpdates at its default`,
      );
    }

    // 10 serves of 1000 MiB fit: 50 callers contend, some are denied, none may be over-admitted.
    const gpu: GpuSpec = { role: 'callers', uuid: 'GPU-callers', capacityMib: 10_000, reserveMib: 0 };
    const ledger = new LedgerClient(box.temporal.client);
    const started = Date.now();
    const outcomes = await Promise.allSettled(
      Array.from({ length: 50 }, async (_, i) => {
        const serve = `caller-${i}`;
        const holder = `bench/${i}`;
        const admitted = await ledger.admit(box.node, { serve, vramMib: 1000, class: 'resident', holder, gpu }, `${holder}/admit`);
        if (admitted.decision.decision !== 'admitted') return { admitted: false, released: false };
        const released = await ledger.release(box.node, gpu, { serve, holder }, `${holder}/release`);
        return { admitted: true, released: released.released };
      }),
    );
    const ms = Date.now() - started;
    const failed = outcomes.flatMap((o) => (o.status === 'rejected' ? [String(o.reason)] : []));
    assert.deepEqual(failed, [], 'every update answered');
    const answers = outcomes.flatMap((o) => (o.status === 'fulfilled' ? [o.value] : []));
    const admittedCount = answers.filter((a) => a.admitted).length;
    assert.ok(admittedCount >= 10, `${admittedCount} admitted`);
    assert.ok(
      answers.every((a) => a.released === a.admitted),
      'each admitted serve released',
    );

    const decisions = await ledgerDecisions(box.temporal.client, workflowIds.ledger(box.node, 'callers'));
    console.log(
      `  50 callers: ${decisions.length} decisions in ${ms} ms (${((decisions.length * 1000) / ms).toFixed(1)}/s), ${admittedCount} admitted, ${50 - admittedCount} denied`,
    );
    assert.equal(decisions.length, 50 + admittedCount, 'one decision per update, each in history');
    assert.deepEqual(
      decisions.filter((d) => d.outcome === 'failed' || d.outcome === 'other' || d.outcome === 'not-released'),
      [],
    );
    const over = decisions.filter((d) => d.committedMib > 10_000);
    assert.deepEqual(over, [], 'never over the 10000 MiB budget');
    assert.equal(decisions.at(-1)?.committedMib, 0);
    assert.equal(totals(await ledger.snapshot(box.node, gpu)).committedMib, 0);
  });
});
