// Small facts about the Docker Engine API that both Docker adapters need.

/** The HTTP status of a dockerode error (404 absent, 304 already so, 409 conflict). */
export function statusCode(err: unknown): number | undefined {
  return typeof err === 'object' && err !== null && 'statusCode' in err ? (err as { statusCode?: number }).statusCode : undefined;
}

/** Docker multiplexes stdout/stderr frames with an 8-byte header when no TTY is attached. */
export function demuxLogs(buf: Buffer): string {
  return Buffer.concat(new LogFrames().push(buf)).toString('utf8');
}

/** The same frames read as they stream: a chunk may end inside a header or a payload, kept for the next. */
export class LogFrames {
  private rest: Buffer = Buffer.alloc(0);

  /** The payloads this chunk completes. */
  push(chunk: Buffer): Buffer[] {
    const buf = this.rest.length ? Buffer.concat([this.rest, chunk]) : chunk;
    const out: Buffer[] = [];
    let i = 0;
    while (i + 8 <= buf.length) {
      const size = buf.readUInt32BE(i + 4);
      if (i + 8 + size > buf.length) break;
      out.push(buf.subarray(i + 8, i + 8 + size));
      i += 8 + size;
    }
    this.rest = buf.subarray(i);
    return out;
  }
}
