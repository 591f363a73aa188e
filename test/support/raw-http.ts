// A client that sends exactly what it is told, when it is told: headers without their body, a body
// trickled a byte at a time, nothing at all. fetch cannot stall mid-request, so the servers'
// bounds on receiving a request are tested through a bare socket.
import http from 'node:http';
import { createConnection } from 'node:net';
import type { AddressInfo } from 'node:net';

export interface RawConnection {
  /** Everything the server sent so far. */
  received(): string;
  write(text: string): void;
  /** Writes bytes; resolves once the socket has handed them all to the kernel (the peer is reading them), or it closed. */
  send(bytes: string | Uint8Array): Promise<void>;
  /** Resolves when the server closes the connection, with the ms since it opened; undefined if still open after withinMs. */
  closed(withinMs: number): Promise<number | undefined>;
  destroy(): void;
}

export async function rawConnection(url: string): Promise<RawConnection> {
  const { hostname, port } = new URL(url);
  const opened = Date.now();
  const socket = createConnection({ host: hostname, port: Number(port) });
  await new Promise<void>((resolve, reject) => socket.once('connect', resolve).once('error', reject));
  let text = '';
  socket.on('data', (d: Buffer) => (text += d.toString('utf8')));
  // A reset is a close too: the server may drop a connection rather than end it.
  socket.on('error', () => undefined);
  const closing = new Promise<number>((resolve) => socket.once('close', () => resolve(Date.now() - opened)));
  return {
    received: () => text,
    write: (t) => {
      if (!socket.destroyed) socket.write(t);
    },
    send: (bytes) =>
      new Promise<void>((resolve) => {
        if (socket.destroyed) return resolve();
        socket.once('close', () => resolve());
        socket.write(bytes, () => resolve());
      }),
    closed: (withinMs) => {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<undefined>((resolve) => (timer = setTimeout(resolve, withinMs, undefined)));
      return Promise.race([closing, late]).finally(() => clearTimeout(timer));
    },
    destroy: () => socket.destroy(),
  };
}

/** Writes one byte of `body` every `everyMs` until it is all sent or the connection closes. */
export function trickle(c: RawConnection, body: string, everyMs: number): () => void {
  let i = 0;
  const timer = setInterval(() => {
    if (i >= body.length) return clearInterval(timer);
    c.write(body[i++] ?? '');
  }, everyMs);
  return () => clearInterval(timer);
}

/** A port nothing listens on (bind, note, close): a backend that is down. */
export async function deadPort(): Promise<number> {
  const s = http.createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

/** GET 127.0.0.1:PORT/PATH with exactly these headers (a Host that fetch would not send, say). */
export function httpGet(port: number, path: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  return new Promise((ok, fail) => {
    const req = http.request({ host: '127.0.0.1', port, path, headers }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => ok({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', fail);
    req.end();
  });
}
