// A lease cancelled (the UI's Cancel, `temporal workflow cancel`) while its bring-down drains the
// serve: the bring-down is not cancelled with it, and the VRAM comes back. A `gpures worker`
// process, fake-vLLM containers, the reference router; coder, leased, holds a request through the
// router, so its bring-down's drain waits on it; the lease is cancelled mid-drain and the box
// sampled every 200 ms until it settles: coder's and vision's containers, the ledger, coder's tier.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { LedgerClient } from '../src/adapters/ledger/ledger-client';
import { exportWorkflow } from '../src/audit/export';
import { LABEL } from '../src/domain/serve';
import { liveProgressQuery, progressQuery, workflowIds } from '../src/shared/messages';
import type { BringDownResult } from '../src/shared/operations';
import { docker, routedChat } from './support/box';
import type { TestServe } from './support/box';
import { gpures, show } from './support/cli';
import { startProcessBox } from './support/process-box';
import type { ProcessBox } from './support/process-box';
import { sleep, waitUntil } from './support/wait';

const GPU = { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 };
const SERVES: TestServe[] = [
  { name: 'fast', vram_mib: 14336 },
  { name: 'vision', vram_mib: 12288, class: 'evictable', served_model_name: 'qwen3-vl-4b-instruct', router_tier: 'vision-local' },
  // Fits only with vision evicted; routed, so its bring-down quiesces and drains it.
  { name: 'coder', vram_mib: 8192, class: 'on-demand', router_tier: 'coder-local' },
];

/** GPURES_SAVE_HISTORIES=DIR: the cancelled lease's run is written there (test/histories/lease-cancelled-expiring.json). */
const SAVE_DIR = process.env['GPURES_SAVE_HISTORIES'];

describe('a lease cancelled while its bring-down drains the serve', () => {
  let box: ProcessBox;
  before(async () => {
    box = await startProcessBox('lease-cancel', GPU, SERVES);
  });
  after(async () => {
    await box?.close();
  });

  const running = async (serve: string) =>
    (await docker().listContainers({ filters: { label: [`${LABEL.node}=${box.node}`, `${LABEL.serve}=${serve}`], status: ['running'] } })).length > 0;
  const reservations = async () =>
    (await new LedgerClient(box.temporal.client).snapshot(box.node, box.manifest.gpus[0]!)).reservations.map((r) => `${r.serve} ${r.phase}`).join(', ');
  const tierState = async (tier: string) => {
    const res = await fetch(`${box.router.url}/admin/tiers/${tier}`, { headers: { authorization: `Bearer ${box.routerToken}` } });
    return (await res.json()) as { state: string; inFlight: number };
  };

  test('the bring-down goes on: coder stopped, its MiB released, vision restored; the lease ends Cancelled', async () => {
    const { node, temporal, manifestPath, env } = box;
    const up = await gpures(['serves', 'up', 'fast', 'vision', '--manifest', manifestPath], env);
    assert.equal(up.code, 0, show(up));
    const acq = await gpures(['serves', 'up', 'coder', '--evict', '--lease', '5s', '--manifest', manifestPath], env);
    assert.equal(acq.code, 0, show(acq));
    // Held 20 s at coder: the lease's bring-down (its drain timeout 120 s) waits for it.
    const held = routedChat(box.router.url, 'coder', { sim_delay_ms: 20_000 });
    await waitUntil('the request held at coder-local', async () => (await tierState('coder-local')).inFlight > 0, 10_000, 20);
    const down = temporal.client.workflow.getHandle(workflowIds.bringDown(node, 'coder'));
    await waitUntil(
      "the lease's bring-down draining coder",
      async () => (await down.query(liveProgressQuery).catch(() => undefined))?.underway?.step === 'drain',
      30_000,
      50,
    );
    const downRun = (await down.describe()).runId;
    // Well into the drain: its activity has polled and heartbeated.
    await sleep(1000);
    const lease = temporal.client.workflow.getHandle(workflowIds.lease(node, 'coder'));
    const leaseRun = (await lease.describe()).runId;
    const cancelledAt = Date.now();
    await lease.cancel();

    let heldStatus: number | undefined;
    void held.then((r) => (heldStatus = r.status));
    const samples: string[] = [];
    const same = (n: number) => samples.length >= n && samples.slice(-n).every((s) => s.replace(/^\+\d+ms /, '') === samples.at(-1)!.replace(/^\+\d+ms /, ''));
    let downClosed = false;
    // Until the lease's bring-down has closed, the held request is answered, and five samples agree.
    for (let t0 = Date.now(); !(downClosed && heldStatus !== undefined && same(5)) && Date.now() - t0 < 90_000; await sleep(200)) {
      const [coderUp, visionUp, ledger, tier, d] = await Promise.all([
        running('coder'),
        running('vision'),
        reservations(),
        tierState('coder-local'),
        temporal.client.workflow.getHandle(workflowIds.bringDown(node, 'coder'), downRun).describe(),
      ]);
      downClosed = d.status.name !== 'RUNNING';
      samples.push(
        `+${Date.now() - cancelledAt}ms coder ${coderUp ? 'running' : 'gone'}, vision ${visionUp ? 'running' : 'gone'}; ledger ${ledger}; coder-local ${tier.state}; serves-down ${d.status.name}`,
      );
    }
    const leaseEnd = await temporal.client.workflow.getHandle(workflowIds.lease(node, 'coder'), leaseRun).describe();
    const steps = await temporal.client.workflow
      .getHandle(workflowIds.lease(node, 'coder'), leaseRun)
      .query(progressQuery)
      .catch(() => []);
    const downEnd = temporal.client.workflow.getHandle(workflowIds.bringDown(node, 'coder'), downRun);
    const downStatus = (await downEnd.describe()).status.name;
    const downResult = downStatus === 'COMPLETED' ? ((await downEnd.result()) as BringDownResult) : undefined;
    console.log(
      `  lease ${leaseEnd.status.name}; serves down ${downStatus}${downResult ? `: ${downResult.message}` : ''}; held request ${heldStatus}; ` +
        `${samples.length} samples, the first: ${samples[0]}; the last: ${samples.at(-1)}; lease steps: ${steps.map((s) => `${s.step}: ${s.outcome}`).join(' | ')}`,
    );
    if (SAVE_DIR) {
      mkdirSync(SAVE_DIR, { recursive: true });
      await exportWorkflow(temporal.client, workflowIds.lease(node, 'coder'), { runId: leaseRun, file: join(SAVE_DIR, 'lease-cancelled-expiring.json') });
    }
    assert.equal(downStatus, 'COMPLETED', `the lease's serves down ${downStatus}`);
    assert.match(downResult?.message ?? '', /^serves down coder: stopped, 8192 MiB released on 'dark-fast'.*; restore: vision restored$/);
    assert.match(samples.at(-1) ?? '', /coder gone, vision running; ledger fast running, vision running; /);
    assert.equal(heldStatus, 200, "coder's in-flight request completed before the stop");
    assert.equal(leaseEnd.status.name, 'CANCELLED');
    assert.ok(
      steps.some((s) => s.step === 'cancel' && /goes on \(not cancelled\)/.test(s.outcome)),
      `the lease says its bring-down goes on: ${JSON.stringify(steps)}`,
    );
    assert.ok(!steps.some((s) => s.step === 'down' && /failed/.test(s.outcome)), 'the cancel counted as a failed bring-down');
    assert.equal((await routedChat(box.router.url, 'vision')).status, 200);
    const rest = await gpures(['serves', 'down', 'vision', 'fast', '--manifest', manifestPath], env, 120_000);
    assert.equal(rest.code, 0, show(rest));
  });
});
