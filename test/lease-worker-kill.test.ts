// A lease as an operator runs it, as processes on Docker: `serves up --evict --lease`, its time
// left in `serves status` and `gpures ledger`, `serves extend`; then the worker is killed -9
// during the lease and the next worker still fires it on time, restoring the victim.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { LeaseView } from '../src/domain/lease';
import { routedChat } from './support/box';
import type { TestServe } from './support/box';
import { gpures, show } from './support/cli';
import { leaseHandle, leaseTimes } from './support/lease';
import { startProcessBox } from './support/process-box';
import type { ProcessBox } from './support/process-box';
import { sleep } from './support/wait';

/** The seconds a line of `serves status` or `ledger` says its lease has left. */
function secondsLeft(stdout: string, line: RegExp): number {
  const m = line.exec(stdout);
  return m ? Number(m[1]) : NaN;
}
const within = (n: number, lo: number, hi: number): boolean => n >= lo && n <= hi;

const GPU = { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 };
const SERVES: TestServe[] = [
  { name: 'fast', vram_mib: 14336, router_tier: 'fast-local' },
  { name: 'vision', vram_mib: 12288, class: 'evictable', served_model_name: 'qwen3-vl-4b-instruct', router_tier: 'vision-local' },
  { name: 'comfyui-sim', vram_mib: 8192, class: 'on-demand', api: 'none', args: ['sleep', '3600'] },
];

describe('a lease across a worker kill -9, as processes on Docker', () => {
  let box: ProcessBox;
  let router: ProcessBox['router'];
  let manifest: string;
  let env: Record<string, string>;

  before(async () => {
    box = await startProcessBox('lease-kill', GPU, SERVES);
    ({ router, env, manifestPath: manifest } = box);
  });
  after(async () => {
    await box?.close();
  });

  const routedVision = async (): Promise<number> => (await routedChat(router.url, 'vision')).status;

  test('serves up --lease, time left shown, extend; kill -9 of the worker; the next worker fires the lease on time', async () => {
    assert.equal((await gpures(['serves', 'up', 'fast', 'vision', '--manifest', manifest], env)).code, 0);
    const bad = await gpures(['serves', 'up', 'comfyui-sim', '--evict', '--lease', '8d', '--manifest', manifest], env);
    assert.equal(bad.code, 2, show(bad));
    assert.match(bad.stderr, /--lease: must be a whole number of seconds in 1\.\.604800 \(at most 7d; got '8d'\)/);

    // 40 s: the CLI calls before the extend must not outlast it on a loaded host (3-8 s each at load 20).
    const up = await gpures(['serves', 'up', 'comfyui-sim', '--evict', '--lease', '40s', '--manifest', manifest], env);
    assert.equal(up.code, 0, show(up));
    assert.match(
      up.stderr,
      /^serves up comfyui-sim --evict: running, 8192 MiB committed on 'dark-fast'; evicted vision; lease 40s \(lease\/.*\/comfyui-sim\)$/m,
    );
    assert.equal(await routedVision(), 503);

    const status = await gpures(['serves', 'status', '--manifest', manifest], env);
    assert.equal(status.code, 0, show(status));
    assert.ok(within(secondsLeft(status.stdout, /^comfyui-sim .* running {2}lease: (\d+)s left$/m), 1, 40), show(status));
    assert.doesNotMatch(status.stdout, /^(fast|vision) .*lease/m);
    const ledger = await gpures(['ledger', '--manifest', manifest], env);
    assert.ok(within(secondsLeft(ledger.stdout, /^ {2}comfyui-sim 8192 MiB \(on-demand, running\) {2}lease: (\d+)s left$/m), 1, 40), show(ledger));

    const beforeExtend = await leaseHandle(box.temporal.client, box.node, 'comfyui-sim').view();

    const extend = await gpures(['serves', 'extend', 'comfyui-sim', '10s', '--manifest', manifest], env);
    assert.equal(extend.code, 0, show(extend));
    const extended = /^serves extend comfyui-sim: lease: \d+s left, expires at (\S+)$/m.exec(extend.stdout);
    assert.ok(extended, show(extend));
    // 10 s past the expiry it had: the extend moved the lease's end, not the clock's.
    const moved = Date.parse(extended[1] ?? '') - beforeExtend.expiresAtEpochMs;
    assert.ok(Math.abs(moved - 10_000) < 1500, `the extend moved the expiry by ${moved} ms; ${show(extend)}`);
    const tooFar = await gpures(['serves', 'extend', 'comfyui-sim', '7d', '--manifest', manifest], env);
    assert.equal(tooFar.code, 3, show(tooFar));
    assert.match(tooFar.stderr, /past the 7d a lease reaches at most/);
    const none = await gpures(['serves', 'release', 'vision', '--manifest', manifest], env);
    assert.equal(none.code, 3, show(none));
    assert.match(none.stderr, /no lease runs for vision \(no lease\/.*\/vision\)/);

    const lease = leaseHandle(box.temporal.client, box.node, 'comfyui-sim');
    const view: LeaseView = await lease.view();
    // SIGKILL, as a crash: no goodbye to the server, the lease's workflow cached on a dead worker.
    const child = box.worker.child;
    const exited = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await exited;
    await sleep(2000);
    await box.startWorker();

    const result = await lease.result();
    assert.equal(result.outcome, 'expired', result.message);
    assert.match(result.message, /restore: vision restored$/);
    const times = await leaseTimes(box.temporal.client, box.node, 'comfyui-sim');
    const late = (times.downInitiatedAtMs ?? NaN) - view.expiresAtEpochMs;
    console.log(`  after a worker kill -9: serves down asked ${(late / 1000).toFixed(2)} s after the lease's expiry`);
    assert.ok(late >= 0 && late < 5000, `serves down asked ${late} ms after the expiry`);
    assert.equal(await routedVision(), 200);

    const after = await gpures(['serves', 'status', '--manifest', manifest], env);
    assert.doesNotMatch(after.stdout, /lease/, show(after));
    assert.equal((await gpures(['serves', 'down', 'vision', 'fast', '--manifest', manifest], env)).code, 0);
  });
});
