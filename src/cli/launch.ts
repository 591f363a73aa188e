// What bin/gpures runs (issue 15: `gpures ledger` within 300 ms): the CLI as one file, made by the
// build (src/dev/cli-bundle.ts), compiled with the V8 code cache the build wrote beside it. The
// bundle spares node's module loader its resolving, reading and wrapping of ~100 files, and leaves
// out the 64 locale tables zod's CommonJS entry loads; the code cache spares V8 compiling what a
// command ran at build time. Both live in dist/src/cli/, beside this file: no input (argument,
// variable, working directory) moves where they are read from.
//
// The bundle sits where main.js does, so the `__dirname`-relative paths of the code in it
// (package.json, ../workflows, the sibling directories of dist/src) resolve as they do from the
// compiled files. A bundle older than tsc's main.js (a `tsc` without `npm run build`'s bundle step)
// is not used: the compiled files are, as before.
import { readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { Script } from 'node:vm';

export const CLI_BUNDLE = join(__dirname, 'gpures-bundle.js');
export const CLI_CODE_CACHE = join(__dirname, 'gpures-bundle.cache');
const COMPILED_MAIN = join(__dirname, 'main.js');

export type CliMain = (argv: string[]) => Promise<number>;

/** The bundle as node would wrap a CommonJS file, compiled with the code cache when one is given. */
export function compileCliBundle(source: string, cachedData?: Buffer): Script {
  return new Script(`(function (exports, require, module, __filename, __dirname) {${source}\n})`, {
    filename: CLI_BUNDLE,
    ...(cachedData ? { cachedData } : {}),
  });
}

/** Runs the compiled bundle as a module at CLI_BUNDLE and answers its main. */
export function runCliBundle(script: Script): CliMain {
  const mod = { exports: {} as { main?: CliMain } };
  const wrapper = script.runInThisContext() as (e: object, r: NodeJS.Require, m: object, f: string, d: string) => void;
  wrapper.call(mod.exports, mod.exports, createRequire(CLI_BUNDLE), mod, CLI_BUNDLE, __dirname);
  if (typeof mod.exports.main !== 'function') throw new Error(`${CLI_BUNDLE}: exports no main`);
  return mod.exports.main;
}

/** The modification time of a file, or undefined when it cannot be read. */
function mtimeOf(file: string): number | undefined {
  try {
    return statSync(file).mtimeMs;
  } catch {
    return undefined;
  }
}

/**
 * V8 checks a code cache against its source's length only, so a cache is used only when it was
 * written after the bundle (the build removes the old one before it writes a bundle).
 */
function readCodeCache(bundleTime: number): Buffer | undefined {
  const cacheTime = mtimeOf(CLI_CODE_CACHE);
  if (cacheTime === undefined || cacheTime < bundleTime) return undefined;
  try {
    return readFileSync(CLI_CODE_CACHE);
  } catch {
    // Unreadable: V8 compiles the bundle itself, only slower.
    return undefined;
  }
}

/** The CLI's main: the bundle's, else the compiled main.js's. A cache V8 refuses (another node) is only slower. */
export async function cliMain(): Promise<CliMain> {
  const bundleTime = mtimeOf(CLI_BUNDLE);
  const mainTime = mtimeOf(COMPILED_MAIN);
  if (bundleTime === undefined || mainTime === undefined || bundleTime < mainTime) return (await import('./main')).main;
  return runCliBundle(compileCliBundle(readFileSync(CLI_BUNDLE, 'utf8'), readCodeCache(bundleTime)));
}
