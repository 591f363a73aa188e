// Heartbeats and retried attempts, activity by activity (MockActivityEnvironment, no server): the
// periodic beat keeps the latest details, and a retry reports what the attempt that acted saw.
// The same with real processes killed mid-step: test/cli-eviction.test.ts, test/promote.test.ts.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Docker from 'dockerode';
import type { Client } from '@temporalio/client';
import { MockActivityEnvironment } from '@temporalio/testing';
import { DefaultLogger } from '@temporalio/worker';
import { createActivities } from '../src/activities';
import { DockerRouterDeployment } from '../src/adapters/router-deployment/docker-router';
import { createEvictionActivities } from '../src/activities/eviction';
import { progress, whileHeartbeating } from '../src/activities/heartbeat';
import type { ContainerRuntime, ContainerState } from '../src/adapters/containers/port';
import type { ServeProbe } from '../src/adapters/serve-probe/port';
import { createPromotionActivities } from '../src/activities/promotion';
import { journalPath } from '../src/adapters/router-deployment/port';
import type { RouterTarget } from '../src/adapters/router-deployment/port';
import { LedgerClient } from '../src/adapters/ledger/ledger-client';
import type { ServeSpec } from '../src/domain/types';

/** A runtime that records its calls; stop answers what the test says the box is in. */
function recordingRuntime(stopAnswer: 'stopped' | 'already-stopped' | 'absent', calls: string[]): ContainerRuntime {
  const no = () => Promise.reject(new Error('not used here'));
  return {
    ensureRunning: no,
    hasImage: no,
    inspect: () => Promise.resolve<ContainerState | undefined>(undefined),
    stop: (name) => (calls.push(`stop ${name}`), Promise.resolve(stopAnswer)),
    remove: (name) => (calls.push(`remove ${name}`), Promise.resolve('absent' as const)),
    list: () => Promise.resolve([]),
    logsTail: () => Promise.resolve(''),
  };
}

/** env.run, typed: its result type is not inferred from the function's. */
function runIn<T>(env: MockActivityEnvironment, fn: () => Promise<T>): Promise<T> {
  return env.run<[], T, () => Promise<T>>(fn);
}

function serveActivities(runtime: ContainerRuntime) {
  const probe: ServeProbe = { health: () => Promise.resolve({ ok: true }), modelIds: () => Promise.resolve([]), requestsRunning: () => Promise.resolve(null) };
  // The ledger is not reached by the activities under test.
  return createActivities({
    runtime,
    probe,
    manifest: { read: () => Promise.reject(new Error('no manifest')) },
    ledger: new LedgerClient({} as Client),
    operations: {
      status: () => Promise.reject(new Error('unused')),
      runningPast: () => Promise.reject(new Error('unused')),
      cancel: () => Promise.reject(new Error('unused')),
    },
  });
}

