// A Unix socket in front of another (dockerd's): a worker given it as DOCKER_HOST reaches Docker
// while it is open, and finds nothing there (ENOENT) while it is closed, as when dockerd restarts.
import { rmSync } from 'node:fs';
import net from 'node:net';

export class SocketProxy {
  private server: net.Server | undefined;
  private readonly open = new Set<net.Socket>();

  constructor(
    /** Where this proxy listens. */
    readonly path: string,
    /** The socket it forwards to. */
    private readonly target: string,
  ) {}

  async listen(): Promise<void> {
    rmSync(this.path, { force: true });
    const server = net.createServer((client) => {
      const up = net.connect(this.target);
      for (const s of [client, up]) {
        this.open.add(s);
        s.once('close', () => this.open.delete(s));
        s.on('error', () => (s === client ? up : client).destroy());
      }
      client.pipe(up).pipe(client);
    });
    await new Promise<void>((resolve, reject) => server.once('error', reject).listen(this.path, () => resolve()));
    this.server = server;
  }

  /** Stops listening and cuts every connection through it. */
  async close(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    for (const s of this.open) s.destroy();
    if (server) await new Promise<void>((r) => server.close(() => r()));
    rmSync(this.path, { force: true });
  }
}
