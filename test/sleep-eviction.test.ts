// Eviction by sleeping (vLLM's sleep mode) on a simulated box: real dev server, the reference
// router, sim serves as local processes with sleep mode, the fake nvidia-smi reading what each
// serve draws asleep and awake. Each case samples the box itself (its nvidia-smi, its processes),
// not only the ledger's word.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { formatLedger, totals } from '../src/domain/ledger';
import type { LedgerState } from '../src/domain/ledger';
import { containerName, serveBaseUrl } from '../src/domain/serve';
import { ledgerSnapshots, serveAcquire, serveDown, serveUp } from '../src/client/operations';
import { sleepingVision } from './support/box';
import type { TestServe } from './support/box';
import { nonLedgerDrawOf, startSimTestBox } from './support/sim';
import type { SimTestBox } from './support/sim';
import { waitUntil } from './support/wait';
import { activitiesInOrder, waitForPendingActivity } from './support/history-scan';
import { workflowIds } from '../src/shared/messages';
import type { BringUpResult } from '../src/shared/operations';

const NON_LEDGER_MIB = 1200;
const GPUS = [
  { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 },
  { role: 'leaky', capacity_mib: 20000, reserve_mib: 2000 },
  { role: 'wakefail', capacity_mib: 16000, reserve_mib: 1000 },
  { role: 'seeping', capacity_mib: 20000, reserve_mib: 2000 },
  { role: 'takeover', capacity_mib: 20000, reserve_mib: 2000 },
  { role: 'lostfence', capacity_mib: 20000, reserve_mib: 2000 },
  { role: 'slowwake', capacity_mib: 20000, reserve_mib: 2000 },
];
/**
 * An evictable serve on its own GPU that sleeps at `level` keeping `residual` MiB (as the sim
 * serve keeps them, plus `env`'s knobs), beside an on-demand `taker` of the same size.
 */
function sleeperAndTaker(
  name: string,
  taker: string,
  gpuRole: string,
  vramMib: number,
  level: 1 | 2,
  residual: number,
  env: Record<string, string>,
): TestServe[] {
  return [
    {
      name,
      gpu_role: gpuRole,
      vram_mib: vramMib,
      class: 'evictable',
      router_tier: `${name}-local`,
      sleep: { level, residual_mib: residual, ...(level === 1 ? { host_ram_mib: 7000 } : {}) },
      env: { SIM_SLEEP_RESIDUAL_MIB: String(residual), ...env },
    },
    { name: taker, gpu_role: gpuRole, vram_mib: vramMib, class: 'on-demand' },
  ];
}

const SERVES: TestServe[] = [
  // The seeds' box: vision sleeps at level 1 and keeps 600 MiB; the sim keeps what it declares.
  { name: 'fast', vram_mib: 14336, router_tier: 'fast-local' },
  sleepingVision({ SIM_WAKE_DELAY_MS: '200' }),
  { name: 'comfyui-sim', vram_mib: 8192, class: 'on-demand' },
  // A sleep that keeps 5000 MiB more than it declares (vLLM #32714).
  ...sleeperAndTaker('leaky', 'taker-l', 'leaky', 12000, 2, 600, { SIM_SLEEP_LEAK_MIB: '5000' }),
  // A wake that fails, as one that hits an OOM does (vLLM #47654).
  ...sleeperAndTaker('wf', 'taker-w', 'wakefail', 10000, 2, 500, { SIM_WAKE_FAIL: '1' }),
  // A sleep that keeps 300 MiB more than declared: within the release check's 5 %, so it is no fallback.
  ...sleeperAndTaker('seep', 'taker-s', 'seeping', 12000, 1, 600, { SIM_SLEEP_LEAK_MIB: '300' }),
  // A sleep that takes 2 s: time to end its acquisition between the /sleep and the hand-over.
  ...sleeperAndTaker('slowsleep', 'taker-t', 'takeover', 12000, 1, 600, { SIM_SLEEP_DELAY_MS: '2000' }),
  // A sleeper whose ledger is lost while it drains: its sleep's fence then refuses.
  ...sleeperAndTaker('lostsleep', 'taker-f', 'lostfence', 12000, 1, 600, {}),
  // A wake that takes 8 s: time to cancel the acquisition that wakes it.
  ...sleeperAndTaker('sloww', 'taker-z', 'slowwake', 12000, 1, 600, { SIM_WAKE_DELAY_MS: '8000' }),
];

