// The bring-up's /health wait as an installed worker runs it (no pollIntervalMs): how long after a
// serve answers the wait notices (MockActivityEnvironment, no server; the probe's times are real).
// The bring-up bench's --worker-poll installed measures the same on Docker (docs/performance.md).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Client } from '@temporalio/client';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createActivities } from '../src/activities';
import type { HealthResult } from '../src/activities';
import type { ContainerRuntime, ContainerState } from '../src/adapters/containers/port';
import type { ServeProbe } from '../src/adapters/serve-probe/port';
import { LedgerClient } from '../src/adapters/ledger/ledger-client';
import { HEALTH_POLL, healthPollDelayMs } from '../src/domain/health-poll';
import type { ServeSpec } from '../src/domain/types';

const SERVE = { name: 'quick', bind: '127.0.0.1', port: 1, api: 'openai', startTimeoutS: 600 } as unknown as ServeSpec;

/** The installed worker's activities: a container that runs, a serve healthy `readyAfterMs` after the first probe; each probe's time noted. */
function installed(readyAfterMs: number, probedAt: number[]) {
  const no = () => Promise.reject(new Error('not used here'));
  const runtime: ContainerRuntime = {
    ensureRunning: no,
    hasImage: no,
    inspect: () => Promise.resolve({ running: true } as ContainerState),
    stop: no,
    remove: no,
    list: () => Promise.resolve([]),
    logsTail: () => Promise.resolve(''),
  };
  const probe: ServeProbe = {
    health: () => {
      probedAt.push(Date.now());
      return Promise.resolve(Date.now() - (probedAt[0] ?? 0) >= readyAfterMs ? { ok: true } : { ok: false, error: 'ECONNREFUSED' });
    },
    modelIds: no,
    requestsRunning: () => Promise.resolve(null),
  };
  return createActivities({
    runtime,
    probe,
    manifest: { read: no },
    ledger: new LedgerClient({} as Client),
    operations: { status: no, runningPast: no, cancel: no },
  });
}

function gaps(at: number[]): number[] {
  return at.slice(1).map((t, i) => t - (at[i] ?? t));
}

describe("an installed worker's /health wait", () => {
  test('a serve healthy 300 ms after its first probe is noticed within the fast poll, not a second later', async (t) => {
    const probedAt: number[] = [];
    const env = new MockActivityEnvironment();
    const r = await env.run<[], HealthResult, () => Promise<HealthResult>>(() =>
      installed(300, probedAt).waitHealthy({ node: 'n', serve: SERVE, deadlineEpochMs: Date.now() + 60_000 }),
    );
    const late = (probedAt.at(-1) ?? 0) - (probedAt[0] ?? 0) - 300;
    assert.ok(
      r.waitedMs < 300 + HEALTH_POLL.fastMs + 150,
      `healthy 300 ms after the first probe, noticed after ${r.waitedMs} ms (${late} ms late); probes ${r.probes}, gaps ${gaps(probedAt).join(', ')} ms`,
    );
    assert.ok(r.probes >= 2, `probes ${r.probes}`);
    t.diagnostic(`noticed after ${r.waitedMs} ms (${late} ms late); probes ${r.probes}, gaps ${gaps(probedAt).join(', ')} ms`);
  });

  test('a retried wait whose first attempt began 31 s ago polls at the slow interval', async () => {
    const probedAt: number[] = [];
    const env = new MockActivityEnvironment({ attempt: 2, heartbeatDetails: { startedAtEpochMs: Date.now() - 31_000, probes: 90 } });
    const r = await env.run<[], HealthResult, () => Promise<HealthResult>>(() =>
      installed(1500, probedAt).waitHealthy({ node: 'n', serve: SERVE, deadlineEpochMs: Date.now() + 60_000 }),
    );
    const g = gaps(probedAt);
    assert.equal(r.probes, 90 + probedAt.length);
    assert.ok(
      g.every((ms) => ms >= HEALTH_POLL.slowMs - 50),
      `gaps ${g.join(', ')} ms`,
    );
  });

  test('the wait: a configured interval as given, 250 ms then 1 s, never past the deadline', () => {
    assert.deepEqual(
      [healthPollDelayMs(0, 60_000), healthPollDelayMs(29_999, 60_000), healthPollDelayMs(30_000, 60_000), healthPollDelayMs(0, 100), healthPollDelayMs(0, -5)],
      [250, 250, 1000, 100, 0],
    );
    assert.deepEqual([healthPollDelayMs(40_000, 60_000, 20), healthPollDelayMs(0, 10, 20)], [20, 10]);
  });
});
