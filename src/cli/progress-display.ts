// How progress reaches the operator's stderr. On a terminal the step under way is one status
// line redrawn in place under the completed steps (log-update does the redraw: it erases what it
// drew last, wrapped lines included, and keeps notes written meanwhile in the scrollback). Off a
// terminal, or with --json, every line is appended as it is: a status line when what it says
// changes (another step, another in-flight count), else at most every PLAIN_STATUS_EVERY_MS, so a
// log of a two-minute drain or model load is readable rather than a line per poll; a line with no
// figure (only how long a step has run) is left out until the step has run that long.
import type * as LogUpdateModule from 'log-update';
import type { StatusLine } from '../client/follow';

export interface ProgressDisplay {
  /** A line that stays: a step, an outcome, a warning. */
  note(line: string): void;
  /** The step under way; undefined clears it. */
  status(line: StatusLine | undefined): void;
}

export const PLAIN_STATUS_EVERY_MS = 5000;

export function plainDisplay(write: (text: string) => void, now: () => number = Date.now): ProgressDisplay {
  let last: { key: string; at: number } | undefined;
  return {
    note: (line) => write(`${line}\n`),
    status(s) {
      if (!s) {
        last = undefined;
        return;
      }
      // A line that says only how long a step has taken is news once the step has taken a while.
      if (!s.figures && (s.sinceMs ?? 0) < PLAIN_STATUS_EVERY_MS) return;
      if (last?.key === s.key && now() - last.at < PLAIN_STATUS_EVERY_MS) return;
      last = { key: s.key, at: now() };
      write(`${s.text}\n`);
    },
  };
}

type LogUpdate = typeof LogUpdateModule;

/**
 * log-update is an ES module and this project compiles to CommonJS, where TypeScript turns an
 * `import()` into a `require()`: Node 20 before 20.19 cannot require an ES module. A Function
 * keeps the dynamic import as written.
 */
// eslint-disable-next-line @typescript-eslint/no-implied-eval
const importEsm = new Function('specifier', 'return import(specifier)') as (specifier: string) => Promise<LogUpdate>;

export async function terminalDisplay(stream: NodeJS.WriteStream): Promise<ProgressDisplay> {
  const { createLogUpdate } = await importEsm('log-update');
  // The cursor stays shown: a follower killed mid-redraw must not leave the terminal without one.
  const live = createLogUpdate(stream, { showCursor: true });
  let shown: string | undefined;
  return {
    note(line) {
      // Written as it is, not through log-update's wrapping: a long line stays one line to copy.
      if (shown !== undefined) live.clear();
      stream.write(`${line}\n`);
      if (shown !== undefined) live(shown);
    },
    status(s) {
      if (!s) {
        if (shown !== undefined) live.clear();
        shown = undefined;
        return;
      }
      shown = s.text;
      live(s.text);
    },
  };
}
