// `gpures audit report LEDGER --at T`: what a ledger held at an instant and which runs held and
// evicted each serve, from an exported ledger history alone. No server. test/fixtures/
// ledger-state-answers.json is `gpures demo`'s ledger (its answers carry the state);
// test/histories/ledger.json was recorded before they did, and is told as such.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { gpures, ROOT, show } from './support/cli';

const LEDGER = join(ROOT, 'test', 'fixtures', 'ledger-state-answers.json');
const OLDER = join(ROOT, 'test', 'histories', 'ledger.json');
const NODE = 'primary-node-demo-28bc41';
const ACQUIRER = new RegExp(`acquire/${NODE}/comfyui-sim/[0-9a-f-]{36}`);

function section(stdout: string, at: string): string {
  const start = stdout.indexOf(`Ledger at ${at}`);
  assert.ok(start >= 0, `no 'Ledger at ${at}' section in:\n${stdout}`);
  return stdout.slice(start, stdout.indexOf('\nUpdates', start));
}

test('mid-eviction: the ledger lines as the acquire answered them, and the run that evicted vision', async () => {
  const r = await gpures(['audit', 'report', LEDGER, '--at', '2026-12-05T04:18:17.5Z'], {});
  assert.equal(r.code, 0, show(r));
  const s = section(r.stdout, '2026-12-05T04:18:17.500Z');
  assert.match(s, /vision 12288 MiB \(evictable, evicting for comfyui-sim\)/);
  assert.match(s, /comfyui-sim 8192 MiB \(on-demand, waiting for victims vision\)/);
  assert.match(s, new RegExp(`as answered by update #153 acquire at 2026-12-05T04:18:17\\.342Z \\(sent by acquire/${NODE}/comfyui-sim/`));
  const vision = s.split('\n').find((l) => l.trim().startsWith('vision: held by'));
  assert.ok(vision, s);
  assert.match(vision, new RegExp(`held by serves-up/${NODE}/vision/[0-9a-f-]{36}; evicted by acquire/${NODE}/comfyui-sim/`));
  assert.equal(vision.match(ACQUIRER)?.[0], s.match(/sent by (\S+)\)/)?.[1], 'the evicting run is the one whose acquire answered');
});

test('a beginStop answered after the last state is named, not folded in', async () => {
  const r = await gpures(['audit', 'report', LEDGER, '--at', '2026-12-05T04:18:15.700Z', '--json'], {});
  assert.equal(r.code, 0, show(r));
  const at = (JSON.parse(r.stdout) as { ledger: { at: { asOf: { eventId: number }; lines: string[]; notInLines: string[] } } }).ledger.at;
  assert.equal(at.asOf.eventId, 98, 'the denied admission answered with the state');
  assert.ok(at.lines.includes('  ocr 5120 MiB (resident, running)'), at.lines.join('\n'));
  assert.deepEqual(
    at.notInLines.map((l) => l.split(': ')[0]),
    ['#103 beginStop at 2026-12-05T04:18:15.611Z'],
  );
});

test('a recording whose answers carry no state: the lines are as the run began, and it says so', async () => {
  const r = await gpures(['audit', 'report', OLDER, '--at', '2026-12-01T09:38:35.150Z'], {});
  assert.equal(r.code, 0, show(r));
  const s = section(r.stdout, '2026-12-01T09:38:35.150Z');
  assert.match(s, /committed 0 MiB, free 27999 MiB\n {2}as the run began at 2026-12-01T09:38:30\.338Z \(its input\)/);
  assert.match(s, /this ledger's update answers carry no state \(recorded before they did\)/);
  assert.match(s, /#94 admit at 2026-12-01T09:38:34\.807Z: denied vision/);
});

test('an instant the run does not cover, a non-ledger history, a bad time: exit 2, nothing printed but why', async () => {
  const before = await gpures(['audit', 'report', LEDGER, '--at', '2026-12-05T04:00:00Z'], {});
  assert.equal(before.code, 2, show(before));
  assert.match(
    before.stderr,
    new RegExp(
      `--at 2026-12-05T04:00:00\\.000Z is before this run of ledger/${NODE}/dark-fast began \\(2026-12-05T04:18:10\\.891Z\\); it continues no earlier run`,
    ),
  );
  assert.equal(before.stdout, '');
  const eviction = await gpures(['audit', 'report', join(ROOT, 'test', 'histories', 'eviction.json'), '--at', '2026-12-01T09:38:37Z'], {});
  assert.equal(eviction.code, 2, show(eviction));
  assert.match(eviction.stderr, /--at reads a ledger's history \(ledgerWorkflow\); acquire\/primary-node\/comfyui-sim is a run of acquireWorkflow/);
  const bad = await gpures(['audit', 'report', LEDGER, '--at', 'yesterday'], {});
  assert.equal(bad.code, 2, show(bad));
  assert.match(bad.stderr, /--at 'yesterday' is not a time \(ISO 8601/);
  // History's times are UTC: a time without a zone would be read in the auditor's own.
  const zoneless = await gpures(['audit', 'report', LEDGER, '--at', '2026-12-05T04:18:17.5'], {});
  assert.equal(zoneless.code, 2, show(zoneless));
  assert.match(zoneless.stderr, /--at '2026-12-05T04:18:17\.5' has no zone: history's times are UTC; end it with Z \(2026-12-05T04:18:17\.5Z\) or an offset/);
});
