// One cold start at a time per GPU (the ledger's start slot), on a simulated box: real dev server,
// sim serves as separate processes, the fake nvidia-smi listing each by its pid, and `gpures serves
// up` run as separate processes at once. The box is sampled every ~100 ms (its containers, and
// each one's own /health), not only the ledger's word.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { containerName, serveBaseUrl, serveHealthUrl } from '../src/domain/serve';
import { ledgerSnapshots, serveAcquire, serveDown, serveUp } from '../src/client/operations';
import { exportWorkflow } from '../src/audit/export';
import { progressQuery, workflowIds } from '../src/shared/messages';
import type { TestServe } from './support/box';
import { startSimTestBox } from './support/sim';
import type { SimTestBox } from './support/sim';
import { sampleBoxUntilStopped } from './support/sim-worker-box';
import { gpures, show } from './support/cli';
import { totals } from '../src/domain/ledger';
import { waitUntil } from './support/wait';
import { activitiesInOrder, slotTakes } from './support/history-scan';

const GPU = { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 };
/** A second GPU: a sleeper, the on-demand serve it sleeps for, and a start that holds the slot while the sleeper's restore waits. */
const SLEEP_GPU = { role: 'sleepgpu', capacity_mib: 20000, reserve_mib: 2000 };
const SERVES: TestServe[] = [
  // Each slow to answer health, as a model load is: two started at once would profile together.
  { name: 'a', vram_mib: 8000, router_tier: 'a-local', env: { SIM_START_DELAY_MS: '3000' } },
  { name: 'b', vram_mib: 6000, env: { SIM_START_DELAY_MS: '3000' } },
  // Never healthy within its 15 s: its start fails and is compensated.
  { name: 'stuck', vram_mib: 4000, start_timeout_s: 15, env: { SIM_START_DELAY_MS: 'never' } },
  // Never healthy, with a long timeout: its run is terminated while it holds the slot.
  { name: 'hung', vram_mib: 4000, start_timeout_s: 600, env: { SIM_START_DELAY_MS: 'never' } },
  {
    name: 'sleepy',
    gpu_role: SLEEP_GPU.role,
    vram_mib: 12000,
    class: 'evictable',
    router_tier: 'sleepy-local',
    sleep: { level: 1, residual_mib: 600, host_ram_mib: 7000 },
    env: { SIM_SLEEP_RESIDUAL_MIB: '600' },
  },
  { name: 'taker', gpu_role: SLEEP_GPU.role, vram_mib: 12000, class: 'on-demand' },
  { name: 'hung2', gpu_role: SLEEP_GPU.role, vram_mib: 4000, start_timeout_s: 600, env: { SIM_START_DELAY_MS: 'never' } },
  // A start whose "profiling" lasts 45 s (a CLI's own start under load, an acquisition's admit, preflight, room check, quiesce and drain come first): another serve stopped meanwhile frees memory under it.
  { name: 'slow', vram_mib: 8000, start_timeout_s: 120, env: { SIM_START_DELAY_MS: '45000' } },
  // An acquisition's victim and its acquirer: 12000 + 8000 (slow) + 14000 is past the GPU's 27999.
  { name: 'v', vram_mib: 12000, class: 'evictable', router_tier: 'v-local' },
  { name: 'od', vram_mib: 14000, class: 'on-demand' },
];
/** Where the bring-ups' histories go when set (how test/histories/start-slot-waited.json and measure-own-first.json were recorded). */
const SAVE_DIR = process.env['GPURES_SAVE_HISTORIES'];

interface Sample {
  atMs: number;
  /** Serves whose container runs and whose /health does not answer 200 yet. */
  starting: string[];
  running: string[];
}

