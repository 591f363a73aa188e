// scripts/temporal-prod.sh as an operator runs it: two starts at once, start again, status, stop, and
// a start on the same state directory that reuses the cluster, the schemas, the namespace and its attributes.
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Connection } from '@temporalio/client';
import { ROOT } from './support/cli';
import type { Run } from './support/cli';
import { freeLowPorts, listening } from './support/low-ports';

function script(args: string[]): Promise<Run> {
  const started = Date.now();
  return new Promise((resolve) => {
    execFile('bash', [join(ROOT, 'scripts', 'temporal-prod.sh'), ...args], { cwd: ROOT, timeout: 180_000 }, (err, stdout, stderr) => {
      resolve({ code: err ? (typeof err.code === 'number' ? err.code : null) : 0, stdout, stderr, ms: Date.now() - started });
    });
  });
}

const show = (r: Run) => `exit ${r.code}\n--- stdout\n${r.stdout}--- stderr\n${r.stderr}`;

describe('scripts/temporal-prod.sh start | status | stop', () => {
  const dir = mkdtempSync(join(tmpdir(), 'gpures-prod-command-'));
  after(async () => {
    await script(['stop', '--dir', dir]);
    rmSync(dir, { recursive: true, force: true });
  });

  test('two starts at once (one waits), idempotent start, status with pids, stop, and a restart that reuses the store', async () => {
    const block = await freeLowPorts(10, { block: true });
    const base = block[0] ?? 0;
    const opts = ['--dir', dir, '--port', String(base), '--pg-port', String(base + 9)];
    // Two starts at once on a fresh directory: one initialises and starts, the other waits for it and finds it running.
    const both = await Promise.all([script(['start', ...opts]), script(['start', ...opts])]);
    for (const r of both) assert.equal(r.code, 0, show(r));
    const first = both.find((r) => r.stderr.includes('PostgreSQL cluster initialised')) ?? both[0];
    const rival = both.find((r) => r !== first) ?? both[1];
    assert.ok(first && rival);
    assert.match(rival.stderr, /another start \(pid [0-9]+\) is under way/, show(rival));
    assert.match(rival.stderr, /already running; nothing started/, show(rival));
    assert.doesNotMatch(rival.stderr, /initialised|created|registered/, show(rival));
    assert.equal(rival.stdout, first.stdout);
    assert.equal(first.stdout, `TEMPORAL_ADDRESS=127.0.0.1:${base} TEMPORAL_NAMESPACE=default\n`, show(first));
    for (const step of [
      'PostgreSQL cluster initialised',
      'namespace default created',
      'search attributes GpuresServe, GpuresNode, GpuresOperation, GpuresVictims registered',
    ])
      assert.ok(first.stderr.includes(step), `${step}: ${show(first)}`);
    assert.equal(statSync(join(dir, 'temporal-password')).mode & 0o777, 0o600);
    assert.equal(statSync(join(dir, 'config', 'production.yaml')).mode & 0o777, 0o600);

    const again = await script(['start', '--dir', dir]);
    assert.equal(again.code, 0, show(again));
    assert.match(again.stderr, /already running; nothing started/, show(again));

    const status = await script(['status', '--dir', dir]);
    assert.equal(status.code, 0, show(status));
    assert.match(
      status.stdout,
      new RegExp(`^PostgreSQL pid [0-9]+ on 127\\.0\\.0\\.1:${base + 9}, temporal-server pid [0-9]+ on 127\\.0\\.0\\.1:${base} `),
      show(status),
    );

    const stop = await script(['stop', '--dir', dir]);
    assert.equal(stop.code, 0, show(stop));
    assert.match(stop.stderr, /temporal-server stopped; PostgreSQL stopped/, show(stop));
    const stopped = await script(['status', '--dir', dir]);
    assert.equal(stopped.code, 3, show(stopped));
    const held = [];
    for (const p of block) if (await listening(p)) held.push(p);
    assert.deepEqual(held, [], `ports still listened on after stop, of ${base}..${base + 9}`);

    // The same directory, the ports remembered: nothing initialised or registered twice.
    const second = await script(['start', '--dir', dir]);
    assert.equal(second.code, 0, show(second));
    assert.equal(second.stdout, first.stdout);
    assert.doesNotMatch(second.stderr, /initialised|created|registered/, show(second));
    const connection = await Connection.connect({ address: `127.0.0.1:${base}` });
    try {
      const { customAttributes } = await connection.operatorService.listSearchAttributes({ namespace: 'default' });
      assert.deepEqual(Object.keys(customAttributes ?? {}).sort(), ['GpuresNode', 'GpuresOperation', 'GpuresServe', 'GpuresVictims']);
    } finally {
      await connection.close();
    }
  });
});
