// A lease's terms where two callers (or a lease's own end) meet: joined terms on a lease that is
// ending, a lease that closes while an acquisition hands it terms. Sim box, real dev server, two
// API instances (an operator's script and another's, each its own server and connection); what is
// read is Temporal's lease workflow (its runs, what its query answers), the box's containers, and
// the ledger.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, readFileSync } from 'node:fs';
import { Worker } from '@temporalio/worker';
import { UNCOUNTED_SINKS } from '../src/worker/workflow-code';
import { workflowBundleWith } from './support/temporal';
import { join } from 'node:path';
import type { WorkflowHandle } from '@temporalio/client';
import { exportWorkflow } from '../src/audit/export';
import { TemporalLeases } from '../src/adapters/leases/temporal';
import { ledgerSnapshots, serveAcquire, serveDown } from '../src/client/operations';
import { findReservation } from '../src/domain/ledger';
import { progressQuery, releaseLeaseUpdate, workflowIds } from '../src/shared/messages';
import type { TestServe } from './support/box';
import { joinBox, stuckBringDown } from './support/acquisition-callers';
import { JOIN_SIGNALS_PER_RUN } from '../src/client/join-terms';
import type { OnDemandBox } from './support/on-demand-box';
import { waitFor } from './support/wait';

const GPU = { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 };
const SERVES: TestServe[] = [
  // Leased, its lease's end held up while it is brought down by hand and acquired anew (slow to
  // start: a second POST joins that acquisition).
  { name: 'renewed', vram_mib: 512, class: 'on-demand', router_tier: 'renewed-local', env: { SIM_START_DELAY_MS: '3000' } },
];

/** GPURES_SAVE_HISTORIES=DIR: the lease runs these tests drive are written there (recording histories for test/histories). */
const SAVE_DIR = process.env['GPURES_SAVE_HISTORIES'];

describe('lease terms that meet: joined terms on an ending lease, a lease closing under a hand-over', () => {
  const j = joinBox({ prefix: 'lease-terms', gpu: GPU, serves: SERVES, onDemand: [] });
  const { post, leaseOf, running, resultOf } = j;
  const leaseHandle = (serve: string) => j.box.temporal.client.workflow.getHandle(workflowIds.lease(j.box.node, serve));
  const holderIn = (serve: string) => holderOf(j.box, serve);

  test('two callers of one acquisition, while the lease of an earlier one is ending: the lease lasts the longer of their asks', async () => {
    // A serves down under the CLI's id that nothing works on (another task queue): at its expiry
    // the lease finds it under way and waits it out, expiring, each look later than the last.
    const stuck = await stuckBringDown(j.box, 'renewed');
    const first = await serveAcquire(j.box.temporal.client, j.box.node, { serve: 'renewed', lease: { kind: 'fixed', seconds: 2 } });
    assert.ok(first.ok, first.ok ? '' : first.message);
    const old = await waitFor(
      'the lease of renewed waits 20 s before its next look',
      async () => {
        const l = await leaseOf('renewed');
        return l.view?.state === 'expiring' && (await pendingTimerS(leaseHandle('renewed'))) >= 20 ? l : undefined;
      },
      60_000,
      100,
    );
    // Meanwhile its serve is brought down by hand and acquired anew: by the operator's script,
    // asking an hour, and by another caller (the other API) asking a minute, who joins it.
    await stuck.terminate('test: the real serves down now');
    const down = await serveDown(j.box.temporal.client, j.box.node, 'renewed');
    assert.ok(down.ok, down.ok ? '' : down.message);
    assert.ok(!(await running()).some((n) => n.includes('renewed')), 'renewed is down');
    const hour = await post(j.box.apiUrl, { serve: 'renewed', lease_s: 3600 });
    assert.equal(hour.status, 202);
    const askedAt = Date.now();
    const minute = await post(j.secondUrl, { serve: 'renewed', lease_s: 60 });
    assert.equal(minute.status, 202);
    assert.equal(minute.body.run_id, hour.body.run_id, 'the second POST joined the first');
    const result = await resultOf(hour);
    console.log(`  acquisition: ${result.outcome}: ${result.message}`);
    assert.equal(result.outcome, 'started');
    const holder = `${hour.body.workflow_id}/${hour.body.run_id}`;

    // The old lease's next look finds renewed another run's and runs on as the new acquisition's.
    const lease = await waitFor(
      'the lease runs on under the new acquisition',
      async () => {
        const l = await leaseOf('renewed');
        return l.runId !== old.runId && l.view ? l : undefined;
      },
      60_000,
      200,
    );
    await save(j.box, 'lease-renewal-joined', workflowIds.lease(j.box.node, 'renewed'), old.runId!);
    const names = await running();
    console.log(
      `  running: ${names.join(', ')}; ledger holder: ${await holderIn('renewed')}; lease/${j.box.node}/renewed ${lease.status} ${JSON.stringify(lease.view)}`,
    );
    assert.ok(
      names.some((n) => n.includes('renewed')),
      'renewed runs',
    );
    assert.equal(await holderIn('renewed'), holder);
    assert.equal(lease.view?.holder, holder);
    assert.equal(lease.view?.kind, 'fixed');
    const left = (lease.view?.expiresAtEpochMs ?? 0) - askedAt;
    assert.ok(left > 3500_000, `the lease lasts about the hour asked, not the minute (expires ${Math.round(left / 1000)} s after the asks)`);
    // The renewed run carries a clock (the minute asked of the renewal), as a continuation does: its step log still says it started, and with what.
    const steps = await j.box.temporal.client.workflow.getHandle(workflowIds.lease(j.box.node, 'renewed'), lease.runId).query(progressQuery);
    console.log(`  the renewed lease's steps: ${JSON.stringify(steps)}`);
    const start = steps.find((s) => s.step === 'start')?.outcome ?? `no start step in ${JSON.stringify(steps.map((s) => s.step))}`;
    assert.match(start, new RegExp(`^lease of 1h renewed for ${holder} \\(its last lease had ended\\); expires at `));
  });
});

