// Free loopback ports in 10000..19999: below the serves' 20000+ (box.ts), below the kernel's
// ephemeral range (no client connection nor listen(0) takes one between the pick and the bind), and
// within the smallint a membership port is stored in (src/dev/prod-temporal-config.ts). For the
// production-shaped Temporal's tests and a worker's /metrics address.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

const LOW = 10000;
const HIGH = 20000;

let rangeChecked = false;

/** This range's promise holds only where the kernel's ephemeral range starts above it (read once a process). */
function checkEphemeralRange(): void {
  if (rangeChecked) return;
  const file = '/proc/sys/net/ipv4/ip_local_port_range';
  const low = Number(readFileSync(file, 'utf8').trim().split(/\s+/)[0]);
  if (!(low >= HIGH))
    throw new Error(`${file}: the ephemeral range starts at ${low}, inside ${LOW}..${HIGH - 1}: these ports could be taken between the pick and the bind`);
  rangeChecked = true;
}

/** Whether something listens on 127.0.0.1:port now (our bind fails). */
export function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(true));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(false)));
  });
}

/** `count` ports nobody listens on now; with `block`, consecutive (the command lays its ports out from --port). */
export async function freeLowPorts(count: number, opts: { block?: boolean } = {}): Promise<number[]> {
  checkEphemeralRange();
  const ports: number[] = [];
  while (ports.length < count) {
    if (opts.block) {
      const base = LOW + Math.floor(Math.random() * (HIGH - LOW - count));
      const block = Array.from({ length: count }, (_, i) => base + i);
      let free = true;
      for (const p of block) {
        if (await listening(p)) {
          free = false;
          break;
        }
      }
      if (free) return block;
      continue;
    }
    const port = LOW + Math.floor(Math.random() * (HIGH - LOW));
    if (!ports.includes(port) && !(await listening(port))) ports.push(port);
  }
  return ports;
}
