// A lease's bounds and arithmetic, the manifest's idle_ttl_s, the API's lease_s and trigger, and a
// lease workflow started with bad input: each refused with the field and the rule, nothing started.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { Client } from '@temporalio/client';
import { buildApi, leaseFor } from '../src/client/api';
import { parseManifest } from '../src/config/manifest';
import { formatIssue } from '../src/domain/types';
import { expiresAt, extensionProblem, formatDuration, leaseText, newClock, parseDuration, withUse } from '../src/domain/lease';
import { operationInputProblems } from '../src/domain/inputs';
import { inFluxBy, leaseHold, leaseInputProblems, leaseStands, leaseRequestProblem, renewalProblems } from '../src/domain/lease';
import { heldLeases } from '../src/client/ledger-view';
import { emptyLedger } from '../src/domain/ledger';
import type { LeaseView } from '../src/domain/lease';
import type { LedgerState, Reservation } from '../src/domain/ledger';
import { taskQueueFor } from '../src/shared/messages';
import { renderManifest, uniqueNode } from './support/box';
import { testTemporal } from './support/temporal';
import type { TestTemporal } from './support/temporal';
import { gpures, show } from './support/cli';
import { releaseNote, untilEpochMs } from '../src/cli/commands/serves-lease';

const GPU = { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 };

describe('what an expiring lease finds of its serve', () => {
  const GPU = { role: 'g', uuid: 'GPU-1', capacityMib: 32000, reserveMib: 0 };
  const L = 'acquire/n/coder/run-l';
  const held = (r: Partial<Reservation>): LedgerState => ({
    ...emptyLedger('n', GPU),
    reservations: [{ serve: 'coder', vramMib: 8192, class: 'on-demand', phase: 'running', holder: L, ...r }],
  });

  test('its own and running: ours; taken by a bring-down from it, or its own being evicted: in flux; anything else: gone', () => {
    assert.deepEqual(leaseHold(held({}), 'coder', L), { hold: 'ours' });
    const taken = leaseHold(
      held({ phase: 'stopping', holder: 'serves-down/n/coder/run-d', takenFrom: { phase: 'running', holder: L, vramMib: 8192 } }),
      'coder',
      L,
    );
    assert.deepEqual(taken, {
      hold: 'in-flux',
      why: `coder is being stopped by serves-down/n/coder/run-d, which took it from ${L} (a bring-down that lets go gives it back)`,
      by: 'serves-down/n/coder/run-d',
    });
    const evicting = leaseHold(held({ phase: 'evicting', evictedFor: 'big', evictedBy: 'acquire/n/big/run-b' }), 'coder', L);
    assert.deepEqual(evicting, {
      hold: 'in-flux',
      why: 'coder is being evicted for big by acquire/n/big/run-b (an eviction that fails gives it back)',
      by: 'acquire/n/big/run-b',
    });
    assert.deepEqual(leaseHold(emptyLedger('n', GPU), 'coder', L), { hold: 'gone' });
    assert.deepEqual(leaseHold(held({ holder: 'serves-up/n/coder/run-u' }), 'coder', L), { hold: 'gone', phase: 'running', heldBy: 'serves-up/n/coder/run-u' });
    // A bring-down that took it from someone else, and an eviction that finished: not the lease's to wait for.
    assert.equal(
      leaseHold(held({ phase: 'stopping', holder: 'serves-down/n/coder/run-d', takenFrom: { phase: 'running', holder: 'x/y', vramMib: 8192 } }), 'coder', L)
        .hold,
      'gone',
    );
    assert.equal(leaseHold(held({ phase: 'evicted', evictedFor: 'big' }), 'coder', L).hold, 'gone');
    assert.equal(leaseHold(held({ phase: 'sleeping', evictedFor: 'big' }), 'coder', L).hold, 'gone');
  });

  test('a lease stands (shown, extended, released) exactly where it will act: expiring, or its serve ours or in flux', () => {
    const view = (state: LeaseView['state'] = 'running'): LeaseView => ({ serve: 'coder', kind: 'fixed', holder: L, expiresAtEpochMs: 0, state });
    const takenByDown = held({ phase: 'stopping', holder: 'serves-down/n/coder/run-d', takenFrom: { phase: 'running', holder: L, vramMib: 8192 } });
    const stands = [held({}), takenByDown, held({ phase: 'evicting', evictedFor: 'big', evictedBy: 'acquire/n/big/run-b' })];
    // Evicted and asleep keep the lease's holder in the ledger, yet a restore readmits them under its own: the lease ends without acting.
    const fallen = [
      emptyLedger('n', GPU),
      held({ holder: 'serves-up/n/coder/run-u' }),
      held({ phase: 'evicted', evictedFor: 'big' }),
      held({ phase: 'sleeping', evictedFor: 'big' }),
    ];
    assert.deepEqual(
      stands.map((l) => leaseStands(view(), l)),
      [true, true, true],
    );
    assert.deepEqual(
      fallen.map((l) => leaseStands(view(), l)),
      [false, false, false, false],
    );
    assert.ok(
      fallen.every((l) => leaseStands(view('expiring'), l)),
      'an expiring lease stands whatever the ledger says: it is bringing the serve down',
    );
  });
});

