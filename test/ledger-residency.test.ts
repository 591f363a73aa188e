// The ledger entity workflow and the minimum residency, on a real dev server: the ledger records
// on its own clock when a restored serve became running, refuses to pick it as a victim inside
// its window with the seconds until it ends, keeps all of it across continue-as-new, and decides
// as before for requests that carry no residency (those of runs from before the setting).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { WorkflowUpdateFailedError } from '@temporalio/client';
import type { WorkflowHandle } from '@temporalio/client';
import type { GpuSpec } from '../src/domain/types';
import type { Reservation } from '../src/domain/ledger';
import {
  acquireUpdate,
  admitUpdate,
  releaseUpdate,
  setPhaseUpdate,
  snapshotQuery,
  taskQueueFor,
  victimReleasedUpdate,
  workflowIds,
} from '../src/shared/messages';
import type { AcquireDecision } from '../src/shared/messages';
import type { ledgerWorkflow } from '../src/workflows/ledger';
import { renderManifest, startTestBox, uniqueNode } from './support/box';
import type { TestBox } from './support/box';
import { untilReconciled } from './support/wait';

const WINDOW_S = 60;

describe('ledger entity workflow: minimum residency', () => {
  let box: TestBox;
  before(async () => {
    const node = uniqueNode('ledger-res');
    box = await startTestBox(node, renderManifest(node, [{ role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 }], []));
  });
  after(async () => {
    await box?.close();
  });

  /** A ledger of its own for each test: T013's card under its own role. */
  async function ledger(role: string, maxHistoryEvents?: number): Promise<{ h: WorkflowHandle<typeof ledgerWorkflow>; gpu: GpuSpec }> {
    const gpu: GpuSpec = { role, uuid: `GPU-${role}`, capacityMib: 32607, reserveMib: 4608 };
    const workflowId = workflowIds.ledger(box.node, role);
    await box.temporal.client.workflow.start<typeof ledgerWorkflow>('ledgerWorkflow', {
      workflowId,
      taskQueue: taskQueueFor(box.node),
      args: [{ node: box.node, gpu, ...(maxHistoryEvents !== undefined ? { maxHistoryEvents } : {}) }],
    });
    // Not the run's handle: updates follow the ledger across continue-as-new.
    const h = box.temporal.client.workflow.getHandle<typeof ledgerWorkflow>(workflowId);
    await untilReconciled(h);
    return { h, gpu };
  }

  /**
   * T013 through the ledger's updates: fast and vision up, comfyui-sim acquired over vision, then
   * comfyui-sim released and vision restored. `minResidencyS` goes in every request, or none.
   */
  async function evictAndRestore(h: WorkflowHandle<typeof ledgerWorkflow>, gpu: GpuSpec, minResidencyS: number | undefined) {
    const res = minResidencyS !== undefined ? { minResidencyS } : {};
    const upPlain = async (serve: string, vramMib: number, cls: 'resident' | 'evictable') => {
      const a = await h.executeUpdate(admitUpdate, { args: [{ serve, vramMib, class: cls, holder: `up/${serve}`, gpu, ...res }] });
      assert.equal(a.decision.decision, 'admitted');
      await h.executeUpdate(setPhaseUpdate, { args: [{ serve, phase: 'running', holder: `up/${serve}` }] });
    };
    await upPlain('fast', 14336, 'resident');
    await upPlain('vision', 12288, 'evictable');
    const acquired = await h.executeUpdate(acquireUpdate, {
      args: [{ serve: 'comfyui-sim', vramMib: 8192, class: 'on-demand', holder: 'acq/1', gpu, evict: true, ...res }],
    });
    assert.equal(acquired.decision.decision, 'evicting', 'a plain bring-up has no window: vision is evicted at once');
    await h.executeUpdate(victimReleasedUpdate, { args: [{ victim: 'vision', acquirer: 'comfyui-sim', holder: 'acq/1' }] });
    await h.executeUpdate(setPhaseUpdate, { args: [{ serve: 'comfyui-sim', phase: 'running', holder: 'acq/1' }] });
    assert.equal((await h.executeUpdate(releaseUpdate, { args: [{ serve: 'comfyui-sim', holder: 'acq/1' }] })).released, true);
    const restore = await h.executeUpdate(admitUpdate, {
      args: [{ serve: 'vision', vramMib: 12288, class: 'evictable', holder: 'restore/vision', gpu, ...res }],
    });
    assert.deepEqual([restore.decision.decision, restore.wasEvicted], ['admitted', true]);
    const before = Date.now();
    await h.executeUpdate(setPhaseUpdate, { args: [{ serve: 'vision', phase: 'running', holder: 'restore/vision' }] });
    return { runningAfterMs: before, runningBeforeMs: Date.now() };
  }

  const acquireAgain = (h: WorkflowHandle<typeof ledgerWorkflow>, gpu: GpuSpec, holder: string) =>
    h.executeUpdate(acquireUpdate, {
      args: [{ serve: 'comfyui-sim', vramMib: 8192, class: 'on-demand', holder, gpu, evict: true, minResidencyS: WINDOW_S }],
    });

  const visionOf = (reservations: Reservation[]) => reservations.find((r) => r.serve === 'vision');

  test('a restored vision is not a victim inside its window; the denial carries it and retryAfterS, across continue-as-new', async () => {
    const { h, gpu } = await ledger('res-a', 80);
    const { runningAfterMs, runningBeforeMs } = await evictAndRestore(h, gpu, WINDOW_S);
    const restoredIn = (await h.describe()).runId;
    const vision = visionOf((await h.query(snapshotQuery)).reservations);
    assert.deepEqual([vision?.phase, vision?.cameUpBy, vision?.minResidencyS], ['running', 'restore', WINDOW_S]);
    // The ledger's clock is workflow time: the start of the task that ran setPhase, on this host's server.
    const since = vision?.runningSinceMs ?? 0;
    assert.ok(since >= runningAfterMs - 1000 && since <= runningBeforeMs + 1000, `runningSinceMs ${since} not in [${runningAfterMs}, ${runningBeforeMs}]`);

    const denied = await acquireAgain(h, gpu, 'acq/2');
    const d: AcquireDecision = denied.decision;
    assert.equal(d.decision, 'denied', JSON.stringify(d));
    assert.ok(d.decision === 'denied');
    assert.equal(d.shortfallMib, 6817);
    assert.deepEqual(
      d.residency?.map((w) => [w.serve, w.cameUpBy, w.minResidencyS, w.runningSinceMs, w.runningForS + w.evictableInS]),
      [['vision', 'restore', WINDOW_S, since, WINDOW_S]],
    );
    assert.ok(d.retryAfterS !== undefined && d.retryAfterS >= 1 && d.retryAfterS <= WINDOW_S, `retryAfterS ${d.retryAfterS}`);
    assert.equal(d.retryAfterS, d.residency?.[0]?.evictableInS);
    // Nothing was touched: vision still runs, no MiB are held for comfyui-sim.
    const after = await h.query(snapshotQuery);
    assert.deepEqual(
      after.reservations.map((r) => `${r.serve}:${r.phase}`),
      ['fast:running', 'vision:running'],
    );

    // Decisions until the ledger continues as new; the next run carries the window and keeps to it.
    for (let i = 0; (await h.describe()).runId === restoredIn; i++) {
      assert.ok(i < 40, 'the ledger should have continued as new');
      await h.executeUpdate(admitUpdate, { args: [{ serve: 'x', vramMib: 10, class: 'resident', holder: `x/${i}`, gpu, minResidencyS: WINDOW_S }] });
      await h.executeUpdate(releaseUpdate, { args: [{ serve: 'x', holder: `x/${i}` }] });
    }
    assert.deepEqual(visionOf((await h.query(snapshotQuery)).reservations), vision);
    const again = await acquireAgain(h, gpu, 'acq/3');
    assert.ok(again.decision.decision === 'denied' && again.decision.residency?.[0]?.serve === 'vision', JSON.stringify(again.decision));
    assert.ok((again.decision.retryAfterS ?? 0) <= (d.retryAfterS ?? 0));
  });

  test('requests that carry no minResidencyS (runs from before the setting): nothing recorded, the restored vision is evicted as before', async () => {
    const { h, gpu } = await ledger('res-b');
    await evictAndRestore(h, gpu, undefined);
    const vision = visionOf((await h.query(snapshotQuery)).reservations);
    assert.deepEqual([vision?.cameUpBy, vision?.minResidencyS, vision?.runningSinceMs], [undefined, undefined, undefined]);
    const evicting = await h.executeUpdate(acquireUpdate, {
      args: [{ serve: 'comfyui-sim', vramMib: 8192, class: 'on-demand', holder: 'acq/2', gpu, evict: true }],
    });
    assert.equal(evicting.decision.decision, 'evicting');
    assert.ok(evicting.decision.decision === 'evicting');
    assert.deepEqual(
      evicting.decision.victims.map((v) => v.serve),
      ['vision'],
    );
  });

  test('a minResidencyS out of bounds is rejected by the validator, naming the bound', async () => {
    const { h, gpu } = await ledger('res-c');
    await assert.rejects(
      h.executeUpdate(admitUpdate, { args: [{ serve: 'v', vramMib: 10, class: 'evictable', holder: 'hv', gpu, minResidencyS: 3601 }] }),
      (err: unknown) =>
        err instanceof WorkflowUpdateFailedError &&
        /admit v: minResidencyS must be a whole number of seconds in 0\.\.3600 \(got 3601\)/.test(String(err.cause?.message)),
    );
    assert.deepEqual((await h.query(snapshotQuery)).reservations, []);
  });
});
