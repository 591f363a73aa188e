// `gpures serves logs`: its options checked against LOG_BOUNDS (bounds.ts), and the serve's output cut into lines with
// the serve's secrets taken out. Pure: the command reads the box (src/cli/commands/serves-logs.ts).
import { LOG_BOUNDS } from './bounds';
import { formatDuration, parseDuration } from './lease';
import { redactSecrets } from './serve';
import type { ServeSpec } from './types';

export interface LogsInput {
  tail?: string;
  since?: string;
}

export interface LogsOptions {
  tail: number;
  /** Seconds back from now; undefined: from the container's first line (within --tail). */
  sinceS?: number;
}

/** The options checked, or the problems, each naming its flag. */
export function logsOptions(input: LogsInput): { ok: true; options: LogsOptions } | { ok: false; problems: string[] } {
  const problems: string[] = [];
  let tail: number = LOG_BOUNDS.tail.default;
  if (input.tail !== undefined) {
    const n = /^\d+$/.test(input.tail.trim()) ? Number(input.tail.trim()) : NaN;
    if (!Number.isSafeInteger(n) || n < 1 || n > LOG_BOUNDS.tail.max) {
      problems.push(`--tail: a whole number of lines in 1..${LOG_BOUNDS.tail.max} (got '${input.tail}')`);
    } else tail = n;
  }
  let sinceS: number | undefined;
  if (input.since !== undefined) {
    const s = parseDuration(input.since);
    if (s === undefined || s < 1 || s > LOG_BOUNDS.sinceS.max) {
      problems.push(
        `--since: a duration back from now such as 90s, 30m, 2h or 1d, at most ${formatDuration(LOG_BOUNDS.sinceS.max * 1000)} (got '${input.since}')`,
      );
    } else sinceS = s;
  }
  return problems.length ? { ok: false, problems } : { ok: true, options: { tail, ...(sinceS !== undefined ? { sinceS } : {}) } };
}

/**
 * The serve's output as whole lines, its secret values (env values, secret flags' values: vLLM
 * prints its arguments) replaced wherever they appear. A chunk may end inside a line (or inside a
 * multi-byte character): the rest waits for the next chunk, up to maxLineBytes.
 */
export class LogLines {
  private pending: Buffer = Buffer.alloc(0);

  constructor(private readonly serve: ServeSpec | undefined) {}

  /** The whole lines this chunk completes, redacted, each ending in '\n'. */
  push(chunk: Buffer): string {
    this.pending = this.pending.length ? Buffer.concat([this.pending, chunk]) : chunk;
    const end = this.pending.lastIndexOf(0x0a);
    if (end < 0) {
      if (this.pending.length <= LOG_BOUNDS.maxLineBytes) return '';
      return this.flush();
    }
    const whole = this.pending.subarray(0, end + 1);
    this.pending = this.pending.subarray(end + 1);
    return this.redact(whole.toString('utf8'));
  }

  /** What is left of a last line without its newline. */
  flush(): string {
    const rest = this.pending;
    this.pending = Buffer.alloc(0);
    return rest.length ? this.redact(rest.toString('utf8')) : '';
  }

  private redact(text: string): string {
    return this.serve ? redactSecrets(text, this.serve) : text;
  }
}

/** The last `maxBytes` of what is pushed, whole lines only: what an answer without --follow prints. */
export class LastBytes {
  private parts: string[] = [];
  private bytes = 0;
  /** Bytes of output dropped from the front. */
  dropped = 0;

  constructor(private readonly maxBytes: number = LOG_BOUNDS.maxBytes) {}

  push(text: string): void {
    if (!text) return;
    this.parts.push(text);
    this.bytes += Buffer.byteLength(text);
    while (this.bytes > this.maxBytes && this.parts.length) {
      const first = this.parts.shift() as string;
      const size = Buffer.byteLength(first);
      this.bytes -= size;
      this.dropped += size;
    }
  }

  text(): string {
    return this.parts.join('');
  }
}

/** The note above an answer whose first bytes were left out. */
export function droppedNote(dropped: number, tail: number): string {
  return `the first ${dropped} bytes of the last ${tail} lines are left out: one answer prints at most ${LOG_BOUNDS.maxBytes / (1024 * 1024)} MiB; ask a smaller --tail or --since`;
}

/**
 * A failed start's last lines, as the worker keeps them when its compensation removes the
 * container (and its log with it): what `gpures serves logs` prints when there is no container.
 */
export interface FailedStartLog {
  container: string;
  serve: string;
  /** The run whose start failed: its workflow id and run id. */
  workflowId: string;
  runId: string;
  /** When the compensation kept them (just before the removal). */
  atEpochMs: number;
  /** The container's end, e.g. 'exited with exit code 3'. */
  end: string;
  /** Whole lines, each ending in '\n', redacted, within LOG_BOUNDS.failedStart. */
  text: string;
}

/** The last lines of `text` within LOG_BOUNDS.failedStart: at most its lines, whole lines within its bytes. */
export function failedStartTail(text: string): string {
  const { lines, bytes } = LOG_BOUNDS.failedStart;
  const all = text.split('\n');
  if (all[all.length - 1] === '') all.pop();
  const kept: string[] = [];
  let size = 0;
  for (let i = all.length - 1; i >= 0 && kept.length < lines; i--) {
    const line = all[i] as string;
    size += Buffer.byteLength(line) + 1;
    if (size > bytes) break;
    kept.unshift(line);
  }
  return kept.length ? `${kept.join('\n')}\n` : '';
}

/** The note above a failed start's kept lines: whose they are, from which run, and when. */
export function failedStartNote(kept: FailedStartLog, shown: number): string {
  return (
    `${kept.container} is gone: its last ${shown} line(s), kept from the start that failed at ${new Date(kept.atEpochMs).toISOString()} ` +
    `(${kept.workflowId} run ${kept.runId}; the container ${kept.end}, then its compensation removed it):`
  );
}
