// gpures audit replay on many histories replays them in replayer processes while its own hands
// them out (one queue, each replayer taking the next history when it is free): every file gets the
// outcome it gets in one process, nondeterminism and unreadable files included, a replayer process
// killed while it holds a history loses nothing (and all of them killed, this process replays the
// rest), a history the replayer cannot take holds up no other, and no replayer process is left
// running afterwards.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { copyFileSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { currentWorkflowBundle, formatReplayOutcome, quietReplayRuntime, replayFiles, replayInLanes } from '../src/audit/replay';
import type { HistoryJson } from '../src/audit/events';
import { readHistoryFile } from '../src/audit/history';
import { replayerFlags, replayProcessCount, HISTORIES_PER_REPLAY_PROCESS } from '../src/audit/replay-processes';
import { ReplayQueue } from '../src/audit/replay-queue';
import { GPURES, gpures, ROOT, show } from './support/cli';
import { waitUntil } from './support/wait';

const HISTORIES = join(__dirname, '..', '..', 'test', 'histories');
const RECORDINGS = readdirSync(HISTORIES)
  .filter((n) => n.endsWith('.json'))
  .sort();

/** The children of `parent` (default this process) running replay-child.js, from /proc. */
function replayChildren(parent = process.pid): number[] {
  const pids: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === parent && readFileSync(`/proc/${name}/cmdline`, 'utf8').includes('replay-child.js')) pids.push(Number(name));
    } catch {
      // Gone while looked at.
    }
  }
  return pids;
}

