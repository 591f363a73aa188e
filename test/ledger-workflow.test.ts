// The ledger entity workflow: validators reject malformed requests before they reach history,
// and continue-as-new carries the reservations over intact.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { WorkflowUpdateFailedError } from '@temporalio/client';
import { totals } from '../src/domain/ledger';
import { admitUpdate, releaseUpdate, setPhaseUpdate, snapshotQuery, taskQueueFor, workflowIds } from '../src/shared/messages';
import type { ledgerWorkflow } from '../src/workflows/ledger';
import { renderManifest, startTestBox, uniqueNode } from './support/box';
import type { TestBox } from './support/box';

const GPU = { role: 'dark-fast', uuid: 'GPU-x', capacityMib: 32607, reserveMib: 4608 };

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

  test("a compensation releases only its own reservation; setPhase by another run is rejected", async () => {
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
      (err: unknown) => err instanceof WorkflowUpdateFailedError && /release of owned without a holder refused: run-b holds it \(admitted\)/.test(String(err.cause?.message)),
    );
    const own = await h.executeUpdate(releaseUpdate, { args: [{ serve: 'owned', holder: 'run-b' }] });
    assert.deepEqual([own.released, own.vramMib], [true, 10]);
  });

  test('a malformed admission is rejected by the validator and leaves no decision in history', async () => {
    const h = box.temporal.client.workflow.getHandle<typeof ledgerWorkflow>(workflowIds.ledger(box.node, 'dark-fast'));
    const before = await h.query(snapshotQuery);
    await assert.rejects(
      h.executeUpdate(admitUpdate, { args: [{ serve: 'zero', vramMib: 0, class: 'resident', holder: 'hz', gpu: GPU }] }),
      (err: unknown) => err instanceof WorkflowUpdateFailedError && /vramMib must be a positive integer/.test(String(err.cause?.message)),
    );
    await assert.rejects(
      h.executeUpdate(admitUpdate, { args: [{ serve: 'other', vramMib: 10, class: 'resident', holder: 'ho', gpu: { ...GPU, role: 'heavy' } }] }),
      (err: unknown) => err instanceof WorkflowUpdateFailedError && /sent to the ledger of 'dark-fast'/.test(String(err.cause?.message)),
    );
    assert.deepEqual(await h.query(snapshotQuery), before);
  });
});
