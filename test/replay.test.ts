// Recorded histories (test/histories/*.json, made by `npm run record-histories`) replayed against
// the current workflow code with the SDK's replayer: no server, no Docker. A change to a workflow
// that running workflows could not replay fails here, before it is deployed. And the proof that
// the check bites: an incompatible variant of bringUpWorkflow fails replay, the same change
// behind patched() passes.
import { before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import { DeterminismViolationError } from '@temporalio/workflow';
import { historyIdentity } from '../src/audit/events';
import { historyProto, readHistoryFile } from '../src/audit/history';
import { formatReplayOutcome, replayHistoryFiles } from '../src/audit/replay';
import type { ReplayOutcome } from '../src/audit/replay';
import { firstDifference } from '../src/audit/update-answers';
import { buildReport } from '../src/audit/report';
import { historyTexts } from './support/history-scan';
import { ROUTER_TOKEN as PROMOTION_ROUTER_TOKEN } from './support/router';
import { ROUTER_TOKEN as SIM_ROUTER_TOKEN } from './support/sim';

// dist/test/replay.test.js -> <repo>/test/histories
const HISTORIES = join(__dirname, '..', '..', 'test', 'histories');
const files = readdirSync(HISTORIES)
  .filter((n) => n.endsWith('.json'))
  .sort();

/** Each kind the recording script produces, and the workflow type it must be. */
const KINDS: Record<string, string> = {
  'bring-up': 'bringUpWorkflow',
  denial: 'bringUpWorkflow',
  eviction: 'acquireWorkflow',
  'drain-timeout': 'acquireWorkflow',
  restore: 'bringDownWorkflow',
  'restore-child-bring-up': 'bringUpWorkflow',
  ledger: 'ledgerWorkflow',
  'promote-success': 'promoteWorkflow',
  'promote-rollback': 'promoteWorkflow',
  'acquire-abandoned': 'acquireWorkflow',
  'acquire-abandon-refused-joined': 'acquireWorkflow',
};

Runtime.install({
  logger: new DefaultLogger('ERROR', () => undefined),
  telemetryOptions: { logging: { filter: { core: 'ERROR', other: 'ERROR' }, forward: {} } },
});

describe('recorded histories replay against the current workflow code', () => {
  let outcomes: ReplayOutcome[] = [];

  before(async () => {
    outcomes = await replayHistoryFiles([HISTORIES]);
  });

  test('every workflow kind is recorded', () => {
    for (const [kind, type] of Object.entries(KINDS)) {
      assert.ok(files.includes(`${kind}.json`), `test/histories/${kind}.json is missing: npm run record-histories`);
      assert.equal(historyIdentity(readHistoryFile(join(HISTORIES, `${kind}.json`))).workflowType, type, kind);
    }
  });

  for (const name of files) {
    test(`replay ${name}`, () => {
      const o = outcomes.find((x) => x.file.endsWith(`/${name}`));
      assert.ok(o, `no replay outcome for ${name}`);
      assert.ok(o.ok, formatReplayOutcome(o));
      assert.ok(o.events > 0);
    });
  }

  test("no recorded history carries a token (the sim router's, or the promoted router's admin token)", () => {
    for (const name of files) {
      const texts = historyTexts(readHistoryFile(join(HISTORIES, name)));
      assert.ok(texts.length > 0);
      for (const token of [SIM_ROUTER_TOKEN, PROMOTION_ROUTER_TOKEN]) assert.ok(!texts.some((s) => s.includes(token)), `${name} contains a token`);
    }
  });

  test('each recorded history is the outcome its name says', () => {
    const report = (kind: string) => buildReport(readHistoryFile(join(HISTORIES, `${kind}.json`)));
    assert.equal(report('bring-up').workflow.status, 'completed');
    assert.equal(report('denial').outcome.failureType, 'AdmissionDenied');
    assert.equal(report('eviction').eviction?.victims[0]?.serve, 'vision');
    assert.equal(report('drain-timeout').outcome.failureType, 'DrainTimeout');
    assert.equal(report('restore').restored[0]?.ok, true);
    assert.equal(report('restore-child-bring-up').workflow.parent, report('restore').workflow.workflowId);
    assert.equal(report('promote-success').promotion?.outcome, 'promoted');
    assert.equal(report('promote-rollback').promotion?.outcome, 'failed, rolled back');
    // The router's abandon, taken (the drain cancelled, vision's tier readmitted, the eviction
    // aborted) and refused (an operator's serves up joined first): its Update and scope's commands.
    const abandoned = report('acquire-abandoned');
    assert.equal(abandoned.outcome.failureType, 'Abandoned');
    assert.match(abandoned.outcome.message, /abandoned at drain vision: .*compensated: readmit tier vision-local, abort eviction/);
    assert.deepEqual(
      abandoned.updates.map((u) => u.name),
      ['abandon'],
    );
    const refused = report('acquire-abandon-refused-joined');
    assert.equal(refused.workflow.status, 'completed');
    assert.deepEqual(
      refused.updates.map((u) => u.name),
      ['joinedAnswered', 'abandon'],
    );
    assert.match(JSON.stringify(refused.updates[1]?.result), /"abandoned":false.*`gpures serves up` joined it/);
  });
});

describe('versioning: an incompatible change fails replay, the same change behind patched() passes', () => {
  const recorded = () => readHistoryFile(join(HISTORIES, 'bring-up.json'));

  test('a new first activity, unpatched: DeterminismViolationError naming the activity', async () => {
    const h = recorded();
    await assert.rejects(
      Worker.runReplayHistory(
        { workflowsPath: require.resolve('./fixtures/bring-up-extra-step'), replayName: 'unpatched' },
        historyProto(h),
        historyIdentity(h).workflowId,
      ),
      (err: unknown) => {
        assert.ok(err instanceof DeterminismViolationError, `expected DeterminismViolationError, got ${String(err)}`);
        assert.match(err.message, /readGpu|resolveServe/);
        return true;
      },
    );
  });

  test('the same activity behind patched(): the recorded history replays', async () => {
    const h = recorded();
    await Worker.runReplayHistory(
      { workflowsPath: require.resolve('./fixtures/bring-up-extra-step-patched'), replayName: 'patched' },
      historyProto(h),
      historyIdentity(h).workflowId,
    );
  });

  test('the replay command reports the unpatched variant as FAIL with the event, the patched one as ok', async () => {
    const bad = await replayHistoryFiles([join(HISTORIES, 'bring-up.json')], { workflowsPath: require.resolve('./fixtures/bring-up-extra-step') });
    assert.equal(bad[0]?.ok, false);
    assert.equal(bad[0]?.errorName, 'DeterminismViolationError');
    assert.ok(bad[0]);
    assert.match(
      formatReplayOutcome(bad[0]),
      /^FAIL serves-up\/primary-node\/vision: nondeterminism: .*\[at event \d+ ActivityTaskScheduled: activity resolveServe/,
    );
    const good = await replayHistoryFiles([join(HISTORIES, 'bring-up.json')], { workflowsPath: require.resolve('./fixtures/bring-up-extra-step-patched') });
    assert.ok(good[0]);
    assert.equal(good[0].ok, true, formatReplayOutcome(good[0]));
  });
});

describe("replay holds each Update's answer against the recorded one (core checks only commands)", () => {
  /** ledger.json with the recorded answer to vision's admission turned into a denial, in a file of its own. */
  function ledgerToldDenied(): { file: string; eventId: number } {
    const h = readHistoryFile(join(HISTORIES, 'ledger.json'));
    for (const e of h.events) {
      const done = e['workflowExecutionUpdateCompletedEventAttributes'] as
        { meta: { updateId: string }; outcome: { success?: { payloads: { data: string }[] } } } | undefined;
      const payload = done?.outcome.success?.payloads[0];
      if (!done || !payload || !/\/vision\/[^/]+\/admit$/.test(done.meta.updateId)) continue;
      const answer = JSON.parse(Buffer.from(payload.data, 'base64').toString('utf8')) as { decision: { decision: string } };
      if (answer.decision.decision !== 'admitted') continue;
      answer.decision.decision = 'denied';
      payload.data = Buffer.from(JSON.stringify(answer)).toString('base64');
      const file = join(mkdtempSync(join(tmpdir(), 'gpures-answers-')), 'ledger.json');
      writeFileSync(file, JSON.stringify(h));
      return { file, eventId: Number(e.eventId) };
    }
    throw new Error('ledger.json has no admission of vision');
  }

  test('an admit the code now answers otherwise than history recorded: FAIL at that Update, naming the field', async () => {
    const { file, eventId } = ledgerToldDenied();
    const [o] = await replayHistoryFiles([file]);
    assert.ok(o);
    assert.equal(o.ok, false);
    assert.equal(o.errorName, 'UpdateAnswerChanged');
    assert.deepEqual(o.event, { id: eventId, type: 'WorkflowExecutionUpdateCompleted' });
    assert.match(
      formatReplayOutcome(o),
      /^FAIL ledger\/primary-node\/dark-fast: UpdateAnswerChanged: Update admit serves-up\/primary-node\/vision\/.*\/admit \(event \d+\) answers differently on replay, at decision\.decision: recorded "denied", now "admitted"/,
    );
  });

  test('answers compared field by field: a field the recorded answer lacks is an addition, a changed or dropped one is not', () => {
    assert.equal(firstDifference({ decision: { decision: 'admitted' } }, { decision: { decision: 'admitted' }, ledger: { reservations: [] } }), undefined);
    assert.equal(firstDifference({ a: [1, 2] }, { a: [1, 2] }), undefined);
    assert.equal(firstDifference({ a: [1, 2] }, { a: [1] }), 'a: recorded [1,2], now [1]');
    assert.equal(firstDifference({ a: { b: 1 } }, { a: {} }), 'a.b: recorded 1, now nothing');
    assert.equal(firstDifference({ a: [{ b: 'x' }] }, { a: [{ b: 'y' }] }), 'a[0].b: recorded "x", now "y"');
    assert.equal(firstDifference(undefined, undefined), undefined);
    // A handler that answered nothing when recorded, and answers now: an addition too.
    assert.equal(firstDifference(undefined, { ok: true }), undefined);
    assert.equal(firstDifference({ ok: true }, undefined), 'the answer: recorded {"ok":true}, now nothing');
  });
});
