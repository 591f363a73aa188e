// Sleep-mode eviction against the fences, on a simulated box sampled itself: nvidia-smi's reading
// of the GPU less what the box draws outside the ledger, against the GPU's budget, beside what the
// ledger holds. vLLM's sleep leaks (#32714, #47654): a victim asleep holds all of its VRAM on paper
// until nvidia-smi has shown it back, whatever ends the acquisition meanwhile.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { formatLedger, totals } from '../src/domain/ledger';
import type { LedgerState } from '../src/domain/ledger';
import { containerName, LABEL, serveBaseUrl } from '../src/domain/serve';
import { ledgerSnapshots, serveAcquire, serveDown, serveUp } from '../src/client/operations';
import { workflowIds } from '../src/shared/messages';
import { startSimTestBox } from './support/sim';
import type { SimTestBox } from './support/sim';
import { waitForPendingActivity } from './support/history-scan';
import { waitFor, waitUntil } from './support/wait';

/** What the box's processes outside the ledger draw (startSimTestBox's nonLedgerDrawMib). */
const NON_LEDGER_MIB = 1200;
const GPUS = [
  { role: 'lk', capacity_mib: 32000, reserve_mib: 8000 },
  { role: 'tko', capacity_mib: 32000, reserve_mib: 8000 },
  { role: 'wk', capacity_mib: 32000, reserve_mib: 8000 },
  { role: 'fr', capacity_mib: 32000, reserve_mib: 8000 },
];
const BUDGET_MIB = 32000 - 8000;