/** Whether `pid` runs (a zombie nobody reaped yet has ended). */
function running(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

/** `count` copies of the recordings (and whatever `extra` writes) in a fresh directory, as files in order. */
function copies(dir: string, count: number, pick: (i: number) => string = (i) => RECORDINGS[i % RECORDINGS.length] as string): string[] {
  return Array.from({ length: count }, (_, i) => {
    const file = join(dir, `h${String(i).padStart(4, '0')}.json`);
    copyFileSync(join(HISTORIES, pick(i)), file);
    return file;
  });
}

describe('the replay queue', () => {
  test('hands out each history once, in order, and ends (done) once every history is settled', async () => {
    const q = new ReplayQueue<string>(3);
    assert.deepEqual([await q.take(), await q.take(), await q.take()], [0, 1, 2]);
    // Two histories are still held: one asking now waits for either to come back.
    let answered: number | undefined | 'waiting' = 'waiting';
    void q.take().then((i) => (answered = i));
    let done = false;
    void q.done.then(() => (done = true));
    q.settle(0, 'a');
    await Promise.resolve();
    assert.equal(answered, 'waiting');
    q.settle(2, 'c');
    await Promise.resolve();
    assert.equal(done, false, 'done with a history still held');
    q.settle(1, 'b');
    await Promise.resolve();
    assert.equal(answered, undefined);
    assert.equal(done, true, 'not done once every history was settled');
    assert.equal(await q.take(), undefined);
    assert.deepEqual(q.outcomes, ['a', 'b', 'c']);
  });

  test('a history its replayers died on twice is settled as failed, not handed out again', async () => {
    const q = new ReplayQueue<string>(1);
    assert.equal(await q.take(), 0);
    q.giveBack([0], (i) => `failed ${i}`);
    assert.equal(await q.take(), 0, 'the first death gives it back');
    q.giveBack([0], (i) => `failed ${i}`);
    assert.equal(await q.take(), undefined);
    assert.deepEqual(q.outcomes, ['failed 0']);
  });

  test('a history given back goes to whoever waits for one, and a settled one keeps its first outcome', async () => {
    const q = new ReplayQueue<string>(2);
    const seen: [number, string][] = [];
    const q2 = new ReplayQueue<string>(2, (i, by) => seen.push([i, by]));
    assert.deepEqual([await q.take(), await q.take()], [0, 1]);
    const waiting = q.take();
    q.giveBack([1]);
    assert.equal(await waiting, 1);
    q.settle(1, 'first', 'lane 1');
    q.settle(1, 'again', 'process 1');
    q.giveBack([1]);
    q.giveBack([0]);
    assert.equal(await q.take(), 0, 'a history given back with nobody waiting is the next taken');
    q.settle(0, 'zero', 'process 1');
    assert.equal(await q.take(), undefined);
    assert.deepEqual(q.outcomes, ['zero', 'first']);
    assert.deepEqual(q.settledBy, ['process 1', 'lane 1']);
    await q2.take();
    q2.as('lane 2').settle(0, 'x');
    assert.deepEqual(seen, [[0, 'lane 2']]);
  });

  test('replayer processes: one per core and per HISTORIES_PER_REPLAY_PROCESS histories unless told, never more than 8 or than the histories', () => {
    assert.equal(replayProcessCount(RECORDINGS.length), 1, 'the recordings alone are not worth a second process');
    assert.equal(replayProcessCount(HISTORIES_PER_REPLAY_PROCESS * 64, 0), 1);
    assert.equal(replayProcessCount(5, 3), 3);
    assert.equal(replayProcessCount(100, 100), 8);
    assert.equal(replayProcessCount(2, 8), 2, 'more processes than histories');
    assert.ok(replayProcessCount(HISTORIES_PER_REPLAY_PROCESS * 2) <= 2);
  });

  test("a replayer process keeps this one's cap on the old generation, not bin/gpures's 1 MiB young one, nor a test runner's or inspector's flags", () => {
    assert.deepEqual(replayerFlags(['--max-semi-space-size=1', '--max-old-space-size=512', '--inspect=0', '--enable-source-maps']), [
      '--max-old-space-size=512',
    ]);
    assert.deepEqual(replayerFlags(['--max-semi-space-size=1']), []);
    assert.deepEqual(replayerFlags(['--max_old_space_size=256', '--max_semi_space_size=1']), ['--max_old_space_size=256'], "node's other spelling");
  });
});

let dir: string;
before(() => {
  dir = mkdtempSync(join(tmpdir(), 'gpures-replay-processes-'));
});
after(() => rmSync(dir, { recursive: true, force: true }));

/** eviction.json with one scheduled activity renamed: a nondeterminism at that event. */
function tamperedEviction(): { text: string; eventId: number } {
  const h = JSON.parse(readFileSync(join(HISTORIES, 'eviction.json'), 'utf8')) as HistoryJson;
  const scheduled = h.events.find(
    (e) => (e['activityTaskScheduledEventAttributes'] as { activityType?: { name?: string } } | undefined)?.activityType?.name === 'quiesceTier',
  );
  assert.ok(scheduled, 'eviction.json schedules no quiesceTier');
  (scheduled['activityTaskScheduledEventAttributes'] as { activityType: { name: string } }).activityType.name = 'quiesceTierV0';
  return { text: JSON.stringify(h), eventId: Number(scheduled.eventId) };
}

describe('replay in processes', { timeout: 120_000 }, () => {
  // Installed here, not at the top: a runtime no replay used would keep this file's process alive.
  before(() => quietReplayRuntime());

  test('every file gets its own outcome, the same as in one process; with two, both replayer processes replay a share and this one none', async () => {
    const here = mkdtempSync(join(dir, 'mixed-'));
    const files = copies(here, 300);
    const tampered = tamperedEviction();
    // Every 7th a nondeterminism, one not a history: a result paired with the wrong file shows.
    const expected = files.map((file, i) => {
      if (i === 150) {
        writeFileSync(file, '{ "events": [ ');
        return 'unreadable';
      }
      if (i % 7 === 3) {
        writeFileSync(file, tampered.text);
        return 'nondeterministic';
      }
      return 'ok';
    });
    const bundle = await currentWorkflowBundle();
    const alone = await replayFiles(files, bundle, { processes: 1 });
    const beside = await replayFiles(files, bundle, { processes: 2, lanes: 1 });
    assert.ok(
      alone.settledBy.every((b) => b.startsWith('lane ')),
      'processes: 1 started another',
    );
    assert.ok(beside.settledBy.includes('process 1') && beside.settledBy.includes('process 2'), `a replayer process settled none of ${files.length}`);
    assert.ok(
      beside.settledBy.every((b) => b.startsWith('process ')),
      'this process replayed while its replayer processes did',
    );
    assert.deepEqual(beside.outcomes, alone.outcomes);
    beside.outcomes.forEach((o, i) => {
      const what = `${basename(files[i] as string)}, by ${beside.settledBy[i]}: ${formatReplayOutcome(o)}`;
      assert.equal(o.file, files[i], what);
      if (expected[i] === 'ok') assert.ok(o.ok, what);
      else if (expected[i] === 'unreadable') assert.match(o.error ?? '', /^not JSON: /, what);
      else {
        assert.equal(o.errorName, 'DeterminismViolationError', what);
        assert.equal(o.event?.id, tampered.eventId, what);
      }
    });
    assert.deepEqual(replayChildren(), [], 'a replayer process outlived the replay');
  });

  /**
   * The recordings 8 times over in two replayer processes, `kill` told of each outcome (who settled
   * it, in order) and returning the replayer processes it killed, if it did now.
   */
  async function replayKilling(prefix: string, kill: (settled: readonly string[]) => number[] | undefined) {
    const files = copies(mkdtempSync(join(dir, prefix)), RECORDINGS.length * 8);
    const settled: string[] = [];
    let killed: number[] = [];
    const { outcomes, settledBy } = await replayFiles(files, await currentWorkflowBundle(), {
      processes: 2,
      lanes: 1,
      onSettled: (_, by) => {
        settled.push(by);
        if (killed.length === 0) killed = kill(settled) ?? [];
      },
    });
    assert.equal(settled.length, files.length, 'a history was left unsettled');
    const failed = outcomes.filter((o) => !o.ok);
    assert.equal(failed.length, 0, failed.map(formatReplayOutcome).join('\n'));
    assert.deepEqual(replayChildren(), []);
    return { settledBy, killed, files, settled };
  }

  test('a replayer process killed while it replays loses no history: what it held is replayed by another', { timeout: 60_000 }, async () => {
    let killedAt = 0;
    const { settledBy, killed, settled } = await replayKilling('killed-', (told) => {
      // Process 1's third outcome told, it is soon replaying its fourth: one of the two is killed.
      if (told.at(-1) !== 'process 1' || told.filter((b) => b === 'process 1').length !== 3) return undefined;
      const pid = replayChildren()[0];
      if (pid === undefined) return undefined;
      setTimeout(() => {
        killedAt = told.length;
        process.kill(pid, 'SIGKILL');
      }, 5);
      return [pid];
    });
    assert.equal(killed.length, 1, 'no replayer process was running to kill');
    // Which of the two it was is not known here; one settled at most one more (in flight at the kill), the other the rest.
    const after = (name: string) => settled.slice(killedAt).filter((b) => b === name).length;
    assert.ok(Math.min(after('process 1'), after('process 2')) <= 1, `after the kill: process 1 ${after('process 1')}, process 2 ${after('process 2')}`);
    assert.ok(
      settledBy.every((b) => b.startsWith('process ')),
      'this process replayed while a replayer process lived',
    );
  });

  test('every replayer process killed: this process replays what they left, no history lost', { timeout: 60_000 }, async () => {
    const { settledBy, killed, files } = await replayKilling('all-killed-', (settled) => {
      // Both replaying: each has told an outcome.
      if (!settled.includes('process 1') || !settled.includes('process 2')) return undefined;
      const pids = replayChildren();
      for (const pid of pids) process.kill(pid, 'SIGKILL');
      return pids;
    });
    assert.equal(killed.length, 2, `${killed.length} replayer processes were running to kill`);
    const here = settledBy.filter((b) => b.startsWith('lane ')).length;
    assert.ok(here > 0, 'this process replayed none of what they left');
    console.log(`  after both replayer processes were killed, this process replayed ${here} of ${files.length}`);
  });

  test('a history the replayer cannot take fails alone: the other lanes do not wait on it', { timeout: 60_000 }, async () => {
    const good = readHistoryFile(join(HISTORIES, 'bring-up.json'));
    const items = [good, { events: [{ eventId: 'x', eventType: 42 }] } as unknown as HistoryJson, good, good].map((history, i) => ({
      workflowId: `w${i}`,
      history,
    }));
    const errors = await replayInLanes(items, await currentWorkflowBundle(), 2);
    assert.deepEqual(
      errors.map((e) => e === undefined),
      [true, false, true, true],
    );
  });
});

describe('gpures audit replay in processes', { timeout: 180_000 }, () => {
  test('gpures audit replay --processes 2: one line a file, in order, the one that is no history failing; a bad --processes is exit 2, one line', async () => {
    const here = mkdtempSync(join(dir, 'cli-'));
    const files = copies(here, 200);
    writeFileSync(files[150] as string, JSON.stringify({ events: [] }));
    const r = await gpures(['audit', 'replay', '--processes', '2', here], {}, 180_000);
    // A file that is not a history is bad input (exit 2), not a nondeterminism (exit 1).
    assert.equal(r.code, 2, show(r));
    const lines = r.stdout.trim().split('\n');
    assert.equal(lines.length, files.length, show(r));
    lines.forEach((line, i) => assert.ok(line.endsWith(`h${String(i).padStart(4, '0')}.json)`), `line ${i}: ${line}`));
    assert.equal(lines.filter((l) => l.startsWith('ok  ')).length, files.length - 1);
    // The file named once, as every line names it.
    assert.equal(lines[150], 'FAIL h0150: the history has no events (h0150.json)');

    for (const bad of ['0', '9', 'two']) {
      const b = await gpures(['audit', 'replay', '--processes', bad, here], {});
      assert.equal(b.code, 2, show(b));
      assert.equal(b.stderr, `--processes: a whole number from 1 to 8 (got '${bad}')\n`);
      assert.equal(b.stdout, '');
    }
  });

  test('Ctrl-C ends gpures audit replay at once, and its replayer processes with it', async () => {
    const here = mkdtempSync(join(dir, 'interrupted-'));
    copies(here, 600);
    const child = spawn(process.execPath, [GPURES, 'audit', 'replay', '--processes', '2', here], { cwd: ROOT, stdio: 'ignore' });
    const ended = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
      child.once('exit', (code, signal) => resolve({ code, signal })),
    );
    const pid = child.pid as number;
    let replayers: number[] = [];
    await waitUntil('two replayer processes', () => (replayers = replayChildren(pid)).length === 2, 30_000);
    const t0 = Date.now();
    child.kill('SIGINT');
    const { signal } = await ended;
    assert.equal(signal, 'SIGINT');
    assert.ok(Date.now() - t0 < 2_000, `gpures took ${Date.now() - t0} ms to end`);
    // A replayer ends on its channel's close (tens of ms), or, just forked, once its modules are loaded (seconds on a loaded host).
    await waitUntil('the replayer processes to end', () => !replayers.some(running), 10_000);
  });
});
