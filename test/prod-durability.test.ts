// Durability on the production-shaped store (PostgreSQL + temporal-server, test/support/prod-temporal.ts),
// with `gpures worker` and the CLI as processes on the test dockerd: the Temporal server killed
// with -9 mid-drain of an eviction, PostgreSQL itself crashed mid-bring-up, and the history this
// server wrote replayed by `gpures audit replay`. Each time the box (Docker) is the witness.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { tsToMs } from '@temporalio/common/lib/time';
import { HttpRouterAdmin } from '../src/adapters/router-admin/http';
import { ledgerSnapshots } from '../src/client/operations';
import { containerName } from '../src/domain/serve';
import { workflowIds } from '../src/shared/messages';
import { docker, nodeContainers, routedChat } from './support/box';
import type { TestServe } from './support/box';
import { gpures, show } from './support/cli';
import { activityRuns, waitForPendingActivity } from './support/history-scan';
import { startProcessBox } from './support/process-box';
import type { ProcessBox } from './support/process-box';
import { productionTemporal } from './support/prod-temporal';
import type { ProductionTemporal } from './support/prod-temporal';
import { sleep, waitUntil } from './support/wait';

const GPU = { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 };
const SERVES: TestServe[] = [
  { name: 'fast', vram_mib: 14336, router_tier: 'fast-local' },
  { name: 'vision', vram_mib: 12288, class: 'evictable', served_model_name: 'qwen3-vl-4b-instruct', router_tier: 'vision-local' },
  { name: 'comfyui-sim', vram_mib: 8192, class: 'on-demand', api: 'none', args: ['sleep', '3600'] },
  // Healthy 20 s after its start: PostgreSQL's crash and restart (3.7 s down when measured) fit well inside the bring-up.
  { name: 'ocr', vram_mib: 1024, env: { FAKE_START_DELAY_S: '20' }, start_timeout_s: 60 },
];
const VRAM = new Map(SERVES.map((s) => [s.name, s.vram_mib]));

/** Docker's own record of one container's events of one kind, from `since` (ms) to now. */
async function dockerEvents(container: string, event: 'start' | 'die', sinceMs: number): Promise<number> {
  const stream = await docker().getEvents({
    since: Math.floor(sinceMs / 1000),
    until: Math.ceil(Date.now() / 1000) + 1,
    filters: { container: [container], event: [event] },
  });
  let text = '';
  for await (const chunk of stream as AsyncIterable<Buffer>) text += chunk.toString('utf8');
  return text.split('\n').filter((l) => l.trim()).length;
}

