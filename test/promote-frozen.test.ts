// A promotion's write attempt left running by a worker that froze (SIGSTOP: a VM paused, a
// process stopped by a debugger or a cgroup freezer) while Temporal, after the 5 s heartbeat
// timeout, retried the write on another worker, the promotion failed its verify and rolled back.
// When the frozen worker goes on (SIGCONT), what it was doing must not land on the live config
// the rollback restored. Separate processes: each worker is a child (dist/test/support/
// promote-worker.js) on the real dev server and dockerd; the box is sampled: the live file on
// disk, the temp files beside it, and what the router serves once restarted from that file.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { journalPath } from '../src/adapters/router-deployment/port';
import { followPromotion, startPromotion } from '../src/client/promote';
import { childPromotionBox, healthz, ROUTER_IMAGE, routerConfig, waitHealthy } from './support/router';
import { waitUntil } from './support/wait';

const mappingOf = (text: string) => /mapping_version = "([^"]*)"/.exec(text)?.[1];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('router promotion: a write attempt frozen on one worker, retried on another, then rolled back', () => {
  const box = childPromotionBox('promfrz', ['frzrename', 'frzstart', 'frzremove']);
  const { d, run, node, tempFiles, stop, startChild } = box;

  async function frozenThenRolledBack(name: string, freezeAt: 'write-rename' | 'write-start'): Promise<void> {
    const t = box.target(name);
    const v1 = readFileSync(t.configPath, 'utf8');
    const marker = join(box.dir, `${name}-frozen.json`);
    const frozen = await startChild({ freezeAt, markerPath: marker });
    // A release that serves the wrong mapping: verify fails, the promotion rolls back.
    const candidate = routerConfig(`${name}-v2`, ['', `# fake-router: report_mapping_version = "${name}-bad"`]);
    const handle = await startPromotion(box.temporal.client, node, { router: name, config: { content: candidate }, image: ROUTER_IMAGE });
    await waitUntil('the first worker frozen in the write', () => existsSync(marker), 30_000, 50);
    console.log(
      `  worker ${frozen.pid} frozen: ${(JSON.parse(readFileSync(marker, 'utf8')) as { frozen: string }).frozen}; temp files: [${tempFiles(t).join(', ')}]`,
    );
    assert.equal(readFileSync(t.configPath, 'utf8'), v1, 'frozen before the write landed');

    const second = await startChild({});
    const out = await followPromotion(handle, () => undefined, 200);
    const said = out.ok ? `ok: ${out.result.message}` : `${out.failureType}: ${out.message}`;
    console.log(`  promotion: ${said}`);
    assert.ok(!out.ok && out.failureType === 'HealthzMismatch', said);
    assert.equal(out.details?.rollback?.ok, true, said);
    assert.equal(readFileSync(t.configPath, 'utf8'), v1, 'the rollback restored the backup');

    // The frozen worker goes on: its stale attempt must end, and end failed, before the box is
    // sampled (a few seconds' sleep would pass as well when, on a loaded host, it has not run yet).
    frozen.kill('SIGCONT');
    const outcomes = `${marker}.outcome`;
    await waitUntil('the frozen write attempt to end', () => existsSync(outcomes), 60_000, 100);
    const ended = readFileSync(outcomes, 'utf8').trim().split('\n');
    console.log(`  the frozen attempt ended: ${ended.join(' | ')}`);
    assert.equal(ended.length, 1, 'one write on the frozen worker');
    const end = JSON.parse(ended[0] ?? '{}') as { ok: boolean; message?: string };
    assert.equal(end.ok, false, `the stale attempt did not fail: ${ended[0]}`);
    // Its message says why (not a bare ENOENT, which reads as a broken config directory).
    assert.match(end.message ?? '', /stale/, `the stale attempt's message: ${end.message}`);
    await sleep(500);
    await stop(frozen);
    await stop(second);

    const live = readFileSync(t.configPath, 'utf8');
    const journal = readFileSync(journalPath(t.configPath), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { op: string; phase: string; attempt?: number });
    // The file is what the router serves from its next start (a crash, a host reboot, a promotion's recreate).
    await d.getContainer(`gpures-test-${run}-${name}`).restart({ t: 1 });
    await waitHealthy(t.url);
    const served = (await healthz(t.url)).mappingVersion;
    console.log(
      `  after SIGCONT: live file mapping ${mappingOf(live)}, temp files [${tempFiles(t).join(', ')}], ` +
        `journal ${journal.map((e) => `${e.op} ${e.phase}${e.attempt ? ` #${e.attempt}` : ''}`).join(', ')}; router restarted serves '${served}'`,
    );
    assert.equal(mappingOf(live), `${name}-v1`, 'the frozen attempt put the rolled-back candidate live after the rollback');
    assert.equal(live, v1);
    assert.equal(served, `${name}-v1`);
    assert.deepEqual(tempFiles(t), [], 'no temp file left beside the live config');
  }

  test("a rollback's removal of the live file (there was none before) frozen, the step retried, then a later promotion: the thawed removal leaves its file", async () => {
    const t = box.target('frzremove');
    // No live file before the promotion: its rollback removes the one it wrote.
    rmSync(t.configPath);
    const marker = join(box.dir, 'frzremove-frozen.json');
    const frozen = await startChild({ freezeAt: 'restore-remove', markerPath: marker });
    const bad = routerConfig('frzremove-v2', ['', '# fake-router: report_mapping_version = "frzremove-bad"']);
    const p1 = await startPromotion(box.temporal.client, node, { router: 'frzremove', config: { content: bad }, image: ROUTER_IMAGE });
    await waitUntil("the first worker frozen in the rollback's removal", () => existsSync(marker), 60_000, 50);
    console.log(`  worker ${frozen.pid} frozen: ${(JSON.parse(readFileSync(marker, 'utf8')) as { frozen: string }).frozen}`);
    assert.equal(readFileSync(t.configPath, 'utf8'), bad, 'frozen before the removal landed');

    // Another worker: the restore is retried there (heartbeat timeout), the rollback ends; then a later promotion writes.
    const second = await startChild({});
    const out1 = await followPromotion(p1, () => undefined, 200);
    console.log(`  first promotion: ${out1.ok ? out1.result.message : `${out1.failureType}: ${out1.message}`}`);
    assert.ok(!out1.ok && out1.failureType === 'HealthzMismatch');
    assert.equal(existsSync(t.configPath), false, 'the retried restore removed the live file');
    const v3 = routerConfig('frzremove-v3');
    const out2 = await followPromotion(
      await startPromotion(box.temporal.client, node, { router: 'frzremove', config: { content: v3 }, image: ROUTER_IMAGE }),
      () => undefined,
      200,
    );
    console.log(`  later promotion: ${out2.ok ? out2.result.message : `${out2.failureType}: ${out2.message}`}`);
    assert.ok(out2.ok);
    assert.equal(readFileSync(t.configPath, 'utf8'), v3);

    // The frozen worker goes on: its removal is stale and must leave the later promotion's file.
    frozen.kill('SIGCONT');
    const outcomes = `${marker}.outcome`;
    await waitUntil('the frozen restore attempt to end', () => existsSync(outcomes), 60_000, 100);
    const ended = readFileSync(outcomes, 'utf8').trim().split('\n');
    console.log(`  the frozen attempt ended: ${ended.join(' | ')}`);
    await sleep(500);
    await stop(frozen);
    await stop(second);
    const live = existsSync(t.configPath) ? readFileSync(t.configPath, 'utf8') : undefined;
    await d.getContainer(`gpures-test-${run}-frzremove`).restart({ t: 1 });
    const served = live ? await waitHealthy(t.url).then(async () => (await healthz(t.url)).mappingVersion) : '(no config to start from)';
    console.log(
      `  after SIGCONT: live file ${live ? `mapping ${mappingOf(live)}` : 'absent'}, temp files [${tempFiles(t).join(', ')}]; router restarted serves '${served}'`,
    );
    assert.equal(live, v3, "the frozen removal took away the later promotion's live config");
    assert.equal(served, 'frzremove-v3');
    assert.deepEqual(tempFiles(t), [], 'no temp file left beside the live config');
    const end = JSON.parse(ended[0] ?? '{}') as { ok: boolean; message?: string };
    assert.equal(ended.length, 1, 'one restore on the frozen worker');
    assert.equal(end.ok, false, `the stale attempt did not fail: ${ended[0]}`);
    assert.match(end.message ?? '', /stale/, `the stale attempt's message: ${end.message}`);
  });

  test('frozen just before renaming its temp file over the live config', () => frozenThenRolledBack('frzrename', 'write-rename'));

  test('frozen before it read the live file (its check then passes: the rollback restored what it expects)', () =>
    frozenThenRolledBack('frzstart', 'write-start'));
});
