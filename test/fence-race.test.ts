// Reservations as fences, raced for real: a `gpures worker` process, fake-vLLM containers on the
// test dockerd, the reference router, and operations started from other processes while the
// box itself is sampled (its running containers and the MiB they reserve), not only the
// ledger's word for it.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { WorkflowFailedError } from '@temporalio/client';
import { CancelledFailure } from '@temporalio/common';
import { LABEL } from '../src/domain/serve';
import type { LedgerState } from '../src/domain/ledger';
import { totals } from '../src/domain/ledger';
import type { GpuSpec } from '../src/domain/types';
import { LedgerClient } from '../src/adapters/ledger/ledger-client';
import { progressQuery, taskQueueFor, workflowIds } from '../src/shared/messages';
import type { BringDownResult } from '../src/shared/operations';
import { docker } from './support/box';
import type { TestServe } from './support/box';
import { gpures, show } from './support/cli';
import type { Run } from './support/cli';
import { startProcessBox } from './support/process-box';
import type { ProcessBox } from './support/process-box';
import { ledgerTotalsAfterEachUpdate } from './support/history-scan';
import type { TestTemporal } from './support/temporal';
import { waitUntil } from './support/wait';
import { prng } from './support/prng';

const GPU = { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 };
const BUDGET = 32607 - 4608;
const SLOW = { FAKE_START_DELAY_S: '4' };
const SERVES: TestServe[] = [
  // The deterministic sequence: b + o1 + r1 = 37000 MiB, the figure, on a 27999 budget.
  { name: 'b', vram_mib: 9000 },
  { name: 'o1', vram_mib: 12000, env: SLOW },
  { name: 'r1', vram_mib: 16000 },
  // The pending variant: ondemand does not fit beside b and vision, so its acquisition evicts vision.
  { name: 'vision', vram_mib: 12288, class: 'evictable', served_model_name: 'qwen3-vl-4b-instruct', router_tier: 'vision-local' },
  { name: 'ondemand', vram_mib: 8192, class: 'on-demand', api: 'none', args: ['sleep', '3600'] },
  // As ondemand, but it never turns healthy: its acquisition waits at its health, vision stopped, until cancelled.
  { name: 'odwait', vram_mib: 8192, class: 'on-demand', env: { FAKE_START_DELAY_S: 'never' }, start_timeout_s: 120 },
  // The randomized race's pool, besides b, vision and ondemand.
  { name: 'e1', vram_mib: 6000, class: 'evictable' },
  { name: 'e2', vram_mib: 7000, class: 'evictable', env: { FAKE_START_DELAY_S: '2' } },
  { name: 'od2', vram_mib: 12000, class: 'on-demand', env: { FAKE_START_DELAY_S: '2' } },
];

/** The box's own figure: the MiB reserved by the containers running now, by their labels. */
class BoxSampler {
  samples = 0;
  maxMib = 0;
  over: { at: string; mib: number; serves: string[] }[] = [];
  private timer: NodeJS.Timeout | undefined;
  private busy = false;

  constructor(private readonly node: string) {}

  start(everyMs = 200): void {
    this.timer = setInterval(() => void this.sample(), everyMs);
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    while (this.busy) await new Promise((r) => setTimeout(r, 20));
    await this.sample();
  }

  async sample(): Promise<void> {
    if (this.busy) return;
    this.busy = true;
    try {
      const running = await docker().listContainers({ filters: { label: [`${LABEL.node}=${this.node}`], status: ['running'] } });
      const mib = running.reduce((s, c) => s + Number(c.Labels[LABEL.vramMib] ?? 0), 0);
      this.samples += 1;
      this.maxMib = Math.max(this.maxMib, mib);
      if (mib > BUDGET) this.over.push({ at: new Date().toISOString(), mib, serves: running.map((c) => c.Labels[LABEL.serve] ?? '?') });
    } finally {
      this.busy = false;
    }
  }
}

