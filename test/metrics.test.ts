// Each /metrics scraped while a box runs an eviction, as an operator's Prometheus would: the
// worker's (`gpures worker` as a process), the reference router's and the acquisition API's. The
// per-GPU gauges are compared with the ledger's own snapshot (`gpures ledger --json`) before,
// during (the victim draining: its acquirer's MiB held) and after; the operation counters with
// what was run, by the CLI, by a plain Temporal client and by the API.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { FastifyInstance } from 'fastify';
import { buildApi } from '../src/client/api';
import { taskQueueFor, workflowIds } from '../src/shared/messages';
import { routedChat } from './support/box';
import type { TestServe } from './support/box';
import { gpures, show } from './support/cli';
import { waitForPendingActivity } from './support/history-scan';
import { startProcessBox } from './support/process-box';
import type { ProcessBox } from './support/process-box';
import { scrape, valueOf } from './support/prom-text';
import type { Exposition } from './support/prom-text';
import { freeLowPorts } from './support/low-ports';
import type { TestTemporal } from './support/temporal';
import { waitFor, waitUntil } from './support/wait';

const GPU = { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 };
const SERVES: TestServe[] = [
  { name: 'fast', vram_mib: 14336, router_tier: 'fast-local' },
  { name: 'vision', vram_mib: 12288, class: 'evictable', served_model_name: 'qwen3-vl-4b-instruct', router_tier: 'vision-local' },
  { name: 'comfyui-sim', vram_mib: 8192, class: 'on-demand', api: 'none', args: ['sleep', '3600'] },
  { name: 'stuck', vram_mib: 1000, env: { FAKE_START_DELAY_S: 'never' }, start_timeout_s: 120 },
];
const API_TOKEN = 'metrics-test-token-0123456789abcdef0123';

interface LedgerJson {
  gpuRole: string;
  gpuUuid: string;
  capacityMib: number;
  reserveMib: number;
  committedMib: number;
  heldMib: number;
  freeMib: number;
  reservations: { serve: string; vramMib: number; class: string; phase: string }[];
  physical: { usedMib: number; nonLedgerDrawMinMib: number } | null;
}

