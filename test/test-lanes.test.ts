// The test command's schedule (src/dev/test-lanes.ts): pure, and the runner (test-lanes-main) on
// three tiny test files: a timeout, a failure and a pass.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { DEFAULT_SECONDS, failureLines, lanePlanProblems, nextToStart, queueFiles, tapCounts, testKey } from '../src/dev/test-lanes';

const plan = { seconds: { long: 170, mid: 60, short: 5, lonely: 100 }, alone: { lonely: 'its race needs the cores' } };
const files = ['dist/test/short.test.js', 'dist/test/new.test.js', 'dist/test/lonely.test.js', 'dist/test/long.test.js', 'dist/test/mid.test.js'];

describe('test lanes: the schedule', () => {
  test('longest expected first, a file the plan does not list at the default, ties by name', () => {
    const q = queueFiles(files, plan);
    assert.deepEqual(
      q.map((f) => [testKey(f.file), f.seconds]),
      [
        ['long', 170],
        ['lonely', 100],
        ['mid', DEFAULT_SECONDS],
        ['new', DEFAULT_SECONDS],
        ['short', 5],
      ],
    );
  });

  test('a file that runs alone waits for the others and nothing starts beside it', () => {
    const q = queueFiles(files, plan);
    const [long, lonely, mid] = q as [(typeof q)[0], (typeof q)[0], (typeof q)[0]];
    const take = (i: number) => q.splice(i, 1)[0];
    // Two lanes free: `long` first, then `mid` past `lonely`, which would need both lanes empty.
    assert.equal(take(nextToStart(q, [], 2)), long);
    assert.equal(take(nextToStart(q, [long], 2)), mid);
    assert.equal(nextToStart(q, [long, mid], 2), -1, 'no lane free');
    // `new` and `short` go beside `long` as lanes free; then only `lonely` is left: it waits while
    // anything runs, starts on an empty box, and nothing starts beside it.
    assert.equal(testKey((take(nextToStart(q, [long], 2)) as (typeof q)[0]).file), 'new');
    assert.equal(testKey((take(nextToStart(q, [long], 2)) as (typeof q)[0]).file), 'short');
    assert.deepEqual(q, [lonely]);
    assert.equal(nextToStart(q, [long], 2), -1);
    assert.equal(nextToStart(q, [], 2), 0);
    assert.equal(nextToStart([mid], [lonely], 2), -1);
  });

  test('one lane runs the files one at a time, in the same order', () => {
    const q = queueFiles(files, plan);
    const order: string[] = [];
    while (q.length > 0) order.push(testKey((q.splice(nextToStart(q, [], 1), 1)[0] as (typeof q)[0]).file));
    assert.deepEqual(order, ['long', 'mid', 'new', 'short', 'lonely']);
  });

  test('test/lanes.json problems name their field', () => {
    assert.deepEqual(lanePlanProblems({ seconds: { a: 1 }, alone: { a: 'why' } }), []);
    assert.deepEqual(lanePlanProblems([]), ['the document must be an object with `seconds` and `alone`']);
    assert.deepEqual(lanePlanProblems({ seconds: { a: -1, b: 'x' }, alone: ['a'] }), [
      'seconds.a: must be a number of seconds in 0..3600 (got -1)',
      'seconds.b: must be a number of seconds in 0..3600 (got "x")',
      'alone: must be an object of file key → why it runs alone',
    ]);
    assert.deepEqual(lanePlanProblems({ seconds: {}, alone: { a: ' ' } }), ['alone.a: must say why the file runs alone']);
  });

  test('why a file failed, in one line: the tests that failed on their own with their errors, and what the file said at the top level', () => {
    const crashed =
      "# gone: the reason\n# Subtest: /t/x.test.js\nnot ok 1 - /t/x.test.js\n  ---\n  duration_ms: 3\n  failureType: 'testCodeFailure'\n  exitCode: 1\n  error: 'test failed'\n  ...\n1..1\n# tests 1\n# fail 1\n";
    assert.equal(failureLines(crashed), 'not ok: /t/x.test.js (test failed); said: gone: the reason');
    // A suite failed for its test, one cancelled with it, a TODO: only the test that failed on its own, with its error's first line;
    // a metric's `# HELP` inside its YAML is not something the file said.
    const nested = [
      '# Subtest: suite',
      '    # Subtest: inner',
      '    not ok 1 - inner',
      '      ---',
      "      failureType: 'testCodeFailure'",
      '      error: |-',
      '        Expected values to be equal:',
      '',
      '        1 !== 2',
      '      expected: |-',
      '        # HELP x a metric',
      '      ...',
      '    not ok 2 - later',
      '      ---',
      "      failureType: 'cancelledByParent'",
      "      error: 'test did not finish before its parent and was cancelled'",
      '      ...',
      '    not ok 3 - todo one # TODO',
      '    1..3',
      'not ok 1 - suite',
      '  ---',
      "  failureType: 'subtestsFailed'",
      "  error: '1 subtest failed'",
      '  ...',
    ].join('\n');
    assert.equal(failureLines(nested), 'not ok: inner (Expected values to be equal:)');
    const late =
      'ok 1 - a\n# Error: Test "a name" at /t/y.test.js:3:1 generated asynchronous activity after the test ended. This activity created the error "Error: boom" and would have caused the test to fail, but instead triggered an unhandledRejection event.\n';
    assert.equal(failureLines(late), 'no test failed on its own; said: after "a name" ended: Error: boom');
    // A crash as the file loads: its error, not its stack frames or node's version.
    const atLoad = '# /t/z.js:1\n# Error: at load\n#     at Object.<anonymous> (/t/z.js:1:7)\n#     at Module._compile\n# Node.js v20.20.2\n';
    assert.equal(failureLines(atLoad), 'no test failed on its own; said: Error: at load');
    assert.equal(failureLines('# first\n# second\n# third\n', 2), 'no test failed on its own; said: second | third');
    assert.equal(failureLines(`# warning ${'x'.repeat(300)}\n`, 4, 20), 'no test failed on its own; said: warning xxxxxxxxxxx…');
    assert.equal(failureLines(''), 'no test failed on its own');
  });

  test('the TAP summary of a file: its last counters, or null when it printed none', () => {
    assert.equal(tapCounts('ok 1 - a\n# Subtest: b\n'), null);
    assert.deepEqual(tapCounts('# pass 9\nok 1 - a\n# tests 3\n# suites 1\n# pass 2\n# fail 1\n# cancelled 0\n# skipped 0\n# todo 0\n'), {
      tests: 3,
      suites: 1,
      pass: 2,
      fail: 1,
      cancelled: 0,
      skipped: 0,
      todo: 0,
    });
  });
});

