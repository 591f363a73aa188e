// The pieces of /metrics that need no Temporal: how a run's end is classified, the metrics address,
// the worker's denial line, the per-GPU reading's bounds (a ledger that does not answer), the
// router's count of a client gone, the caches of the endpoints that need no token, and what a
// worker whose connect is refused leaves behind.
import { EventEmitter } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { ContinueAsNew } from '@temporalio/workflow';
import type { Client } from '@temporalio/client';
import type { FastifyReply } from 'fastify';
import type { LogLevel, LogMetadata, Logger } from '@temporalio/worker';
import type { WorkflowInfo } from '@temporalio/workflow';
import { buildApi } from '../src/client/api';
import { parseMetricsAddr, workerEnv } from '../src/config/env';
import { parseManifest } from '../src/config/manifest';
import type { LedgerState } from '../src/domain/ledger';
import { BodyBudget } from '../src/router/body-budget';
import { RouterMetrics } from '../src/router/metrics';
import type { OnDemand } from '../src/router/on-demand';
import type { TierTable } from '../src/router/tier-table';
import { FAILURE_TYPE_LOG_ATTRIBUTE, OUTCOME_LOG_ATTRIBUTE } from '../src/shared/operation-metrics';
import { denialsAsInfo } from '../src/worker/log';
import { WorkerMetrics } from '../src/worker/metrics';
import { runWorker } from '../src/worker/main';
import { startMetricsServer } from '../src/worker/metrics-server';
import { closesRun, completedOutcome, failedOutcome } from '../src/workflows/operation-metrics';
import { renderManifest } from './support/box';
import { gpures, show } from './support/cli';
import { parseExposition, valueOf } from './support/prom-text';
import { freeLowPorts } from './support/low-ports';
import { waitUntil } from './support/wait';

describe('operation outcomes', () => {
  test('results: restored, evicted, admitted, already-running, stopped, already-stopped, completed', () => {
    assert.deepEqual(completedOutcome('bring-up', { outcome: 'restored' }), { kind: 'bring-up', outcome: 'restored' });
    assert.deepEqual(completedOutcome('bring-up', { outcome: 'started' }), { kind: 'bring-up', outcome: 'admitted' });
    assert.deepEqual(completedOutcome('acquisition', { outcome: 'started', victims: [{ serve: 'vision' }] }), { kind: 'acquisition', outcome: 'evicted' });
    assert.deepEqual(completedOutcome('acquisition', { outcome: 'started', victims: [] }), { kind: 'acquisition', outcome: 'admitted' });
    assert.deepEqual(completedOutcome('acquisition', { outcome: 'already-running', victims: [] }), { kind: 'acquisition', outcome: 'already-running' });
    assert.deepEqual(completedOutcome('bring-down', { outcome: 'stopped' }), { kind: 'bring-down', outcome: 'stopped' });
    assert.deepEqual(completedOutcome('bring-down', { outcome: 'cancelled' }), { kind: 'bring-down', outcome: 'stopped' });
    assert.deepEqual(completedOutcome('bring-down', { outcome: 'already-stopped' }), { kind: 'bring-down', outcome: 'already-stopped' });
    assert.deepEqual(completedOutcome('lease', { outcome: 'expired' }), { kind: 'lease', outcome: 'completed' });
  });

  test('failures: a denial, a cancel, any other failure with its type', () => {
    const denial = ApplicationFailure.create({ type: 'AdmissionDenied', message: 'over budget', nonRetryable: true });
    assert.deepEqual(failedOutcome('bring-up', denial, false), { kind: 'bring-up', outcome: 'denied' });
    assert.deepEqual(failedOutcome('acquisition', new CancelledFailure('cancelled'), true), { kind: 'acquisition', outcome: 'cancelled' });
    const health = ApplicationFailure.create({ type: 'HealthTimeout', message: 'no 200', nonRetryable: true });
    assert.deepEqual(failedOutcome('bring-up', health, false), { kind: 'bring-up', outcome: 'failed', failureType: 'HealthTimeout' });
    assert.deepEqual(failedOutcome('promotion', ApplicationFailure.create({ message: 'boom' }), false), {
      kind: 'promotion',
      outcome: 'failed',
      failureType: 'unknown',
    });
  });

  test("a cancellation error the run was not cancelled with (an inner scope's) is the run's failure, not a cancel", () => {
    assert.deepEqual(failedOutcome('bring-down', new CancelledFailure('inner scope'), false), {
      kind: 'bring-down',
      outcome: 'failed',
      failureType: 'unknown',
    });
  });

  test('counted only when the error closes the run: a Temporal failure or a cancel asked for, not a bug (the task fails and retries) nor continue-as-new', () => {
    assert.equal(closesRun(ApplicationFailure.create({ type: 'HealthTimeout', message: 'no 200' }), false), true);
    assert.equal(closesRun(new CancelledFailure('cancelled'), true), true);
    assert.equal(closesRun(new CancelledFailure('inner scope'), false), true, 'a TemporalFailure: the SDK fails the run with it');
    assert.equal(closesRun(new TypeError("cannot read properties of undefined (reading 'vramMib')"), false), false);
    assert.equal(closesRun(new Error('boom'), true), false, 'a plain Error fails the task even while cancelled');
    assert.equal(closesRun(new ContinueAsNew({ workflowType: 'leaseWorkflow' }), false), false);
  });
});