describe('/metrics of the worker, the router and the acquisition API during an eviction', () => {
  let box: ProcessBox;
  let temporal: TestTemporal;
  let router: ProcessBox['router'];
  let api: FastifyInstance;
  let apiUrl: string;
  let workerMetrics: string;
  let node: string;
  let manifest: string;

  before(async () => {
    // Below the ephemeral range, where the worker's SDK core exporter picks its own port (listen 0) first.
    const [port = 0] = await freeLowPorts(1);
    workerMetrics = `http://127.0.0.1:${port}/metrics`;
    box = await startProcessBox('metrics', GPU, SERVES, { workerEnv: { GPURES_METRICS_ADDR: `127.0.0.1:${port}` } });
    ({ temporal, router, node, manifestPath: manifest } = box);
    api = buildApi({ client: temporal.client, manifest: box.manifest, manifestFile: manifest, token: API_TOKEN });
    await api.listen({ host: '127.0.0.1', port: 0 });
    const address = api.addresses()[0];
    apiUrl = `http://127.0.0.1:${typeof address === 'object' ? address?.port : ''}`;
  });

  after(async () => {
    await api?.close();
    await box?.close();
  });

  /** The ledger as the operator reads it, with nvidia-smi beside it (the worker's environment names the fake one). */
  async function ledger(): Promise<LedgerJson> {
    const r = await gpures(['ledger', '--json', '--manifest', manifest], box.workerEnv);
    assert.equal(r.code, 0, show(r));
    const [l] = JSON.parse(r.stdout) as LedgerJson[];
    assert.ok(l);
    return l;
  }

  const gpuLabels = (l: LedgerJson) => ({ node, gpu_role: l.gpuRole, gpu_uuid: l.gpuUuid });

  /** The per-GPU gauges as one record, to compare with the ledger's. */
  function gauges(e: Exposition, l: LedgerJson) {
    const g = (name: string) => valueOf(e, name, gpuLabels(l));
    return {
      capacityMib: g('gpures_gpu_capacity_mib'),
      reserveMib: g('gpures_gpu_reserve_mib'),
      committedMib: g('gpures_gpu_committed_mib'),
      heldMib: g('gpures_gpu_held_mib'),
      freeMib: g('gpures_gpu_free_mib'),
      usedMib: g('gpures_gpu_used_mib'),
      nonLedgerDrawMib: g('gpures_gpu_non_ledger_draw_mib'),
      ledgerUp: valueOf(e, 'gpures_ledger_up', { node, gpu_role: l.gpuRole }),
      reservations: l.reservations
        .map((r) => ({ ...r, vramMib: valueOf(e, 'gpures_reservation_mib', { node, gpu_role: l.gpuRole, serve: r.serve, class: r.class, phase: r.phase }) }))
        .sort((a, b) => a.serve.localeCompare(b.serve)),
    };
  }

  function fromLedger(l: LedgerJson) {
    assert.ok(l.physical, 'the fake nvidia-smi answers');
    return {
      capacityMib: l.capacityMib,
      reserveMib: l.reserveMib,
      committedMib: l.committedMib,
      heldMib: l.heldMib,
      freeMib: l.freeMib,
      usedMib: l.physical.usedMib,
      nonLedgerDrawMib: l.physical.nonLedgerDrawMinMib,
      ledgerUp: 1,
      reservations: [...l.reservations].sort((a, b) => a.serve.localeCompare(b.serve)),
    };
  }

  /**
   * The worker's gauges equal the ledger's snapshot: read within the worker's one-second reading
   * cache, so a scrape may lag a change by that much. Returns the snapshot.
   */
  async function gaugesMatchLedger(): Promise<LedgerJson> {
    const l = await ledger();
    let last: unknown;
    await waitUntil(
      'the worker gauges to equal the ledger snapshot',
      async () => {
        last = gauges(await scrape(workerMetrics), l);
        try {
          assert.deepEqual(last, fromLedger(l));
          return true;
        } catch {
          return false;
        }
      },
      5000,
      200,
    ).catch(() => assert.deepEqual(last, fromLedger(l), 'worker gauges vs `gpures ledger --json`'));
    return l;
  }

  const operations = async (kind: string, outcome: string) => valueOf(await scrape(workerMetrics), 'gpures_operations_total', { kind, outcome }) ?? 0;

  /** The counter reaches `want` (the sink is called as the run's last workflow task completes). */
  async function operationsReach(kind: string, outcome: string, want: number): Promise<void> {
    await waitUntil(
      `gpures_operations_total{kind="${kind}",outcome="${outcome}"} = ${want}`,
      async () => (await operations(kind, outcome)) === want,
      5000,
      100,
    );
  }

  test('before: two serves up; the gauges are the ledger, and the SDK core metrics come in the same scrape', async () => {
    const up = await gpures(['serves', 'up', 'fast', 'vision', '--manifest', manifest], box.env);
    assert.equal(up.code, 0, show(up));
    const l = await gaugesMatchLedger();
    assert.equal(l.committedMib, 26624);
    assert.equal(l.freeMib, 1375);
    await operationsReach('bring-up', 'admitted', 2);

    const e = await scrape(workerMetrics);
    assert.equal(valueOf(e, 'gpures_operation_duration_seconds_count', { kind: 'bring-up', outcome: 'admitted' }), 2);
    // The Temporal SDK's own, appended (the parser refuses a family declared twice).
    const core = [...e.types.keys()].filter((n) => n.startsWith('temporal_'));
    assert.ok(core.length > 5, `temporal_ families: ${core.join(', ')}`);
    console.log(`  one scrape: ${e.types.size} families, ${core.length} of them the SDK core's (temporal_*)`);
    assert.ok(
      e.samples.some((s) => s.name.startsWith('temporal_') && s.labels['task_queue'] === taskQueueFor(node)),
      "the core's metrics carry this worker's task queue",
    );
    assert.equal((await routedChat(router.url, 'vision')).status, 200);
  });

  test('a denial counts as denied however it was started, and the worker logs it as one info line', async () => {
    const r = await gpures(['serves', 'up', 'comfyui-sim', '--manifest', manifest], box.env);
    assert.equal(r.code, 3, show(r));
    await operationsReach('bring-up', 'denied', 1);

    // Started by a plain Temporal client, as `temporal workflow start` or the UI would: counted the same.
    const direct = await temporal.client.workflow.start('bringUpWorkflow', {
      taskQueue: taskQueueFor(node),
      workflowId: `metrics-direct-${node}`,
      args: [{ serve: 'comfyui-sim' }],
    });
    await assert.rejects(direct.result());
    await operationsReach('bring-up', 'denied', 2);
    assert.equal(await operations('bring-up', 'failed'), 0);

    const log = box.worker.stderr();
    const denials = log
      .split('\n')
      .filter((line) =>
        /\[INFO\] bringUpWorkflow \S+: serves up comfyui-sim denied: over budget by \d+ MiB, nothing started( \(with --evict it would evict vision: \d+ MiB\))?$/.test(
          line,
        ),
      );
    assert.equal(denials.length, 2, log);
    assert.ok(
      denials.some((line) => line.includes(`metrics-direct-${node}`)),
      log,
    );
    assert.ok(!log.includes('Workflow failed'), log);
    console.log(`  worker log: ${denials[0]}`);
    await gaugesMatchLedger();
  });

  test('during the eviction the held MiB and the draining victim show; after it, the ledger again; drain and release observed', async () => {
    const admin = { tier: 'vision-local' };
    const routerBefore = await scrape(`${router.url}/metrics`);
    const ok200 = valueOf(routerBefore, 'gpures_router_requests_total', { ...admin, code: '200' }) ?? 0;
    assert.equal(ok200, 1, 'the routed request of the first test');

    // One request in flight to vision: the drain waits for it.
    const slow = routedChat(router.url, 'vision', { sim_delay_ms: 20_000 });
    await waitUntil(
      'the router /metrics to show 1 in flight to vision-local',
      async () => valueOf(await scrape(`${router.url}/metrics`), 'gpures_router_in_flight', admin) === 1,
      10_000,
      50,
    );

    const evict = gpures(['serves', 'up', 'comfyui-sim', '--evict', '--manifest', manifest], box.env, 120_000);
    const acquire = temporal.client.workflow.getHandle(workflowIds.acquire(node, 'comfyui-sim'));
    await waitForPendingActivity(acquire, 'drainServe', { heartbeated: true });

    const during = await gaugesMatchLedger();
    assert.equal(during.heldMib, 8192, JSON.stringify(during));
    assert.deepEqual(
      during.reservations.map((r) => `${r.serve} ${r.phase}`).sort(),
      ['comfyui-sim pending', 'fast running', 'vision evicting'],
      'the victim still drains',
    );
    const r1 = await scrape(`${router.url}/metrics`);
    assert.equal(valueOf(r1, 'gpures_router_in_flight', admin), 1);
    assert.equal(valueOf(r1, 'gpures_router_tier_quiesced', admin), 1);
    assert.equal(valueOf(r1, 'gpures_router_tier_quiesced', { tier: 'fast-local' }), 0);
    assert.equal(valueOf(r1, 'gpures_router_queue_depth', admin), 0);
    // A new request to the quiesced tier is refused, and counted as such.
    assert.equal((await routedChat(router.url, 'vision')).status, 503);
    const r2 = await scrape(`${router.url}/metrics`);
    assert.equal(valueOf(r2, 'gpures_router_unavailable_total', { ...admin, reason: 'quiesced' }), 1);
    assert.equal(valueOf(r2, 'gpures_router_requests_total', { ...admin, code: '503' }), 1);

    assert.equal((await slow).status, 200);
    const done = await evict;
    assert.equal(done.code, 0, show(done));

    const afterLedger = await gaugesMatchLedger();
    assert.equal(afterLedger.heldMib, 0);
    assert.equal(afterLedger.committedMib, 22528);
    await operationsReach('acquisition', 'evicted', 1);
    const e = await scrape(workerMetrics);
    assert.equal(valueOf(e, 'gpures_drain_duration_seconds_count', { outcome: 'drained' }), 1);
    assert.ok((valueOf(e, 'gpures_drain_duration_seconds_sum', { outcome: 'drained' }) ?? 0) > 0, 'the drain waited for the request in flight');
    assert.equal(valueOf(e, 'gpures_vram_release_wait_seconds_count', { outcome: 'released' }), 1);
    assert.equal(valueOf(e, 'gpures_operation_duration_seconds_count', { kind: 'acquisition', outcome: 'evicted' }), 1);
    const r3 = await scrape(`${router.url}/metrics`);
    assert.equal(valueOf(r3, 'gpures_router_in_flight', admin), 0);
    assert.equal(valueOf(r3, 'gpures_router_requests_total', { ...admin, code: '200' }), ok200 + 1, 'the slow request, counted when it ended');
  });

  test('restore: the bring-down and the restored bring-up are counted, the gauges follow the ledger back', async () => {
    const restore = await gpures(['serves', 'down', 'comfyui-sim', '--restore', '--manifest', manifest], box.env);
    assert.equal(restore.code, 0, show(restore));
    await operationsReach('bring-down', 'stopped', 1);
    await operationsReach('bring-up', 'restored', 1);
    const l = await gaugesMatchLedger();
    assert.equal(l.committedMib, 26624);
    const r = await scrape(`${router.url}/metrics`);
    assert.equal(valueOf(r, 'gpures_router_tier_quiesced', { tier: 'vision-local' }), 0);
  });

  test('the API: /healthz and /metrics without the token; an acquisition it starts is counted by the worker', async () => {
    const health = await fetch(`${apiUrl}/healthz`);
    assert.equal(health.status, 200);
    assert.deepEqual(await health.json(), { status: 'ok', node, temporal: 'reachable' });
    const refused = await fetch(`${apiUrl}/v1/acquisitions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
    assert.equal(refused.status, 401);

    const down = await gpures(['serves', 'down', 'fast', '--manifest', manifest], box.env);
    assert.equal(down.code, 0, show(down));
    const post = await fetch(`${apiUrl}/v1/acquisitions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${API_TOKEN}` },
      body: JSON.stringify({ serve: 'fast' }),
    });
    assert.equal(post.status, 202, await post.clone().text());
    const { status_url } = (await post.json()) as { status_url: string };
    await waitFor(
      'the API acquisition to complete',
      async () => {
        const s = (await (await fetch(`${apiUrl}${status_url}`, { headers: { authorization: `Bearer ${API_TOKEN}` } })).json()) as { status: string };
        return s.status === 'completed' ? s : undefined;
      },
      60_000,
      250,
    );
    await operationsReach('acquisition', 'admitted', 1);

    const m = await scrape(`${apiUrl}/metrics`);
    assert.equal(valueOf(m, 'gpures_api_requests_total', { route: '/healthz', code: '200' }), 1);
    assert.equal(valueOf(m, 'gpures_api_requests_total', { route: '/v1/acquisitions', code: '401' }), 1);
    assert.equal(valueOf(m, 'gpures_api_requests_total', { route: '/v1/acquisitions', code: '202' }), 1);
    assert.ok((valueOf(m, 'gpures_api_requests_total', { route: '/v1/acquisitions/:id', code: '200' }) ?? 0) >= 1);

    const rest = await gpures(['serves', 'down', 'fast', 'vision', '--manifest', manifest], box.env);
    assert.equal(rest.code, 0, show(rest));
    const l = await gaugesMatchLedger();
    assert.equal(l.committedMib, 0);
  });

  test('a cancelled bring-up is counted once, as cancelled, not as failed', async () => {
    const before = { cancelled: await operations('bring-up', 'cancelled'), failed: await operations('bring-up', 'failed') };
    const up = await temporal.client.workflow.start('bringUpWorkflow', {
      taskQueue: taskQueueFor(node),
      workflowId: workflowIds.bringUp(node, 'stuck'),
      args: [{ serve: 'stuck' }],
    });
    await waitForPendingActivity(up, 'waitHealthy');
    await up.cancel();
    await assert.rejects(up.result());
    assert.equal((await up.describe()).status.name, 'CANCELLED');
    await operationsReach('bring-up', 'cancelled', before.cancelled + 1);
    // Past another scrape cache: still once, and nothing counted as failed.
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(await operations('bring-up', 'cancelled'), before.cancelled + 1);
    assert.equal(await operations('bring-up', 'failed'), before.failed);
    const l = await gaugesMatchLedger();
    assert.equal(l.committedMib, 0, 'the cancelled bring-up gave back its MiB');
  });
  test('gpures ledger is answered by the worker process at /v1/ledger beside /metrics, as its own read through Temporal', async () => {
    const answered = async () => valueOf(await scrape(workerMetrics), 'gpures_ledger_reads_total', { outcome: 'answered' }) ?? 0;
    const answer = await fetch(workerMetrics.replace(/\/metrics$/, '/v1/ledger'), { headers: { 'x-gpures-reader': 'test' } });
    assert.equal(answer.status, 200);
    const body = (await answer.json()) as { node: string; ledgers: { reservations: { serve: string }[] }[] };
    assert.equal(body.node, node);
    const before = await answered();
    const viaWorker = await gpures(['ledger', '--json', '--manifest', manifest], box.workerEnv);
    assert.equal(viaWorker.code, 0, show(viaWorker));
    assert.equal(await answered(), before + 1, 'the worker process answered the command');
    const viaTemporal = await gpures(['ledger', '--json', '--manifest', manifest], { ...box.workerEnv, GPURES_METRICS_ADDR: 'off' });
    assert.equal(await answered(), before + 1, 'off: the command read for itself');
    const serves = (out: string) =>
      (JSON.parse(out) as LedgerJson[]).map((l) => ({ committedMib: l.committedMib, serves: l.reservations.map((r) => r.serve) }));
    assert.deepEqual(serves(viaWorker.stdout), serves(viaTemporal.stdout));
    assert.deepEqual(
      body.ledgers.map((l) => l.reservations.map((r) => r.serve)),
      serves(viaTemporal.stdout).map((l) => l.serves),
    );
  });
});
