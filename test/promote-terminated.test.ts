// A promotion terminated mid-verify (the UI's Terminate, a run timeout) runs no rollback: its
// candidate stays live, never verified. The next promotion backed that up as "the config before"
// and, failing, rolled back to it: the last verified config was only in the terminated run's
// backup. Now the journal says which writes were verified and the next promotion refuses at
// resolve, naming the run and its backup; promoting that backup is the way back. Real dev
// server, real dockerd, gpures/fake-router:test; the box is sampled.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RouterTarget } from '../src/adapters/router-deployment/port';
import { journalPath } from '../src/adapters/router-deployment/port';
import { followPromotion, startPromotion } from '../src/client/promote';
import { promotionStepsQuery } from '../src/shared/promotion';
import { backupsIn, healthz, promotionBox, ROUTER_IMAGE, routerConfig } from './support/router';
import { Worker } from '@temporalio/worker';
import { UNCOUNTED_SINKS } from '../src/worker/workflow-code';
import { workflowBundle } from './support/temporal';
import { waitUntil } from './support/wait';

describe('router promotion after a promotion terminated mid-verify', () => {
  const promo = promotionBox('promterm', ['term', 'back']);
  const { d, node } = promo;
  const target = (name: string) => promo.target(name);

  const mappingOf = (text: string) => /mapping_version = "([^"]*)"/.exec(text)?.[1];

  /** What a promotion could have changed on the box: the live file, the router's answer and its container, the backups, the journal. */
  const box = async (t: RouterTarget) => {
    const c = await d.getContainer(t.container).inspect();
    return {
      live: readFileSync(t.configPath, 'utf8'),
      serves: (await healthz(t.url)).mappingVersion,
      container: { id: c.Id, startedAt: c.State.StartedAt, restartCount: c.RestartCount },
      backups: backupsIn(t.configPath),
      journal: readFileSync(journalPath(t.configPath), 'utf8'),
    };
  };

  let p1Run = '';
  let p2Run = '';
  let p1Backup = '';

  test("the next promotion does not take the terminated run's unverified candidate for the config to roll back to", async () => {
    const t = target('term');
    const p1 = await startPromotion(promo.temporal.client, node, {
      router: 'term',
      config: { content: routerConfig('term-v2', ['', '# fake-router: report_mapping_version = "stale"']) },
      image: ROUTER_IMAGE,
    });
    await waitUntil('P1 at verify', async () => (await p1.query(promotionStepsQuery)).current === 'verify', 30_000, 50);
    await p1.terminate('operator: stop this promotion');
    p1Run = p1.firstExecutionRunId;
    const before = await box(t);
    assert.equal(before.backups.length, 1, 'P1 made one backup');
    p1Backup = join(t.configPath, '..', before.backups[0] ?? '?');
    console.log(
      `  P1 terminated at verify; live file mapping: ${mappingOf(before.live)}; router serves: ${before.serves}; backups: ${before.backups.join(', ')}`,
    );
    assert.equal(mappingOf(before.live), 'term-v2', "P1's candidate is live");
    assert.equal(mappingOf(readFileSync(p1Backup, 'utf8')), 'term-v1', "P1's backup holds the last verified config");

    const p2 = await startPromotion(promo.temporal.client, node, {
      router: 'term',
      config: { content: routerConfig('term-v3', ['', '# fake-router: report_mapping_version = "stale3"']) },
      image: ROUTER_IMAGE,
    });
    p2Run = p2.firstExecutionRunId;
    const out = await followPromotion(p2, () => undefined, 200);
    const said = out.ok ? `ok: ${out.result.message}` : `${out.failureType}: ${out.message}`;
    const afterP2 = await box(t);
    console.log(`  P2: ${said}`);
    console.log(`  live file mapping: ${mappingOf(afterP2.live)}; router serves: ${afterP2.serves}`);
    // P1's candidate was never verified: P2 must not start from it as if it were the good config.
    // Refused before anything is changed, naming P1's run and its backup (the last verified
    // config), so the operator restores that or promotes it knowingly.
    assert.ok(!out.ok, said);
    assert.equal(out.failureType, 'LiveConfigConflict', said);
    assert.equal(out.details?.step, 'resolve', said);
    assert.ok(out.message.includes(`promote/${node}/term, run ${p1Run}`), `names P1's run: ${said}`);
    assert.ok(out.message.includes(p1Backup), `names P1's backup: ${said}`);
    assert.match(out.message, /put that back by hand .* or promote it .*; nothing was changed$/);
    // The box: nothing P2 could change has changed (no backup, no journal line, no reload, no recreate).
    assert.deepEqual(afterP2, before, 'P2 changed nothing on the box');
    assert.ok(!out.details?.steps.some((s) => s.step === 'validate'), 'refused before its validate run');

    // --validate-only backs nothing up: it is not refused, and changes nothing either.
    const look = await startPromotion(promo.temporal.client, node, {
      router: 'term',
      config: { content: routerConfig('term-v3') },
      image: ROUTER_IMAGE,
      validateOnly: true,
    });
    const looked = await followPromotion(look, () => undefined, 200);
    assert.ok(looked.ok && looked.result.outcome === 'validated', looked.ok ? looked.result.message : looked.message);
    assert.deepEqual(await box(t), before, 'the validate-only run changed nothing on the box');
  });

  test("the way back: promoting the terminated run's backup goes ahead and is verified; the promotion after it is not refused", async () => {
    const t = target('term');
    assert.ok(p1Backup, 'the first test ran');
    const p3 = await startPromotion(promo.temporal.client, node, { router: 'term', config: { content: readFileSync(p1Backup, 'utf8') }, image: ROUTER_IMAGE });
    const out3 = await followPromotion(p3, () => undefined, 200);
    assert.ok(out3.ok, out3.ok ? '' : `${out3.failureType}: ${out3.message}`);
    const afterP3 = await box(t);
    console.log(`  P3 (P1's backup): ${out3.result.message}; router serves: ${afterP3.serves}`);
    assert.equal(mappingOf(afterP3.live), 'term-v1');
    assert.equal(afterP3.serves, 'term-v1');
    const p3Ref = `${p3.workflowId}/${p3.firstExecutionRunId}`;
    const lines = afterP3.journal
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { op: string; phase?: string; run: string; verifies?: boolean });
    assert.deepEqual(
      lines.filter((e) => e.run === p3Ref).map((e) => `${e.op} ${e.phase}${e.verifies ? ' verifies' : ''}`),
      ['backup intent', 'backup done', 'write intent verifies', 'write done verifies', 'verified done'],
    );

    const p4 = await startPromotion(promo.temporal.client, node, { router: 'term', config: { content: routerConfig('term-v4') }, image: ROUTER_IMAGE });
    const out4 = await followPromotion(p4, () => undefined, 200);
    assert.ok(out4.ok, out4.ok ? '' : `${out4.failureType}: ${out4.message}`);
    const afterP4 = await box(t);
    console.log(`  P4: ${out4.result.message}; router serves: ${afterP4.serves}`);
    assert.equal(mappingOf(afterP4.live), 'term-v4');
    assert.equal(afterP4.serves, 'term-v4');

    // Each run's history (terminated mid-verify, refused, promoted with `verified`) replays against the bundle.
    const earlier = [p1Run, p2Run].map((r) => promo.temporal.client.workflow.getHandle(p3.workflowId, r));
    for (const h of [...earlier, p3, p4]) {
      await Worker.runReplayHistory({ workflowBundle: await workflowBundle(), sinks: UNCOUNTED_SINKS }, await h.fetchHistory(), h.workflowId);
    }
  });

  test('the way back that fails its verify and rolls back puts the unverified candidate live again: the next promotion is still refused', async () => {
    const t = target('back');
    // P1 terminated mid-verify: back-v2 (its router reports a stale mapping) is live, never verified.
    const p1 = await startPromotion(promo.temporal.client, node, {
      router: 'back',
      config: { content: routerConfig('back-v2', ['', '# fake-router: report_mapping_version = "stale"']) },
      image: ROUTER_IMAGE,
    });
    await waitUntil('P1 at verify', async () => (await p1.query(promotionStepsQuery)).current === 'verify', 30_000, 50);
    await p1.terminate('operator: stop this promotion');
    const backups = backupsIn(t.configPath);
    const backup = join(t.configPath, '..', backups[0] ?? '?');
    assert.equal(mappingOf(readFileSync(backup, 'utf8')), 'back-v1');

    // The way back the refusal names: P1's backup promoted. Its verify fails (the router stops
    // during it), and its rollback restores what it backed up: P1's unverified candidate.
    const p2 = await startPromotion(promo.temporal.client, node, { router: 'back', config: { content: readFileSync(backup, 'utf8') }, image: ROUTER_IMAGE });
    await waitUntil('P2 at verify', async () => (await p2.query(promotionStepsQuery)).current === 'verify', 30_000, 50);
    await d.getContainer(t.container).stop({ t: 0 });
    const out2 = await followPromotion(p2, () => undefined, 200);
    console.log(`  P2 (P1's backup): ${out2.ok ? `ok: ${out2.result.message}` : `${out2.failureType}: ${out2.message}`}`);
    assert.ok(!out2.ok, 'P2 failed its verify');
    const before = await box(t);
    console.log(`  live file mapping: ${mappingOf(before.live)}; router serves: ${before.serves}`);
    assert.equal(mappingOf(before.live), 'back-v2', "P2's rollback put P1's unverified candidate back");

    // The live config is still P1's unverified write: a promotion must not back it up as the config before.
    const p3 = await startPromotion(promo.temporal.client, node, {
      router: 'back',
      config: { content: routerConfig('back-v3', ['', '# fake-router: report_mapping_version = "stale3"']) },
      image: ROUTER_IMAGE,
    });
    const out3 = await followPromotion(p3, () => undefined, 200);
    const said = out3.ok ? `ok: ${out3.result.message}` : `${out3.failureType}: ${out3.message}`;
    const after = await box(t);
    console.log(`  P3: ${said}`);
    console.log(`  live file mapping: ${mappingOf(after.live)}; router serves: ${after.serves}; backups: ${after.backups.length}`);
    assert.ok(!out3.ok, said);
    assert.equal(out3.failureType, 'LiveConfigConflict', said);
    assert.equal(out3.details?.step, 'resolve', said);
    assert.ok(out3.message.includes(`run ${p1.firstExecutionRunId}`), `names P1's run: ${said}`);
    assert.ok(out3.message.includes(backup), `names P1's backup: ${said}`);
    assert.deepEqual(after, before, 'P3 changed nothing on the box');
  });
});