describe('durability on PostgreSQL + temporal-server: server kill -9, store crash, replay of its history', () => {
  let temporal: ProductionTemporal;
  let box: ProcessBox;
  let acquireId = '';

  before(async () => {
    const started = Date.now();
    temporal = await productionTemporal();
    console.log(`  production-shaped Temporal (PostgreSQL + temporal-server) up in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    box = await startProcessBox('prod-durable', GPU, SERVES, { temporal });
  });
  after(async () => {
    await box?.close();
    await temporal?.close();
  });

  const cli = (args: string[], timeoutMs?: number) => gpures([...args, '--manifest', box.manifestPath], box.env, timeoutMs);

  /** The ledger is the box: each running reservation is a running container, with the manifest's MiB, and nothing else runs. */
  async function assertLedgerIsTheBox(): Promise<string> {
    const [ledger] = await ledgerSnapshots(temporal.client, box.manifest);
    assert.ok(ledger);
    const settled = ledger.reservations.filter((r) => r.phase !== 'running' && r.phase !== 'evicted');
    assert.deepEqual(settled, [], 'no reservation left between phases');
    const reserved = ledger.reservations
      .filter((r) => r.phase === 'running')
      .map((r) => `${r.serve}:${r.vramMib}`)
      .sort();
    const running = (await nodeContainers(box.node))
      .filter((c) => c.running)
      .map((c) => `${c.serve}:${VRAM.get(c.serve)}`)
      .sort();
    assert.deepEqual(reserved, running, 'running reservations and their MiB = running containers');
    return reserved.join(' ');
  }

  test('kill -9 of temporal-server mid-drain, restarted 3 s later: the acquisition completes once, the in-flight request answers 200', async () => {
    const up = await cli(['serves', 'up', 'fast', 'vision']);
    assert.equal(up.code, 0, show(up));
    // 40 s: the kill, the 3 s pause and the restart took 4.3 s when measured; the request outlasts them by a wide margin on a loaded machine.
    const slow = routedChat(box.router.url, 'vision', { sim_delay_ms: 40_000 });
    const admin = new HttpRouterAdmin({ baseUrl: box.router.url, token: box.routerToken });
    await waitUntil('the request in flight at the router', async () => (await admin.tierState('vision-local')).inFlight === 1, 10_000, 50);

    const evictStartedAt = Date.now();
    const evict = cli(['serves', 'up', 'comfyui-sim', '--evict'], 180_000);
    acquireId = workflowIds.acquire(box.node, 'comfyui-sim');
    const acquire = temporal.client.workflow.getHandle(acquireId);
    await waitForPendingActivity(acquire, 'drainServe', { heartbeated: true });
    const killedAt = Date.now();
    await temporal.killServer();
    await sleep(3000);
    await temporal.startServer();
    const answeredAt = Date.now();

    const r = await evict;
    assert.equal(r.code, 0, show(r));
    assert.match(r.stderr, /^serves up comfyui-sim --evict: running, 8192 MiB committed on 'dark-fast'; evicted vision$/m, show(r));
    const answer = await slow;
    assert.equal(answer.status, 200, JSON.stringify(answer.body));
    // The drain was heartbeating at the kill and cannot end before the request does: the request was in flight across the kill, not cut off.
    assert.ok(answer.finishedAt > killedAt, `the request ended ${killedAt - answer.finishedAt} ms before the kill`);

    // Exactly once: one run of the acquisition, one stop of the victim and one start of the acquirer, in its history and in Docker's.
    const runs = [];
    for await (const w of temporal.client.workflow.list({ query: `WorkflowId = '${acquireId}'` })) runs.push(w);
    assert.equal(runs.length, 1, `runs of ${acquireId}: ${runs.map((w) => w.runId).join(', ')}`);
    const history = (await acquire.fetchHistory()).events ?? [];
    assert.equal(activityRuns(history, 'stopServeContainer').length, 1, 'one stop in the history');
    assert.equal(activityRuns(history, 'startServeContainer').length, 1, 'one start in the history');
    assert.equal(await dockerEvents(containerName(box.node, 'vision'), 'die', evictStartedAt), 1, "the victim's container died once");
    assert.equal(await dockerEvents(containerName(box.node, 'comfyui-sim'), 'start', evictStartedAt), 1, "the acquirer's container started once");
    assert.equal(await assertLedgerIsTheBox(), 'comfyui-sim:8192 fast:14336');

    const closedAt = tsToMs(history.at(-1)?.eventTime);
    const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
    console.log(`  temporal-server down ${s(answeredAt - killedAt)} (kill -9 to answering again)`);
    console.log(`  the in-flight request answered ${s(answer.finishedAt - answeredAt)} after the server answered again`);
    console.log(`  acquisition completed ${s(closedAt - answer.finishedAt)} after the in-flight request's 200`);
    assert.ok(closedAt - answer.finishedAt < 60_000, `completed ${closedAt - answer.finishedAt} ms after the request's 200`);
  });

  test('the acquisition history exported from this server replays with gpures audit replay', async () => {
    assert.ok(acquireId, 'the eviction test ran first');
    const dir = mkdtempSync(join(tmpdir(), 'gpures-prod-audit-'));
    const file = join(dir, 'acquire.json');
    try {
      const exported = await gpures(['audit', 'export', acquireId, '-o', file], box.env);
      assert.equal(exported.code, 0, show(exported));
      // Started with the search attributes this server had registered at its start.
      assert.match(readFileSync(file, 'utf8'), /"GpuresServe"/);
      const replayed = await gpures(['audit', 'replay', file], box.env);
      assert.equal(replayed.code, 0, show(replayed));
      assert.match(replayed.stdout, new RegExp(`^ok {2}${acquireId} \\(acquireWorkflow, [0-9]+ events; [^)]+\\.json\\)$`, 'm'), show(replayed));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('PostgreSQL crashed (pg_ctl stop -m immediate) during a bring-up: the bring-up completes once the store is back', async () => {
    const upStartedAt = Date.now();
    const up = cli(['serves', 'up', 'ocr'], 180_000);
    const bringUp = temporal.client.workflow.getHandle(workflowIds.bringUp(box.node, 'ocr'));
    await waitForPendingActivity(bringUp, 'waitHealthy');
    const crashedAt = Date.now();
    await temporal.restartPostgres({ downMs: 3000 });
    const backAt = Date.now();
    const r = await up;
    assert.equal(r.code, 0, show(r));
    assert.match(r.stderr, /^serves up ocr: running, 1024 MiB committed on 'dark-fast'/m, show(r));
    const runs = [];
    for await (const w of temporal.client.workflow.list({ query: `WorkflowId = '${workflowIds.bringUp(box.node, 'ocr')}'` })) runs.push(w);
    assert.equal(runs.length, 1);
    assert.equal(await dockerEvents(containerName(box.node, 'ocr'), 'start', upStartedAt), 1, 'the container started once');
    assert.equal(await assertLedgerIsTheBox(), 'comfyui-sim:8192 fast:14336 ocr:1024');
    const events = (await bringUp.fetchHistory()).events ?? [];
    const closedAt = tsToMs(events.at(-1)?.eventTime);
    // The crash hit the bring-up, not a finished one: its health wait was still pending when the store came back.
    const healthWait = events.find((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'waitHealthy');
    const healthy = events.find((e) => String(e.activityTaskCompletedEventAttributes?.scheduledEventId) === String(healthWait?.eventId));
    const healthyAt = tsToMs(healthy?.eventTime);
    assert.ok(healthyAt > backAt, `waitHealthy completed ${backAt - healthyAt} ms before PostgreSQL was back`);
    const s = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
    console.log(`  PostgreSQL down ${s(backAt - crashedAt)} (stop -m immediate to accepting again)`);
    console.log(`  serve healthy ${s(healthyAt - backAt)} after the store was back; bring-up completed ${s(closedAt - backAt)} after`);

    const down = await cli(['serves', 'down', 'ocr', 'comfyui-sim', 'fast']);
    assert.equal(down.code, 0, show(down));
    assert.equal(await assertLedgerIsTheBox(), '');
  });
});
