// Small facts about the Docker Engine API that both Docker adapters need.

/** The HTTP status of a dockerode error (404 absent, 304 already so, 409 conflict). */
export function statusCode(err: unknown): number | undefined {
  return typeof err === 'object' && err !== null && 'statusCode' in err ? (err as { statusCode?: number }).statusCode : undefined;
}

/** Docker multiplexes stdout/stderr frames with an 8-byte header when no TTY is attached. */
export function demuxLogs(buf: Buffer): string {
  const out: Buffer[] = [];
  let i = 0;
  while (i + 8 <= buf.length) {
    const size = buf.readUInt32BE(i + 4);
    out.push(buf.subarray(i + 8, i + 8 + size));
    i += 8 + size;
  }
  return Buffer.concat(out).toString('utf8');
}
