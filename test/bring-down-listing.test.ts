// A bring-down's release wait takes up the process listing its stop started as the container went
// down, on a simulated box (real dev server, sim serves as separate processes, the fake nvidia-smi
// listing each by its pid): the wait's first reading is queried after the container was down, as
// a victim's is, without a spawn of its own after the stop's workflow task and the wait's dispatch.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { serveDown, serveUp } from '../src/client/operations';
import { workflowIds } from '../src/shared/messages';
import type { TestServe } from './support/box';
import { startSimTestBox } from './support/sim';
import type { SimTestBox } from './support/sim';
import { scheduledActivities, scheduledRuns } from './support/history-scan';

const GPU = { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 };
const SERVES: TestServe[] = [
  // No tier: the take asks for the stop's start slot, and the reading before the stop follows it.
  { name: 'solo', vram_mib: 8000 },
  // Never brought up: the box's router needs a tier.
  { name: 'routed', vram_mib: 4000, router_tier: 'routed-local' },
];

describe("a bring-down's release wait and its stop's listing", () => {
  let t: SimTestBox;

  before(async () => {
    t = await startSimTestBox('down-listing', [GPU], SERVES);
  });
  after(async () => {
    await t?.close();
  });

  test("serves down: the stop starts a listing as the container is down, and the release wait's first reading is that listing", async () => {
    const client = t.temporal.client;
    const up = await serveUp(client, t.node, 'solo');
    assert.ok(up.ok, !up.ok ? up.message : '');
    const listings = t.box.gpu.listings;
    const [spawnedBefore, reusedBefore] = [listings.spawned, listings.reused];
    const down = await serveDown(client, t.node, 'solo');
    const [spawned, reused] = [listings.spawned - spawnedBefore, listings.reused - reusedBefore];
    assert.ok(down.ok, !down.ok ? down.message : '');
    assert.equal(down.result.outcome, 'stopped', down.result.message);

    const events = (await client.workflow.getHandle(workflowIds.bringDown(t.node, 'solo')).fetchHistory()).events ?? [];
    const [stop] = scheduledRuns(events, 'stopServeContainer');
    const [wait] = scheduledRuns(events, 'confirmVramReleased');
    const stopIn = stop?.input as { listWhenDown?: boolean } | undefined;
    const stopped = stop?.result as { downAtEpochMs?: number } | undefined;
    const waitIn = wait?.input as { listedAfterEpochMs?: number } | undefined;
    console.log(
      `  steps ${scheduledActivities(events).join(', ')}; stop listWhenDown ${stopIn?.listWhenDown}, down at ${stopped?.downAtEpochMs}; ` +
        `release wait listedAfterEpochMs ${waitIn?.listedAfterEpochMs}, ${wait && wait.completedAtMs !== undefined ? wait.completedAtMs - wait.scheduledAtMs : '?'} ms scheduled to completed; ` +
        `stop's completion to the wait's: ${stop?.completedAtMs !== undefined && wait?.completedAtMs !== undefined ? wait.completedAtMs - stop.completedAtMs : '?'} ms; ` +
        `process listings: ${spawned} spawned, ${reused} reused; ${down.result.steps.find((s) => s.step === 'release')?.outcome}`,
    );
    // Read before the stop (under the slot), then released: the wait follows the stop.
    assert.deepEqual(scheduledActivities(events), [
      'resolveServe',
      'ledgerBeginStop',
      'inspectServe',
      'readBeforeStop',
      'stopServeContainer',
      'confirmVramReleased',
      'ledgerRelease',
    ]);
    assert.equal(stopIn?.listWhenDown, true, JSON.stringify(stop?.input));
    assert.equal(typeof stopped?.downAtEpochMs, 'number', JSON.stringify(stop?.result));
    assert.equal(waitIn?.listedAfterEpochMs, stopped?.downAtEpochMs, JSON.stringify(wait?.input));
    // Three asked: the reading before the stop's, the stop's and, taken up, the wait's. A listing is
    // taken up only within 2 s of its start (LISTED_AHEAD_MAX_AGE_MS), and between them lie a
    // removal, a workflow task and a dispatch: on a host loaded past that the wait lists for itself.
    assert.equal(spawned + reused, 3, `process listings: ${spawned} spawned, ${reused} reused`);
    assert.equal(reused, 1, `process listings: ${spawned} spawned, ${reused} reused`);
  });
});
