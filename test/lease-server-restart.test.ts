// A lease's timer is the Temporal server's: a dev server keeping its state in a SQLite file is
// killed and started again during the lease, and the lease still fires within moments of its time.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { devServerArgs, waitForServer } from '../src/dev/dev-server';
import { DEV_SERVER } from '../src/dev/toolchain';
import { serveAcquire, serveDown, serveUp, ledgerSnapshots } from '../src/client/operations';
import { startSimTestBox } from './support/sim';
import type { SimTestBox } from './support/sim';
import { leaseHandle, leaseTimes } from './support/lease';
import { freePort, temporalCliPath } from './support/temporal';
import { sleep } from './support/wait';

/** A dev server on a fixed port and database file, so a second start finds the first one's state. */
class PersistentDevServer {
  private child: ChildProcess | undefined;
  constructor(
    readonly port: number,
    readonly dbFilename: string,
  ) {}
  get address(): string {
    return `${DEV_SERVER.ip}:${this.port}`;
  }
  async start(): Promise<void> {
    this.child = spawn(temporalCliPath(), devServerArgs({ port: this.port, dbFilename: this.dbFilename }), { stdio: ['ignore', 'ignore', 'inherit'] });
    await waitForServer(this.address, this.child, 60_000);
  }
  /** SIGKILL: a crash, no orderly shutdown. */
  async kill(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
  }
}

describe('a lease across a Temporal dev server restart', () => {
  let server: PersistentDevServer;
  let t: SimTestBox;
  before(async () => {
    server = new PersistentDevServer(await freePort(), join(mkdtempSync(join(tmpdir(), 'gpures-lease-db-')), 'temporal.db'));
    await server.start();
    process.env['TEMPORAL_TEST_ADDRESS'] = server.address;
    t = await startSimTestBox(
      'lease-restart',
      [{ role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 }],
      [
        { name: 'fast', vram_mib: 14336, router_tier: 'fast-local' },
        { name: 'vision', vram_mib: 12288, class: 'evictable', served_model_name: 'qwen3-vl-4b-instruct', router_tier: 'vision-local' },
        { name: 'comfyui-sim', vram_mib: 8192, class: 'on-demand' },
      ],
    );
  });
  after(async () => {
    await t?.close();
    await server?.kill();
  });

  test('the server is killed and restarted mid-lease: the lease fires on time, vision is restored', async () => {
    for (const s of ['fast', 'vision']) assert.ok((await serveUp(t.temporal.client, t.node, s)).ok);
    const acq = await serveAcquire(t.temporal.client, t.node, { serve: 'comfyui-sim', evict: true, lease: { kind: 'fixed', seconds: 15 } });
    assert.ok(acq.ok, !acq.ok ? acq.message : '');
    const lease = leaseHandle(t.temporal.client, t.node, 'comfyui-sim');
    const view = await lease.view();

    await server.kill();
    await sleep(3000);
    await server.start();
    assert.ok(Date.now() < view.expiresAtEpochMs, 'the server is back before the lease expires');

    const result = await lease.result();
    assert.equal(result.outcome, 'expired', result.message);
    assert.match(result.message, /restore: vision restored$/);
    const times = await leaseTimes(t.temporal.client, t.node, 'comfyui-sim');
    const late = (times.downInitiatedAtMs ?? NaN) - view.expiresAtEpochMs;
    console.log(`  after a dev server restart: serves down asked ${(late / 1000).toFixed(2)} s after the lease's expiry`);
    assert.ok(late >= 0 && late < 5000, `serves down asked ${late} ms after the expiry`);
    const [l] = await ledgerSnapshots(t.temporal.client, t.manifest);
    assert.deepEqual(
      l?.reservations.map((r) => `${r.serve}:${r.phase}`),
      ['fast:running', 'vision:running'],
    );
    assert.equal((await t.routed('vision')).status, 200);
    for (const s of ['vision', 'fast']) assert.ok((await serveDown(t.temporal.client, t.node, s)).ok);
  });
});
