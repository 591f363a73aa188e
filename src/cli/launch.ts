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
// is not used: the compiled files are, as before. Nor for --help and --version, which need
// commander and a few small files only: reading the bundle (1.3 MB) and its cache (0.6 MB) and
// deserializing the cache cost them more than the compiled files' loading does.
//
// GPURES_LAUNCH_TRACE=1 says on stderr which the launcher ran and why, and whether V8 took the
// code cache: a cache V8 refuses (a node of another version, other flags) is otherwise only slower.
import { isAscii } from 'node:buffer';
import { readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { Script } from 'node:vm';

export const CLI_BUNDLE = join(__dirname, 'gpures-bundle.js');
export const CLI_CODE_CACHE = join(__dirname, 'gpures-bundle.cache');
const COMPILED_MAIN = join(__dirname, 'main.js');
/** The variable that makes the launcher say what it ran. */
export const LAUNCH_TRACE_ENV = 'GPURES_LAUNCH_TRACE';

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

/**
 * The bundle's text. The build keeps it ASCII (its comments' other characters escaped), which is
 * read one byte a character: decoding it as UTF-8, with those few characters in it, cost 27 ms of
 * CPU at load 18 against under 1 ms (and V8 then held it as a two-byte string). A bundle that is
 * not ASCII is decoded as UTF-8, as before.
 */
export function readCliBundle(): string {
  const bytes = readFileSync(CLI_BUNDLE);
  return isAscii(bytes) ? bytes.toString('latin1') : bytes.toString('utf8');
}

/** The modification time of a file, or undefined when it cannot be read. */
function mtimeOf(file: string): number | undefined {
  try {
    return statSync(file).mtimeMs;
  } catch {
    return undefined;
  }
}

/** Flags that make commander print and exit before any command runs. */
const PRINT_ONLY = new Set(['--help', '-h', '--version', '-V']);

/** The modification times the choice is made from (undefined: the file is not there). */
export interface LaunchFiles {
  main?: number;
  bundle?: number;
  cache?: number;
}

export type LaunchChoice = { run: 'main.js'; why: string } | { run: 'bundle'; cache: boolean; why: string };

/**
 * Which to run. V8 checks a code cache against its source's length only, so a cache is used only
 * when it was written after the bundle (the build removes the old one before it writes a bundle).
 */
export function launchChoice(files: LaunchFiles, args: readonly string[]): LaunchChoice {
  if (files.main === undefined) return { run: 'main.js', why: 'no main.js to compare the bundle with' };
  if (files.bundle === undefined) return { run: 'main.js', why: 'no bundle' };
  if (files.bundle < files.main) return { run: 'main.js', why: 'the bundle is older than main.js' };
  if (args.some((a) => PRINT_ONLY.has(a))) return { run: 'main.js', why: `${args.find((a) => PRINT_ONLY.has(a))} needs no bundle` };
  if (files.cache === undefined) return { run: 'bundle', cache: false, why: 'no code cache' };
  if (files.cache < files.bundle) return { run: 'bundle', cache: false, why: 'the code cache is older than the bundle' };
  return { run: 'bundle', cache: true, why: 'the code cache is newer than the bundle' };
}

function trace(line: string): void {
  if (process.env[LAUNCH_TRACE_ENV] === '1') process.stderr.write(`gpures launch: ${line}\n`);
}

/** The code cache's bytes, or undefined when it cannot be read: V8 then compiles the bundle itself, only slower. */
function readCodeCache(): Buffer | undefined {
  try {
    return readFileSync(CLI_CODE_CACHE);
  } catch (err) {
    trace(`code cache unreadable (${err instanceof Error ? err.message : String(err)})`);
    return undefined;
  }
}

/** The CLI's main for this command line (argv as node gives it): the bundle's, else the compiled main.js's. */
export async function cliMain(argv: readonly string[] = process.argv): Promise<CliMain> {
  const choice = launchChoice({ main: mtimeOf(COMPILED_MAIN), bundle: mtimeOf(CLI_BUNDLE), cache: mtimeOf(CLI_CODE_CACHE) }, argv.slice(2));
  if (choice.run === 'main.js') {
    trace(`main.js: ${choice.why}`);
    return (await import('./main')).main;
  }
  const cachedData = choice.cache ? readCodeCache() : undefined;
  const script = compileCliBundle(readCliBundle(), cachedData);
  if (!cachedData) trace(`bundle without its code cache: ${choice.why}`);
  else if (script.cachedDataRejected) trace(`bundle: V8 rejected its code cache (made by another node or under other flags), compiled from source`);
  else trace('bundle with its code cache');
  return runCliBundle(script);
}
