// `gpures worker` twice for one node: the second refuses to start, naming the first by the identity
// Temporal saw it poll with, unless --allow-second-worker says the pair is deliberate. Real
// processes on a real dev server; Temporal's DescribeTaskQueue is what both the check and the
// test read.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { temporal as proto } from '@temporalio/proto';
import { EXIT } from '../src/cli/exit-codes';
import { taskQueueFor } from '../src/shared/messages';
import { livePollers } from '../src/adapters/node-workers';
import { renderManifest, uniqueNode } from './support/box';
import { gpures, show, startWorkerProcess } from './support/cli';
import type { WorkerProcess } from './support/cli';
import { testTemporal } from './support/temporal';
import type { TestTemporal } from './support/temporal';
import { waitFor } from './support/wait';

let temporal: TestTemporal;
const workers: WorkerProcess[] = [];

before(async () => {
  temporal = await testTemporal();
});
after(async () => {
  for (const w of workers) await w.stop();
  // Left open, the dev server and its connections keep this file's process from exiting.
  await temporal?.close();
});

/** The identities polling the node's workflow task queue, as the server lists them. */
async function pollers(node: string): Promise<string[]> {
  const { pollers: seen } = await temporal.client.workflowService.describeTaskQueue({
    namespace: 'default',
    taskQueue: { name: taskQueueFor(node) },
    taskQueueType: proto.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
  });
  return (seen ?? []).map((p) => p.identity ?? '');
}

test('a second worker for a node refuses, naming the first; --allow-second-worker starts it', { timeout: 240_000 }, async () => {
  const node = uniqueNode('second-worker');
  const dir = mkdtempSync(join(tmpdir(), 'gpures-second-'));
  const manifest = join(dir, 'serves.toml');
  writeFileSync(manifest, renderManifest(node, [{ role: 'main', capacity_mib: 24576, reserve_mib: 1024 }], [{ name: 'a', vram_mib: 1000 }]));
  const env = { TEMPORAL_ADDRESS: temporal.address };
  const args = ['--manifest', manifest, '--gpus', 'off', '--metrics', 'off'];
  const first = await startWorkerProcess(args, env);
  workers.push(first);
  const firstIdentity = `${first.child.pid}@`;
  await waitFor('the first worker polling', async () => ((await pollers(node)).some((p) => p.startsWith(firstIdentity)) ? true : undefined), 30_000, 200);

  const second = await gpures(['worker', ...args], env, 60_000);
  assert.equal(second.code, EXIT.denied, show(second));
  const last = second.stderr.trim().split('\n').pop() ?? '';
  assert.match(last, new RegExp(`another worker polls gpures\\.${node} \\(${first.child.pid}@[^)]+\\).*--allow-second-worker`), show(second));
  // Refused before it polled: the server still lists the first alone.
  assert.deepEqual(
    (await pollers(node)).filter((p) => !p.startsWith(firstIdentity)),
    [],
  );

  const pair = await startWorkerProcess([...args, '--allow-second-worker'], env);
  workers.push(pair);
  await waitFor(
    'the deliberate second worker polling',
    async () => ((await pollers(node)).some((p) => p.startsWith(`${pair.child.pid}@`)) ? true : undefined),
    30_000,
    200,
  );
});

test("a poller that is gone does not refuse a restart, nor counts as another worker: this host's dead pid, this process's own (a restarted container's, or a worker's own as it stops), or a poll older than the server's window", () => {
  const now = 1_000_000_000;
  const alive = (pid: number) => pid === 42 || pid === process.pid;
  const seen = [
    { identity: '42@box', lastAccessMs: now - 1_000 },
    { identity: `${process.pid}@box`, lastAccessMs: now - 1_000 },
    { identity: '43@box', lastAccessMs: now - 1_000 },
    { identity: '7@other-host', lastAccessMs: now - 60_000 },
    { identity: '8@other-host', lastAccessMs: now - 200_000 },
  ];
  assert.deepEqual(livePollers(seen, now, 'box', alive), ['42@box', '7@other-host']);
});

test('a poller whose process is a zombie (exited, its parent has not reaped it) is gone: a worker under a supervisor that has not waited for it yet does not refuse the restart', async () => {
  // sh starts a child, then becomes `sleep`, which never reaps it: a zombie once the child exits.
  // The child outlives sh's exec by seconds: one that exited before it could be reaped by sh
  // itself (seen on a loaded host: its /proc entry gone, never a zombie).
  const parent = spawn('sh', ['-c', 'sleep 3 & echo $!; exec sleep 60'], { stdio: ['ignore', 'pipe', 'ignore'] });
  try {
    const zombie = Number(await new Promise<string>((resolve) => parent.stdout.once('data', (d: Buffer) => resolve(d.toString()))));
    const state = () => /^\d+ \(.*\) (\S)/.exec(readFileSync(`/proc/${zombie}/stat`, 'utf8'))?.[1];
    await waitFor('the child a zombie', () => Promise.resolve(state() === 'Z' ? true : undefined), 10_000, 20);
    // It still answers kill(pid, 0): only /proc's state says it has exited.
    assert.equal(process.kill(zombie, 0), true);
    const now = Date.now();
    assert.deepEqual(livePollers([{ identity: `${zombie}@${hostname()}`, lastAccessMs: now - 1_000 }], now, hostname()), []);
  } finally {
    parent.kill('SIGKILL');
  }
});