describe('the leases a ledger shows', () => {
  const GPU = { role: 'g', uuid: 'GPU-1', capacityMib: 32000, reserveMib: 0 };
  const L = 'acquire/n/coder/run-l';
  const held = (r: Partial<Reservation>, over: Partial<LedgerState> = {}): LedgerState => ({
    ...emptyLedger('n', GPU),
    reservations: [{ serve: 'coder', vramMib: 8192, class: 'on-demand', phase: 'running', holder: L, ...r }],
    ...over,
  });
  const leases = new Map<string, LeaseView>([['coder', { serve: 'coder', kind: 'fixed', holder: L, expiresAtEpochMs: 120_000, state: 'running' }]]);
  const shown = (l: LedgerState) => heldLeases([l], leases, 0).get('coder')?.text;

  test('its time left while its acquisition holds the serve; while another run has it, that the lease acts only if it is given back; none once it fell', () => {
    assert.equal(shown(held({})), 'lease: 2m left');
    const takenByDown = held({ phase: 'stopping', holder: 'serves-down/n/coder/run-d', takenFrom: { phase: 'running', holder: L, vramMib: 8192 } });
    assert.equal(shown(takenByDown), 'lease: 2m left; serves-down/n/coder/run-d has coder now: the lease acts only if it gives coder back');
    const evicting = held({ phase: 'evicting', evictedFor: 'big', evictedBy: 'acquire/n/big/run-b' });
    assert.equal(shown(evicting), 'lease: 2m left; acquire/n/big/run-b has coder now: the lease acts only if it gives coder back');
    // Expired and waiting on that run: not 'bringing coder down', which it may not do.
    const expiring = new Map<string, LeaseView>([['coder', { ...(leases.get('coder') as LeaseView), state: 'expiring' }]]);
    assert.equal(
      heldLeases([takenByDown], expiring, 0).get('coder')?.text,
      'lease: expired, waiting for serves-down/n/coder/run-d, which has coder now: it brings coder down only if that run gives it back',
    );
    assert.equal(shown(held({ holder: 'serves-up/n/coder/run-u' })), undefined);
    assert.equal(inFluxBy(leases.get('coder') as LeaseView, held({})), undefined);
    // `serves release` says the same once the lease took it.
    assert.equal(
      releaseNote('coder', 'serves-down/n/coder/run-d'),
      'serves release coder: the lease expires now; it waits for serves-down/n/coder/run-d, which has coder now, and brings coder down and restores what it evicted only if that run gives coder back',
    );
    assert.equal(releaseNote('coder', undefined), 'serves release coder: the lease expires now; bringing coder down and restoring what it evicted');
  });

  test('a ledger still reconciling is not judged: its lease is shown as it says', () => {
    assert.equal(shown(held({ holder: 'serves-up/n/coder/run-u' }, { reconciling: true })), 'lease: 2m left');
  });
});