describe('metrics address', () => {
  test('HOST:PORT, [IPv6]:PORT, off; anything else named', () => {
    assert.deepEqual(parseMetricsAddr('127.0.0.1:9475'), { host: '127.0.0.1', port: 9475 });
    assert.deepEqual(parseMetricsAddr('[::1]:0'), { host: '::1', port: 0 });
    assert.equal(parseMetricsAddr('off'), 'off');
    for (const bad of ['9475', '127.0.0.1:70000', '::1:9475', 'host:', ':9475']) assert.ok('problem' in (parseMetricsAddr(bad) as object), bad);
    assert.throws(() => workerEnv({ GPURES_METRICS_ADDR: 'localhost' }), /^Error: GPURES_METRICS_ADDR: HOST:PORT/);
    assert.deepEqual(workerEnv({ GPURES_METRICS_ADDR: 'off' }).metrics, 'off');
    assert.equal(workerEnv({}).metrics, undefined);
  });

  test('gpures worker --metrics with a bad address: exit 2 naming the option, before anything connects', async () => {
    const r = await gpures(['worker', '--metrics', '0.0.0.0'], {});
    assert.equal(r.code, 2, show(r));
    assert.match(r.stderr, /--metrics: HOST:PORT \(PORT 0\.\.65535, an IPv6 host in brackets\) or 'off' \(got '0\.0\.0\.0'\)/, show(r));
  });
});

