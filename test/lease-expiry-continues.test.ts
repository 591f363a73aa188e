// An expiring lease's history is bounded: while it waits (another serves down under way, a ledger
// that does not answer) each look adds events, and past its bound it continues as new, still
// expiring, and the run it continues in brings the serve down. Sim box, real dev server; the lease
// started as the UI's form would, with a bound of 30 events (maxHistoryEvents), at its expiry a
// serves down under the CLI's id that nothing works on (another task queue), waited out.
// So is the history of a running idle lease, overdue, whose router does not answer its tier's use
// (asked again each minute): the worker's router answers 503 for that tier until the lease has
// continued as new, then answers, and the lease judges the tier idle and brings the serve down.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { exportWorkflow } from '../src/audit/export';
import { ledgerSnapshots, serveAcquire, serveDown, serveUp } from '../src/client/operations';
import { progressQuery, taskQueueFor, workflowIds } from '../src/shared/messages';
import type { LeaseInput, LeaseResult } from '../src/shared/operations';
import { containerName } from '../src/domain/serve';
import { startSimTestBox } from './support/sim';
import type { SimTestBox } from './support/sim';
import { sleep } from './support/wait';
import { leaseHandle, leaseTimes } from './support/lease';
import type { RouterAdmin } from '../src/adapters/router-admin/port';

const BOUND = 30;
/** GPURES_SAVE_HISTORIES=DIR: each case's lease runs are written there (test/histories/lease-expiry-continued*.json, lease-router-retry-continued*.json). */
const SAVE_DIR = process.env['GPURES_SAVE_HISTORIES'];

/** The box's router as the worker reaches it, its reads of one tier answered 503 while `down`. */
class TierReadsDown implements RouterAdmin {
  down = false;
  constructor(
    private readonly router: RouterAdmin,
    private readonly tier: string,
  ) {}
  quiesce(tier: string) {
    return this.router.quiesce(tier);
  }
  tierState(tier: string) {
    if (this.down && tier === this.tier) return Promise.reject(new Error(`router tier state of tier '${tier}' answered 503: the test's router outage`));
    return this.router.tierState(tier);
  }
  readmit(tier: string, quiesceMark?: string) {
    return this.router.readmit(tier, quiesceMark);
  }
  reload() {
    return this.router.reload();
  }
  healthz() {
    return this.router.healthz();
  }
}

