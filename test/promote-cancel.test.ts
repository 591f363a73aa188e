// A promotion cancelled while its write runs (`temporal workflow cancel`, the UI's cancel, a
// script's): the file steps are cancelled TRY_CANCEL, so the run hears of the cancel at once,
// restores the backup while the write attempt goes on, and ends Cancelled. The write, still
// running, must not then put its candidate live: unverified, never reloaded, with no rollback to
// follow and the next promotion refusing it (LiveConfigConflict). Separate processes: the worker
// is a child (dist/test/support/promote-worker.js) whose first write of the live config is held
// after its temp file's sync (a slow disk), on either side of the check before its rename, until
// the run has ended; the box is sampled: the live file on disk, the temp files beside it, what the
// router serves once restarted from that file, and a promotion after it.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { RouterTarget } from '../src/adapters/router-deployment/port';
import { journalPath } from '../src/adapters/router-deployment/port';
import { followPromotion, startPromotion } from '../src/client/promote';
import { childPromotionBox, healthz, ROUTER_IMAGE, routerConfig, waitHealthy } from './support/router';
import { waitUntil } from './support/wait';

const mappingOf = (text: string) => /mapping_version = "([^"]*)"/.exec(text)?.[1];

describe('router promotion: cancelled while its write runs', () => {
  const box = childPromotionBox('promcnl', ['cnlcheck', 'cnlrename', 'cnlnone']);
  const { d, node, tempFiles, stop } = box;

  async function cancelledMidWrite(name: string, holdAt: 'write-check' | 'write-rename', noLiveConfig = false): Promise<void> {
    const t = box.target(name);
    // No live file before the promotion: its restore is the removal of the one it wrote.
    if (noLiveConfig) rmSync(t.configPath);
    const marker = join(box.dir, `${name}-held.json`);
    const worker = await box.startChild({ holdAt, markerPath: marker });
    try {
      await cancelHeldWrite(t, marker);
    } finally {
      // The next test's worker takes the next write.
      await stop(worker);
    }
  }

  async function cancelHeldWrite(t: RouterTarget, marker: string): Promise<void> {
    const { name } = t;
    const liveNow = () => (existsSync(t.configPath) ? readFileSync(t.configPath, 'utf8') : undefined);
    const v1 = liveNow();
    // A release the router would take: only the cancel stops it.
    const candidate = routerConfig(`${name}-v2`);
    const handle = await startPromotion(box.temporal.client, node, { router: name, config: { content: candidate }, image: ROUTER_IMAGE });
    await waitUntil('the write held after its sync', () => existsSync(marker), 60_000, 50);
    console.log(`  write held: ${readFileSync(marker, 'utf8')}; temp files [${tempFiles(t).join(', ')}]`);
    assert.equal(liveNow(), v1, 'held before its rename');

    await handle.cancel();
    const ended = await handle.result().then(
      () => 'completed',
      (err: unknown) => (err instanceof Error ? `${err.message}: ${err.cause instanceof Error ? err.cause.message : ''}` : String(err)),
    );
    const status = (await handle.describe()).status.name;
    console.log(`  promotion ${status}: ${ended}`);
    assert.equal(status, 'CANCELLED');

    // The run is over; the held write goes on, and its end is awaited before the box is sampled.
    writeFileSync(`${marker}.release`, '');
    const outcomes = `${marker}.outcome`;
    await waitUntil('the held write to end', () => existsSync(outcomes), 60_000, 100);
    const writes = readFileSync(outcomes, 'utf8').trim().split('\n');
    const live = liveNow();
    const journal = readFileSync(journalPath(t.configPath), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { op: string; phase: string; attempt?: number });
    // The file is what the router serves from its next start (a crash, a host reboot, a promotion's recreate).
    let served = '(no config to start from)';
    if (live !== undefined) {
      await d.getContainer(t.container).restart({ t: 1 });
      await waitHealthy(t.url);
      served = (await healthz(t.url)).mappingVersion ?? '(none)';
    }
    console.log(
      `  after the release: the write ended ${writes.join(' | ')}; live file ${live === undefined ? 'absent' : `mapping ${mappingOf(live)}`}, temp files [${tempFiles(t).join(', ')}], ` +
        `journal ${journal.map((e) => `${e.op} ${e.phase}${e.attempt ? ` #${e.attempt}` : ''}`).join(', ')}; router restarted serves '${served}'`,
    );
    assert.equal(live === undefined ? undefined : mappingOf(live), v1 && `${name}-v1`, 'the cancelled run left its unverified candidate as the live config');
    assert.equal(live, v1);
    if (v1 !== undefined) assert.equal(served, `${name}-v1`);
    assert.deepEqual(tempFiles(t), [], 'no temp file left beside the live config');
    assert.equal(writes.length, 1, 'one write');
    const end = JSON.parse(writes[0] ?? '{}') as { ok: boolean; message?: string };
    assert.equal(end.ok, false, `the write went on after the cancel: ${writes[0]}`);
    assert.match(end.message ?? '', /stale/, `the write's message: ${end.message}`);

    // The next promotion starts from the config the router runs, not refused over a candidate never verified.
    const v3 = routerConfig(`${name}-v3`);
    const next = await followPromotion(
      await startPromotion(box.temporal.client, node, { router: name, config: { content: v3 }, image: ROUTER_IMAGE }),
      () => undefined,
      200,
    );
    const said = next.ok ? `ok: ${next.result.message}` : `${next.failureType}: ${next.message}`;
    console.log(`  next promotion: ${said}`);
    assert.ok(next.ok, said);
    assert.equal(readFileSync(t.configPath, 'utf8'), v3);
    assert.equal((await healthz(t.url)).mappingVersion, `${name}-v3`);
  }

  test('cancelled while the write waits to check the journal before its rename', () => cancelledMidWrite('cnlcheck', 'write-check'));

  test('cancelled while the write, its check passed, waits to rename', () => cancelledMidWrite('cnlrename', 'write-rename'));

  test('no live config before it: cancelled while the write waits to check, the file it would write never appears', () =>
    cancelledMidWrite('cnlnone', 'write-check', true));
});