describe('test lanes: the runner', () => {
  test('a hung file is killed at its bound and counted failed, a failing file fails the run, the others still run', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gpures-lanes-'));
    const file = (name: string, body: string) => {
      const path = join(dir, `${name}.test.js`);
      writeFileSync(path, `const { test, after } = require('node:test');\n${body}\n`);
      return path;
    };
    const hangs = file('hangs', "test('ends', () => {});\nafter(() => new Promise(() => setInterval(() => {}, 1000)));");
    const fails = file('fails', "test('fails', () => { throw new Error('as it should'); });");
    const passes = file('passes', "test('passes', () => {});");
    const crashes = file('crashes', "test('crashes', () => { console.error('gone: the reason it went'); process.exit(1); });");
    const main = join(__dirname, '..', 'src', 'dev', 'test-lanes-main.js');
    const started = Date.now();
    const { code, stdout } = await new Promise<{ code: number | null; stdout: string }>((resolve) => {
      const child = execFile(
        process.execPath,
        [main, '--', hangs, fails, passes, crashes],
        { env: { ...process.env, GPURES_TEST_FILE_TIMEOUT_S: '10', GPURES_TEST_LANES: '2', GPURES_TEST_TIMES: join(dir, 'times.json') } },
        (_e, out) => resolve({ code: child.exitCode, stdout: String(out) }),
      );
    });
    const seconds = (Date.now() - started) / 1000;
    assert.equal(code, 1, stdout);
    assert.match(stdout, new RegExp(`^# file ${hangs}: FAILED, killed after 10 s \\(GPURES_TEST_FILE_TIMEOUT_S\\): a test or hook did not end`, 'm'));
    assert.match(stdout, new RegExp(`^# file ${fails}: FAILED, exited 1`, 'm'));
    assert.match(stdout, new RegExp(`^# file ${passes}: ok`, 'm'));
    // Why each file failed is in the run's last lines, which is what a CI log's tail shows.
    assert.match(stdout, new RegExp(`^# FAILED ${crashes}: exited 1; not ok: ${crashes} \\(test failed\\); said: gone: the reason it went$`, 'm'));
    assert.match(stdout, new RegExp(`^# FAILED ${fails}: exited 1; not ok: fails \\(as it should\\)$`, 'm'));
    assert.match(stdout, /^# files 4, failed 3;/m);
    assert.match(stdout, /^# tests 4$/m);
    assert.match(stdout, /^# pass 1$/m);
    // The hung file printed no summary (its passing test is not counted): it counts as one failed test; node --test counts the crashed one.
    assert.match(stdout, /^# fail 3$/m);
    // Each file's seconds, where test/lanes.json is refreshed from.
    assert.deepEqual(Object.keys(JSON.parse(readFileSync(join(dir, 'times.json'), 'utf8')) as object).sort(), ['crashes', 'fails', 'hangs', 'passes']);
    // The hung file's hook would have run forever: the run ended within its bound and the kill's grace.
    assert.ok(seconds < 10 + 10 + 5, `the run took ${seconds.toFixed(1)} s`);
  });
});
