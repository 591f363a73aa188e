// bin/gpures's launcher (src/cli/launch.ts) on real files and processes: which it runs, the build's
// one-file bundle or tsc's main.js, and whether with the code cache, as the files' modification
// times say. A copy of bin/gpures and of the built launch.js in a scratch tree, beside a main.js and
// a bundle that each print their name, and a code cache V8 made for that bundle under the
// launcher's flags; GPURES_LAUNCH_TRACE=1 makes the launcher say what it did and why.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { GPURES, ROOT, show } from './support/cli';
import type { Run } from './support/cli';

const TRACE = { GPURES_LAUNCH_TRACE: '1' };
const EXAMPLE = join(ROOT, 'examples', 'primary-node', 'serves.toml');

/** bin/gpures's node flags, from its shebang: a code cache made under other flags is refused. */
function launcherFlags(): string[] {
  const words = (readFileSync(GPURES, 'utf8').split('\n', 1)[0] ?? '').split(/\s+/);
  return words.slice(words.indexOf('node') + 1).filter((w) => w.startsWith('--'));
}

/** FILE ARGS as a program, through its shebang (node found on PATH, as an installed gpures finds it). */
function runProgram(file: string, args: string[], env: Record<string, string> = {}): Promise<Run> {
  const started = Date.now();
  const PATH = `${dirname(process.execPath)}:${process.env.PATH ?? ''}`;
  return new Promise((resolve) =>
    execFile(file, args, { env: { ...process.env, PATH, ...env }, timeout: 30_000 }, (err, stdout, stderr) =>
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : null) : 0, stdout, stderr, ms: Date.now() - started }),
    ),
  );
}

describe("bin/gpures's launcher: the bundle, its code cache or main.js", () => {
  let root = '';
  let cli = '';
  let bin = '';
  const file = (name: string) => join(cli, name);
  /** Sets the modification times of main.js, the bundle and the cache, seconds from now (undefined: leave the file as it is). */
  const ages = (t: { main: number; bundle: number; cache?: number }) => {
    const at = (s: number) => new Date(Date.now() + s * 1000);
    utimesSync(file('main.js'), at(t.main), at(t.main));
    utimesSync(file('gpures-bundle.js'), at(t.bundle), at(t.bundle));
    if (t.cache !== undefined) utimesSync(file('gpures-bundle.cache'), at(t.cache), at(t.cache));
  };
  const launch = async (args: string[], env: Record<string, string> = TRACE) => {
    const r = await runProgram(bin, args, env);
    assert.equal(r.code, 0, show(r));
    return { ran: r.stdout.trim(), trace: r.stderr.trim(), r };
  };
  let validCache: Buffer = Buffer.alloc(0);

  before(() => {
    root = mkdtempSync(join(tmpdir(), 'gpures-launch-'));
    cli = join(root, 'dist', 'src', 'cli');
    mkdirSync(cli, { recursive: true });
    mkdirSync(join(root, 'bin'));
    bin = join(root, 'bin', 'gpures');
    copyFileSync(GPURES, bin);
    copyFileSync(join(ROOT, 'dist', 'src', 'cli', 'launch.js'), file('launch.js'));
    writeFileSync(file('main.js'), "exports.main = async () => (process.stdout.write('main.js\\n'), 0);\n");
    writeFileSync(file('gpures-bundle.js'), "exports.main = async () => (process.stdout.write('bundle\\n'), 0);\n");
    // The cache as the build makes it: the bundle compiled and run once by the copied launcher, under bin/gpures's flags.
    const make = `const l = require(${JSON.stringify(file('launch.js'))}); const fs = require('fs');
      const s = l.compileCliBundle(fs.readFileSync(l.CLI_BUNDLE, 'utf8')); l.runCliBundle(s)([])
        .then(() => fs.writeFileSync(l.CLI_CODE_CACHE, s.createCachedData()));`;
    execFileSync(process.execPath, [...launcherFlags(), '-e', make], { stdio: ['ignore', 'ignore', 'inherit'], timeout: 30_000 });
    validCache = readFileSync(file('gpures-bundle.cache'));
  });
  after(() => rmSync(root, { recursive: true, force: true }));

  test('a bundle no older than main.js runs, with a code cache newer than it; a bundle older than main.js does not', async () => {
    ages({ main: -20, bundle: -10, cache: -5 });
    assert.deepEqual(await launch(['validate']).then((l) => [l.ran, l.trace]), ['bundle', 'gpures launch: bundle with its code cache']);
    ages({ main: -10, bundle: -10, cache: -5 });
    assert.equal((await launch(['validate'])).ran, 'bundle', 'a bundle as old as main.js (written in the same second)');
    ages({ main: -5, bundle: -10, cache: -1 });
    assert.deepEqual(await launch(['validate']).then((l) => [l.ran, l.trace]), ['main.js', 'gpures launch: main.js: the bundle is older than main.js']);
  });

  test('a code cache older than its bundle is not read, even one V8 would take', async () => {
    writeFileSync(file('gpures-bundle.cache'), validCache);
    ages({ main: -20, bundle: -5, cache: -10 });
    assert.deepEqual(await launch(['validate']).then((l) => [l.ran, l.trace]), [
      'bundle',
      'gpures launch: bundle without its code cache: the code cache is older than the bundle',
    ]);
    rmSync(file('gpures-bundle.cache'));
    assert.equal((await launch(['validate'])).trace, 'gpures launch: bundle without its code cache: no code cache');
    writeFileSync(file('gpures-bundle.cache'), validCache);
  });

  test('a code cache V8 refuses is said when asked, and nothing is said unasked', async () => {
    writeFileSync(file('gpures-bundle.cache'), Buffer.alloc(validCache.length, 7));
    ages({ main: -20, bundle: -10, cache: -5 });
    const asked = await launch(['validate']);
    assert.deepEqual(
      [asked.ran, asked.trace],
      ['bundle', 'gpures launch: bundle: V8 rejected its code cache (made by another node or under other flags), compiled from source'],
    );
    const unasked = await launch(['validate'], {});
    assert.deepEqual([unasked.ran, unasked.trace], ['bundle', '']);
    writeFileSync(file('gpures-bundle.cache'), validCache);
  });

  test('--help, -h, --version and -V run main.js, without reading the bundle', async () => {
    ages({ main: -20, bundle: -10, cache: -5 });
    for (const args of [['--help'], ['serves', 'up', '-h'], ['--version'], ['-V']]) {
      const l = await launch(args);
      assert.deepEqual([l.ran, l.trace], ['main.js', `gpures launch: main.js: ${args[args.length - 1]} needs no bundle`], args.join(' '));
    }
  });

  test("the build's own bundle runs with its cache, which V8 takes under bin/gpures's flags; --version is main.js's", async () => {
    const validate = await runProgram(GPURES, ['validate', EXAMPLE], TRACE);
    assert.equal(validate.code, 0, show(validate));
    assert.match(validate.stderr, /^gpures launch: bundle with its code cache$/m, show(validate));
    const version = await runProgram(GPURES, ['--version'], TRACE);
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    assert.deepEqual([version.code, version.stdout, version.stderr], [0, `${pkg.version}\n`, 'gpures launch: main.js: --version needs no bundle\n']);
  });
});
