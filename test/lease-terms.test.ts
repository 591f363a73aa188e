// A lease's terms where two callers (or a lease's own end) meet: joined terms on a lease that is
// ending, a lease that closes while an acquisition hands it terms. Sim box, real dev server, two
// API instances (an operator's script and another's, each its own server and connection); what is
// read is Temporal's lease workflow (its runs, what its query answers), the box's containers, and
// the ledger.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { WorkflowHandle } from '@temporalio/client';
import { exportWorkflow } from '../src/audit/export';
import { ledgerSnapshots, serveAcquire, serveDown } from '../src/client/operations';
import { findReservation } from '../src/domain/ledger';
import { workflowIds } from '../src/shared/messages';
import type { TestServe } from './support/box';
import { joinBox } from './support/acquisition-callers';
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
    const downId = workflowIds.bringDown(j.box.node, 'renewed');
    const stuck = await j.box.temporal.client.workflow.start('bringDownWorkflow', {
      taskQueue: `${j.box.node}-nobody`,
      workflowId: downId,
      args: [{ serve: 'renewed' }],
    });
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