async function holderOf(box: OnDemandBox, serve: string): Promise<string | undefined> {
  return findReservation((await ledgerSnapshots(box.temporal.client, box.manifest))[0]!, serve)?.holder;
}

async function save(box: OnDemandBox, name: string, workflowId: string, runId: string): Promise<void> {
  if (!SAVE_DIR) return;
  mkdirSync(SAVE_DIR, { recursive: true });
  await exportWorkflow(box.temporal.client, workflowId, { runId, file: join(SAVE_DIR, `${name}.json`) });
}

/** The duration of the lease's timer that has not fired yet (its wait before the next look), in seconds; 0 if none. */
async function pendingTimerS(handle: WorkflowHandle): Promise<number> {
  const events = (await handle.fetchHistory()).events ?? [];
  const fired = new Set(events.filter((e) => e.timerFiredEventAttributes).map((e) => e.timerFiredEventAttributes?.timerId));
  const started = events.filter((e) => e.timerStartedEventAttributes && !fired.has(e.timerStartedEventAttributes.timerId));
  const last = started.at(-1)?.timerStartedEventAttributes?.startToFireTimeout;
  return last ? Number(last.seconds ?? 0) : 0;
}

describe('a lease that closes between an acquisition finding it running and telling it its terms', () => {
  // The acquisition's tell is held LEASE_TELL_HOLD_MS after its start of the lease is refused
  // (already started): the old lease is released and closes in that window.
  const j = joinBox({
    prefix: 'lease-closing',
    gpu: GPU,
    serves: [{ name: 'closing', vram_mib: 512, class: 'on-demand', router_tier: 'closing-local' }],
    onDemand: [],
    workflowInterceptorModules: [require.resolve('./support/hold-lease-tell')],
  });

  test('the new acquisition starts its lease again instead of dropping its terms: the serve is leased, not left up unleased', async () => {
    const { box } = j;
    const first = await serveAcquire(box.temporal.client, box.node, { serve: 'closing', lease: { kind: 'fixed', seconds: 600 } });
    assert.ok(first.ok, first.ok ? '' : first.message);
    const down = await serveDown(box.temporal.client, box.node, 'closing');
    assert.ok(down.ok, down.ok ? '' : down.message);
    const old = await j.leaseOf('closing');
    assert.equal(old.status, 'RUNNING', 'the first lease runs on after serves down');

    const again = await j.post(box.apiUrl, { serve: 'closing', lease_s: 600 });
    assert.equal(again.status, 202);
    const acquisition = box.temporal.client.workflow.getHandle(again.body.workflow_id, again.body.run_id);
    await waitFor(
      "the acquisition's start of its lease refused: already started",
      async () => ((await acquisition.fetchHistory()).events ?? []).some((e) => e.startChildWorkflowExecutionFailedEventAttributes) || undefined,
      60_000,
      100,
    );
    // In the window: the old lease is released and closes (its serve is no longer its own).
    await box.temporal.client.workflow.getHandle(workflowIds.lease(box.node, 'closing'), old.runId).executeUpdate(releaseLeaseUpdate);
    const closed: unknown = await box.temporal.client.workflow.getHandle(workflowIds.lease(box.node, 'closing'), old.runId).result();
    console.log(`  the old lease closed: ${JSON.stringify(closed).slice(0, 200)}`);
    const result = await j.resultOf(again);
    console.log(`  acquisition: ${result.outcome}: ${result.message}`);
    await save(box, 'lease-start-closed', again.body.workflow_id, again.body.run_id);
    const lease = await j.leaseOf('closing');
    const names = await j.running();
    const holder = `${again.body.workflow_id}/${again.body.run_id}`;
    console.log(
      `  running: ${names.join(', ')}; ledger holder: ${await holderOf(box, 'closing')}; lease/${box.node}/closing ${lease.status} ${JSON.stringify(lease.view)}`,
    );
    assert.ok(
      names.some((n) => n.includes('closing')),
      'closing runs',
    );
    assert.equal(await holderOf(box, 'closing'), holder);
    assert.equal(result.leaseNotApplied, undefined, 'the terms were applied');
    assert.equal(lease.status, 'RUNNING', 'closing is up under a lease (not left up unleased)');
    assert.equal(lease.view?.holder, holder);
    assert.notEqual(lease.runId, old.runId);
    // This run, and one recorded before the fix (its terms dropped), replay against the bundle the worker ran.
    const bundle = await workflowBundleWith([require.resolve('./support/hold-lease-tell')]);
    await Worker.runReplayHistory({ workflowBundle: bundle, sinks: UNCOUNTED_SINKS }, await acquisition.fetchHistory(), again.body.workflow_id);
    const before = JSON.parse(readFileSync(join(__dirname, '..', '..', 'test', 'fixtures', 'held-histories', 'lease-start-closed.json'), 'utf8')) as unknown;
    await Worker.runReplayHistory({ workflowBundle: bundle, sinks: UNCOUNTED_SINKS }, before);
  });
});