describe("a lease's history", () => {
  let t: SimTestBox;
  let coderReads: TierReadsDown;
  before(async () => {
    t = await startSimTestBox(
      'lease-can',
      [{ role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 }],
      [
        { name: 'fast', vram_mib: 14336, router_tier: 'fast-local' },
        { name: 'vision', vram_mib: 12288, class: 'evictable', served_model_name: 'qwen3-vl-4b-instruct', router_tier: 'vision-local', min_residency_s: 0 },
        { name: 'comfyui-sim', vram_mib: 8192, class: 'on-demand' },
        { name: 'coder', vram_mib: 8192, class: 'on-demand', router_tier: 'coder-local' },
      ],
      { router: (r) => (coderReads = new TierReadsDown(r, 'coder-local')) },
    );
  });
  after(async () => {
    await t?.close();
  });

  /** Each run of the lease so far, oldest first: its run id, history length, input and how it closed. */
  async function runsOf(id: string) {
    const runs: { runId: string; events: number; input: LeaseInput; status: string }[] = [];
    for await (const w of t.temporal.client.workflow.list({ query: `WorkflowId = '${id}'` })) {
      const events = (await t.temporal.client.workflow.getHandle(id, w.runId).fetchHistory()).events ?? [];
      const payload = events[0]?.workflowExecutionStartedEventAttributes?.input?.payloads?.[0];
      const input = JSON.parse(Buffer.from(payload?.data ?? []).toString()) as LeaseInput;
      runs.push({ runId: w.runId, events: events.length, input, status: w.status.name });
    }
    return runs.reverse();
  }

  /** Each run's status, history length and whether it was expiring, as the messages print them. */
  const shown = (runs: Awaited<ReturnType<typeof runsOf>>) =>
    runs.map((r) => `${r.status} ${r.events} events${r.input.expiring ? ` expiring ${JSON.stringify(r.input.expiring)}` : ''}`).join('; ');

  /** Every run of the lease written to SAVE_DIR as `name`.json, `name`-run2.json, …, when asked. */
  async function saveRuns(id: string, runs: Awaited<ReturnType<typeof runsOf>>, name: string) {
    if (!SAVE_DIR) return;
    mkdirSync(SAVE_DIR, { recursive: true });
    for (const [i, r] of runs.entries()) {
      await exportWorkflow(t.temporal.client, id, { runId: r.runId, file: join(SAVE_DIR, `${name}${i ? `-run${i + 1}` : ''}.json`) });
    }
  }

  test('past its bound it continues as new, still expiring, and the run it continues in brings the serve down', async () => {
    const { client } = t.temporal;
    for (const s of ['fast', 'vision']) assert.ok((await serveUp(client, t.node, s)).ok);
    const acq = await serveAcquire(client, t.node, { serve: 'comfyui-sim', evict: true });
    assert.ok(acq.ok, !acq.ok ? acq.message : '');
    const stuck = await client.workflow.start('bringDownWorkflow', {
      taskQueue: `${t.node}-nobody`,
      workflowId: workflowIds.bringDown(t.node, 'comfyui-sim'),
      args: [{ serve: 'comfyui-sim' }],
    });
    const id = workflowIds.lease(t.node, 'comfyui-sim');
    const input: LeaseInput = { serve: 'comfyui-sim', holder: `${acq.workflowId}/${acq.runId}`, kind: 'fixed', seconds: 2, maxHistoryEvents: BOUND };
    await client.workflow.start('leaseWorkflow', { workflowId: id, taskQueue: taskQueueFor(t.node), args: [input] });

    // Waiting out the stuck serves down: 5, 10, 20 s between looks, each adding its events.
    let runs: Awaited<ReturnType<typeof runsOf>> = [];
    const t0 = Date.now();
    while (!runs.some((r) => r.input.expiring) && Date.now() - t0 < 90_000) {
      await sleep(1000);
      runs = await runsOf(id);
    }
    const show = shown(runs);
    console.log(`  after ${Date.now() - t0} ms: runs ${show}`);
    assert.ok(
      runs.some((r) => r.input.expiring),
      `the lease did not continue as new while expiring in ${Date.now() - t0} ms (bound ${BOUND}): runs ${show}`,
    );
    const continued = runs.find((r) => r.input.expiring)!;
    assert.equal(continued.input.expiring?.released, false);
    assert.equal(continued.input.expiring?.downUnderWay, true, 'it carries the serves down it found under way');
    assert.ok(continued.input.expiring?.waits, 'it carries its waits, whose bound counts from their start');
    assert.equal(continued.input.maxHistoryEvents, BOUND);

    // The serves down ends: the run the lease continues in brings comfyui-sim down itself.
    await stuck.terminate('test: the wait is over');
    const result = (await client.workflow.getHandle(id).result()) as LeaseResult;
    runs = await runsOf(id);
    const steps = (await client.workflow.getHandle(id, runs.at(-1)!.runId).query(progressQuery)) as { step: string; outcome: string }[];
    console.log(
      `  ${result.outcome}: ${result.message}; runs ${runs.map((r) => `${r.status} ${r.events} events`).join('; ')}; last run's steps: ${steps.map((s) => `${s.step}: ${s.outcome}`).join(' | ')}`,
    );
    await saveRuns(id, runs, 'lease-expiry-continued');
    assert.equal(result.outcome, 'expired', result.message);
    assert.match(
      result.message,
      /^lease of comfyui-sim expired: serves down comfyui-sim: stopped, 8192 MiB released on 'dark-fast'; restore: vision restored$/,
    );
    assert.match(steps[0]?.outcome ?? '', /^expired; still expiring, continued as new from its last run/);
    // Each run stays near its bound: it continues at its first look past it.
    for (const r of runs) assert.ok(r.events <= BOUND + 20, `a run of ${r.events} events, bound ${BOUND}`);
    assert.equal(await t.box.runtime.inspect(containerName(t.node, 'comfyui-sim')), undefined);
    const [l] = await ledgerSnapshots(client, t.manifest);
    assert.deepEqual(
      l?.reservations.map((r) => `${r.serve}:${r.phase}`),
      ['fast:running', 'vision:running'],
    );
    for (const s of ['vision', 'fast']) assert.ok((await serveDown(client, t.node, s)).ok);
  });

  test('an idle lease overdue while its router does not answer continues as new, and expires once the router answers', async () => {
    const { client } = t.temporal;
    const acq = await serveAcquire(client, t.node, { serve: 'coder' });
    assert.ok(acq.ok, !acq.ok ? acq.message : '');
    coderReads.down = true;
    const id = workflowIds.lease(t.node, 'coder');
    const TTL_S = 10;
    const input: LeaseInput = { serve: 'coder', holder: `${acq.workflowId}/${acq.runId}`, kind: 'idle', seconds: TTL_S, maxHistoryEvents: 20 };
    await client.workflow.start('leaseWorkflow', { workflowId: id, taskQueue: taskQueueFor(t.node), args: [input] });

    // Overdue at 10 s, then each ask fails (five attempts, ~15 s) and is made again a minute later.
    let runs: Awaited<ReturnType<typeof runsOf>> = [];
    const t0 = Date.now();
    while (!runs.some((r) => r.status === 'CONTINUED_AS_NEW') && Date.now() - t0 < 240_000) {
      await sleep(1000);
      runs = await runsOf(id);
    }
    console.log(`  router down, after ${Date.now() - t0} ms: runs ${shown(runs)}`);
    assert.ok(
      runs.some((r) => r.status === 'CONTINUED_AS_NEW'),
      `the lease did not continue as new in ${Date.now() - t0} ms while its router did not answer (bound ${input.maxHistoryEvents}): runs ${shown(runs)}`,
    );
    const next = runs[1]!.input;
    assert.equal(next.expiring, undefined, 'it was running, not expiring');
    assert.equal(next.kind, 'idle');
    assert.equal(next.maxHistoryEvents, input.maxHistoryEvents);
    assert.equal(next.clock?.lastUseSeenEpochMs, next.clock?.startedAtEpochMs, 'it carries the clock, no use seen');

    // A request through the router while its tier's reads still fail, then the router answers.
    assert.equal((await t.routed('coder')).status, 200);
    const lastUse = (await t.box.routerAdmin.tierState('coder-local')).lastUsedAtEpochMs ?? NaN;
    coderReads.down = false;
    const result = await leaseHandle(client, t.node, 'coder').result();
    runs = await runsOf(id);
    const times = await leaseTimes(client, t.node, 'coder');
    const sinceIdle = (times.downInitiatedAtMs ?? NaN) - (lastUse + TTL_S * 1000);
    console.log(`  ${result.outcome}: ${result.message}; serves down asked ${sinceIdle} ms after the last use + ttl; runs ${shown(runs)}`);
    await saveRuns(id, runs, 'lease-router-retry-continued');
    assert.equal(result.outcome, 'expired', result.message);
    assert.match(result.message, /^lease of coder idle for 10s: serves down coder: stopped, 8192 MiB released on 'dark-fast'/);
    // Judged by the router's answer: not before the use it reported had been idle a ttl.
    assert.ok(sinceIdle >= -100 && sinceIdle < 90_000, `serves down asked ${sinceIdle} ms after the last use + ttl`);
    for (const r of runs) assert.ok(r.events <= input.maxHistoryEvents! + 20, `a run of ${r.events} events, bound ${input.maxHistoryEvents}`);
    assert.equal(await t.box.runtime.inspect(containerName(t.node, 'coder')), undefined);
    const [l] = await ledgerSnapshots(client, t.manifest);
    assert.deepEqual(l?.reservations, []);
  });
});