describe('reservations fence their containers: races on a real box', () => {
  let box: ProcessBox;
  let temporal: TestTemporal;
  let node: string;
  let manifest: string;
  let gpu: GpuSpec;
  let env: Record<string, string>;
  let ledger: LedgerClient;

  before(async () => {
    box = await startProcessBox('fence', GPU, SERVES);
    ({ temporal, node, env, manifestPath: manifest } = box);
    gpu = box.manifest.gpus[0]!;
    ledger = new LedgerClient(temporal.client);
    // The router starts with every tier active; an operator's first `serves down` puts a tier whose serve is not up where gpures keeps it: quiesced.
    const down = await gpures(['serves', 'down', 'vision', '--manifest', manifest], env);
    assert.equal(down.code, 0, show(down));
  });

  after(async () => {
    await box?.close();
  });

  const start = (type: 'bringUpWorkflow' | 'bringDownWorkflow' | 'acquireWorkflow', workflowId: string, input: Record<string, unknown>) =>
    temporal.client.workflow.start(type, { workflowId, taskQueue: taskQueueFor(node), args: [input], workflowIdConflictPolicy: 'USE_EXISTING' });

  async function tierMode(tier: string): Promise<string> {
    const res = await fetch(`${box.router.url}/admin/tiers/${tier}`, { headers: { authorization: `Bearer ${box.routerToken}` } });
    return ((await res.json()) as { state: string }).state;
  }

  async function routedVision(delayMs = 0): Promise<number> {
    const res = await fetch(`${box.router.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'vision', messages: [{ role: 'user', content: 'describe' }], sim_delay_ms: delayMs }),
    });
    await res.text();
    return res.status;
  }

  /** Operations (not the ledger) still open on this node's task queue, by workflow id. */
  async function openOperations(): Promise<string[]> {
    const open: string[] = [];
    for await (const w of temporal.client.workflow.list({ query: `TaskQueue = '${taskQueueFor(node)}' AND ExecutionStatus = 'Running'` })) {
      if (!w.workflowId.startsWith('ledger/')) open.push(w.workflowId);
    }
    return open;
  }

  /**
   * Ledger equals box: the serves it calls running (or stopping, evicting) are exactly the
   * running containers, committed is their sum, nothing is left half-held, and each routed tier
   * is active exactly when its serve runs.
   */
  async function assertLedgerEqualsBox(): Promise<LedgerState> {
    const l = await ledger.snapshot(node, gpu);
    const running = (await docker().listContainers({ filters: { label: [`${LABEL.node}=${node}`], status: ['running'] } })).map((c) => ({
      serve: c.Labels[LABEL.serve] ?? '?',
      mib: Number(c.Labels[LABEL.vramMib] ?? 0),
    }));
    const committed = l.reservations.filter((r) => r.phase !== 'evicted' && r.phase !== 'pending');
    assert.deepEqual(
      committed.map((r) => `${r.serve} ${r.phase}`).sort(),
      committed.map((r) => `${r.serve} running`).sort(),
      'nothing left half-held once every operation ended',
    );
    assert.deepEqual(
      committed.map((r) => r.serve).sort(),
      running.map((c) => c.serve).sort(),
      'the serves the ledger calls running are the running containers',
    );
    assert.equal(
      totals(l).committedMib,
      running.reduce((s, c) => s + c.mib, 0),
    );
    const visionRuns = running.some((c) => c.serve === 'vision');
    assert.equal(await tierMode('vision-local'), visionRuns ? 'active' : 'quiesced', 'the tier is active exactly when its serve runs');
    return l;
  }

  async function allDown(): Promise<void> {
    const names = SERVES.map((s) => s.name);
    const r = await gpures(['serves', 'down', ...names, '--manifest', manifest], env, 120_000);
    assert.equal(r.code, 0, show(r));
    assert.equal(totals(await ledger.snapshot(node, gpu)).committedMib, 0);
  }

  test('serves down racing the bring-up of the same serve: the bring-up is cancelled and compensated; the box never runs over budget', async () => {
    const sampler = new BoxSampler(node);
    sampler.start();
    try {
      const bUp = await gpures(['serves', 'up', 'b', '--manifest', manifest], env);
      assert.equal(bUp.code, 0, show(bUp));
      const up = await start('bringUpWorkflow', workflowIds.bringUp(node, 'o1'), { serve: 'o1' });
      // The bring-down must overlap the bring-up: wait for its admission (o1 is slow to turn healthy).
      await waitUntil(
        'o1 admitted by its bring-up',
        async () => (await ledger.snapshot(node, gpu)).reservations.some((r) => r.serve === 'o1' && r.phase === 'admitted'),
        10_000,
      );
      await new Promise((r) => setTimeout(r, 200));
      const down = await start('bringDownWorkflow', workflowIds.bringDown(node, 'o1'), { serve: 'o1' });
      await new Promise((r) => setTimeout(r, 800));
      const r1 = await start('bringUpWorkflow', workflowIds.bringUp(node, 'r1'), { serve: 'r1' });

      const upError = await up.result().then(
        () => undefined,
        (err: unknown) => err,
      );
      assert.ok(upError instanceof WorkflowFailedError && upError.cause instanceof CancelledFailure, `o1's bring-up ends Cancelled: ${String(upError)}`);
      const downResult = (await down.result()) as BringDownResult;
      assert.equal(downResult.outcome, 'cancelled', downResult.message);
      assert.match(
        downResult.message,
        new RegExp(
          `^serves down o1: cancelled ${workflowIds.bringUp(node, 'o1')}/${up.firstExecutionRunId} \\(it gave back what it took\\); nothing was left running$`,
        ),
      );
      assert.deepEqual(
        downResult.steps.map((s) => s.step),
        ['take', 'cancel', 'take', 'stop', 'release'],
        JSON.stringify(downResult.steps),
      );
      // r1 either found o1's MiB given back or was denied: never admitted over o1's container.
      const r1Outcome = await r1.result().then(
        () => 'running',
        (err: unknown) => (err instanceof WorkflowFailedError ? String(err.cause?.message) : String(err)),
      );
      assert.ok(r1Outcome === 'running' || /denied: over budget by/.test(r1Outcome), r1Outcome);
      // o1's compensation ran its steps: the fence never let a container outlive its reservation.
      const upSteps = await up.query(progressQuery).catch(() => []);
      assert.ok(
        upSteps.every((s) => s.step !== 'running'),
        JSON.stringify(upSteps),
      );
    } finally {
      await sampler.stop();
    }
    console.log(`deterministic race: ${sampler.samples} samples of the box, max ${sampler.maxMib} MiB against ${BUDGET}`);
    assert.deepEqual(sampler.over, [], 'the running containers never reserved more than the budget');
    assert.deepEqual(await openOperations(), []);
    await assertLedgerEqualsBox();
    await allDown();
  });

  test('serves down of an on-demand serve while its acquisition drains the victim: the acquisition is cancelled, the victim stays up and routed', async () => {
    const sampler = new BoxSampler(node);
    sampler.start();
    try {
      const upFirst = await gpures(['serves', 'up', 'b', 'vision', '--manifest', manifest], env);
      assert.equal(upFirst.code, 0, show(upFirst));
      assert.equal(await routedVision(), 200);
      // A request in flight keeps the drain waiting while serves down arrives: long enough for a
      // `gpures` process started under load, or the cancel lands after vision's stop (the odwait cases below).
      const slow = routedVision(15_000);
      await new Promise((r) => setTimeout(r, 300));
      const acquire = await start('acquireWorkflow', workflowIds.acquire(node, 'ondemand'), { serve: 'ondemand', evict: true });
      await waitUntil('the acquisition draining vision', async () => (await acquire.query(progressQuery)).some((s) => s.step === 'quiesce vision'), 15_000);
      const down = await gpures(['serves', 'down', 'ondemand', '--manifest', manifest], env, 120_000);
      assert.equal(down.code, 0, show(down));
      assert.match(
        down.stderr,
        new RegExp(
          `^serves down ondemand: cancelled ${workflowIds.acquire(node, 'ondemand')}/\\S+ \\(it gave back what it took\\); nothing was left running$`,
          'm',
        ),
        show(down),
      );
      const acquireError = await acquire.result().then(
        () => undefined,
        (err: unknown) => err,
      );
      assert.ok(acquireError instanceof WorkflowFailedError && acquireError.cause instanceof CancelledFailure, String(acquireError));
      assert.equal(await slow, 200, 'the request in flight at the quiesce still finished');
    } finally {
      await sampler.stop();
    }
    assert.deepEqual(sampler.over, []);
    const l = await assertLedgerEqualsBox();
    assert.deepEqual(
      l.reservations.map((r) => `${r.serve} ${r.phase}`),
      ['b running', 'vision running'],
    );
    assert.equal(await tierMode('vision-local'), 'active');
    assert.equal(await routedVision(), 200);
    const again = await gpures(['serves', 'up', 'vision', '--manifest', manifest], env);
    assert.equal(again.code, 0, show(again));
    assert.match(again.stderr, /^serves up vision: already running, nothing changed$/m);
    await allDown();
  });

  test('serves down --restore of an on-demand serve whose acquisition was cancelled after its eviction: says it was not running, restores the victim', async () => {
    const upFirst = await gpures(['serves', 'up', 'b', 'vision', '--manifest', manifest], env);
    assert.equal(upFirst.code, 0, show(upFirst));
    const acquire = await start('acquireWorkflow', workflowIds.acquire(node, 'ondemand'), { serve: 'ondemand', evict: true });
    // Cancelled (as from the UI) while ondemand proves it stays up, after vision was stopped for it.
    await waitUntil('ondemand started after the eviction', async () => (await acquire.query(progressQuery)).some((s) => s.step === 'start'), 20_000);
    await acquire.cancel();
    await acquire.result().catch(() => undefined);
    const mid = await ledger.snapshot(node, gpu);
    assert.deepEqual(
      mid.reservations.map((r) => `${r.serve} ${r.phase}`),
      ['b running', 'vision evicted'],
    );

    const down = await gpures(['serves', 'down', 'ondemand', '--restore', '--manifest', manifest], env, 120_000);
    assert.equal(down.code, 0, show(down));
    assert.match(down.stderr, /^serves down ondemand: was not running, nothing to stop; restore: vision restored$/m, show(down));
    assert.equal(await routedVision(), 200);
    await assertLedgerEqualsBox();
    await allDown();
  });

  /**
   * `serves down odwait` once odwait's acquisition stopped vision and waits at odwait's health,
   * which never comes; its line names the cancel, then says `said` (a regular expression) of vision.
   */
  async function downAfterVisionStopped(args: string[], said: string): Promise<void> {
    const upFirst = await gpures(['serves', 'up', 'b', 'vision', '--manifest', manifest], env);
    assert.equal(upFirst.code, 0, show(upFirst));
    const acquire = await start('acquireWorkflow', workflowIds.acquire(node, 'odwait'), { serve: 'odwait', evict: true });
    try {
      // Its start recorded, it waits at odwait's health (up to its 120 s start timeout): vision is stopped by then.
      await waitUntil('odwait started after the eviction', async () => (await acquire.query(progressQuery)).some((s) => s.step === 'start'), 60_000);
      const mid = await ledger.snapshot(node, gpu);
      assert.ok(
        mid.reservations.some((r) => r.serve === 'vision' && r.phase === 'evicted'),
        JSON.stringify(mid.reservations),
      );
      const down = await gpures(['serves', 'down', 'odwait', ...args, '--manifest', manifest], env, 180_000);
      assert.equal(down.code, 0, show(down));
      const acquireError = await acquire.result().then(
        () => undefined,
        (err: unknown) => err,
      );
      assert.ok(acquireError instanceof WorkflowFailedError && acquireError.cause instanceof CancelledFailure, String(acquireError));
      const acquireRun = `${workflowIds.acquire(node, 'odwait')}/${acquire.firstExecutionRunId}`;
      assert.match(
        down.stderr,
        new RegExp(`^serves down odwait: cancelled ${acquireRun} \\(it gave back what it took\\); nothing was left running; ${said}$`, 'm'),
        show(down),
      );
    } catch (err) {
      // Left waiting, it would hold odwait and vision's memory for the cases after this one.
      await acquire.cancel().catch(() => undefined);
      await acquire.result().catch(() => undefined);
      throw err;
    }
  }

  test('serves down of an on-demand serve whose acquisition had stopped its victim: the message names the victim left evicted and how to bring it back', async () => {
    await downAfterVisionStopped([], 'vision, which it had stopped, stays evicted \\(`gpures serves up vision` brings it back\\)');
    const l = await assertLedgerEqualsBox();
    assert.deepEqual(
      l.reservations.map((r) => `${r.serve} ${r.phase}`),
      ['b running', 'vision evicted'],
    );
    assert.equal(await routedVision(), 503);
    // The command the message names brings it back: a restore, its tier readmitted.
    const back = await gpures(['serves', 'up', 'vision', '--manifest', manifest], env, 120_000);
    assert.equal(back.code, 0, show(back));
    assert.equal(await routedVision(), 200);
    await assertLedgerEqualsBox();
    await allDown();
  });

  test('serves down --restore of that on-demand serve: the victim its cancelled acquisition had stopped is restored, and the message says so', async () => {
    await downAfterVisionStopped(['--restore'], 'vision, which it had stopped, runs again \\(restored\\); restore: vision restored');
    assert.equal(await routedVision(), 200);
    const l = await assertLedgerEqualsBox();
    assert.deepEqual(
      l.reservations.map((r) => `${r.serve} ${r.phase}`),
      ['b running', 'vision running'],
    );
    await allDown();
  });

  test('an acquisition terminated mid-drain (it never compensates): serves down takes its hold over, vision runs and is routed again', async () => {
    const upFirst = await gpures(['serves', 'up', 'b', 'vision', '--manifest', manifest], env);
    assert.equal(upFirst.code, 0, show(upFirst));
    const slow = routedVision(4000);
    await new Promise((r) => setTimeout(r, 300));
    const acquire = await start('acquireWorkflow', workflowIds.acquire(node, 'ondemand'), { serve: 'ondemand', evict: true });
    await waitUntil('the acquisition draining vision', async () => (await acquire.query(progressQuery)).some((s) => s.step === 'quiesce vision'), 15_000);
    await acquire.terminate('a worker lost for good, as an operator would clean up');
    const stuck = await ledger.snapshot(node, gpu);
    assert.deepEqual(
      stuck.reservations.map((r) => `${r.serve} ${r.phase}`),
      ['b running', 'vision evicting', 'ondemand pending'],
    );
    assert.equal(await tierMode('vision-local'), 'quiesced');

    const down = await gpures(['serves', 'down', 'ondemand', '--manifest', manifest], env, 120_000);
    assert.equal(down.code, 0, show(down));
    assert.match(
      down.stderr,
      new RegExp(
        `^ {2}take: ${workflowIds.acquire(node, 'ondemand')}/\\S+ \\(pending\\) ended TERMINATED without giving ondemand back: taking it over {2}\\[`,
        'm',
      ),
      show(down),
    );
    assert.match(down.stderr, /^ {2}take: vision still runs: tier vision-local readmitted {2}\[/m, show(down));
    assert.match(
      down.stderr,
      /^serves down ondemand: took over the hold of \S+, which had ended TERMINATED without giving it back; nothing was left running$/m,
      show(down),
    );
    assert.equal(await slow, 200);
    const l = await assertLedgerEqualsBox();
    assert.deepEqual(
      l.reservations.map((r) => `${r.serve} ${r.phase}`),
      ['b running', 'vision running'],
    );
    assert.equal(await routedVision(), 200);
    await allDown();
  });

  test('two bring-downs of one serve (one started from the UI under another id): the second waits for the first, the tier stays quiesced', async () => {
    const upFirst = await gpures(['serves', 'up', 'vision', '--manifest', manifest], env);
    assert.equal(upFirst.code, 0, show(upFirst));
    const slow = routedVision(3000);
    await new Promise((r) => setTimeout(r, 300));
    const first = await start('bringDownWorkflow', workflowIds.bringDown(node, 'vision'), { serve: 'vision' });
    await waitUntil('the first bring-down draining', async () => (await first.query(progressQuery)).some((s) => s.step === 'quiesce'), 15_000);
    const second = await start('bringDownWorkflow', `ui/${node}/down-vision`, { serve: 'vision' });
    const modes: string[] = [];
    const watching = (async () => {
      while ((await second.describe()).status.name === 'RUNNING') {
        modes.push(await tierMode('vision-local'));
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    const [a, b] = (await Promise.all([first.result(), second.result()])) as [BringDownResult, BringDownResult];
    await watching;
    assert.equal(a.outcome, 'stopped', a.message);
    assert.equal(b.outcome, 'already-stopped', b.message);
    assert.ok(
      b.steps.some((s) => s.step === 'wait' && s.outcome.includes(`${workflowIds.bringDown(node, 'vision')}/`)),
      JSON.stringify(b.steps),
    );
    assert.deepEqual([...new Set(modes)], ['quiesced'], 'the second bring-down never readmitted the tier in between');
    assert.equal(await slow, 200);
    await assertLedgerEqualsBox();
  });

  test('a seeded race of 60 up / up --evict / down from separate processes: never over budget, in the ledger or on the box', async () => {
    const seed = Number(process.env['GPURES_RACE_SEED'] ?? 9);
    const rand = prng(seed);
    // Weighted to the serves slow to turn healthy, so downs race bring-ups still under way.
    const pool = ['b', 'vision', 'ondemand', 'e1', 'e2', 'e2', 'od2', 'od2', 'o1', 'o1'];
    const ops: string[][] = [];
    for (let i = 0; i < 60; i++) {
      const serve = pool[Math.floor(rand() * pool.length)]!;
      const roll = rand();
      // A short drain bound for victims: the race should not wait 120 s on one.
      ops.push(roll < 0.35 ? ['serves', 'down', serve] : roll < 0.7 ? ['serves', 'up', serve, '--evict', '--drain-timeout', '5'] : ['serves', 'up', serve]);
    }
    const sampler = new BoxSampler(node);
    sampler.start();
    const runs: { op: string; run: Run }[] = [];
    const started = Date.now();
    try {
      // Six operators at once, each op its own process.
      let next = 0;
      await Promise.all(
        Array.from({ length: 6 }, async () => {
          for (let i = next++; i < ops.length; i = next++) {
            const op = ops[i]!;
            runs.push({ op: op.join(' '), run: await gpures([...op, '--manifest', manifest], env, 180_000) });
          }
        }),
      );
      await waitUntil('every operation ended', async () => (await openOperations()).length === 0, 60_000);
    } finally {
      await sampler.stop();
    }
    const cancelledBy = runs.filter((r) => /^serves down \S+: cancelled /m.test(r.run.stderr)).length;
    const codes = new Map<string, number>();
    for (const r of runs) codes.set(String(r.run.code), (codes.get(String(r.run.code)) ?? 0) + 1);
    const decisions = await ledgerTotalsAfterEachUpdate(temporal.client, workflowIds.ledger(node, gpu.role));
    // Committed is what reservations in effect hold. Held MiB are an acquirer's promise while its
    // victims (still committed) drain: they become committed only as the victims' MiB come back.
    const overDecisions = decisions.filter((t) => t.committedMib > t.budgetMib);
    console.log(
      `seeded race (seed ${seed}): ${runs.length} operations in ${Date.now() - started} ms, exit codes ${JSON.stringify(Object.fromEntries(codes))}, ${cancelledBy} downs cancelled a bring-up under way; ` +
        `${decisions.length} ledger decisions, ${overDecisions.length} over budget; ${sampler.samples} samples of the box, max ${sampler.maxMib} MiB against ${BUDGET}, ${sampler.over.length} over`,
    );
    // Done (0), failed and compensated (1: cancelled by a racing down, a health or drain timeout), refused (3). Never bad input or a lost server.
    for (const r of runs) assert.ok([0, 1, 3].includes(r.run.code ?? -1), `${r.op}\n${show(r.run)}`);
    assert.ok(runs.filter((r) => r.run.code === 0).length >= 20, `most operations went through: ${JSON.stringify(Object.fromEntries(codes))}`);
    assert.ok(decisions.length >= 50, `${decisions.length} decisions`);
    assert.deepEqual(overDecisions, []);
    assert.deepEqual(sampler.over, []);
    await assertLedgerEqualsBox();
    await allDown();
  });
});
