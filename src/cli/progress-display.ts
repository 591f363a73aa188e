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

type LogUpdate = ReturnType<typeof LogUpdateModule.createLogUpdate>;

/**
 * Status lines redrawn in place. log-update is an ES module, loaded (Node ≥ 20.19 requires an ES
 * module from CommonJS) when the first status line is drawn, not by every command on a terminal:
 * `validate` or `serves list` never draw one. The line drawn meanwhile is drawn once it has loaded;
 * if it cannot be, status lines are written as a plain display would.
 */
export function terminalDisplay(stream: NodeJS.WriteStream): ProgressDisplay {
  const plain = plainDisplay((text) => stream.write(text));
  let live: LogUpdate | undefined;
  let loading: Promise<void> | undefined;
  let failed = false;
  let shown: string | undefined;
  const load = () =>
    import('log-update').then(
      ({ createLogUpdate }) => {
        // The cursor stays shown: a follower killed mid-redraw must not leave the terminal without one.
        live = createLogUpdate(stream, { showCursor: true });
        if (shown !== undefined) live(shown);
      },
      () => {
        failed = true;
        if (shown !== undefined) plain.status({ text: shown, key: shown, figures: true });
      },
    );
  return {
    note(line) {
      // Written as it is, not through log-update's wrapping: a long line stays one line to copy.
      if (live && shown !== undefined) live.clear();
      stream.write(`${line}\n`);
      if (live && shown !== undefined) live(shown);
    },
    status(s) {
      if (!s) {
        if (live && shown !== undefined) live.clear();
        shown = undefined;
        if (failed) plain.status(undefined);
        return;
      }
      shown = s.text;
      if (live) live(s.text);
      else if (failed) plain.status(s);
      else loading ??= load();
    },
  };
}
