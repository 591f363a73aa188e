// What a command is: it takes its parsed options and a context, and returns what it found as data.
// It never writes to stdout or stderr nor exits: the program layer (main.ts) does, so `--json`
// prints only the result and every exit code comes from one table (exit-codes.ts).
import type { CliEnv } from '../config/env';
import type { StatusLine } from '../client/follow';

export interface Rendered {
  /** What --json prints. */
  data: unknown;
  /** What a person reads. */
  text: string[];
  exitCode: number;
}

export interface CommandContext {
  env: CliEnv;
  /** Reads what `env` says (the environment, checked) before a command runs; --help and usage errors never need it. */
  prepare?(): Promise<void>;
  /** One line for the operator as it happens (progress, warnings, notes): stderr, so stdout stays the result. */
  note(line: string): void;
  /**
   * The step under way (undefined: none): redrawn in place under the notes on a terminal; off one,
   * or with --json, appended as plain lines when it says something new. stderr too.
   */
  status(line: StatusLine | undefined): void;
  /**
   * Until the returned function is called, Ctrl-C prints what `message` says (if anything) and exits
   * with EXIT.interrupted: following an operation stops, the workflow goes on.
   */
  onInterrupt(message: () => string | undefined): () => void;
  /**
   * Part of the result, on stdout as it comes, for a command whose result is a stream (`serves
   * logs --follow`); resolves once stdout took it. Such a command returns no text of its own.
   */
  write?: (text: string) => Promise<void>;
  /** Resolves on SIGINT or SIGTERM: how a command that serves until stopped (api) ends. */
  stopped(): Promise<void>;
}
