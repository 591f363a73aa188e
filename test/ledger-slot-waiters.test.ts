// The runs waiting for a GPU's start slot, as the ledger tells them (patched('slot-wakes-first')),
// on a real dev server with the ledger's Updates sent directly: one give tells one waiter, the
// longest waiting; a waiter told that finds another asker was first keeps its place; one told that
// never asks loses it at the next give; one whose run has closed is passed over at once; and the
// waiters are carried across the ledger's continue-as-new. Read from the ledger's own history (its
// SignalExternalWorkflowExecution events). The waiters are stand-ins: other ledgers, running
// workflows the signal reaches, as a bring-up waiting for the slot is.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { WorkflowHandle } from '@temporalio/client';
import { exportWorkflow } from '../src/audit/export';
import { emptyLedger } from '../src/domain/ledger';
import { ledgerInputProblems } from '../src/domain/inputs';
import type { GpuSpec } from '../src/domain/types';
import { snapshotQuery, startSlotUpdate, taskQueueFor, workflowIds } from '../src/shared/messages';
import type { ledgerWorkflow } from '../src/workflows/ledger';
import { renderManifest, startTestBox, uniqueNode } from './support/box';
import type { TestBox } from './support/box';
import { waitUntil } from './support/wait';

/** Where the ledgers' histories go when set (how test/histories/ledger-slot-wakes-first.json and ledger-slot-waiters-carried.json were recorded). */
const SAVE_DIR = process.env['GPURES_SAVE_HISTORIES'];

type Ledger = WorkflowHandle<typeof ledgerWorkflow>;

interface Told {
  to: string;
  eventId: number;
  /** Its SignalExternalWorkflowExecutionFailed's event id: the run it named had closed. */
  failedAt?: number;
}

