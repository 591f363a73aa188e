// The files an operator gives (a manifest, a router config, a history) are read only up to a size
// that such a file can have: a path to something else (a log, a disk image, /dev/zero) is refused
// by its size, and never read into memory past it.
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';

/** A file larger than it may be, or one that could not be read: `reason` says which, as read as what. */
export class BoundedReadError extends Error {
  constructor(
    readonly file: string,
    readonly reason: string,
  ) {
    super(`${file}: ${reason}`);
  }
}

/**
 * Why JSON.parse refused a file's text, without the text: V8 quotes some ten bytes around where it
 * stopped (`Unexpected token 's', "sk-live-01"... is not valid JSON`), and a file given by mistake
 * may hold a secret there.
 */
export function notJsonReason(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).replace(/, (?:\.\.\.)?".*"(?:\.\.\.)? is not valid JSON$/s, '');
}

/** `size`: what the file's stat says; a pipe or device, read past the bound, has none. */
function tooLarge(file: string, what: string, size: number | undefined, maxBytes: number): BoundedReadError {
  return new BoundedReadError(file, `${what} is ${size === undefined ? 'more than' : `${size} bytes, larger than`} the ${maxBytes} bytes it may be`);
}

/** Node's fs error without the path it ends with (`ENOENT: no such file or directory`): the message names the file first. */
function withoutPath(err: unknown): string {
  return (err instanceof Error ? err.message : String(err)).replace(/, \w+ '.*'$/s, '');
}

/** The file's text, read up to maxBytes: a regular file by its size, anything else (a pipe) by what it yields. */
export function readBoundedSync(file: string, what: string, maxBytes: number): string {
  let fd: number;
  try {
    fd = openSync(file, 'r');
  } catch (err) {
    throw new BoundedReadError(file, `cannot read ${what}: ${withoutPath(err)}`);
  }
  try {
    const s = fstatSync(fd);
    if (s.isFile() && s.size > maxBytes) throw tooLarge(file, what, s.size, maxBytes);
    const buf = Buffer.alloc((s.isFile() ? s.size : maxBytes) + 1);
    let n = 0;
    for (;;) {
      const read = readSync(fd, buf, n, buf.length - n, null);
      if (read === 0) break;
      n += read;
      if (n > maxBytes) throw tooLarge(file, what, undefined, maxBytes);
      if (n === buf.length) break;
    }
    return buf.subarray(0, n).toString('utf8');
  } catch (err) {
    if (err instanceof BoundedReadError) throw err;
    throw new BoundedReadError(file, `cannot read ${what}: ${withoutPath(err)}`);
  } finally {
    closeSync(fd);
  }
}

/**
 * The same for an async caller. Read synchronously: the files are at most a few MiB and local,
 * and one implementation keeps the bound in one place.
 */
export function readBounded(file: string, what: string, maxBytes: number): Promise<string> {
  // Thrown in the executor, a refusal is the promise's rejection.
  return new Promise((resolve) => resolve(readBoundedSync(file, what, maxBytes)));
}
