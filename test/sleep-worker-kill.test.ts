// A worker killed -9 while it puts a victim to sleep: the sleep it sent lands, the next worker's
// retry finds the victim asleep and does not sleep it again, and the hand-over happens exactly
// once. Separate processes: the worker (gpures worker over the simulated box's runtime), the sim
// serves, the router and the test, which samples the box (nvidia-smi, the serve's own log).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { temporal as proto } from '@temporalio/proto';
import { formatLedger } from '../src/domain/ledger';
import type { LedgerState } from '../src/domain/ledger';
import { containerName } from '../src/domain/serve';
import { ledgerSnapshots, serveAcquire, serveUp } from '../src/client/operations';
import { workflowIds } from '../src/shared/messages';
import type { SimBox } from '../src/sim/box';
import type { Manifest } from '../src/domain/types';
import { sleepingVision } from './support/box';
import type { TestServe } from './support/box';
import type { WorkerProcess } from './support/cli';
import { activityRuns } from './support/history-scan';
import { nonLedgerDrawOf } from './support/sim';
import { startSimWorkerBox } from './support/sim-worker-box';
import type { SimWorkerBox } from './support/sim-worker-box';
import type { TestTemporal } from './support/temporal';
import { waitUntil } from './support/wait';

const GPU = { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 };
const SERVES: TestServe[] = [
  { name: 'fast', vram_mib: 14336, router_tier: 'fast-local' },
  // A sleep that takes 3 s: long enough to kill the worker while it waits for it.
  sleepingVision({ SIM_SLEEP_DELAY_MS: '3000' }),
  { name: 'comfyui-sim', vram_mib: 8192, class: 'on-demand' },
];

describe('eviction by sleeping across a worker kill -9', () => {
  let temporal: TestTemporal;
  let box: SimBox;
  let manifest: Manifest;
  let node: string;
  let worker: WorkerProcess | undefined;
  let startWorker: () => Promise<WorkerProcess>;

  let simWorkerBox: SimWorkerBox;

  before(async () => {
    simWorkerBox = await startSimWorkerBox('sleep-kill', GPU, SERVES);
    ({ node, manifest, box, temporal } = simWorkerBox);
    startWorker = () => simWorkerBox.startWorker();
    worker = await startWorker();
  });
  after(async () => {
    await worker?.stop();
    await simWorkerBox?.close();
  });

  const client = () => temporal.client;
  async function ledger(): Promise<LedgerState> {
    const [l] = await ledgerSnapshots(client(), manifest);
    assert.ok(l);
    return l;
  }

  test('killed while /sleep runs: the retry finds vision asleep, sleeps it no more, hands over once; the ledger is the box', async () => {
    for (const s of ['fast', 'vision']) {
      const o = await serveUp(client(), node, s);
      assert.ok(o.ok, !o.ok ? o.message : '');
    }
    const visionId = (await box.runtime.inspect(containerName(node, 'vision')))?.id;
    assert.ok(visionId);

    const acquisition = serveAcquire(client(), node, { serve: 'comfyui-sim', evict: true });
    const handle = client().workflow.getHandle(workflowIds.acquire(node, 'comfyui-sim'));
    await waitUntil(
      'sleepServe started on the worker',
      async () =>
        (await handle.describe().catch(() => undefined))?.raw.pendingActivities?.some(
          (a) => a.activityType?.name === 'sleepServe' && a.state === proto.api.enums.v1.PendingActivityState.PENDING_ACTIVITY_STATE_STARTED,
        ) ?? false,
      60_000,
      20,
    );
    // Let the attempt send its /sleep (an /is_sleeping first), then kill it while the serve sleeps.
    await new Promise((r) => setTimeout(r, 500));
    worker?.child.kill('SIGKILL');
    await new Promise((r) => worker?.child.once('exit', r));
    worker = await startWorker();

    const o = await acquisition;
    assert.ok(o.ok, !o.ok ? o.message : '');
    assert.match(o.result.message, /put to sleep vision$/);
    const v = o.result.victims[0];
    assert.equal(v?.sleep?.level, 1);
    assert.equal(v.vram?.releasedMib, 11688);

    const events = (await handle.fetchHistory()).events ?? [];
    const sleeps = activityRuns(events, 'sleepServe');
    assert.equal(sleeps.length, 1, 'one sleepServe activity');
    assert.ok((sleeps[0]?.attempt ?? 0) >= 2, `the sleep completed on a retry (attempt ${sleeps[0]?.attempt})`);
    assert.equal((sleeps[0]?.result as { alreadyAsleep?: boolean } | undefined)?.alreadyAsleep, true);
    assert.equal(activityRuns(events, 'ledgerVictimReleased').length, 1, 'one hand-over');

    // The serve itself: put to sleep once, the same process, asleep.
    const log = await box.runtime.logsTail(containerName(node, 'vision'), 500);
    assert.equal(log.match(/sleeping at level 1/g)?.length, 1, log);
    assert.equal((await box.runtime.inspect(containerName(node, 'vision')))?.id, visionId);
    const l = await ledger();
    assert.deepEqual(formatLedger(l).slice(1), [
      '  fast 14336 MiB (resident, running)',
      '  vision 12288 MiB (evictable, sleeping at level 1 for comfyui-sim, 600 MiB held): 600 MiB of it committed',
      '  comfyui-sim 8192 MiB (on-demand, running)',
    ]);
    assert.equal(await nonLedgerDrawOf(box, l), 1200);
  });
});