describe('the start slot: one waiter told at a time, the longest waiting, carried across continue-as-new', () => {
  let box: TestBox;
  before(async () => {
    const node = uniqueNode('slot-waiters');
    box = await startTestBox(node, renderManifest(node, [{ role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 }], []));
  });
  after(async () => {
    await box?.close();
  });

  const client = () => box.temporal.client;

  /** A ledger started as a continuation (its state given: no reconcile), by its role. */
  async function ledger(role: string, maxHistoryEvents?: number): Promise<Ledger> {
    const gpu: GpuSpec = { role, uuid: `GPU-${role}`, capacityMib: 32607, reserveMib: 4608 };
    const workflowId = workflowIds.ledger(box.node, role);
    await client().workflow.start<typeof ledgerWorkflow>('ledgerWorkflow', {
      workflowId,
      taskQueue: taskQueueFor(box.node),
      args: [{ node: box.node, gpu, state: emptyLedger(box.node, gpu), ...(maxHistoryEvents !== undefined ? { maxHistoryEvents } : {}) }],
    });
    // Not the run's handle: updates follow the ledger across continue-as-new.
    const h = client().workflow.getHandle<typeof ledgerWorkflow>(workflowId);
    await h.query(snapshotQuery);
    return h;
  }

  /** A take (with `wake`, a waiting run's) or a give of the slot, by `holder`. */
  const slot = async (h: Ledger, holder: string, take: boolean, wake?: string): Promise<boolean> =>
    (await h.executeUpdate(startSlotUpdate, { args: [{ serve: 'sv', holder, take, startTimeoutS: 60, ...(wake ? { wake } : {}) }] })).taken;

  /** The signals the ledger's latest run sent, in order: to whom, and whether each failed. */
  async function told(h: Ledger): Promise<Told[]> {
    const out: Told[] = [];
    for (const e of (await h.fetchHistory()).events ?? []) {
      const sent = e.signalExternalWorkflowExecutionInitiatedEventAttributes;
      if (sent?.signalName === 'startSlotFreed') out.push({ to: sent.workflowExecution?.workflowId ?? '?', eventId: Number(e.eventId) });
      const failed = e.signalExternalWorkflowExecutionFailedEventAttributes;
      const which = failed ? out.find((t) => t.eventId === Number(failed.initiatedEventId)) : undefined;
      if (which) which.failedAt = Number(e.eventId);
    }
    return out;
  }
  const toldTo = async (h: Ledger) => (await told(h)).map((t) => t.to);

  /** Running workflows for the ledger to tell (their ids are what a waiting run names in `wake`). */
  async function waiters(role: string, n: number): Promise<string[]> {
    return Promise.all(Array.from({ length: n }, async (_, i) => (await ledger(`${role}-w${i + 1}`)).workflowId));
  }

  test('one give tells the longest waiting only; told and beaten by another asker, it keeps its place; told and silent, it loses it; a closed run is passed over', async () => {
    const h = await ledger('first');
    const [w1, w2, w3, gone, w4] = await waiters('first', 5);
    assert.ok(w1 && w2 && w3 && gone && w4);
    assert.equal(await slot(h, 'run-h', true), true);
    for (const w of [w1, w2, w3]) assert.equal(await slot(h, `run-${w}`, true, w), false);

    assert.equal(await slot(h, 'run-h', false), false);
    assert.deepEqual(await toldTo(h), [w1], 'the give told more than the longest waiting');
    // Another asker (a poll, a new run) takes it before w1 asks; w1 asks, is refused, and is told again at the next give.
    assert.equal(await slot(h, 'run-x', true), true);
    assert.equal(await slot(h, `run-${w1}`, true, w1), false);
    await slot(h, 'run-x', false);
    assert.deepEqual(await toldTo(h), [w1, w1], 'w1, told and beaten by another asker, lost its place');
    assert.equal(await slot(h, `run-${w1}`, true, w1), true);
    await slot(h, `run-${w1}`, false);
    assert.deepEqual(await toldTo(h), [w1, w1, w2]);
    // w2 never asks (its run ended after it was told): another asker's give passes the turn to w3.
    assert.equal(await slot(h, 'run-y', true), true);
    await slot(h, 'run-y', false);
    assert.deepEqual(await toldTo(h), [w1, w1, w2, w3]);
    assert.equal(await slot(h, `run-${w3}`, true, w3), true);
    await slot(h, `run-${w3}`, false);
    assert.deepEqual(await toldTo(h), [w1, w1, w2, w3], 'a give with nobody waiting told someone');

    // A waiter whose run has closed: its signal fails, and the next is told then, the slot still free.
    assert.equal(await slot(h, 'run-z', true), true);
    for (const w of [gone, w4]) assert.equal(await slot(h, `run-${w}`, true, w), false);
    await client().workflow.getHandle(gone).terminate('test: a waiting run that has ended');
    await slot(h, 'run-z', false);
    await waitUntil('w4 told', async () => (await toldTo(h)).includes(w4), 30_000, 100);
    const last = (await told(h)).slice(4);
    console.log(`  told ${JSON.stringify((await told(h)).map((t) => ({ ...t, to: t.to.split('/').pop() })))}`);
    assert.deepEqual(
      last.map((t) => [t.to, t.failedAt !== undefined]),
      [
        [gone, true],
        [w4, false],
      ],
    );
    assert.ok((last[1]?.eventId ?? 0) > (last[0]?.failedAt ?? Infinity), 'w4 was told before the closed run was found closed: told together');
    if (SAVE_DIR) {
      mkdirSync(SAVE_DIR, { recursive: true });
      await exportWorkflow(client(), h.workflowId, { file: join(SAVE_DIR, 'ledger-slot-wakes-first.json') });
    }
  });

  test('a waiter refused before the ledger continued as new is told by the next run', async () => {
    const h = await ledger('carried', 40);
    const [w1, w2] = await waiters('carried', 2);
    assert.ok(w1 && w2);
    assert.equal(await slot(h, 'run-h', true), true);
    for (const w of [w1, w2]) assert.equal(await slot(h, `run-${w}`, true, w), false);
    // w1 told (its signal could be one the closing run's server drops), then the slot taken again
    // before it asks: the queue goes on without the told mark, so the next run tells w1 again
    // rather than passing it over as a waiter that never asked.
    await slot(h, 'run-h', false);
    assert.deepEqual(await toldTo(h), [w1]);
    assert.equal(await slot(h, 'run-h', true), true);
    const first = (await h.describe()).runId;
    // Takes by the holder again (answered taken) until the ledger continues as new.
    for (let i = 0; (await h.describe()).runId === first; i++) {
      assert.ok(i < 40, 'the ledger should have continued as new');
      assert.equal(await slot(h, 'run-h', true), true);
    }
    await slot(h, 'run-h', false);
    const toldNow = await toldTo(h);
    console.log(`  the next run told ${JSON.stringify(toldNow)}`);
    assert.deepEqual(toldNow, [w1], 'the next run did not tell the longest waiting (its waiters were not carried)');
    if (SAVE_DIR) {
      mkdirSync(SAVE_DIR, { recursive: true });
      await exportWorkflow(client(), h.workflowId, { file: join(SAVE_DIR, 'ledger-slot-waiters-carried.json') });
    }
  });

  test("a continuation's waiters are checked as the rest of its input", () => {
    const gpu = { role: 'g', uuid: 'GPU-g', capacityMib: 32607, reserveMib: 4608 };
    const problems = (slotWaiters: unknown) => ledgerInputProblems({ node: 'n', gpu, slotWaiters });
    assert.deepEqual(problems({ queue: ['a', 'b'], told: 'a' }), []);
    assert.deepEqual(problems({ queue: ['a', '', 'a'] }), [
      `slotWaiters.queue[1]: a workflow's id, 1 to 1000 characters (got "")`,
      'slotWaiters.queue[2]: each id once (got "a")',
    ]);
    assert.deepEqual(problems({ queue: ['a'], told: 'b' }), [`slotWaiters.told: one of its queue's ids (got "b")`]);
    assert.match(problems({ queue: Array.from({ length: 65 }, (_, i) => `w${i}`) })[0] ?? '', /^slotWaiters\.queue: an array of at most 64 workflow ids/);
    assert.match(problems([]).join(), /^slotWaiters: \{ "queue"/);
  });
});
