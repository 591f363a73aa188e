// The demo's serves listen on the ports their manifest names (examples/primary-node: 30001…): a
// second demo left running (--keep) holds them, and every bring-up of this one then fails at its
// health with EADDRINUSE in the serve's output, eleven checks later. Asked once, before anything starts.
import { createServer } from 'node:net';
import type { ServeSpec } from '../domain/types';

/** `30001 (fast)` for each serve whose bind:port another process holds now. */
export async function servePortsInUse(serves: readonly Pick<ServeSpec, 'name' | 'bind' | 'port'>[]): Promise<string[]> {
  const taken: string[] = [];
  for (const s of serves) {
    const free = await new Promise<boolean>((resolve) => {
      const probe = createServer();
      probe.once('error', () => resolve(false));
      probe.listen({ host: s.bind, port: s.port, exclusive: true }, () => probe.close(() => resolve(true)));
    });
    if (!free) taken.push(`${s.port} (${s.name})`);
  }
  return taken;
}