describe('one cold start at a time per GPU: the start slot', () => {
  let t: SimTestBox;
  let env: Record<string, string>;

  before(async () => {
    t = await startSimTestBox('start-slot', [GPU, SLEEP_GPU], SERVES);
    env = { TEMPORAL_ADDRESS: t.temporal.address };
  });
  after(async () => {
    await t?.close();
  });

  const client = () => t.temporal.client;
  const cli = (...args: string[]) => gpures([...args, '--manifest', t.manifestPath], env, 180_000);
  const ledger = async (role = GPU.role) => (await ledgerSnapshots(client(), t.manifest)).find((l) => l.gpuRole === role);

  async function healthy(serve: string): Promise<boolean> {
    const spec = t.manifest.serves.find((s) => s.name === serve);
    if (!spec) return false;
    try {
      return (await fetch(serveHealthUrl(spec), { signal: AbortSignal.timeout(300) })).status === 200;
    } catch {
      return false;
    }
  }

  /** The box every ~100 ms until stopped (3 min at most): which serves' containers run, and which of them are not healthy yet. */
  const sampleBox = () => {
    const names = new Map(SERVES.map((s) => [containerName(t.node, s.name), s.name]));
    return sampleBoxUntilStopped<Sample>(async () => {
      const running = (await t.box.runtime.list({})).filter((c) => c.running && names.has(c.name)).map((c) => names.get(c.name) ?? '');
      const health = await Promise.all(running.map(async (s) => [s, await healthy(s)] as const));
      return { atMs: Date.now(), running, starting: health.filter(([, ok]) => !ok).map(([s]) => s) };
    }, 180_000);
  };

  /**
   * Pairs of samples in which a container that ran in the first had exited in the second while
   * another, started, was not healthy in either: memory freed under a start's profiling.
   */
  function exitsUnderAStart(samples: Sample[]): { count: number; first?: { exited: string[]; starting: string[] } } {
    let count = 0;
    let first: { exited: string[]; starting: string[] } | undefined;
    for (let i = 1; i < samples.length; i++) {
      const [prev, cur] = [samples[i - 1] as Sample, samples[i] as Sample];
      const exited = prev.running.filter((s) => !cur.running.includes(s));
      const starting = prev.starting.filter((s) => cur.starting.includes(s) && !exited.includes(s));
      if (exited.length && starting.length) {
        count += 1;
        first ??= { exited, starting };
      }
    }
    return { count, ...(first ? { first } : {}) };
  }

  /** Until `serve`'s container runs (its start is under way, not healthy yet). */
  async function containerRunning(serve: string): Promise<void> {
    const name = containerName(t.node, serve);
    await waitUntil(`${serve}'s container running`, async () => (await t.box.runtime.list({})).some((c) => c.running && c.name === name), 60_000, 100);
  }

  /** Each serve's own process MiB, as the fake nvidia-smi lists it. */
  async function ownMib(serve: string): Promise<number | undefined> {
    const pids = (await t.box.runtime.processes?.(containerName(t.node, serve))) ?? [];
    const apps = await t.box.gpu.computeApps();
    return apps.filter((p) => pids.includes(p.pid)).reduce((sum, p) => sum + (p.usedMib ?? 0), 0);
  }

  /**
   * `serves down serve` (brought up first) while slow's start holds the slot: both succeed, the
   * down says it waits for the slot, and no container exits under the start (the box sampled).
   */
  async function downWhileSlowStarts(serve: string): Promise<void> {
    const up = await cli('serves', 'up', serve);
    assert.equal(up.code, 0, show(up));
    const box = sampleBox();
    const slow = cli('serves', 'up', 'slow');
    await containerRunning('slow');
    const down = await cli('serves', 'down', serve);
    const rs = await slow;
    const samples = await box.stop();
    const exits = exitsUnderAStart(samples);
    console.log(
      `  slow exit ${rs.code}, down ${serve} exit ${down.code}; ${exits.count} of ${samples.length} samples with a container exited under a start ` +
        `(first: ${JSON.stringify(exits.first ?? null)}); down ${serve}: ${down.stdout.trim().split('\n').slice(0, 8).join(' | ')}`,
    );
    assert.equal(rs.code, 0, show(rs));
    assert.equal(down.code, 0, show(down));
    assert.equal(exits.count, 0, `a container exited while another started: ${JSON.stringify(exits.first)}`);
    assert.match(down.stdout + down.stderr, new RegExp(`start slot: slow is starting on dark-fast since \\d+ s; waiting to stop ${serve}`));
  }

  async function clearBox(): Promise<void> {
    for (const s of SERVES.map((x) => x.name)) await serveDown(client(), t.node, s);
    const l = await ledger();
    assert.deepEqual(l?.reservations.map((r) => r.serve) ?? [], []);
    assert.equal(l?.startSlot, undefined, 'the start slot is still held once every serve is down');
  }

  test('two serves up on one GPU at once, each from its own process: one starts at a time, both run, each measured as its own process', async () => {
    try {
      const box = sampleBox();
      const [ra, rb] = await Promise.all([cli('serves', 'up', 'a'), cli('serves', 'up', 'b')]);
      const samples = await box.stop();
      const both = samples.filter((s) => s.starting.length > 1);
      const l = await ledger();
      const measured = Object.fromEntries((l?.reservations ?? []).map((r) => [r.serve, r.measuredMib]));
      const own = { a: await ownMib('a'), b: await ownMib('b') };
      const waited = [ra, rb].find((r) => /start slot: [ab] is starting on dark-fast since \d+ s; waiting/.test(r.stdout + r.stderr));
      const waiter = waited === ra ? 'a' : 'b';
      // The waiter's takes, and what it woke to before each: the ledger tells it the slot is free.
      const { takes, toldAfterLast } = slotTakes((await client().workflow.getHandle(workflowIds.bringUp(t.node, waiter)).fetchHistory()).events ?? []);
      console.log(
        `  a exit ${ra.code}, b exit ${rb.code}; ${both.length} of ${samples.length} samples with two starting ` +
          `(first: ${JSON.stringify(both[0] ?? null)}); measured ${JSON.stringify(measured)}, own ${JSON.stringify(own)}; one waited: ${Boolean(waited)}; ` +
          `${waiter}'s takes ${JSON.stringify(takes)}${toldAfterLast ? ', told after its last' : ''}`,
      );
      assert.equal(ra.code, 0, show(ra));
      assert.equal(rb.code, 0, show(rb));
      assert.equal(both.length, 0, `two containers starting at once: ${JSON.stringify(both.slice(0, 3))}`);
      assert.deepEqual(samples[samples.length - 1]?.running.sort(), ['a', 'b']);
      assert.deepEqual(l?.reservations.map((r) => `${r.serve} ${r.phase}`).sort(), ['a running', 'b running']);
      assert.equal(measured['a'], own.a);
      assert.equal(measured['b'], own.b);
      assert.ok(waited, 'neither CLI printed the start slot it waited for');
      assert.equal(l?.startSlot, undefined);
      // Refused first, then taken at the ledger's word that the slot was given back, not at a poll;
      // or, where a poll's ask reached the ledger just after the give, told after it took it.
      assert.equal(takes[0]?.taken, false, JSON.stringify(takes));
      const last = takes[takes.length - 1];
      assert.ok(
        last?.taken && (last.after === 'signal' || toldAfterLast),
        `${waiter} was never told the slot was free: ${JSON.stringify(takes)}, told after its last take: ${toldAfterLast}`,
      );
      if (SAVE_DIR) {
        mkdirSync(SAVE_DIR, { recursive: true });
        await exportWorkflow(client(), workflowIds.bringUp(t.node, 'b'), { file: join(SAVE_DIR, 'measure-own-first.json') });
        await exportWorkflow(client(), workflowIds.bringUp(t.node, waiter), { file: join(SAVE_DIR, 'start-slot-woken.json') });
        await exportWorkflow(client(), workflowIds.ledger(t.node, GPU.role), { file: join(SAVE_DIR, 'ledger-slot-woken.json') });
      }
    } finally {
      await clearBox();
    }
  });

  test('a start that fails (never healthy within its timeout) gives the slot back, and the start waiting for it proceeds', async () => {
    try {
      const box = sampleBox();
      const stuck = cli('serves', 'up', 'stuck');
      await waitUntil('stuck holds the start slot', async () => (await ledger())?.startSlot?.serve === 'stuck', 60_000, 100);
      const ra = await cli('serves', 'up', 'a');
      const rs = await stuck;
      const samples = await box.stop();
      const both = samples.filter((s) => s.starting.length > 1);
      console.log(
        `  stuck exit ${rs.code}, a exit ${ra.code}; ${both.length} of ${samples.length} samples with two starting; a: ${ra.stdout.trim().split('\n').slice(0, 4).join(' | ')}`,
      );
      assert.equal(rs.code, 1, show(rs));
      assert.equal(ra.code, 0, show(ra));
      assert.match(ra.stdout + ra.stderr, /start slot: stuck is starting on dark-fast since \d+ s; waiting/);
      assert.equal(both.length, 0, JSON.stringify(both.slice(0, 3)));
      assert.equal((await ledger())?.startSlot, undefined);
      const rb = await cli('serves', 'up', 'b');
      assert.equal(rb.code, 0, show(rb));
      assert.doesNotMatch(rb.stdout + rb.stderr, /waiting/);
      if (SAVE_DIR) {
        mkdirSync(SAVE_DIR, { recursive: true });
        await exportWorkflow(client(), workflowIds.bringUp(t.node, 'a'), { file: join(SAVE_DIR, 'start-slot-waited.json') });
      }
    } finally {
      await clearBox();
    }
  });

  test('a ledger lost while a start holds the slot: the fresh ledger carries it while that run runs, and the next start waits for it', async () => {
    try {
      const box = sampleBox();
      const hung = cli('serves', 'up', 'hung');
      await waitUntil('hung holds the start slot', async () => (await ledger())?.startSlot?.serve === 'hung', 60_000, 100);
      const holder = (await ledger())?.startSlot?.holder ?? '';
      // Its container created (the fresh ledger takes its reservation from the box), still profiling.
      await waitUntil(
        'hung started',
        async () => (await t.box.runtime.list({})).some((c) => c.running && c.name === containerName(t.node, 'hung')),
        60_000,
        100,
      );
      await client().workflow.getHandle(workflowIds.ledger(t.node, GPU.role)).terminate('test: the ledger is lost while hung starts');
      // The fresh ledger, started by this read.
      const fresh = await ledger();
      const b = cli('serves', 'up', 'b');
      // Until b's run waits for the slot, or b's container runs beside hung's.
      const bRun = client().workflow.getHandle(workflowIds.bringUp(t.node, 'b'));
      let beside = false;
      await waitUntil(
        'b waiting for the slot, or started beside hung',
        async () => {
          beside = (await t.box.runtime.list({})).some((c) => c.running && c.name === containerName(t.node, 'b'));
          const running = (await bRun.describe().catch(() => undefined))?.status.name === 'RUNNING';
          return beside || (running && (await bRun.query(progressQuery).catch(() => [])).some((x) => x.step === 'slot'));
        },
        90_000,
        200,
      );
      await client().workflow.getHandle(workflowIds.bringUp(t.node, 'hung')).cancel();
      const [rb, rh] = [await b, await hung];
      const samples = await box.stop();
      const both = samples.filter((s) => s.starting.length > 1);
      console.log(
        `  fresh ledger's slot ${JSON.stringify(fresh?.startSlot ?? null)}; b started beside hung: ${beside}; ` +
          `b exit ${rb.code}, hung exit ${rh.code}; ${both.length} of ${samples.length} samples with two starting (first: ${JSON.stringify(both[0] ?? null)})`,
      );
      assert.equal(beside, false, 'b started while hung still held the slot');
      assert.equal(both.length, 0, JSON.stringify(both.slice(0, 3)));
      assert.equal(fresh?.startSlot?.holder, holder, "the fresh ledger did not carry the lost run's start slot");
      assert.equal(rb.code, 0, show(rb));
      assert.match(rb.stdout + rb.stderr, /start slot: hung is starting on dark-fast since \d+ s; waiting/);
      assert.equal((await ledger())?.startSlot, undefined);
    } finally {
      await clearBox();
    }
  });

  test("a sleeper's restore cancelled while it waits for the slot: the sleeper stays asleep, its container and its reservation as they were", async () => {
    const sleepy = t.manifest.serves.find((x) => x.name === 'sleepy');
    assert.ok(sleepy);
    const isSleeping = async () =>
      ((await (await fetch(`${serveBaseUrl(sleepy)}/is_sleeping`, { signal: AbortSignal.timeout(2000) })).json()) as { is_sleeping: boolean }).is_sleeping;
    const sleepyId = async () => {
      const c = await t.box.runtime.inspect(containerName(t.node, 'sleepy'));
      return c?.running ? c.id : undefined;
    };
    const entry = async () => {
      const l = await ledger(SLEEP_GPU.role);
      const r = l?.reservations.find((x) => x.serve === 'sleepy');
      return r
        ? `${r.phase}${r.evictedFor ? ` for ${r.evictedFor}` : ''}${r.sleptAtLevel ? ` at ${r.sleptAtLevel}` : ''}, ${l ? totals(l).committedMib : '?'} MiB committed`
        : 'none';
    };
    try {
      const up = await serveUp(client(), t.node, 'sleepy');
      assert.ok(up.ok, !up.ok ? up.message : '');
      const taken = await serveAcquire(client(), t.node, { serve: 'taker', evict: true });
      assert.ok(taken.ok, !taken.ok ? taken.message : '');
      const down = await serveDown(client(), t.node, 'taker');
      assert.ok(down.ok, !down.ok ? down.message : '');
      const asleepId = await sleepyId();
      const before = await entry();
      assert.equal(before, 'sleeping for taker at 1, 600 MiB committed');
      assert.equal(await isSleeping(), true);
      // hung2 holds the slot (never healthy); sleepy's restore then waits for it.
      const hung2 = cli('serves', 'up', 'hung2');
      await waitUntil('hung2 holds the start slot', async () => (await ledger(SLEEP_GPU.role))?.startSlot?.serve === 'hung2', 60_000, 100);
      const restore = cli('serves', 'up', 'sleepy');
      const run = client().workflow.getHandle(workflowIds.bringUp(t.node, 'sleepy'));
      await waitUntil(
        'the restore of sleepy waiting for the slot',
        async () => (await run.query(progressQuery).catch(() => [])).some((x) => x.step === 'slot'),
        60_000,
        100,
      );
      await run.cancel();
      const rr = await restore;
      if (SAVE_DIR) await exportWorkflow(client(), workflowIds.bringUp(t.node, 'sleepy'), { file: join(SAVE_DIR, 'restore-cancelled-waiting-slot.json') });
      const after = { id: await sleepyId(), asleep: await isSleeping().catch((e: unknown) => String(e)), entry: await entry() };
      console.log(`  before: ${before}, container ${asleepId}; restore exit ${rr.code}; after: ${JSON.stringify(after)}`);
      assert.notEqual(rr.code, 0, show(rr));
      assert.equal(after.id, asleepId, "the sleeper's container was removed by the cancelled restore");
      assert.equal(after.asleep, true);
      // hung2's 4000 MiB beside the sleeper's 600, as before the restore.
      assert.equal(after.entry, 'sleeping for taker at 1, 4600 MiB committed');
      await client().workflow.getHandle(workflowIds.bringUp(t.node, 'hung2')).cancel();
      await hung2;
      // It wakes as any sleeper does.
      const woken = await serveUp(client(), t.node, 'sleepy');
      assert.ok(woken.ok, !woken.ok ? woken.message : '');
      assert.equal(woken.result.restoredBy, 'wake');
    } finally {
      for (const s of ['hung2', 'taker', 'sleepy']) await serveDown(client(), t.node, s);
    }
  });

  test('a slot whose holder was terminated is taken over by the next start', async () => {
    const hung = cli('serves', 'up', 'hung');
    await waitUntil('hung holds the start slot', async () => (await ledger())?.startSlot?.serve === 'hung', 60_000, 100);
    const holder = (await ledger())?.startSlot?.holder ?? '';
    await client().workflow.getHandle(workflowIds.bringUp(t.node, 'hung')).terminate('test: a run that dies holding the start slot');
    await hung;
    const began = Date.now();
    const ra = await cli('serves', 'up', 'a');
    const l = await ledger();
    console.log(
      `  a exit ${ra.code} after ${Date.now() - began} ms; slot now ${JSON.stringify(l?.startSlot ?? null)}; a: ${ra.stdout.trim().split('\n').slice(0, 4).join(' | ')}`,
    );
    assert.equal(ra.code, 0, show(ra));
    assert.match(
      ra.stdout + ra.stderr,
      new RegExp(`start slot taken on dark-fast after \\d+ s \\(${holder.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} had ended holding it\\)`),
    );
    assert.equal(l?.startSlot, undefined);
    assert.equal(l?.reservations.find((r) => r.serve === 'a')?.phase, 'running');
  });

  test('serves down while another serve starts on the GPU waits for the start slot: no container exits under a start', async () => {
    // The case before may leave a serve held (the terminated holder's): each begins on an empty GPU.
    await clearBox();
    try {
      await downWhileSlowStarts('a');
      const l = await ledger();
      assert.deepEqual(
        l?.reservations.map((r) => `${r.serve} ${r.phase}`),
        ['slow running'],
      );
      assert.equal(l?.startSlot, undefined);
      if (SAVE_DIR) {
        mkdirSync(SAVE_DIR, { recursive: true });
        await exportWorkflow(client(), workflowIds.bringDown(t.node, 'a'), { file: join(SAVE_DIR, 'stop-slot-waited.json') });
      }
    } finally {
      await clearBox();
    }
  });

  test("serves down of a serve with no tier to drain asks for its stop's slot with its take: it waits for a start that holds it, and takes it at once when free", async () => {
    await clearBox();
    try {
      await downWhileSlowStarts('b');
      const waited = await activitiesInOrder(client(), workflowIds.bringDown(t.node, 'b'));
      // No snapshot before the take (its answer says the ledger before it); the slot's take answered held, then asked again.
      assert.deepEqual(waited.slice(0, 3), ['resolveServe', 'ledgerBeginStop', 'inspectServe'], waited.join(', '));
      assert.ok(waited.includes('ledgerStartSlot'), waited.join(', '));
      if (SAVE_DIR) {
        mkdirSync(SAVE_DIR, { recursive: true });
        await exportWorkflow(client(), workflowIds.bringDown(t.node, 'b'), { file: join(SAVE_DIR, 'stop-slot-with-take.json') });
      }
      // The slot free, the take takes it with the serve: no Update of its own, and the release gives it back.
      const freeDown = await serveDown(client(), t.node, 'slow');
      assert.ok(freeDown.ok, !freeDown.ok ? freeDown.message : '');
      assert.equal(freeDown.result.outcome, 'stopped', freeDown.result.message);
      // Its ledgerBefore from the take's answer: the serve as the take found it, not as it left it.
      assert.ok(
        freeDown.result.ledgerBefore.some((l) => /slow 8000 MiB \(resident, running\)/.test(l)),
        freeDown.result.ledgerBefore.join('\n'),
      );
      const free = await activitiesInOrder(client(), workflowIds.bringDown(t.node, 'slow'));
      assert.deepEqual(
        free.filter((a) => a !== 'confirmVramReleased'),
        ['resolveServe', 'ledgerBeginStop', 'inspectServe', 'readBeforeStop', 'stopServeContainer', 'ledgerRelease'],
      );
      assert.equal((await ledger())?.startSlot, undefined);
    } finally {
      await clearBox();
    }
  });

  test('an acquisition that evicts while another serve starts waits for the start slot before its victim stops, and holds it through its own start', async () => {
    // The case before may leave a serve held (the terminated holder's): each begins on an empty GPU.
    await clearBox();
    try {
      const rv = await cli('serves', 'up', 'v');
      assert.equal(rv.code, 0, show(rv));
      const box = sampleBox();
      const slow = cli('serves', 'up', 'slow');
      await containerRunning('slow');
      const acq = await cli('serves', 'up', 'od', '--evict');
      const rs = await slow;
      const samples = await box.stop();
      const exits = exitsUnderAStart(samples);
      const l = await ledger();
      console.log(
        `  slow exit ${rs.code}, od --evict exit ${acq.code}; ${exits.count} of ${samples.length} samples with a container exited under a start ` +
          `(first: ${JSON.stringify(exits.first ?? null)}); od: ${acq.stdout.trim().split('\n').slice(0, 10).join(' | ')}`,
      );
      assert.equal(rs.code, 0, show(rs));
      assert.equal(acq.code, 0, show(acq));
      assert.equal(exits.count, 0, `a container exited while another started: ${JSON.stringify(exits.first)}`);
      assert.match(acq.stdout + acq.stderr, /start slot: slow is starting on dark-fast since \d+ s; waiting to evict v/);
      assert.deepEqual(l?.reservations.map((r) => `${r.serve} ${r.phase}`).sort(), ['od running', 'slow running', 'v evicted']);
      assert.equal(l?.startSlot, undefined);
      // The slot's bound counts v's stop timeout from the manifest entry v's eviction resolved: od's and v's, each resolved once.
      const resolves = (await activitiesInOrder(client(), workflowIds.acquire(t.node, 'od'))).filter((a) => a === 'resolveServe');
      assert.equal(resolves.length, 2, 'resolveServe steps of the acquisition (od and its one victim v)');
      if (SAVE_DIR) {
        mkdirSync(SAVE_DIR, { recursive: true });
        await exportWorkflow(client(), workflowIds.acquire(t.node, 'od'), { file: join(SAVE_DIR, 'evict-victims-resolved-once.json') });
      }
    } finally {
      await clearBox();
    }
  });
});