describe("at-least terms racing the lease's continue-as-new", () => {
  const j = joinBox({ prefix: 'lease-can', gpu: GPU, serves: [{ name: 'busy', vram_mib: 512, class: 'on-demand', router_tier: 'busy-local' }], onDemand: [] });

  test('Updates sent while the lease continues as new are answered by the run it continues in, never `ended`', async () => {
    const { box } = j;
    const first = await serveAcquire(box.temporal.client, box.node, { serve: 'busy', lease: { kind: 'fixed', seconds: 3600 } });
    assert.ok(first.ok, first.ok ? '' : first.message);
    const holder = `${first.workflowId}/${first.runId}`;
    const leases = new TemporalLeases(box.temporal.client);
    const id = workflowIds.lease(box.node, 'busy');
    const startRun = (await j.leaseOf('busy')).runId;
    const answers: Record<string, number> = {};
    let sent = 0;
    // Each Update adds its events to the lease's history: past MAX_HISTORY_EVENTS it continues as new, with Updates in flight.
    const sender = async () => {
      while (sent < 1600) {
        const n = sent++;
        const a = await leases.atLeast(id, { holder, kind: 'fixed', seconds: 60 }, `probe-${n}`);
        const key = a.applied ? a.how : a.state;
        answers[key] = (answers[key] ?? 0) + 1;
      }
    };
    await Promise.all(Array.from({ length: 8 }, sender));
    const lease = await j.leaseOf('busy');
    console.log(`  answers: ${JSON.stringify(answers)}; lease ${lease.status} run ${lease.runId === startRun ? 'the first' : 'a later'}`);
    assert.notEqual(lease.runId, startRun, 'the lease continued as new meanwhile');
    assert.equal(lease.status, 'RUNNING');
    assert.deepEqual(Object.keys(answers), ['at-least'], 'every Update answered by a running lease');
  });
});