describe('sleep-mode eviction and the fences', () => {
  let t: SimTestBox;
  before(async () => {
    t = await startSimTestBox('sleep-fences', GPUS, [
      // Declares 600 MiB asleep and keeps 5000 more: its release check would fall back to a stop.
      {
        name: 'lky',
        vram_mib: 12000,
        class: 'evictable',
        router_tier: 'lky-local',
        sleep: { level: 2, residual_mib: 600 },
        env: { SIM_SLEEP_RESIDUAL_MIB: '600', SIM_SLEEP_LEAK_MIB: '5000' },
      },
      { name: 'tk', vram_mib: 20000, class: 'on-demand' },
      { name: 'big', vram_mib: 23000 },
      // A sleeper acquired while another serve drains for it.
      { name: 'sl', gpu_role: 'tko', vram_mib: 12000, class: 'evictable', router_tier: 'sl-local', sleep: { level: 1, residual_mib: 600, host_ram_mib: 7000 } },
      { name: 'tk-s', gpu_role: 'tko', vram_mib: 20000, class: 'on-demand' },
      { name: 'vic', gpu_role: 'tko', vram_mib: 12000, class: 'evictable', router_tier: 'vic-local' },
      { name: 'fill', gpu_role: 'tko', vram_mib: 11000 },
      { name: 'x', gpu_role: 'tko', vram_mib: 1000 },
      // A sleeper whose wake takes 10 s.
      {
        name: 'sw',
        gpu_role: 'wk',
        vram_mib: 12000,
        class: 'evictable',
        router_tier: 'sw-local',
        sleep: { level: 1, residual_mib: 600, host_ram_mib: 7000 },
        env: { SIM_SLEEP_RESIDUAL_MIB: '600', SIM_WAKE_DELAY_MS: '10000' },
      },
      { name: 'tk-w', gpu_role: 'wk', vram_mib: 20000, class: 'on-demand' },
      { name: 'big-w', gpu_role: 'wk', vram_mib: 16000 },
      // A sleeper that keeps 300 MiB more than it declares: within the release check's 5 %, held at the 900 MiB seen.
      {
        name: 'seep',
        gpu_role: 'fr',
        vram_mib: 12000,
        class: 'evictable',
        router_tier: 'seep-local',
        sleep: { level: 2, residual_mib: 600 },
        env: { SIM_SLEEP_RESIDUAL_MIB: '600', SIM_SLEEP_LEAK_MIB: '300' },
      },
      { name: 'tk-f', gpu_role: 'fr', vram_mib: 20000, class: 'on-demand' },
      // Fits beside seep held at its declared 600 MiB (24000 - 600), not beside the 900 it keeps.
      { name: 'big-f', gpu_role: 'fr', vram_mib: 23200 },
    ]);
  });
  after(async () => {
    await t?.close();
  });
  const client = () => t.temporal.client;

  async function ledger(role = 'lk'): Promise<LedgerState> {
    const l = (await ledgerSnapshots(client(), t.manifest)).find((x) => x.gpuRole === role);
    assert.ok(l);
    return l;
  }
  /** nvidia-smi's own reading of the GPU, less the non-ledger draw: what the serves draw. */
  async function servesDrawMib(role = 'lk'): Promise<number> {
    const reading = (await t.box.gpu.readGpus()).find((g) => g.uuid === t.manifest.gpus.find((x) => x.role === role)?.uuid);
    assert.ok(reading);
    return reading.usedMib - NON_LEDGER_MIB;
  }
  /** The running containers of the GPU and the MiB each reserves, as the box labels them. */
  async function runningOn(role: string): Promise<string[]> {
    const found = await t.box.runtime.list({ [LABEL.node]: t.node, [LABEL.gpuRole]: role });
    return found
      .filter((c) => c.running)
      .map((c) => `${c.labels[LABEL.serve]} ${c.labels[LABEL.vramMib]} MiB`)
      .sort();
  }
  async function asleep(serve: string): Promise<boolean> {
    const spec = t.manifest.serves.find((s) => s.name === serve);
    assert.ok(spec);
    const r = (await (await fetch(`${serveBaseUrl(spec)}/is_sleeping`, { signal: AbortSignal.timeout(2000) })).json()) as { is_sleeping: boolean };
    return r.is_sleeping;
  }

  test("an acquirer brought down while its leaky victim's release check runs: the victim stays asleep held whole, and nothing is admitted into the MiB it keeps", async () => {
    assert.ok((await serveUp(client(), t.node, 'lky')).ok);
    const acquisition = serveAcquire(client(), t.node, { serve: 'tk', evict: true, releaseTimeoutS: 20 });
    await waitForPendingActivity(client().workflow.getHandle(workflowIds.acquire(t.node, 'tk')), 'confirmVramReleased');
    assert.equal(await asleep('lky'), true);
    // The operator changes their mind: serves down of the acquirer cancels its acquisition.
    assert.ok((await serveDown(client(), t.node, 'tk')).ok);
    assert.ok(!(await acquisition).ok);
    assert.equal(await asleep('lky'), true, 'the victim stays asleep: only a restore wakes it');
    const l = await ledger();
    assert.deepEqual(formatLedger(l).slice(1), ['  lky 12000 MiB (evictable, sleeping at level 2 for tk, 12000 MiB held): 12000 MiB of it committed']);
    // The box: lky keeps 5600 MiB asleep. A bring-up of 23000 MiB would run it past the budget.
    const up = await serveUp(client(), t.node, 'big');
    assert.ok(!up.ok && up.failureType === 'AdmissionDenied', up.ok ? up.result.message : up.message);
    const draw = await servesDrawMib();
    assert.ok(draw <= BUDGET_MIB && draw >= 5600, `serves draw ${draw} MiB on a ${BUDGET_MIB} MiB budget; ledger committed ${totals(l).committedMib} MiB`);
    assert.ok((await serveDown(client(), t.node, 'lky')).ok);
  });

  test("serves down takes over an acquisition terminated during its leaky victim's release check: the victim stays asleep held whole", async () => {
    const lky = await serveUp(client(), t.node, 'lky');
    assert.ok(lky.ok, lky.ok ? '' : lky.message);
    // The first test's acquisition of tk is a closed run under the same id: this one's run is followed.
    const id = workflowIds.acquire(t.node, 'tk');
    const earlier = (await client().workflow.getHandle(id).describe()).runId;
    const acquisition = serveAcquire(client(), t.node, { serve: 'tk', evict: true, releaseTimeoutS: 20 });
    const runId = await waitFor('a new acquisition of tk', async () => {
      const now = (await client().workflow.getHandle(id).describe()).runId;
      return now !== earlier ? now : undefined;
    });
    const handle = client().workflow.getHandle(id, runId);
    await waitForPendingActivity(handle, 'confirmVramReleased');
    await handle.terminate('test: the acquisition dies during the release check');
    assert.ok(!(await acquisition).ok);
    assert.equal(await asleep('lky'), true);
    // serves down of the acquirer takes its eviction over: lky is found asleep, its release never confirmed.
    assert.ok((await serveDown(client(), t.node, 'tk')).ok);
    // The level it sleeps at is not known to the take-over: its wake reloads as after level 2.
    assert.deepEqual(formatLedger(await ledger()).slice(1), ['  lky 12000 MiB (evictable, sleeping for tk, 12000 MiB held): 12000 MiB of it committed']);
    const up = await serveUp(client(), t.node, 'big');
    assert.ok(!up.ok && up.failureType === 'AdmissionDenied', up.ok ? up.result.message : up.message);
    const draw = await servesDrawMib();
    assert.ok(draw <= BUDGET_MIB && draw >= 5600, `serves draw ${draw} MiB on a ${BUDGET_MIB} MiB budget`);
    assert.ok((await serveDown(client(), t.node, 'lky')).ok);
  });

  test('serves down takes over an acquisition of a sleeper terminated while its victim drains: the sleeper holds its residual until its stop lands, and nothing is admitted into it', async () => {
    for (const serve of ['sl']) assert.ok((await serveUp(client(), t.node, serve)).ok);
    assert.ok((await serveAcquire(client(), t.node, { serve: 'tk-s', evict: true })).ok);
    assert.ok((await serveDown(client(), t.node, 'tk-s')).ok);
    for (const serve of ['vic', 'fill']) assert.ok((await serveUp(client(), t.node, serve)).ok);
    assert.equal(totals(await ledger('tko')).committedMib, 600 + 12000 + 11000);
    assert.equal(await asleep('sl'), true);

    // vic answers slowly: its drain holds the acquisition of sl while it is terminated.
    const slow = t.routed('vic', { sim_delay_ms: 8000 });
    await waitUntil('1 in flight at vic-local', async () => (await t.box.routerAdmin.tierState('vic-local')).inFlight >= 1, 5000);
    const acquisition = serveAcquire(client(), t.node, { serve: 'sl', evict: true });
    const handle = client().workflow.getHandle(workflowIds.acquire(t.node, 'sl'));
    await waitForPendingActivity(handle, 'drainServe');
    await handle.terminate('test: the acquisition dies while its victim drains');
    assert.ok(!(await acquisition).ok);

    // The bring-down's stop of sl held (a vLLM process may take seconds to exit): the window between its take and the stop.
    const runtime = t.box.runtime as unknown as { stop: (name: string, timeoutS: number) => Promise<unknown> };
    const stop = runtime.stop.bind(runtime);
    let reached = false;
    let open = () => undefined as void;
    const gate = new Promise<void>((resolve) => (open = resolve));
    runtime.stop = async (name, timeoutS) => {
      if (name === containerName(t.node, 'sl')) {
        reached = true;
        await gate;
      }
      return stop(name, timeoutS);
    };
    try {
      const down = serveDown(client(), t.node, 'sl');
      await waitUntil("serves down sl's stop reached", () => reached, 60_000, 50);
      assert.equal(await asleep('sl'), true, 'still asleep as its stop begins');
      const held = (await ledger('tko')).reservations.find((r) => r.serve === 'sl');
      assert.deepEqual([held?.phase, held?.vramMib], ['stopping', 600], 'its residual held while it stops');
      const x = await serveUp(client(), t.node, 'x');
      assert.ok(!x.ok && x.failureType === 'AdmissionDenied', x.ok ? `x admitted: ${x.result.message}` : x.message);
      const draw = await servesDrawMib('tko');
      assert.ok(draw <= BUDGET_MIB, `serves draw ${draw} MiB on a ${BUDGET_MIB} MiB budget`);
      open();
      assert.ok((await down).ok);
    } finally {
      open();
      runtime.stop = stop;
    }
    await slow;
    for (const serve of ['fill', 'vic']) assert.ok((await serveDown(client(), t.node, serve)).ok);
  });

  test('a ledger started afresh while a restore wakes its sleeper counts the sleeper whole, held by that restore: nothing is admitted into the MiB the wake takes', async () => {
    assert.ok((await serveUp(client(), t.node, 'sw')).ok);
    assert.ok((await serveAcquire(client(), t.node, { serve: 'tk-w', evict: true })).ok);
    assert.ok((await serveDown(client(), t.node, 'tk-w')).ok);
    assert.deepEqual(formatLedger(await ledger('wk')).slice(1), [
      '  sw 12000 MiB (evictable, sleeping at level 1 for tk-w, 600 MiB held): 600 MiB of it committed',
    ]);

    // The restore (serves up of a sleeper wakes it): its wake's fence passes, then /wake_up takes 10 s.
    const restore = serveUp(client(), t.node, 'sw');
    const bringUp = client().workflow.getHandle(workflowIds.bringUp(t.node, 'sw'));
    await waitForPendingActivity(bringUp, 'wakeServe');
    const ledgerHandle = client().workflow.getHandle(workflowIds.ledger(t.node, 'wk'));
    await waitUntil(
      "the wake's fence accepted by the ledger",
      async () =>
        ((await ledgerHandle.fetchHistory()).events ?? []).some((e) =>
          (e.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest?.meta?.updateId ?? '').includes('/fence-wake/'),
        ),
      20_000,
      100,
    );
    assert.equal(await asleep('sw'), true, 'still asleep while its wake runs');
    // The ledger is lost: the next update starts one afresh from the box.
    await ledgerHandle.terminate('test: the ledger is lost while a wake runs');
    const big = await serveUp(client(), t.node, 'big-w');
    assert.ok(!big.ok && big.failureType === 'AdmissionDenied', big.ok ? `big-w admitted beside the waking sw: ${big.result.message}` : big.message);
    const restored = await restore;
    assert.ok(restored.ok, restored.ok ? '' : restored.message);
    const { runId } = await bringUp.describe();
    const sw = (await ledger('wk')).reservations.find((r) => r.serve === 'sw');
    assert.deepEqual([sw?.phase, sw?.vramMib, sw?.holder], ['running', 12000, `${workflowIds.bringUp(t.node, 'sw')}/${runId}`]);
    const draw = await servesDrawMib('wk');
    assert.ok(draw <= BUDGET_MIB, `serves draw ${draw} MiB on a ${BUDGET_MIB} MiB budget`);
    assert.ok((await serveDown(client(), t.node, 'sw')).ok);
  });

  test('a restore that starts a ledger afresh (the one its sleeper slept in was lost) wakes it, admitted by that ledger', async () => {
    assert.ok((await serveUp(client(), t.node, 'sw')).ok);
    assert.ok((await serveAcquire(client(), t.node, { serve: 'tk-w', evict: true })).ok);
    assert.ok((await serveDown(client(), t.node, 'tk-w')).ok);
    await client().workflow.getHandle(workflowIds.ledger(t.node, 'wk')).terminate('test: the ledger is lost while sw sleeps');
    // The restore's own admission starts the fresh ledger, whose reconcile finds sw asleep.
    const restored = await serveUp(client(), t.node, 'sw');
    assert.ok(restored.ok, restored.ok ? '' : restored.message);
    assert.ok(
      restored.result.steps.some((s) => s.step === 'wake' && /woke|awake/i.test(s.outcome)),
      JSON.stringify(restored.result.steps),
    );
    const sw = (await ledger('wk')).reservations.find((r) => r.serve === 'sw');
    assert.deepEqual([sw?.phase, sw?.vramMib], ['running', 12000]);
    assert.ok((await serveDown(client(), t.node, 'sw')).ok);
  });

  test('a ledger started afresh keeps the residual its sleeper was seen to keep above the declared one: a bring-up that fits only beside the declared residual is denied', async () => {
    assert.ok((await serveUp(client(), t.node, 'seep')).ok);
    const taken = await serveAcquire(client(), t.node, { serve: 'tk-f', evict: true });
    assert.ok(taken.ok, taken.ok ? '' : taken.message);
    assert.equal(taken.result.victims[0]?.sleep?.residualSeenMib, 900);
    assert.ok((await serveDown(client(), t.node, 'tk-f')).ok);
    assert.deepEqual(formatLedger(await ledger('fr')).slice(1), [
      '  seep 12000 MiB (evictable, sleeping at level 2 for tk-f, 900 MiB held): 900 MiB of it committed',
    ]);
    assert.equal(await servesDrawMib('fr'), 900, 'the sleeper keeps 900 MiB on the box');

    // The ledger is lost while seep sleeps: the bring-up's admission starts one afresh from the box.
    await client().workflow.getHandle(workflowIds.ledger(t.node, 'fr')).terminate('test: the ledger is lost while seep sleeps');
    const up = await serveUp(client(), t.node, 'big-f');
    const l = await ledger('fr');
    assert.ok(!up.ok && up.failureType === 'AdmissionDenied', up.ok ? `big-f admitted beside seep: ${formatLedger(l).join('; ')}` : up.message);
    assert.deepEqual(formatLedger(l).slice(1), ['  seep 12000 MiB (evictable, sleeping at level 2 for tk-f, 900 MiB held): 900 MiB of it committed']);
    // The box: only the sleeper runs, and the serves draw within the budget.
    assert.deepEqual(await runningOn('fr'), ['seep 12000 MiB']);
    const draw = await servesDrawMib('fr');
    assert.equal(draw, 900);
    assert.ok(totals(l).committedMib >= draw, `serves draw ${draw} MiB; the ledger holds ${totals(l).committedMib} MiB`);

    // Lost again: the fresh run before it held 900 MiB, and so does the next.
    await client().workflow.getHandle(workflowIds.ledger(t.node, 'fr')).terminate('test: the fresh ledger is lost too');
    const again = await serveUp(client(), t.node, 'big-f');
    assert.ok(!again.ok && again.failureType === 'AdmissionDenied', again.ok ? 'big-f admitted after a second loss' : again.message);
    assert.deepEqual(formatLedger(await ledger('fr')).slice(1), [
      '  seep 12000 MiB (evictable, sleeping at level 2 for tk-f, 900 MiB held): 900 MiB of it committed',
    ]);
    assert.deepEqual(await runningOn('fr'), ['seep 12000 MiB']);

    // Lost with its history (past retention, or a server that lost its state): nothing says what seep keeps, and it is held whole.
    const id = workflowIds.ledger(t.node, 'fr');
    // Deleted running (a terminate, then the deletion), and the runs before it too. The server may
    // take 20 s or more to delete a run a worker has just replayed for a query.
    const runs: string[] = [];
    for await (const wf of client().workflow.list({ query: `WorkflowId = '${id}'` })) runs.push(wf.runId);
    const gone = async (runId: string): Promise<boolean> => {
      try {
        await client().workflow.getHandle(id, runId).describe();
        return false;
      } catch {
        return true;
      }
    };
    for (const runId of runs) {
      await client().workflowService.deleteWorkflowExecution({ namespace: client().options.namespace, workflowExecution: { workflowId: id, runId } });
      await waitUntil(`run ${runId} of ${id} deleted`, () => gone(runId), 90_000, 250);
    }
    const lost = await serveUp(client(), t.node, 'big-f');
    assert.ok(!lost.ok && lost.failureType === 'AdmissionDenied', lost.ok ? 'big-f admitted after the history was lost' : lost.message);
    // Over-held, never under: 12000 MiB for the 900 the box draws, until seep is woken or stopped.
    const unread = formatLedger(await ledger('fr'));
    assert.deepEqual(unread.slice(1, -1), ['  seep 12000 MiB (evictable, sleeping at level 2, 12000 MiB held): 12000 MiB of it committed']);
    // And says why: the ledger it replaced could not be read.
    assert.match(unread.at(-1) ?? '', /^note: reconciled from the box alone at .*: the ledger run it replaced could not be read/);
    assert.deepEqual(await runningOn('fr'), ['seep 12000 MiB']);
    assert.equal(await servesDrawMib('fr'), 900);
    assert.ok((await serveDown(client(), t.node, 'seep')).ok);
  });
});
