// The program layer's edge: runs one command line, writes its result to stdout (text, or with
// --json only JSON) and everything else to stderr, and answers the exit code. bin/gpures runs this.
import type { CommandContext, Rendered } from './command';
import type { CliEnv } from '../config/env';
import { CliError, commanderExit, EXIT, missingNamespace, unexpectedExit, unexpectedMessage } from './exit-codes';
import { buildProgram } from './program';
import { plainDisplay, terminalDisplay } from './progress-display';
import type { ProgressDisplay } from './progress-display';

/** A malformed variable is the operator's input: exit 2 naming it, for every command, as a bad flag is. */
async function checkedEnv(): Promise<CliEnv> {
  const { cliEnv, EnvError } = await import('../config/env');
  try {
    return cliEnv(process.env);
  } catch (err) {
    if (err instanceof EnvError) throw new CliError(err.message, EXIT.badInput);
    throw err;
  }
}

/** What commands may ask of the process, done here so that no command writes or exits itself. */
function processContext(display: ProgressDisplay): CommandContext {
  let env: CliEnv | undefined;
  return {
    // Read before a command runs (prepare): --help and a usage error need none of it, nor zod, which checks it.
    get env(): CliEnv {
      if (!env) throw new Error('the environment is read by prepare() before a command runs');
      return env;
    },
    async prepare() {
      env ??= await checkedEnv();
    },
    note: (line) => display.note(line),
    status: (line) => display.status(line),
    onInterrupt(message) {
      const onSigint = () => {
        const m = message();
        display.status(undefined);
        if (m) display.note(m);
        process.exit(EXIT.interrupted);
      };
      process.once('SIGINT', onSigint);
      return () => process.removeListener('SIGINT', onSigint);
    },
    write: (text) => {
      // A reader gone (`serves logs --follow | head`): it has all it wanted, so the command ends as it would at its end.
      if (process.stdout.listenerCount('error') === 0) {
        process.stdout.on('error', (err: NodeJS.ErrnoException) => {
          if (err.code !== 'EPIPE') throw err;
          process.exit(EXIT.ok);
        });
      }
      return new Promise<void>((resolve) => {
        if (process.stdout.write(text)) resolve();
        else process.stdout.once('drain', resolve);
      });
    },
    stopped: () =>
      new Promise<void>((resolve) => {
        process.once('SIGINT', resolve);
        process.once('SIGTERM', resolve);
      }),
  };
}

function write(r: Rendered, json: boolean): void {
  process.stdout.write(json ? `${JSON.stringify(r.data, null, 2)}\n` : r.text.map((l) => `${l}\n`).join(''));
}

export async function main(argv: string[]): Promise<number> {
  let json = argv.includes('--json');
  let exitCode: number = EXIT.ok;
  // Redrawn in place only for a person at a terminal: --json is for a program, which reads lines;
  // a terminal of no size (a pty nobody sized) would show nothing of a redraw.
  const terminal = process.stderr.isTTY && process.stderr.columns > 0 && process.stderr.rows > 0 && !json;
  const display = terminal ? terminalDisplay(process.stderr) : plainDisplay((text) => process.stderr.write(text));
  try {
    const program = buildProgram(processContext(display), (r, j) => {
      json = j;
      exitCode = r.exitCode;
      write(r, j);
    });
    await program.parseAsync(argv);
    return exitCode;
  } catch (err) {
    // A status line left by a follow the error cut short goes: the error is what stays.
    display.status(undefined);
    if (err instanceof CliError) {
      if (json) process.stdout.write(`${JSON.stringify({ error: { message: err.message, exitCode: err.exitCode, details: err.details } }, null, 2)}\n`);
      else process.stderr.write(`${err.message}\n`);
      return err.exitCode;
    }
    // commander's own usage errors and --help: it has printed them already.
    const usage = commanderExit(err);
    if (usage !== undefined) return usage;
    const code = unexpectedExit(err);
    const message = unexpectedMessage(err);
    const jsonMessage = missingNamespace(err) !== undefined ? message : err instanceof Error ? err.message : String(err);
    if (json) process.stdout.write(`${JSON.stringify({ error: { message: jsonMessage, exitCode: code } }, null, 2)}\n`);
    else process.stderr.write(`${message}\n`);
    return code;
  }
}

if (require.main === module) {
  main(process.argv).then(
    (code) => process.exit(code),
    (err: unknown) => {
      process.stderr.write(`gpures: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exit(EXIT.failed);
    },
  );
}
