// Between two of the box's processes (the router and the acquisition API, a worker and the
// router's admin API): forwards everything, but while stalled holds the requests a test names,
// each forwarded only once released (then it gets what the target answers then).
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export class StallingProxy {
  private stalled: Promise<void> | undefined;
  private release: () => void = () => undefined;
  private server: http.Server | undefined;
  /** Requests held so far, each counted as it is held. */
  held = 0;

  /** holds: which requests a stall holds (the rest go through at once). */
  constructor(private readonly holds: (method: string, url: string) => boolean) {}

  async start(target: string): Promise<string> {
    this.server = http.createServer((req, res) => void this.forward(target, req, res));
    await new Promise<void>((r) => this.server?.listen(0, '127.0.0.1', r));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  stall(): void {
    this.stalled = new Promise((r) => (this.release = r));
  }

  resume(): void {
    this.stalled = undefined;
    this.release();
  }

  close(): Promise<void> {
    this.resume();
    return new Promise((r) => (this.server ? this.server.close(() => r()) : r()));
  }

  private async forward(target: string, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    if (this.stalled && this.holds(req.method ?? 'GET', req.url ?? '/')) {
      this.held += 1;
      await this.stalled;
    }
    const headers: Record<string, string> = {};
    for (const h of ['authorization', 'content-type']) if (typeof req.headers[h] === 'string') headers[h] = req.headers[h];
    try {
      const up = await fetch(`${target}${req.url ?? '/'}`, { method: req.method, headers, ...(chunks.length ? { body: Buffer.concat(chunks) } : {}) });
      res.writeHead(up.status, { 'content-type': up.headers.get('content-type') ?? 'application/json' });
      res.end(Buffer.from(await up.arrayBuffer()));
    } catch {
      res.destroy();
    }
  }
}