describe('eviction by sleeping, restore by waking', () => {
  let t: SimTestBox;

  before(async () => {
    t = await startSimTestBox('sleep', GPUS, SERVES);
  });
  after(async () => {
    await t?.close();
  });

  const client = () => t.temporal.client;
  async function ledger(role: string): Promise<LedgerState> {
    const l = (await ledgerSnapshots(client(), t.manifest)).find((x) => x.gpuRole === role);
    assert.ok(l);
    return l;
  }
  /** The box against the ledger: what nvidia-smi shows used, less what the ledger says the serves hold, is the non-ledger draw and nothing else. */
  async function assertLedgerIsTheBox(role: string): Promise<void> {
    const l = await ledger(role);
    assert.equal(await nonLedgerDrawOf(t.box, l), NON_LEDGER_MIB, `${role}: ${formatLedger(l).join('; ')}`);
  }
  async function containerId(serve: string): Promise<string | undefined> {
    const c = await t.box.runtime.inspect(containerName(t.node, serve));
    return c?.running ? c.id : undefined;
  }
  async function up(...serves: string[]): Promise<void> {
    for (const s of serves) {
      const o = await serveUp(client(), t.node, s);
      assert.ok(o.ok, !o.ok ? o.message : '');
    }
  }

  test('requests in flight all finish 200; the sleep comes after the drain; 11688 MiB confirmed back; vision sleeps holding 600 MiB', async () => {
    await up('fast', 'vision');
    const visionId = await containerId('vision');
    assert.ok(visionId);
    const slow = Array.from({ length: 3 }, () => t.routed('vision', { sim_delay_ms: 2500 }));
    await waitUntil('3 in flight at vision-local', async () => (await t.box.routerAdmin.tierState('vision-local')).inFlight >= 3, 5000);

    const o = await serveAcquire(client(), t.node, { serve: 'comfyui-sim', evict: true });
    assert.ok(o.ok, !o.ok ? o.message : '');
    const done = await Promise.all(slow);
    assert.deepEqual(
      done.map((d) => d.status),
      [200, 200, 200],
    );
    const v = o.result.victims[0];
    assert.ok(v?.sleep);
    assert.match(o.result.evictionReason ?? '', /vision \(11688 of 12288 MiB by sleeping\)/);
    assert.equal(v.sleep.level, 1);
    assert.equal(v.sleep.fellBack, undefined);
    assert.equal(v.inFlightAtQuiesce, 3);
    assert.equal(v.inFlightAtStop, 0);
    const answeredAt = done.map((d) => (d.body as { sim_answered_at_ms: number }).sim_answered_at_ms);
    assert.ok((v.sleep.issuedAtEpochMs ?? 0) >= Math.max(...answeredAt), "sleep issued before the serve's last answer");
    assert.equal(v.vram?.releasedMib, 11688);
    assert.equal(v.sleep.residualSeenMib, 600);

    const acts = await activitiesInOrder(client(), o.workflowId);
    const at = (name: string) => acts.indexOf(name);
    assert.ok(at('drainServe') >= 0 && at('drainServe') < at('sleepServe'), acts.join(','));
    assert.ok(at('sleepServe') < at('confirmVramReleased'));
    assert.ok(at('confirmVramReleased') < at('ledgerVictimReleased'));
    assert.ok(at('ledgerVictimReleased') < at('startServeContainer'));
    assert.equal(acts.filter((a) => a === 'stopServeContainer').length, 0, 'vision was stopped, not put to sleep');

    assert.deepEqual(formatLedger(await ledger('dark-fast')), [
      "gpu_role 'dark-fast': capacity 32607 MiB, reserve 4608 MiB, committed 23128 MiB, free 4871 MiB",
      '  fast 14336 MiB (resident, running)',
      '  vision 12288 MiB (evictable, sleeping at level 1 for comfyui-sim, 600 MiB held): 600 MiB of it committed',
      '  comfyui-sim 8192 MiB (on-demand, running)',
    ]);
    // The process is the one that served before: asleep, not stopped.
    assert.equal(await containerId('vision'), visionId);
    assert.equal((await t.routed('vision')).status, 503);
    await assertLedgerIsTheBox('dark-fast');
  });

  test('restore by waking: the same process, woken, passes the guarded readmit; the ledger is the box again', async () => {
    const visionId = await containerId('vision');
    assert.ok(visionId);
    const o = await serveDown(client(), t.node, 'comfyui-sim', { restore: true });
    assert.ok(o.ok, !o.ok ? o.message : '');
    const r = o.result.restored[0];
    assert.ok(r?.ok, r?.message);
    assert.match(
      r.message,
      /serves up vision: restored by waking \(\d+ ms\), 12288 MiB committed on 'dark-fast'; tier vision-local readmitted \(identity 'qwen3-vl-4b-instruct'\)/,
    );
    assert.equal(await containerId('vision'), visionId, 'restored by a cold start, not a wake');
    const routed = await t.routed('vision');
    assert.equal(routed.status, 200);
    assert.equal(totals(await ledger('dark-fast')).committedMib, 26624);
    await assertLedgerIsTheBox('dark-fast');
    const acts = await activitiesInOrder(client(), r.workflowId);
    assert.ok(acts.indexOf('wakeServe') >= 0 && acts.indexOf('wakeServe') < acts.indexOf('waitHealthy'), acts.join(','));
    assert.equal(acts.filter((a) => a === 'startServeContainer').length, 0, acts.join(','));
    for (const s of ['vision', 'fast']) await serveDown(client(), t.node, s);
  });

  test('an acquisition of a sleeping serve wakes it (the same process), and the ledger is the box', async () => {
    await up('fast', 'vision');
    const id = await containerId('vision');
    assert.ok((await serveAcquire(client(), t.node, { serve: 'comfyui-sim', evict: true })).ok);
    // comfyui-sim goes without a restore: vision sleeps on, until a router (or an operator) acquires it.
    assert.ok((await serveDown(client(), t.node, 'comfyui-sim')).ok);
    assert.match(formatLedger(await ledger('dark-fast'))[2] ?? '', /vision 12288 MiB \(evictable, sleeping at level 1 for comfyui-sim, 600 MiB held\)/);
    const o = await serveAcquire(client(), t.node, { serve: 'vision', evict: true });
    assert.ok(o.ok, !o.ok ? o.message : '');
    const wake = o.result.steps.find((x) => x.step === 'wake');
    assert.match(wake?.outcome ?? '', /^awake from level 1 after \d+ ms$/);
    assert.equal(await containerId('vision'), id);
    assert.equal((await t.routed('vision')).status, 200);
    assert.equal(totals(await ledger('dark-fast')).committedMib, 26624);
    await assertLedgerIsTheBox('dark-fast');
    for (const s of ['vision', 'fast']) await serveDown(client(), t.node, s);
  });

  test('a sleeper seen to keep more than it declared (within the release check) is held in the ledger at what it keeps', async () => {
    await up('seep');
    const o = await serveAcquire(client(), t.node, { serve: 'taker-s', evict: true });
    assert.ok(o.ok, !o.ok ? o.message : '');
    const v = o.result.victims[0];
    assert.equal(v?.sleep?.fellBack, undefined);
    assert.equal(v?.sleep?.residualSeenMib, 900);
    assert.ok(
      o.result.steps.some((x) => /seep keeps 900 MiB on the GPU asleep, above its sleep_residual_mib of 600: raise the declaration/.test(x.outcome)),
      o.result.steps.map((x) => x.outcome).join('\n'),
    );
    assert.deepEqual(formatLedger(await ledger('seeping')).slice(1), [
      '  seep 12000 MiB (evictable, sleeping at level 1 for taker-s, 900 MiB held): 900 MiB of it committed',
      '  taker-s 12000 MiB (on-demand, running)',
    ]);
    await assertLedgerIsTheBox('seeping');
    for (const s of ['taker-s', 'seep']) await serveDown(client(), t.node, s);
  });

  test("an acquisition that ended between its victim's sleep and the hand-over: serves down takes it over, the victim stays asleep and out of rotation", async () => {
    await up('slowsleep');
    const acquisition = serveAcquire(client(), t.node, { serve: 'taker-t', evict: true });
    const handle = client().workflow.getHandle(workflowIds.acquire(t.node, 'taker-t'));
    await waitForPendingActivity(handle, 'sleepServe');
    await handle.terminate('test: the acquisition dies while its victim falls asleep');
    assert.ok(!(await acquisition).ok);
    await waitUntil(
      'slowsleep asleep',
      async () =>
        ((await fetch(`${serveBaseUrl(t.manifest.serves.find((x) => x.name === 'slowsleep')!)}/is_sleeping`).then((r) => r.json())) as { is_sleeping: boolean })
          .is_sleeping,
      10_000,
    );
    const down = await serveDown(client(), t.node, 'taker-t');
    assert.ok(down.ok, !down.ok ? down.message : '');
    assert.ok(
      down.result.steps.some((x) => x.step === 'take' && /slowsleep sleeps$/.test(x.outcome)),
      down.result.steps.map((x) => `${x.step}: ${x.outcome}`).join('\n'),
    );
    // Its release was never seen (the acquisition died before its check): held whole, not at its declared
    // residual, so the ledger holds at least what the box draws until the restore wakes it.
    assert.deepEqual(formatLedger(await ledger('takeover')).slice(1), [
      '  slowsleep 12000 MiB (evictable, sleeping for taker-t, 12000 MiB held): 12000 MiB of it committed',
    ]);
    assert.equal((await t.box.routerAdmin.tierState('slowsleep-local')).state, 'quiesced');
    assert.ok((await nonLedgerDrawOf(t.box, await ledger('takeover'))) <= NON_LEDGER_MIB, 'the ledger holds at least what the box draws');
    const back = await serveUp(client(), t.node, 'slowsleep');
    assert.ok(back.ok, !back.ok ? back.message : '');
    assert.match(back.result.message, /restored by waking/);
    await assertLedgerIsTheBox('takeover');
    assert.equal((await t.routed('slowsleep')).status, 200);
    await serveDown(client(), t.node, 'slowsleep');
  });

  test('a GPU without the room a wake needs (a stray process took it): the restore is a cold restart, recorded', async () => {
    await up('fast', 'vision');
    const o = await serveAcquire(client(), t.node, { serve: 'comfyui-sim', evict: true });
    assert.ok(o.ok, !o.ok ? o.message : '');
    const asleepId = await containerId('vision');
    const l = await ledger('dark-fast');
    // 10000 MiB drawn outside the ledger: free on the card 32607 - (14336 + 600 + 1200 + 10000) = 6471 once comfyui-sim stops, short of 11688.
    t.box.writeNvidiaSmiState({ heldMib: { [l.gpuUuid]: 10000 } });
    try {
      const down = await serveDown(client(), t.node, 'comfyui-sim', { restore: true });
      assert.ok(down.ok, !down.ok ? down.message : '');
      const r = down.result.restored[0];
      assert.ok(r?.ok, r?.message);
      assert.match(r.message, /restored by a cold start/);
      const bringUp: BringUpResult = await client().workflow.getHandle<() => Promise<BringUpResult>>(r.workflowId).result();
      const wake = bringUp.steps.find((s) => s.step === 'wake');
      assert.match(wake?.outcome ?? '', /^wake of vision failed \(nvidia-smi shows 6471 MiB free on \S+; waking from level 1 needs 11688 MiB\): cold restart$/);
      assert.notEqual(await containerId('vision'), asleepId);
    } finally {
      t.box.writeNvidiaSmiState({ heldMib: {} });
    }
    assert.equal((await t.routed('vision')).status, 200);
    await assertLedgerIsTheBox('dark-fast');
    for (const s of ['vision', 'fast']) await serveDown(client(), t.node, s);
  });

  test('a sleep that leaks falls back to stop, recorded with the figures; the victim is evicted, the ledger is the box', async () => {
    await up('leaky');
    const o = await serveAcquire(client(), t.node, { serve: 'taker-l', evict: true, releaseTimeoutS: 2 });
    assert.ok(o.ok, !o.ok ? o.message : '');
    const v = o.result.victims[0];
    assert.ok(v?.sleep);
    // Expected back 11400 MiB (12000 less the 600 declared); the sleep freed 6400 (it kept 5000 more).
    assert.match(
      v.sleep.fellBack ?? '',
      /VRAM of leaky not released on GPU \S+: 5000 MiB still held by its own processes above the 600 MiB it keeps asleep after \d+ s/,
    );
    assert.equal(v.vram?.releasedMib, 12000);
    assert.ok(await t.box.runtime.inspect(containerName(t.node, 'leaky')).then((c) => !c?.running));
    const steps = o.result.steps.map((s) => `${s.step}: ${s.outcome}`);
    assert.ok(
      steps.some((s) => /^sleep leaky: sleep of leaky gave up \(VRAM of leaky not released/.test(s)),
      steps.join('\n'),
    );
    assert.deepEqual(formatLedger(await ledger('leaky')).slice(1), [
      '  leaky 12000 MiB (evictable, evicted for taker-l): not committed',
      '  taker-l 12000 MiB (on-demand, running)',
    ]);
    await assertLedgerIsTheBox('leaky');
    await serveDown(client(), t.node, 'taker-l');
    await serveDown(client(), t.node, 'leaky');
  });

  test('a wake that fails falls back to a cold start: a new process, through the guarded readmit', async () => {
    await up('wf');
    const asleepId = await containerId('wf');
    const o = await serveAcquire(client(), t.node, { serve: 'taker-w', evict: true });
    assert.ok(o.ok, !o.ok ? o.message : '');
    assert.equal(o.result.victims[0]?.sleep?.level, 2);
    assert.deepEqual(formatLedger(await ledger('wakefail')).slice(1), [
      '  wf 10000 MiB (evictable, sleeping at level 2 for taker-w, 500 MiB held): 500 MiB of it committed',
      '  taker-w 10000 MiB (on-demand, running)',
    ]);
    await assertLedgerIsTheBox('wakefail');

    const down = await serveDown(client(), t.node, 'taker-w', { restore: true });
    assert.ok(down.ok, !down.ok ? down.message : '');
    const r = down.result.restored[0];
    assert.ok(r?.ok, r?.message);
    assert.match(r.message, /restored by a cold start/);
    const coldId = await containerId('wf');
    assert.ok(coldId);
    assert.notEqual(coldId, asleepId);
    assert.equal((await t.routed('wf')).status, 200);
    await assertLedgerIsTheBox('wakefail');
    await serveDown(client(), t.node, 'wf');
  });

  test("a victim's sleep whose fence refuses (its ledger lost during the drain) fails the acquisition: no unfenced stop, the victim serves on", async () => {
    await up('lostsleep');
    const before = await containerId('lostsleep');
    assert.ok(before);
    const slow = Array.from({ length: 2 }, () => t.routed('lostsleep', { sim_delay_ms: 2500 }));
    await waitUntil('2 in flight at lostsleep-local', async () => (await t.box.routerAdmin.tierState('lostsleep-local')).inFlight >= 2, 5000);
    const acquisition = serveAcquire(client(), t.node, { serve: 'taker-f', evict: true });
    const handle = client().workflow.getHandle(workflowIds.acquire(t.node, 'taker-f'));
    await waitForPendingActivity(handle, 'drainServe');
    // The ledger the eviction was decided in is gone: the next update starts one afresh from the box.
    await client().workflow.getHandle(workflowIds.ledger(t.node, 'lostfence')).terminate('test: lose the ledger mid-drain');
    const o = await acquisition;
    assert.ok(!o.ok, 'the acquisition must fail');
    assert.equal(o.failureType, 'ReservationLost', o.message);
    assert.match(o.message, /sleep of lostsleep refused/);
    assert.deepEqual(
      (await Promise.all(slow)).map((d) => d.status),
      [200, 200],
    );
    const acts = await activitiesInOrder(client(), handle.workflowId);
    assert.equal(acts.filter((a) => a === 'stopServeContainer').length, 0, acts.join(','));
    // The same process, awake, routed again, and the fresh ledger holds it as running.
    assert.equal(await containerId('lostsleep'), before);
    const awake = (await fetch(`${serveBaseUrl(t.manifest.serves.find((x) => x.name === 'lostsleep')!)}/is_sleeping`).then((r) => r.json())) as {
      is_sleeping: boolean;
    };
    assert.equal(awake.is_sleeping, false);
    assert.equal((await t.routed('lostsleep')).status, 200);
    assert.deepEqual(formatLedger(await ledger('lostfence')).slice(1), ['  lostsleep 12000 MiB (evictable, running)']);
    await assertLedgerIsTheBox('lostfence');
    await serveDown(client(), t.node, 'lostsleep');
  });

  test('an acquisition of a sleeping serve cancelled mid-wake stops the sleeper before it releases its MiB', async () => {
    await up('sloww');
    const evict = await serveAcquire(client(), t.node, { serve: 'taker-z', evict: true });
    assert.ok(evict.ok, !evict.ok ? evict.message : '');
    const freed = await serveDown(client(), t.node, 'taker-z');
    assert.ok(freed.ok, !freed.ok ? freed.message : '');
    assert.deepEqual(formatLedger(await ledger('slowwake')).slice(1), [
      '  sloww 12000 MiB (evictable, sleeping at level 1 for taker-z, 600 MiB held): 600 MiB of it committed',
    ]);

    const acquisition = serveAcquire(client(), t.node, { serve: 'sloww' });
    const handle = client().workflow.getHandle(workflowIds.acquire(t.node, 'sloww'));
    await waitForPendingActivity(handle, 'wakeServe');
    await handle.cancel();
    const o = await acquisition;
    assert.ok(!o.ok, 'the cancelled acquisition must not succeed');
    // Compensations run last-added first: the process goes before its reservation does.
    const acts = await activitiesInOrder(client(), handle.workflowId);
    const after = acts.slice(acts.indexOf('wakeServe') + 1);
    // (The wake's own compensation stops it too: a stop is idempotent.)
    assert.ok(after.includes('stopServeContainer') && after.indexOf('ledgerRelease') > after.lastIndexOf('stopServeContainer'), acts.join(','));
    assert.equal(await containerId('sloww'), undefined);
    assert.deepEqual(formatLedger(await ledger('slowwake')).slice(1), []);
    await assertLedgerIsTheBox('slowwake');
  });

  test('a ledger started afresh takes a sleeping serve as sleeping; serves down of it stops its process and gives back the residual', async () => {
    await up('wf');
    const o = await serveAcquire(client(), t.node, { serve: 'taker-w', evict: true });
    assert.ok(o.ok, !o.ok ? o.message : '');
    // Lose the ledger: the fresh one reads the running containers, and asks the sleeper whether it sleeps.
    await client().workflow.getHandle(workflowIds.ledger(t.node, 'wakefail')).terminate('test: lose the ledger');
    assert.deepEqual(formatLedger(await ledger('wakefail')), [
      "gpu_role 'wakefail': capacity 16000 MiB, reserve 1000 MiB, committed 10500 MiB, free 4500 MiB",
      '  taker-w 10000 MiB (on-demand, running)',
      '  wf 10000 MiB (evictable, sleeping at level 2 for taker-w, 500 MiB held): 500 MiB of it committed',
    ]);
    await assertLedgerIsTheBox('wakefail');
    const down = await serveDown(client(), t.node, 'wf');
    assert.ok(down.ok, !down.ok ? down.message : '');
    assert.equal(down.result.releasedMib, 500);
    assert.equal(await containerId('wf'), undefined);
    assert.deepEqual(formatLedger(await ledger('wakefail')).slice(1), ['  taker-w 10000 MiB (on-demand, running)']);
    await assertLedgerIsTheBox('wakefail');
    await serveDown(client(), t.node, 'taker-w');
  });
});