describe("the worker's log", () => {
  function recorder(): { logger: Logger; lines: { level: LogLevel; message: string; meta?: LogMetadata }[] } {
    const lines: { level: LogLevel; message: string; meta?: LogMetadata }[] = [];
    const log = (level: LogLevel, message: string, meta?: LogMetadata) => void lines.push({ level, message, ...(meta ? { meta } : {}) });
    return {
      lines,
      logger: {
        log,
        trace: (m, x) => log('TRACE', m, x),
        debug: (m, x) => log('DEBUG', m, x),
        info: (m, x) => log('INFO', m, x),
        warn: (m, x) => log('WARN', m, x),
        error: (m, x) => log('ERROR', m, x),
      },
    };
  }

  test("a denied run's WARN is one INFO line; a run failed by a named failure one WARN line; an unnamed error (an activity's, a run's) stays a WARN with its error", () => {
    const { logger, lines } = recorder();
    const log = denialsAsInfo(logger);
    const error = { message: 'serves up vision denied: over budget by 10401 MiB,\nnothing started', stack: 'ApplicationFailure: ...\n    at x' };
    log.warn('Workflow failed', { workflowType: 'bringUpWorkflow', workflowId: 'up/box/vision', error, [OUTCOME_LOG_ATTRIBUTE]: 'denied' });
    log.warn('Workflow failed', {
      workflowType: 'bringUpWorkflow',
      workflowId: 'up/box/ocr',
      error: { message: 'no 200' },
      [OUTCOME_LOG_ATTRIBUTE]: 'failed',
      [FAILURE_TYPE_LOG_ATTRIBUTE]: 'HealthTimeout',
    });
    log.warn('Activity failed', { activityType: 'startServeContainer', error: { message: 'x is undefined', stack: 'TypeError: x\n    at y' } });
    // A run failed by workflow code (a saga fails it with the TypeError's type): the SDK's line, its stack kept.
    const bug = { message: 'serves up ocr failed at slot: x is undefined', stack: 'TypeError: x\n    at takeStartSlot' };
    log.warn('Workflow failed', {
      workflowType: 'bringUpWorkflow',
      workflowId: 'up/box/ocr',
      error: bug,
      [OUTCOME_LOG_ATTRIBUTE]: 'failed',
      [FAILURE_TYPE_LOG_ATTRIBUTE]: 'TypeError',
    });
    assert.equal(lines.length, 4);
    assert.equal(lines[0]?.level, 'INFO');
    assert.equal(lines[0]?.message, 'bringUpWorkflow up/box/vision: serves up vision denied: over budget by 10401 MiB, nothing started');
    assert.equal(Object.keys(lines[0]?.meta ?? {}).length, 0, 'no error, no stack');
    assert.equal(lines[1]?.level, 'WARN');
    assert.equal(lines[1]?.message, 'bringUpWorkflow up/box/ocr failed: no 200');
    assert.equal(lines[1]?.meta?.['error'], undefined);
    assert.equal(lines[2]?.level, 'WARN');
    assert.equal(lines[2]?.message, 'Activity failed');
    assert.deepEqual(lines[2]?.meta?.['error'], { message: 'x is undefined', stack: 'TypeError: x\n    at y' });
    assert.equal(lines[3]?.message, 'Workflow failed');
    assert.deepEqual(lines[3]?.meta?.['error'], bug);
  });
});

const MANIFEST = renderManifest('box', [{ role: 'main', capacity_mib: 24000, reserve_mib: 1000 }], [{ name: 'a', vram_mib: 1000 }]);