describe('a flood of POSTs joining one acquisition, each with lease terms', () => {
  const j = joinBox({
    prefix: 'lease-flood',
    gpu: GPU,
    serves: [{ name: 'flood', vram_mib: 512, class: 'on-demand', router_tier: 'flood-local', env: { SIM_START_DELAY_MS: '25000' } }],
    onDemand: [],
  });
  /** GPURES_FLOOD_JOINS: fewer joins, to record a history small enough for test/histories. */
  const JOINS = Number(process.env['GPURES_FLOOD_JOINS'] ?? 500);

  test(`${JOINS} joins: the acquisition's and the lease's histories stay bounded, and the lease lasts the longest asked`, async () => {
    const first = await j.post(j.box.apiUrl, { serve: 'flood', lease_s: 60 });
    assert.equal(first.status, 202);
    let n = 0;
    let longest = 60;
    const statuses: Record<string, number> = {};
    await Promise.all(
      Array.from({ length: 10 }, async () => {
        while (n < JOINS) {
          const seconds = 61 + (n++ % 300);
          const r = await j.post(j.secondUrl, { serve: 'flood', lease_s: seconds });
          statuses[r.status] = (statuses[r.status] ?? 0) + 1;
          if (r.status === 429) {
            // Refused, not told its terms were taken: nothing was sent for it.
            const error = (r.body as unknown as { error: { type: string; message: string } }).error;
            assert.equal(error.type, 'too_many_joins');
            assert.match(error.message, /nothing was sent/);
            continue;
          }
          assert.equal(r.status, 202);
          assert.equal(r.body.run_id, first.body.run_id);
          longest = Math.max(longest, seconds);
        }
      }),
    );
    console.log(`  POSTs answered: ${JSON.stringify(statuses)}; the longest accepted: ${longest} s`);
    const askedAt = Date.now();
    const result = await j.resultOf(first);
    console.log(`  acquisition: ${result.outcome}: ${result.message.slice(0, 240)}`);
    assert.equal(result.outcome, 'started');
    const acquisition = j.box.temporal.client.workflow.getHandle(first.body.workflow_id, first.body.run_id);
    await save(j.box, 'lease-joins-flood', first.body.workflow_id, first.body.run_id);
    const events = (await acquisition.fetchHistory()).events ?? [];
    const signals = events.filter((e) => e.workflowExecutionSignaledEventAttributes).length;
    const activities = events.filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'leaseAtLeast').length;
    const lease = await j.box.temporal.client.workflow.getHandle(workflowIds.lease(j.box.node, 'flood')).describe();
    const view = (await j.leaseOf('flood')).view;
    const names = await j.running();
    console.log(
      `  acquisition history: ${events.length} events (${signals} join signals, ${activities} leaseAtLeast); lease ${lease.status.name}, ${lease.historyLength} events; running: ${names.join(', ')}`,
    );
    assert.ok(
      names.some((n) => n.includes('flood')),
      'flood runs',
    );
    assert.ok(activities <= 10, `leaseAtLeast activities: ${activities}, not one per join`);
    assert.ok(lease.historyLength < 200, `the lease's history: ${lease.historyLength} events`);
    // The first API's one (its start), and the second's: at most JOIN_SIGNALS_PER_RUN counted before they are sent,
    // and the one of its first POST, sent before it knew the run (its ten senders racing in at once).
    assert.ok(signals <= 1 + 1 + JOIN_SIGNALS_PER_RUN, `join signals in the acquisition's history: ${signals} for ${JOINS} joins`);
    assert.ok(events.length < 300, `the acquisition's history: ${events.length} events`);
    const left = (view?.expiresAtEpochMs ?? 0) - askedAt;
    assert.ok(left >= (longest - 5) * 1000, `the lease lasts at least the longest accepted (${longest} s): ${Math.round(left / 1000)} s left`);
  });
});
