// The files an operator gives (a manifest, a router config, a history) are read only up to a size
// that such a file can have: a path to something else (a log, a disk image, /dev/zero) is refused
// by its size, and never read into memory past it.
import { statSync } from 'node:fs';
import { open } from 'node:fs/promises';

/** A file larger than it may be, or one that could not be read: `reason` says which, as read as what. */
export class BoundedReadError extends Error {
  constructor(
    readonly file: string,
    readonly reason: string,
  ) {
    super(`${file}: ${reason}`);
  }
}

/** `size`: what the file's stat says; a pipe or device, read past the bound, has none. */
function tooLarge(file: string, what: string, size: number | undefined, maxBytes: number): BoundedReadError {
  return new BoundedReadError(file, `${what} is ${size === undefined ? 'more than' : `${size} bytes, larger than`} the ${maxBytes} bytes it may be`);
}

/** The file's text, read up to maxBytes: a regular file by its size, anything else (a pipe) by what it yields. */
export async function readBounded(file: string, what: string, maxBytes: number): Promise<string> {
  let handle;
  try {
    handle = await open(file, 'r');
  } catch (err) {
    throw new BoundedReadError(file, `cannot read ${what}: ${(err as Error).message}`);
  }
  try {
    const s = await handle.stat();
    if (s.isFile() && s.size > maxBytes) throw tooLarge(file, what, s.size, maxBytes);
    // One byte past the bound tells a pipe that is too long from one that fits.
    const buf = Buffer.alloc((s.isFile() ? s.size : maxBytes) + 1);
    let n = 0;
    for (;;) {
      const { bytesRead } = await handle.read(buf, n, buf.length - n, null);
      if (bytesRead === 0) break;
      n += bytesRead;
      if (n > maxBytes) throw tooLarge(file, what, undefined, maxBytes);
      if (n === buf.length) break;
    }
    return buf.subarray(0, n).toString('utf8');
  } catch (err) {
    if (err instanceof BoundedReadError) throw err;
    throw new BoundedReadError(file, `cannot read ${what}: ${(err as Error).message}`);
  } finally {
    await handle.close();
  }
}

/** The same bound, synchronously, for a caller that reads the (regular) file itself. */
export function checkSize(file: string, what: string, maxBytes: number): void {
  const s = statSync(file);
  if (s.isFile() && s.size > maxBytes) throw tooLarge(file, what, s.size, maxBytes);
}