describe('the per-GPU reading', () => {
  const manifest = { read: () => Promise.resolve({ text: MANIFEST, file: 'serves.toml' }) };
  const state: LedgerState = {
    node: 'box',
    gpuRole: 'main',
    gpuUuid: 'GPU-00000000-0000-0000-0000-000000000000',
    capacityMib: 24000,
    reserveMib: 1000,
    reservations: [
      { serve: 'a', vramMib: 10000, class: 'evictable', phase: 'evicting', holder: 'x/1' },
      { serve: 'b', vramMib: 16000, class: 'on-demand', phase: 'pending', holder: 'y/1' },
    ],
  };

  test('the gauges are the ledger: free goes negative while a victim drains', async () => {
    const m = new WorkerMetrics({ cacheMs: 0 });
    let asked = 0;
    m.observeLedgers({ node: 'box', manifest, ledger: { answer: () => (asked++, Promise.resolve(state)) } });
    const e = parseExposition(await m.text());
    const labels = { node: 'box', gpu_role: 'main', gpu_uuid: state.gpuUuid };
    assert.equal(valueOf(e, 'gpures_gpu_committed_mib', labels), 10000);
    assert.equal(valueOf(e, 'gpures_gpu_held_mib', labels), 16000);
    assert.equal(valueOf(e, 'gpures_gpu_free_mib', labels), 24000 - 1000 - 10000 - 16000);
    assert.equal(valueOf(e, 'gpures_reservation_mib', { serve: 'b', phase: 'pending' }), 16000);
    assert.equal(valueOf(e, 'gpures_ledger_up', { gpu_role: 'main' }), 1);
    await m.text();
    assert.equal(asked, 2, 'cacheMs 0: each scrape reads');
  });

  // The timeout is only a hang guard: a ledger that never answers must not hold the scrape (readTimeoutMs is 200 ms).
  test('a ledger that does not answer: ledger_up 0 and no figures, the read bounded; one reading shared within cacheMs', { timeout: 60_000 }, async () => {
    const m = new WorkerMetrics({ readTimeoutMs: 200, cacheMs: 60_000 });
    let asked = 0;
    m.observeLedgers({ node: 'box', manifest, ledger: { answer: () => (asked++, new Promise<LedgerState>(() => undefined)) } });
    const [a, b] = await Promise.all([m.text(), m.text()]);
    assert.equal(asked, 1, 'two scrapes, one reading');
    assert.equal(a, b);
    const e = parseExposition(a);
    assert.equal(valueOf(e, 'gpures_ledger_up', { gpu_role: 'main' }), 0);
    assert.equal(valueOf(e, 'gpures_gpu_committed_mib', { gpu_role: 'main' }), undefined);
  });

  test(
    'single flight: a scrape while a slow reading is under way joins it, none starts beside it; the cache counts from its end',
    { timeout: 60_000 },
    async () => {
      const m = new WorkerMetrics({ readTimeoutMs: 10_000, cacheMs: 1000 });
      const gates: ((s: LedgerState) => void)[] = [];
      m.observeLedgers({ node: 'box', manifest, ledger: { answer: () => new Promise<LedgerState>((resolve) => gates.push(resolve)) } });
      const first = m.text();
      await new Promise((r) => setTimeout(r, 50));
      const second = m.text();
      await new Promise((r) => setTimeout(r, 1500));
      assert.equal(gates.length, 1, 'no second reading while the first, older than cacheMs, is under way');
      const third = m.text();
      gates[0]?.(state);
      const [a, b, c] = await Promise.all([first, second, third]);
      assert.equal(a, b);
      assert.equal(b, c);
      assert.equal(valueOf(parseExposition(a), 'gpures_gpu_held_mib', { gpu_role: 'main' }), 16000);
      await m.text();
      assert.equal(gates.length, 1, 'a scrape right after a 1.5 s reading is served by it: cacheMs from its end, not its start');
    },
  );
});

describe('operation durations', () => {
  test("a lease is timed from its chain's start, not its last continue-as-new run; hours have buckets", async () => {
    const m = new WorkerMetrics();
    const now = Date.now();
    const info = { startTime: new Date(now - 3 * 3600_000), runStartTime: new Date(now - 60_000) } as WorkflowInfo;
    await m.sinks().operations.ended.fn(info, { kind: 'lease', outcome: 'completed' });
    const e = parseExposition(await m.registry.metrics());
    const bucket = (le: string) => valueOf(e, 'gpures_operation_duration_seconds_bucket', { kind: 'lease', le });
    assert.equal(bucket('3600'), 0);
    assert.equal(bucket('7200'), 0);
    assert.equal(bucket('14400'), 1);
    const sum = valueOf(e, 'gpures_operation_duration_seconds_sum', { kind: 'lease' }) ?? 0;
    assert.ok(sum >= 3 * 3600 && sum < 3 * 3600 + 600, `about 3 h, got ${sum} s`);
  });
});

describe("the router's request count", () => {
  function closed(headersSent: boolean, statusCode: number): FastifyReply {
    const raw = Object.assign(new EventEmitter(), { headersSent, statusCode });
    return { raw } as unknown as FastifyReply;
  }

  test("a client that left before any status was sent (held in the on-demand queue) is code 'aborted', not the raw default 200", async () => {
    const m = new RouterMetrics({ config: { tiers: [] } } as unknown as TierTable, { onAbandon: () => undefined } as unknown as OnDemand, new BodyBudget(1024));
    for (const [sent, code] of [
      [false, 200],
      [true, 200],
      [true, 503],
    ] as const) {
      const reply = closed(sent, code);
      m.requestFor('vision-local', reply);
      reply.raw.emit('close');
    }
    const e = parseExposition(await m.registry.metrics());
    const count = (code: string) => valueOf(e, 'gpures_router_requests_total', { tier: 'vision-local', code });
    assert.deepEqual([count('aborted'), count('200'), count('503')], [1, 1, 1]);
  });
});

