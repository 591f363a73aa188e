// An acquisition cancelled while its lease starts: the cancel undoes the acquisition as it would at
// any other step. Before, the lease's start took the cancellation for a lease that could not start,
// and the acquisition completed with its serve up and no lease to give its VRAM back. The worker's
// workflows are bundled with test/support/hold-lease-start.ts, which holds the lease's start so the
// cancel lands in it.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { WorkflowNotFoundError } from '@temporalio/client';
import { ledgerSnapshots, serveAcquire } from '../src/client/operations';
import { liveProgressQuery, workflowIds } from '../src/shared/messages';
import { containerName } from '../src/domain/serve';
import { startSimTestBox } from './support/sim';
import type { SimTestBox } from './support/sim';
import { waitUntil } from './support/wait';

describe('a lease whose start is cancelled', () => {
  let t: SimTestBox;
  before(async () => {
    t = await startSimTestBox(
      'lease-start-cancel',
      [{ role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 }],
      [{ name: 'coder', vram_mib: 8192, class: 'on-demand', router_tier: 'coder-local', idle_ttl_s: 60 }],
      { workflowInterceptorModules: [require.resolve('./support/hold-lease-start')] },
    );
  });
  after(async () => {
    await t?.close();
  });

  test('an acquisition cancelled while its lease starts is cancelled and undone: no container, no reservation, no lease', async () => {
    const acquisition = serveAcquire(t.temporal.client, t.node, { serve: 'coder', lease: { kind: 'fixed', seconds: 600 } });
    const handle = t.temporal.client.workflow.getHandle(workflowIds.acquire(t.node, 'coder'));
    await waitUntil(
      "the acquisition's lease step under way",
      async () => {
        try {
          return (await handle.query(liveProgressQuery)).underway?.step === 'lease';
        } catch {
          return false; // not started yet
        }
      },
      30_000,
      50,
    );
    // The serve is up and held by the acquisition as its lease starts.
    assert.equal((await t.box.runtime.inspect(containerName(t.node, 'coder')))?.running, true);
    await handle.cancel();

    const o = await acquisition;
    assert.ok(!o.ok, o.ok ? `completed: ${o.result.message}` : '');
    assert.equal((await handle.describe()).status.name, 'CANCELLED');
    // The box itself: the container is gone and the ledger holds nothing for coder.
    assert.equal((await t.box.runtime.inspect(containerName(t.node, 'coder')))?.running ?? false, false);
    const [l] = await ledgerSnapshots(t.temporal.client, t.manifest);
    assert.deepEqual(
      l?.reservations.map((r) => `${r.serve}:${r.phase}`),
      [],
    );
    await assert.rejects(t.temporal.client.workflow.getHandle(workflowIds.lease(t.node, 'coder')).describe(), WorkflowNotFoundError);
  });
});