describe('lease arithmetic', () => {
  test('durations: 90s, 30m, 2h, 1h30m, plain seconds; printed as the two largest units', () => {
    assert.deepEqual(['90s', '30m', '2h', '1h30m', '1d', '45', '2h0m5s'].map(parseDuration), [90, 1800, 7200, 5400, 86_400, 45, 7205]);
    for (const bad of ['', '2x', 'h', '1.5h', '-3s', '2h 3m']) assert.equal(parseDuration(bad), undefined, bad);
    assert.deepEqual([7_140_000, 252_000, 45_000, 0, 183_600_000, 604_800_000].map(formatDuration), ['1h59m', '4m12s', '45s', '0s', '2d3h', '7d']);
  });

  test('a long duration reads as its largest unit and the next, never skipping a zero one (`--until 2030-01-01`)', () => {
    const d1122h0m38 = (1122 * 86_400 + 38 * 60) * 1000;
    assert.deepEqual([d1122h0m38, 7_205_000, 86_400_000 + 59_000, 3_660_000].map(formatDuration), ['1122d', '2h', '1d', '1h1m']);
  });

  test('an idle lease moves with use seen at the router, and counts from its start when none is reported', () => {
    const c = newClock(300, 1_000_000);
    assert.equal(expiresAt('idle', 300, c), 1_300_000);
    assert.equal(expiresAt('idle', 300, withUse(c, { inFlight: 0, lastUsedAtEpochMs: null }, 1_300_000)), 1_300_000);
    assert.equal(expiresAt('idle', 300, withUse(c, { inFlight: 0 }, 1_300_000)), 1_300_000);
    assert.equal(expiresAt('idle', 300, withUse(c, { inFlight: 0, lastUsedAtEpochMs: 1_200_000 }, 1_300_000)), 1_500_000);
    // A use from before the lease (the acquisition's own probes) does not shorten it.
    assert.equal(expiresAt('idle', 300, withUse(c, { inFlight: 0, lastUsedAtEpochMs: 900_000 }, 1_300_000)), 1_300_000);
    // A request still in flight is use now, however long ago it began.
    assert.equal(expiresAt('idle', 300, withUse(c, { inFlight: 1, lastUsedAtEpochMs: 1_000_500 }, 1_300_000)), 1_600_000);
    assert.equal(expiresAt('fixed', 300, withUse(c, { inFlight: 1 }, 1_300_000)), 1_300_000);
  });

  test('serves extend NAME -5m says that an extension does not shorten a lease, before any Temporal; an unknown option is still one', async () => {
    // No Temporal at this address: a refusal that reached for it would be exit 4, not 2.
    const env = { TEMPORAL_ADDRESS: '127.0.0.1:9' };
    const negative = await gpures(['serves', 'extend', 'vision', '-5m'], env);
    assert.equal(negative.code, 2, show(negative));
    assert.equal(negative.stderr, "DURATION: an extension does not shorten a lease (`serves release` ends it now; got '-5m')\n");
    for (const args of [['--bogus'], ['--until', '2030-01-01T00:00:00Z', '--bogus']]) {
      const unknown = await gpures(['serves', 'extend', 'vision', ...args], env);
      assert.equal(unknown.code, 2, show(unknown));
      assert.equal(unknown.stderr, "error: unknown option '--bogus'\n");
    }
  });

  test('serves extend --until takes a time with its zone, after now and within 7 days, refused by the flag before any Temporal', async () => {
    const now = Date.parse('2026-12-04T12:00:00Z');
    assert.equal(untilEpochMs('2026-12-04T18:00:00Z', now), Date.parse('2026-12-04T18:00:00Z'));
    assert.equal(untilEpochMs('2026-12-04T19:00+01:00', now), Date.parse('2026-12-04T18:00:00Z'));
    const refusal = (text: string) => {
      try {
        untilEpochMs(text, now);
      } catch (err) {
        return (err as Error).message;
      }
      return 'taken';
    };
    // Date.parse alone took '3' as 2001-03-01, 'Dec 25' as 2001-12-25, and rolled February 30 over to March 2.
    for (const bad of ['3', 'Dec 25', '2026-02-30T00:00:00Z', '2026-12-05', '2026-12-05T10:00:00']) {
      assert.equal(refusal(bad), `--until: a time with its zone, such as 2026-12-01T18:00:00Z or 2026-12-01T19:00+01:00 (got '${bad}')`);
    }
    assert.equal(refusal('2020-01-01T00:00:00Z'), "--until: 2020-01-01T00:00:00.000Z is not after now, 2026-12-04T12:00:00.000Z (got '2020-01-01T00:00:00Z')");
    assert.equal(refusal('2026-12-11T12:00:01Z'), "--until: 1s past the 7d a lease reaches at most, counted from now (got '2026-12-11T12:00:01Z')");
    assert.equal(refusal('2026-12-11T12:00:00.5Z'), "--until: 1s past the 7d a lease reaches at most, counted from now (got '2026-12-11T12:00:00.5Z')");
    assert.equal(refusal('2026-12-11T12:06:51Z'), "--until: 6m51s past the 7d a lease reaches at most, counted from now (got '2026-12-11T12:06:51Z')");
    assert.equal(refusal('2026-12-11T13:00:00Z'), "--until: 7d1h from now, 1h past the 7d a lease reaches at most (got '2026-12-11T13:00:00Z')");
    // Two units that follow each other: this read '1123d12h' before, but 1122 days and 38 minutes read '1122d38m'.
    assert.equal(refusal('2030-01-01T00:00:00Z'), "--until: 1123d12h from now, 1116d12h past the 7d a lease reaches at most (got '2030-01-01T00:00:00Z')");
    // As typed, with no Temporal at this address: a refusal that reached for it would be exit 4, not 2.
    for (const bad of ['3', '2020-01-01T00:00:00Z']) {
      const r = await gpures(['serves', 'extend', 'vision', '--until', bad], { TEMPORAL_ADDRESS: '127.0.0.1:9' });
      assert.equal(r.code, 2, show(r));
      assert.match(r.stderr, new RegExp(`^--until: .*\\(got '${bad}'\\)\\n$`));
    }
  });

  test('extensions are bounded: one of by or to, within 7 days of now', () => {
    const now = 1_000_000;
    assert.equal(extensionProblem({ byS: 3600 }, now + 60_000, now), undefined);
    assert.equal(extensionProblem({ toEpochMs: now + 60_000 }, now, now), undefined);
    assert.match(extensionProblem({}, now, now) ?? '', /exactly one of byS/);
    assert.match(extensionProblem({ byS: 1, toEpochMs: now + 1 }, now, now) ?? '', /exactly one of byS/);
    assert.match(extensionProblem({ byS: 0 }, now, now) ?? '', /^byS: must be a whole number of seconds in 1\.\.604800/);
    assert.match(extensionProblem({ toEpochMs: now - 1 }, now, now) ?? '', /^toEpochMs: must be a time after now/);
    assert.match(extensionProblem({ toEpochMs: now + 30_000 }, now + 60_000, now) ?? '', /before the lease's current expiry .*does not shorten a lease/);
    assert.match(extensionProblem({ byS: 604_800 }, now + 1000, now) ?? '', /would be 1s past the 7d a lease reaches at most, counted from now$/);
    assert.equal(
      leaseText({ serve: 'x', kind: 'idle', holder: 'h', expiresAtEpochMs: now + 252_000, idleTtlS: 300, state: 'running' }, now),
      'idle lease: 4m12s left (ttl 5m)',
    );
    // Extended past its last use + ttl: the time left is a floor, and idleness ends it only after.
    assert.equal(
      leaseText(
        { serve: 'x', kind: 'idle', holder: 'h', expiresAtEpochMs: now + 1_858_000, idleTtlS: 60, lastUseSeenEpochMs: now - 2_000, state: 'running' },
        now,
      ),
      'idle lease: up for at least 30m58s (extended), then down at the first moment after that with no routed request in the last 1m',
    );
    assert.equal(
      leaseText(
        { serve: 'x', kind: 'idle', holder: 'h', expiresAtEpochMs: now + 58_000, idleTtlS: 60, lastUseSeenEpochMs: now - 2_000, state: 'running' },
        now,
      ),
      'idle lease: 58s left (ttl 1m)',
    );
  });

  test('a renewal is checked as a start is: holder, kind, seconds within their bound; a carried clock is epoch milliseconds', () => {
    assert.deepEqual(renewalProblems({ holder: 'acq/run', kind: 'fixed', seconds: 600 }), []);
    assert.deepEqual(renewalProblems({ kind: 'fixed', seconds: 1e12 }), [
      'holder: the acquisition run (<workflow id>/<run id>) that holds the serve',
      'seconds: must be a whole number of seconds in 1..604800 (got 1000000000000)',
    ]);
    assert.match(renewalProblems(undefined)[0] ?? '', /^the renewal must be one JSON object/);
    const start = { serve: 'sd', holder: 'acq/run', kind: 'fixed', seconds: 600 };
    assert.deepEqual(leaseInputProblems({ ...start, clock: newClock(600, 1_000_000) }), []);
    assert.match(
      leaseInputProblems({ ...start, clock: { startedAtEpochMs: 1, notBeforeEpochMs: 'soon' } })[0] ?? '',
      /^clock: \{ startedAtEpochMs, notBeforeEpochMs, lastUseSeenEpochMs \}/,
    );
    assert.deepEqual(leaseInputProblems({ ...start, renewal: true, clock: newClock(600, 1_000_000) }), []);
    assert.deepEqual(leaseInputProblems({ ...start, renewal: 'yes' }), ['renewal: true, or not given (got "yes")']);
  });

  test("an expiring lease's continuation is checked field by field: its bound, and what it carries", () => {
    const start = { serve: 'sd', holder: 'acq/run', kind: 'fixed', seconds: 600, clock: newClock(600, 1_000_000) };
    const expiring = { released: false, failures: 2, downUnderWay: true, waits: { sinceEpochMs: 1_000_000, nextMs: 20_000 } };
    const renewal = { holder: 'acq2/run', kind: 'idle', seconds: 300 };
    assert.deepEqual(leaseInputProblems({ ...start, maxHistoryEvents: 30, expiring: { ...expiring, renewal, renewalAtLeastUntilEpochMs: 2_000_000 } }), []);
    assert.deepEqual(leaseInputProblems({ ...start, maxHistoryEvents: 5 }), ['maxHistoryEvents: a whole number of events in 20..2000, or not given (got 5)']);
    assert.deepEqual(
      leaseInputProblems({
        ...start,
        expiring: { ...expiring, failures: -1, waits: { sinceEpochMs: 1, nextMs: 1e9 }, renewal: { kind: 'fixed', seconds: 1 }, why: 1 },
      }),
      [
        'expiring.failures: a whole number in 0..100 (got -1)',
        'expiring.waits: { sinceEpochMs, nextMs }, epoch ms and a wait of at most an hour',
        'expiring.renewal: holder: the acquisition run (<workflow id>/<run id>) that holds the serve',
        'expiring.why: unknown field (known: released, failures, downUnderWay, waits, renewal, renewalAtLeastUntilEpochMs)',
      ],
    );
    assert.match(leaseInputProblems({ ...start, expiring: 'yes' })[0] ?? '', /^expiring: \{ released, failures, downUnderWay/);
  });

  test("an acquisition's lease input is checked like its other fields", () => {
    const spec = { other: { lease: leaseRequestProblem } };
    assert.deepEqual(operationInputProblems({ serve: 'sd', lease: { kind: 'fixed', seconds: 7200 } }, spec), []);
    assert.deepEqual(operationInputProblems({ serve: 'sd', lease: { kind: 'idle' } }, spec), []);
    for (const lease of [{ kind: 'fixed', seconds: 0 }, { kind: 'fixed' }, { kind: 'idle', seconds: 5 }, 'idle', { kind: 'fixed', seconds: 1e300 }]) {
      const [problem] = operationInputProblems({ serve: 'sd', lease }, spec);
      assert.match(problem ?? '', /^lease: \{ "kind": "fixed", "seconds": 1\.\.604800 \} or \{ "kind": "idle" \} \(got /, JSON.stringify(lease));
    }
  });
});

describe('idle_ttl_s in the manifest', () => {
  const manifest = (extra: string, tier = true) =>
    renderManifest('n1', [GPU], [{ name: 'coder', vram_mib: 8192, class: 'on-demand', ...(tier ? { router_tier: 'coder-local' } : {}) }]).replace(
      'stop_timeout_s = 5',
      `stop_timeout_s = 5\n${extra}`,
    );

  test('on a routed serve it is the ServeSpec idleTtlS', () => {
    const r = parseManifest(manifest('idle_ttl_s = 300'), 'serves.toml');
    assert.ok(r.ok, r.ok ? '' : r.errors.map(formatIssue).join('\n'));
    assert.equal(r.manifest.serves[0]?.idleTtlS, 300);
  });

  test('bounded, and only behind a router tier, each error naming the file and field', () => {
    for (const [text, tier, want] of [
      ['idle_ttl_s = 0', true, /^serves\.toml: serve 'coder' \(serves\[0\]\.idle_ttl_s\): must be a whole number of seconds in 1\.\.86400/],
      ['idle_ttl_s = 86401', true, /1\.\.86400/],
      ['idle_ttl_s = "5m"', true, /1\.\.86400/],
      [
        'idle_ttl_s = 300',
        false,
        /^serves\.toml: serve 'coder' \(serves\[0\]\.idle_ttl_s\): needs a router_tier: .*the router sees no request of a serve it does not route/,
      ],
    ] as const) {
      const r = parseManifest(manifest(text, tier), 'serves.toml');
      assert.equal(r.ok, false, text);
      if (!r.ok) assert.match(r.errors.map(formatIssue).join('\n'), want, text);
    }
  });
});

describe('lease_s and trigger in the acquisition API', () => {
  const file = resolve(__dirname, '..', '..', 'examples', 'primary-node', 'serves.toml');
  const parsed = parseManifest(readFileSync(file, 'utf8'), file);
  assert.ok(parsed.ok);
  const TOKEN = 'lease-test-token-0123456789abcdef-0123456789';
  const auth = { authorization: `Bearer ${TOKEN}` };
  const client = new Client();
  const api = buildApi({ client, manifest: parsed.manifest, manifestFile: file, token: TOKEN });
  after(async () => {
    await api.close();
    await client.connection.close();
  });

  test('lease_s is bounded like the CLI --lease, refused before Temporal', async () => {
    for (const lease_s of [0, 604_801, 1.5, '2h']) {
      const r = await api.inject({ method: 'POST', url: '/v1/acquisitions', headers: auth, payload: { serve: 'comfyui-sim', lease_s } });
      assert.equal(r.statusCode, 400);
      assert.match(r.json<{ error: { message: string } }>().error.message, /^lease_s: must be a whole number of seconds in 1\.\.604800 \(got /);
    }
  });

  test("trigger 'router' without lease_s is an idle lease when the serve declares idle_ttl_s; lease_s is fixed", () => {
    const coder = { ...parsed.manifest.serves[0]!, idleTtlS: 300 };
    const plain = { ...parsed.manifest.serves[0]! };
    assert.deepEqual(leaseFor({ trigger: 'router' }, coder), { kind: 'idle' });
    assert.equal(leaseFor({ trigger: 'router' }, plain), undefined);
    assert.equal(leaseFor({ trigger: 'operator' }, coder), undefined);
    assert.deepEqual(leaseFor({ trigger: 'router', lease_s: 600 }, coder), { kind: 'fixed', seconds: 600 });
  });
});

describe('the lease workflow refuses bad input at once', () => {
  let temporal: TestTemporal;
  const node = uniqueNode('lease-input');
  before(async () => {
    temporal = await testTemporal();
  });
  after(async () => {
    await temporal?.close();
  });

  test('an out-of-bounds lease from the UI start form fails InvalidInput, naming each field', async () => {
    const { Worker } = await import('@temporalio/worker');
    const { workflowBundle } = await import('./support/temporal');
    const { UNCOUNTED_SINKS } = await import('../src/worker/workflow-code');
    const worker = await Worker.create({
      connection: temporal.nativeConnection,
      taskQueue: taskQueueFor(node),
      sinks: UNCOUNTED_SINKS,
      workflowBundle: await workflowBundle(),
    });
    await worker.runUntil(async () => {
      const handle = await temporal.client.workflow.start('leaseWorkflow', {
        taskQueue: taskQueueFor(node),
        workflowId: `lease/${node}/x`,
        args: [{ serve: 'x', holder: '', kind: 'idle', seconds: 90_000, ttl: 3 }],
      });
      await assert.rejects(handle.result(), (err: { cause?: { type?: string; message?: string } }) => {
        assert.equal(err.cause?.type, 'InvalidInput');
        assert.match(err.cause?.message ?? '', /holder: .*; seconds: must be a whole number of seconds in 1\.\.86400 \(got 90000\); ttl: unknown field/);
        return true;
      });
    });
  });
});