describe('unauthenticated endpoints do their work once per cache period, however many ask', () => {
  test("the worker's /metrics fetches the SDK core's text once for concurrent scrapes and the cacheMs after", async () => {
    let fetched = 0;
    const core = createServer((_req, res) => {
      fetched++;
      res.writeHead(200, { 'content-type': 'text/plain' }).end('# TYPE temporal_sticky_cache_size gauge\ntemporal_sticky_cache_size 3\n');
    });
    await new Promise<void>((resolve) => core.listen(0, '127.0.0.1', resolve));
    const server = await startMetricsServer({
      host: '127.0.0.1',
      port: 0,
      metrics: new WorkerMetrics({ cacheMs: 60_000 }),
      coreUrl: `http://127.0.0.1:${(core.address() as AddressInfo).port}/metrics`,
    });
    try {
      const texts = await Promise.all([1, 2, 3].map(async () => (await fetch(server.url)).text()));
      texts.push(await (await fetch(server.url)).text());
      assert.equal(fetched, 1, 'four scrapes, one fetch of the core');
      for (const t of texts) assert.equal(valueOf(parseExposition(t), 'temporal_sticky_cache_size'), 3);
    } finally {
      await server.close();
      await new Promise((resolve) => core.close(resolve));
    }
  });

  test('/healthz asks Temporal once for concurrent probes and the second after; an unreachable answer is 503 the same way', async () => {
    let asked = 0;
    let reachable = true;
    const client = {
      withDeadline: (_deadline: number, fn: () => Promise<unknown>) => fn(),
      workflowService: { getSystemInfo: () => (asked++, reachable ? Promise.resolve({}) : Promise.reject(new Error('UNAVAILABLE'))) },
    } as unknown as Client;
    const parsed = parseManifest(MANIFEST, 'serves.toml');
    assert.ok(parsed.ok);
    const api = buildApi({ client, manifest: parsed.manifest, manifestFile: 'serves.toml', token: 'units-test-token-0123456789abcdef0123' });
    try {
      const probe = async () => (await api.inject({ method: 'GET', url: '/healthz' })).statusCode;
      assert.deepEqual(await Promise.all([probe(), probe(), probe()]), [200, 200, 200]);
      assert.equal(await probe(), 200);
      assert.equal(asked, 1, 'four probes, one RPC');
      reachable = false;
      await waitUntil('/healthz to say 503 once its cached answer is older than 1 s', async () => (await probe()) === 503, 30_000, 200);
      assert.equal(asked, 2);
    } finally {
      await api.close();
    }
  });
});

describe("the worker's start", () => {
  test('a refused Temporal connect leaves its /metrics address unbound', async () => {
    // The /metrics port below the ephemeral range: one picked from it (CI, 38041) was taken by the time
    // the probe bound it (EADDRINUSE), by whatever took an ephemeral port meanwhile (the SDK core's
    // exporter takes one by listen(0) and keeps it for the process's life). Temporal at port 1: no pick, nothing listens.
    const [port = 0] = await freeLowPorts(1);
    const saved = process.env['TEMPORAL_ADDRESS'];
    process.env['TEMPORAL_ADDRESS'] = '127.0.0.1:1';
    try {
      await assert.rejects(
        runWorker({ manifestPath: 'serves.toml', node: 'box', gpus: 'off', metrics: { host: '127.0.0.1', port } }),
        /connect|ECONNREFUSED|transport/i,
      );
    } finally {
      if (saved === undefined) delete process.env['TEMPORAL_ADDRESS'];
      else process.env['TEMPORAL_ADDRESS'] = saved;
    }
    const probe = createServer();
    await new Promise<void>((resolve, reject) => {
      probe.once('error', reject);
      probe.listen(port, '127.0.0.1', resolve);
    });
    await new Promise((resolve) => probe.close(resolve));
  });
});