describe('heartbeats while an activity works', () => {
  test('outside an activity (the simulated box, a script) the work just runs', async () => {
    assert.equal(await whileHeartbeating(() => Promise.resolve(42), 10), 42);
    assert.doesNotThrow(() => progress({ ignored: true }));
  });

  test("beats every interval, re-sending the latest details; an earlier attempt's until this one records its own", async () => {
    const env = new MockActivityEnvironment({ attempt: 2, heartbeatDetails: { from: 'attempt 1' } });
    const beats: unknown[] = [];
    let waiter: { count: number; resolve: () => void } | undefined;
    env.on('heartbeat', (d: unknown) => {
      beats.push(d);
      if (waiter && beats.length >= waiter.count) waiter.resolve();
    });
    /** Resolves once `count` beats in all were seen: no assumption on how late a busy box fires timers. */
    const beatsSeen = (count: number) => new Promise<void>((resolve) => (beats.length >= count ? resolve() : (waiter = { count, resolve })));
    await env.run(() =>
      whileHeartbeating(async () => {
        await beatsSeen(2);
        progress({ from: 'attempt 2' });
        await beatsSeen(beats.length + 3);
      }, 20),
    );
    const firstOwn = beats.findIndex((b) => (b as { from?: string }).from === 'attempt 2');
    assert.ok(firstOwn >= 2, `periodic beats before progress(): ${JSON.stringify(beats)}`);
    assert.ok(
      beats.slice(0, firstOwn).every((b) => (b as { from?: string }).from === 'attempt 1'),
      JSON.stringify(beats),
    );
    assert.ok(beats.length - firstOwn >= 3, `periodic beats after progress(): ${JSON.stringify(beats)}`);
    assert.ok(
      beats.slice(firstOwn).every((b) => (b as { from?: string }).from === 'attempt 2'),
      JSON.stringify(beats),
    );
    // Stopped with the work: nothing beats after it settled.
    const settled = beats.length;
    await new Promise((r) => setTimeout(r, 60));
    assert.equal(beats.length, settled);
  });

  test("a local step sends no heartbeat (the SDK core refuses a local step's, a warning every beat)", async () => {
    const env = new MockActivityEnvironment({ isLocal: true, attempt: 1 });
    const beats: unknown[] = [];
    env.on('heartbeat', (d: unknown) => beats.push(d));
    const result = await env.run(() =>
      whileHeartbeating(async () => {
        progress({ from: 'a local step' });
        await new Promise((r) => setTimeout(r, 80));
        return 'done';
      }, 10),
    );
    assert.equal(result, 'done');
    assert.deepEqual(beats, []);
  });

  test('a stop heartbeats its issue time before it is issued; the retry reports that time and attempt', async () => {
    const calls: string[] = [];
    const first = new MockActivityEnvironment({ attempt: 1 });
    const beats: unknown[] = [];
    first.on('heartbeat', (d: unknown) => {
      beats.push(d);
      calls.push('heartbeat');
    });
    const before = Date.now();
    const r1 = await runIn(first, () => serveActivities(recordingRuntime('stopped', calls)).stopServeContainer({ node: 'n', serve: 'vision', timeoutS: 5 }));
    assert.deepEqual(calls.slice(0, 2), ['heartbeat', 'stop gpures-n-vision']);
    const issued = beats[0] as { stopIssuedAtEpochMs: number; attempt: number };
    assert.ok(issued.stopIssuedAtEpochMs >= before && issued.attempt === 1, JSON.stringify(issued));
    assert.equal(r1.stop, 'stopped');
    assert.equal(r1.issuedByAttempt, 1);

    // The worker died after the stop: the retry, a minute later, finds the container gone.
    const retry = new MockActivityEnvironment({ attempt: 2, heartbeatDetails: { ...issued, stopIssuedAtEpochMs: issued.stopIssuedAtEpochMs - 60_000 } });
    const r2 = await runIn(retry, () => serveActivities(recordingRuntime('absent', [])).stopServeContainer({ node: 'n', serve: 'vision', timeoutS: 5 }));
    assert.deepEqual([r2.stop, r2.issuedAtEpochMs, r2.issuedByAttempt], ['stopped', issued.stopIssuedAtEpochMs - 60_000, 1]);
  });

  test("a retried drain keeps the first attempt's figures at its start", async () => {
    const serve = { name: 'vision', bind: '127.0.0.1', port: 1 } as ServeSpec;
    const deps = {
      runtime: recordingRuntime('stopped', []),
      manifest: { read: () => Promise.reject(new Error('no manifest')) },
      probe: { health: () => Promise.resolve({ ok: true }), modelIds: () => Promise.resolve([]), requestsRunning: () => Promise.resolve(0) },
      router: {
        tierState: (tier: string) => Promise.resolve({ tier, state: 'quiesced' as const, inFlight: 0, backend: 'b', modelIdentity: true }),
        quiesce: () => Promise.reject(new Error('unused')),
        readmit: () => Promise.reject(new Error('unused')),
        reload: () => Promise.reject(new Error('unused')),
        healthz: () => Promise.reject(new Error('unused')),
      },
    };
    const startedAtEpochMs = Date.now() - 4000;
    const env = new MockActivityEnvironment({
      attempt: 2,
      heartbeatDetails: { startedAtEpochMs, polls: 7, first: { router: 1, vllm: 1 }, routerInFlight: 1, vllmRunning: 1 },
    });
    const r = await runIn(env, () => createEvictionActivities(deps).drainServe({ tier: 'vision-local', serve, deadlineEpochMs: Date.now() + 10_000 }));
    assert.equal(r.drained, true);
    assert.deepEqual([r.routerInFlightAtStart, r.vllmRunningAtStart, r.routerInFlightAtEnd, r.polls], [1, 1, 0, 8]);
    assert.ok(r.waitedMs >= 4000, `waited ${r.waitedMs} ms, counted from the first attempt`);
  });

  test('a promotion write cut short between the file change and its journal line: the retry completes the line', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gpures-journal-'));
    try {
      const configPath = join(dir, 'router.toml');
      writeFileSync(configPath, 'mapping_version = "v1"\n');
      const t: RouterTarget = { name: 'r', container: 'c', configPath, containerConfigPath: '/config/router.toml', url: 'http://127.0.0.1:1', adminToken: 'x' };
      const run = { workflowId: 'promote/n/r', runId: 'run-1' };
      const content = 'mapping_version = "v2"\n';
      // Files only: no Docker call is made by a write.
      const files = new DockerRouterDeployment({} as Docker);
      // The first worker dies right after the rename: the new config is live, the attempt never ends.
      const dying = Object.assign(Object.create(files) as DockerRouterDeployment, {
        writeFileAtomic: async (dir: string, path: string, data: Buffer | string, mode?: number) => {
          await files.writeFileAtomic(dir, path, data, mode);
          throw new Error('worker killed');
        },
      });
      const input = { router: 'r', content, expectSha256: createHash('sha256').update(readFileSync(configPath)).digest('hex'), run };
      await assert.rejects(
        runIn(new MockActivityEnvironment({ attempt: 1 }, { logger: new DefaultLogger('ERROR') }), () =>
          createPromotionActivities({ routerDeployment: dying, routerTargets: [t] }).promoteWrite(input),
        ),
        /worker killed/,
      );
      assert.equal(readFileSync(configPath, 'utf8'), content);
      const lines = () =>
        readFileSync(journalPath(configPath), 'utf8')
          .trim()
          .split('\n')
          .map((l) => JSON.parse(l) as { op: string; phase: string; run: string });
      assert.deepEqual(
        lines().map((l) => [l.op, l.phase]),
        [['write', 'intent']],
      );

      const r = await runIn(new MockActivityEnvironment({ attempt: 2 }), () =>
        createPromotionActivities({ routerDeployment: files, routerTargets: [t] }).promoteWrite(input),
      );
      assert.equal(r.outcome, 'written', 'the retry reports the write its earlier attempt made');
      assert.deepEqual(
        lines().map((l) => [l.op, l.phase, l.run]),
        [
          ['write', 'intent', 'promote/n/r/run-1'],
          ['write', 'done', 'promote/n/r/run-1'],
        ],
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
