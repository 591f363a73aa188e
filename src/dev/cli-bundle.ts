// `node dist/src/dev/cli-bundle.js`: the last step of `npm run build`, the CLI as one file and its
// V8 code cache (src/cli/launch.ts runs them; issue 15, docs/performance.md "The CLI's `gpures
// ledger`"). esbuild bundles src/cli/main.ts from the TypeScript. zod, commander, smol-toml and
// @temporalio/envconfig are bundled; every other npm package stays outside and is required from
// node_modules as before: the Temporal SDK (one copy of its classes for every `instanceof`),
// dockerode, fastify, prom-client. zod's entry points re-export its 63 locale tables as a namespace
// (`export * as locales`), which our `z.` keeps whole in any bundle; gpures shows zod's English
// only (zod imports it from locales/en.js itself), so that index is bundled as an empty module: at
// build time, in a copy of zod no other code shares.
//
// The code cache is made by running the bundle once (`gpures validate` on the example manifest)
// in a node started with bin/gpures's own flags: V8 refuses a cache made under other flags.
import { execFileSync } from 'node:child_process';
import { readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { build } from 'esbuild';
import { CLI_BUNDLE, CLI_CODE_CACHE, compileCliBundle, readCliBundle, runCliBundle } from '../cli/launch';

const ROOT = join(__dirname, '..', '..', '..');
/**
 * Libraries the bundle takes in; every other dependency is required at run time. Only our code
 * imports these (no package left outside does), so the bundle's copy is the only one: envconfig's
 * TOML reader is the bundle's smol-toml, and its own imports of @temporalio/common stay outside.
 */
const BUNDLED_PACKAGES = new Set(['zod', 'commander', 'smol-toml', '@temporalio/envconfig']);
const CACHE_RUN = ['validate', join(ROOT, 'examples', 'primary-node', 'serves.toml')];

function writeWhole(file: string, data: string | Uint8Array): void {
  writeFileSync(`${file}.tmp`, data);
  renameSync(`${file}.tmp`, file);
}

/** zod's index of every locale, as its own entry points import it. */
const ZOD_LOCALES_INDEX = /^\.\.\/locales\/index\.js$/;

/** bin/gpures's node flags, from its `#!/usr/bin/env -S node FLAGS` line. */
function launcherFlags(): string[] {
  const shebang = readFileSync(join(ROOT, 'bin', 'gpures'), 'utf8').split('\n', 1)[0] ?? '';
  const words = shebang.split(/\s+/);
  return words.slice(words.indexOf('node') + 1).filter((w) => w.startsWith('--'));
}

async function bundle(): Promise<number> {
  const localesLeftOut = new Set<string>();
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
  const result = await build({
    absWorkingDir: ROOT,
    entryPoints: ['src/cli/main.ts'],
    bundle: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    // The worker runs from the bundle too: a class renamed for the bundle's one scope (esbuild adds a
    // digit to a name two modules share) would change the failure type the SDK records for it.
    keepNames: true,
    external: Object.keys(pkg.dependencies).filter((d) => !BUNDLED_PACKAGES.has(d)),
    // import() as tsc compiles it (a require in a promise): the launcher's vm.Script has no loader
    // for a real one, which rejected log-update's and left a terminal without its redraw.
    supported: { 'dynamic-import': false },
    write: false,
    logLevel: 'warning',
    legalComments: 'none',
    outfile: CLI_BUNDLE,
    // The workflow code's paths (src/worker/workflow-code.ts) are resolved when the worker or a replay
    // runs: from the bundle beside main.js they name the compiled dist/src/workflows, as before.
    plugins: [
      {
        // envconfig requires smol-toml and our code imports it: esbuild would take its CommonJS and its
        // ES build, two copies, and our `instanceof TomlError` would miss envconfig's errors. One file for both.
        name: 'one-smol-toml',
        setup: (b) => b.onResolve({ filter: /^smol-toml$/ }, () => ({ path: require.resolve('smol-toml', { paths: [ROOT] }) })),
      },
      {
        name: 'require-resolve-at-run-time',
        setup: (b) => b.onResolve({ filter: /.*/ }, (a) => (a.kind === 'require-resolve' ? { external: true } : undefined)),
      },
      {
        name: 'zod-english-only',
        setup: (b) => {
          b.onResolve({ filter: ZOD_LOCALES_INDEX }, (a) => {
            if (!/[\\/]node_modules[\\/]zod[\\/]/.test(a.importer)) return undefined;
            localesLeftOut.add(a.importer);
            return { path: 'zod-locales', namespace: 'left-out' };
          });
          b.onLoad({ filter: /.*/, namespace: 'left-out' }, () => ({ contents: 'export {};', loader: 'js' }));
        },
      },
    ],
  });
  // A zod whose files moved would bring its locales back: said, not failed (only slower).
  if (!localesLeftOut.size) process.stderr.write(`cli bundle: zod's locales index was not found to leave out (zod's layout changed?): they are bundled\n`);
  const [out] = result.outputFiles;
  if (!out) throw new Error('esbuild wrote no bundle');
  // The old cache goes first: one left beside a new bundle of the same length would pass V8's check.
  rmSync(CLI_CODE_CACHE, { force: true });
  const text = asciiOnly(out.text);
  writeWhole(CLI_BUNDLE, text);
  return text.length;
}

/**
 * esbuild escapes every character beyond ASCII in code (charset 'ascii', its default) but keeps the
 * comments it keeps as written: escaped there too, the bundle is ASCII, which the launcher reads
 * without decoding UTF-8 (readCliBundle).
 */
function asciiOnly(code: string): string {
  return code.replace(/[\u0080-\uffff]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

/** In the child: run one command from the bundle, then keep what V8 compiled for it. */
async function writeCodeCache(): Promise<void> {
  const script = compileCliBundle(readCliBundle());
  const code = await runCliBundle(script)(['node', 'gpures', ...CACHE_RUN]);
  if (code !== 0) throw new Error(`gpures ${CACHE_RUN.join(' ')} exited ${code}`);
  writeWhole(CLI_CODE_CACHE, script.createCachedData());
}

async function main(): Promise<void> {
  if (process.argv[2] === '--code-cache') return writeCodeCache();
  const bytes = await bundle();
  execFileSync(process.execPath, [...launcherFlags(), __filename, '--code-cache'], { stdio: ['ignore', 'ignore', 'inherit'], timeout: 60_000 });
  const cache = readFileSync(CLI_CODE_CACHE).byteLength;
  process.stderr.write(`cli bundle: ${CLI_BUNDLE} (${Math.round(bytes / 1024)} KiB, code cache ${Math.round(cache / 1024)} KiB)\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`cli bundle: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
});
