// `gpures serves logs` as an operator runs it: bin/gpures as processes against the test dockerd's
// fake-vLLM containers, brought up by a `gpures worker` process on a real dev server (whose ledger
// says why a serve has no container), then against the simulated box's files (GPURES_SIM_BOX).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { LogFrames } from '../src/adapters/containers/docker-util';
import { failedStartTail, LastBytes, LogLines, logsOptions } from '../src/domain/logs';
import { containerName, LABEL, REDACTED } from '../src/domain/serve';
import type { ServeSpec } from '../src/domain/types';
import { linesSince, SimRuntime } from '../src/sim/runtime';
import { docker, nodeContainers, removeNodeContainers, renderManifest, uniqueNode } from './support/box';
import type { TestGpu, TestServe } from './support/box';
import { GPURES, ROOT, gpures, show, startCliWorker } from './support/cli';
import type { Run, WorkerProcess } from './support/cli';
import { freePort } from './support/temporal';
import type { TestTemporal } from './support/temporal';
import { waitUntil } from './support/wait';

const GPU: TestGpu = { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 };
// late is healthy 12 s after its start: a follow started once its container exists sees that line come.
const SERVES: TestServe[] = [
  { name: 'talk', vram_mib: 1000 },
  { name: 'late', vram_mib: 1000, env: { FAKE_START_DELAY_S: '12' }, start_timeout_s: 90 },
  { name: 'idle', vram_mib: 1000 },
  // A start that fails: 250 lines, its secret among them, then its error, and an exit before the 2 s a serve without an API must run.
  {
    name: 'crash',
    vram_mib: 1000,
    api: 'none',
    args: ['sh', '-c', 'i=0; while [ $i -lt 250 ]; do echo "crash line $i key=$CRASH_KEY"; i=$((i+1)); done; echo "fatal: CUDA out of memory"; exit 3'],
    env: { CRASH_KEY: 'sk-crash-0123456789' },
  },
  // Failed once (its kept lines written by the test), then started: the healthy start drops them.
  { name: 'mended', vram_mib: 1000 },
];

/** `bin/gpures ARGS` as a process whose output is read as it comes, for --follow. */
function follower(args: string[], env: Record<string, string>) {
  const started = Date.now();
  const child = spawn(process.execPath, [GPURES, ...args], { cwd: ROOT, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
  child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  const timer = setTimeout(() => child.kill('SIGKILL'), 180_000);
  const run = new Promise<Run>((resolve) =>
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, ms: Date.now() - started });
    }),
  );
  return { child, run, stdout: () => stdout, stderr: () => stderr };
}

describe('serves logs: the pieces', () => {
  test('--tail and --since are bounded, each problem naming its flag', () => {
    assert.deepEqual(logsOptions({}), { ok: true, options: { tail: 200 } });
    assert.deepEqual(logsOptions({ tail: '10000', since: '2h' }), { ok: true, options: { tail: 10_000, sinceS: 7200 } });
    const bad = logsOptions({ tail: '10001', since: '31d' });
    assert.ok(!bad.ok);
    assert.match(bad.problems[0] ?? '', /^--tail: a whole number of lines in 1\.\.10000 \(got '10001'\)/);
    assert.match(bad.problems[1] ?? '', /^--since: .* at most 30d \(got '31d'\)/);
    assert.ok(!logsOptions({ tail: '0' }).ok);
    assert.ok(!logsOptions({ tail: '-5' }).ok);
  });

  test("Docker's frames split anywhere, and a secret split across chunks, come out as whole redacted lines", () => {
    const frame = (text: string) => {
      const payload = Buffer.from(text);
      const head = Buffer.alloc(8);
      head.writeUInt8(2, 0);
      head.writeUInt32BE(payload.length, 4);
      return Buffer.concat([head, payload]);
    };
    const serve = { env: { HF_TOKEN: 'hf_abcdefghijklmnop' }, args: ['--api-key', 'sk-0123456789'] } as unknown as ServeSpec;
    const all = Buffer.concat([frame('args: --api-key sk-01234'), frame('56789 token hf_abcdefg'), frame('hijklmnop\nnext line\npart')]);
    const frames = new LogFrames();
    const lines = new LogLines(serve);
    let out = '';
    // One byte at a time: every header and payload boundary falls inside a chunk at some point.
    for (let i = 0; i < all.length; i++) for (const p of frames.push(all.subarray(i, i + 1))) out += lines.push(p);
    assert.equal(out, `args: --api-key ${REDACTED} token ${REDACTED}\nnext line\n`);
    assert.equal(lines.flush(), 'part');
  });

  test("a failed start's kept lines are its last 200, whole, within 256 KiB", () => {
    const lines = Array.from({ length: 300 }, (_, i) => `line ${i}`);
    const kept = failedStartTail(`${lines.join('\n')}\n`);
    assert.equal(kept, `${lines.slice(-200).join('\n')}\n`);
    const long = Array.from({ length: 5 }, (_, i) => `${i}${'x'.repeat(100 * 1024)}`);
    const few = failedStartTail(long.join('\n'));
    assert.ok(Buffer.byteLength(few) <= 256 * 1024);
    assert.equal(few, `${long.slice(-2).join('\n')}\n`);
  });

  test("the kept lines' files: one per container, a name cannot leave the directory, at most 64", async () => {
    const { FailedStartFiles } = await import('../src/adapters/failed-starts/files');
    const dir = mkdtempSync(join(tmpdir(), 'gpures-kept-'));
    try {
      const store = new FailedStartFiles(join(dir, 'failed-starts'));
      const log = (container: string, text = 'a\n') => ({
        container,
        serve: 's',
        workflowId: 'w',
        runId: 'r',
        atEpochMs: 1,
        end: 'exited with exit code 3',
        text,
      });
      for (const bad of ['../x', '/etc/passwd', '.hidden', 'a/b', '']) {
        assert.throws(() => store.keep(log(bad)), /not a container name/);
        assert.throws(() => store.read(bad), /not a container name/);
      }
      store.keep(log('gpures-n-s', 'first\n'));
      store.keep(log('gpures-n-s', 'second\n'));
      assert.equal(store.read('gpures-n-s')?.text, 'second\n');
      assert.equal(statSync(join(dir, 'failed-starts', 'gpures-n-s.failed-start.json')).mode & 0o777, 0o600);
      for (let i = 0; i < 70; i++) store.keep(log(`gpures-n-s${i}`));
      assert.equal(readdirSync(join(dir, 'failed-starts')).length, 64);
      assert.equal(store.read('gpures-n-none'), undefined);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("the simulated box's --since goes by its lines' own stamps; an unstamped line goes with its neighbours", () => {
    const since = Date.parse('2026-01-01T00:00:10Z');
    const text = ['early', '2026-01-01T00:00:05.000Z old', 'old frame', '2026-01-01T00:00:10.000Z new', 'new frame', ''].join('\n');
    assert.equal(linesSince(text, since), '2026-01-01T00:00:10.000Z new\nnew frame\n');
    assert.equal(linesSince('frame\n2026-01-01T00:00:11.000Z later\n', since), 'frame\n2026-01-01T00:00:11.000Z later\n');
    assert.equal(linesSince('no stamp at all\n', since), 'no stamp at all\n');
  });

  test('one answer keeps its last bytes and counts what it left out', () => {
    const kept = new LastBytes(10);
    for (const l of ['aaaa\n', 'bbbb\n', 'cccc\n']) kept.push(l);
    assert.equal(kept.text(), 'bbbb\ncccc\n');
    assert.equal(kept.dropped, 5);
  });
});

describe('gpures serves logs, as real processes on the test dockerd', () => {
  let temporal: TestTemporal;
  let env: Record<string, string>;
  let dir: string;
  let node: string;
  let manifest: string;
  let worker: WorkerProcess | undefined;

  before(async () => {
    let box: Record<string, string>;
    ({ temporal, dir, node, manifest, worker, env: box } = await startCliWorker('logs', [GPU], SERVES));
    env = { ...box, GPURES_MANIFEST: manifest };
    const up = await gpures(['serves', 'up', 'talk'], env, 120_000);
    assert.equal(up.code, 0, show(up));
  });

  after(async () => {
    await worker?.stop();
    await removeNodeContainers(node);
    await temporal?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test("prints the serve's own start-up lines; --tail N prints its last N", async () => {
    const all = await gpures(['serves', 'logs', 'talk'], env);
    assert.equal(all.code, 0, show(all));
    assert.match(all.stdout, /^fake-vllm: serving model=test\/talk revision=<none> served-model-name=talk /m);
    assert.match(all.stdout, /^fake-vllm: healthy$/m);
    const lines = all.stdout.trimEnd().split('\n');
    const one = await gpures(['serves', 'logs', 'talk', '--tail', '1'], env);
    assert.equal(one.code, 0, show(one));
    assert.equal(one.stdout, `${lines[lines.length - 1]}\n`);
    const json = await gpures(['serves', 'logs', 'talk', '--tail', '2', '--json'], env);
    assert.equal(json.code, 0, show(json));
    const data = JSON.parse(json.stdout) as { container: string; running: boolean; lines: string[] };
    assert.deepEqual(data, { ...data, container: containerName(node, 'talk'), running: true, lines: lines.slice(-2) });
  });

  test('an unknown serve names the manifest and the serves it declares, and prints nothing', async () => {
    const r = await gpures(['serves', 'logs', 'nope'], env);
    assert.equal(r.code, 2, show(r));
    assert.equal(r.stdout, '');
    assert.match(
      r.stderr,
      new RegExp(`^${manifest.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: no serve named 'nope' \\(serves: talk, late, idle, crash, mended\\)$`, 'm'),
    );
  });

  test('a serve with no container says what its ledger holds of it, and prints nothing else', async () => {
    const r = await gpures(['serves', 'logs', 'idle'], env);
    assert.equal(r.code, 1, show(r));
    assert.equal(r.stdout, '');
    assert.equal(
      r.stderr.trim(),
      `idle has no container (${containerName(node, 'idle')}) on Docker at ${process.env['DOCKER_HOST']} (DOCKER_HOST): ` +
        `down: the ledger of gpu_role 'dark-fast' holds nothing for it (not brought up, or brought down; a start that failed ` +
        `removed its container, and \`gpures audit report serves-up/${node}/idle\`, or \`gpures audit report acquire/${node}/idle\` for one with --evict or --lease, has the failure)`,
    );
  });

  test("a failed start's last lines outlive its container: serves logs prints them, saying from which start", async () => {
    const up = await gpures(['serves', 'up', 'crash'], env, 120_000);
    assert.equal(up.code, 1, show(up));
    assert.match(up.stderr, /`gpures serves logs crash` prints its last 200 lines, kept when the container is removed/);
    assert.ok(!(await nodeContainers(node)).some((c) => c.serve === 'crash'), 'the compensation removed the container');
    const name = containerName(node, 'crash');
    const r = await gpures(['serves', 'logs', 'crash'], env);
    assert.equal(r.code, 0, show(r));
    const lines = r.stdout.trimEnd().split('\n');
    assert.equal(lines.length, 200, show(r));
    assert.equal(lines[0], `crash line 51 key=${REDACTED}`);
    assert.equal(lines[199], 'fatal: CUDA out of memory');
    assert.doesNotMatch(r.stdout, /sk-crash/);
    const runId = (await temporal.client.workflow.getHandle(`serves-up/${node}/crash`).describe()).runId;
    assert.match(
      r.stderr,
      new RegExp(
        `^${name} is gone: its last 200 line\\(s\\), kept from the start that failed at \\d{4}-\\d\\d-\\d\\dT[\\d:.]+Z ` +
          `\\(serves-up/${node}/crash run ${runId}; the container exited with exit code 3, then its compensation removed it\\):$`,
        'm',
      ),
    );
    const two = await gpures(['serves', 'logs', 'crash', '--tail', '2', '--json'], env);
    assert.equal(two.code, 0, show(two));
    const data = JSON.parse(two.stdout) as { status: string; keptFrom: { runId: string }; lines: string[] };
    assert.deepEqual([data.status, data.keptFrom.runId, data.lines], ['removed', runId, [`crash line 249 key=${REDACTED}`, 'fatal: CUDA out of memory']]);
    // The worker's file holds no secret, and no line reached the run's history (its failure quotes its last 5 lines, redacted).
    const file = readFileSync(join(dir, 'state', 'failed-starts', `${name}.failed-start.json`), 'utf8');
    assert.doesNotMatch(file, /sk-crash/);
    const history = JSON.stringify(await temporal.client.workflow.getHandle(`serves-up/${node}/crash`).fetchHistory());
    assert.doesNotMatch(history, /crash line 100 /);
  });

  test("a start that turns healthy drops an earlier failure's kept lines: once it is down, serves logs says it has no container", async () => {
    const { FailedStartFiles } = await import('../src/adapters/failed-starts/files');
    const name = containerName(node, 'mended');
    const kept = new FailedStartFiles(join(dir, 'state', 'failed-starts'));
    kept.keep({
      container: name,
      serve: 'mended',
      workflowId: `serves-up/${node}/mended`,
      runId: 'r0',
      atEpochMs: Date.now(),
      end: 'exited with exit code 1',
      text: 'fatal: old failure\n',
    });
    const before = await gpures(['serves', 'logs', 'mended'], env);
    assert.equal(before.code, 0, show(before));
    assert.equal(before.stdout, 'fatal: old failure\n');
    const up = await gpures(['serves', 'up', 'mended'], env, 120_000);
    assert.equal(up.code, 0, show(up));
    assert.equal(kept.read(name), undefined, 'the healthy start dropped the kept lines');
    const down = await gpures(['serves', 'down', 'mended'], env, 120_000);
    assert.equal(down.code, 0, show(down));
    const after = await gpures(['serves', 'logs', 'mended'], env);
    assert.equal(after.code, 1, show(after));
    assert.equal(after.stdout, '');
    assert.match(after.stderr, new RegExp(`^mended has no container \\(${name}\\)`, 'm'));
  });

  test('--follow before the container exists says it waits, and follows the start once it appears', async () => {
    const f = follower(['serves', 'logs', 'idle', '--follow'], env);
    await waitUntil('the follower says it waits, or ends', () => Promise.resolve(/waiting up to/.test(f.stderr()) || f.child.exitCode !== null), 30_000, 50);
    assert.match(
      f.stderr(),
      new RegExp(`container ${containerName(node, 'idle')} does not exist yet on .*: waiting up to \\d+ s for it to appear`),
      f.stderr(),
    );
    const up = await gpures(['serves', 'up', 'idle'], env, 120_000);
    assert.equal(up.code, 0, show(up));
    await waitUntil('the follower printed the start-up line', () => Promise.resolve(/^fake-vllm: healthy$/m.test(f.stdout())), 60_000, 50);
    f.child.kill('SIGINT');
    const r = await f.run;
    assert.equal(r.code, 0, show(r));
    assert.match(r.stdout, /^fake-vllm: serving model=test\/idle /m);
  });

  test('--follow prints a line written after it started, and ends when the container goes, saying so', async () => {
    const up = gpures(['serves', 'up', 'late'], env, 150_000);
    const name = containerName(node, 'late');
    await waitUntil(`${name} created`, async () => (await nodeContainers(node)).some((c) => c.serve === 'late' && c.running), 60_000, 100);
    const f = follower(['serves', 'logs', 'late', '--follow'], env);
    await waitUntil('the follower printed the start-up line', () => Promise.resolve(/fake-vllm: serving model=test\/late/.test(f.stdout())), 60_000, 50);
    // The line the follower has yet to see: the box itself does not have it yet either.
    const before = await docker().getContainer(name).logs({ stdout: true, stderr: true, follow: false });
    assert.doesNotMatch(f.stdout(), /healthy/, 'healthy already printed: the follow started too late to tell');
    assert.doesNotMatch(before.toString('latin1'), /fake-vllm: healthy/, "the container's log had the line before the follower was up");
    await waitUntil('the follower printed the line written after it started', () => Promise.resolve(/^fake-vllm: healthy$/m.test(f.stdout())), 60_000, 50);
    const upRun = await up;
    assert.equal(upRun.code, 0, show(upRun));
    const down = await gpures(['serves', 'down', 'late'], env, 120_000);
    assert.equal(down.code, 0, show(down));
    const r = await f.run;
    assert.equal(r.code, 0, show(r));
    assert.match(r.stderr, new RegExp(`container ${name} (was removed|exited with exit code \\d+): no more lines`));
  });

  test('--follow ends on Ctrl-C, saying so', async () => {
    const f = follower(['serves', 'logs', 'talk', '--follow', '--tail', '1'], env);
    await waitUntil('the follower printed the last line', () => Promise.resolve(f.stdout().includes('\n')), 60_000, 50);
    f.child.kill('SIGINT');
    const r = await f.run;
    assert.equal(r.code, 0, show(r));
    assert.equal(r.stdout, 'fake-vllm: healthy\n');
    assert.match(r.stderr, new RegExp(`stopped following container ${containerName(node, 'talk')} \\(Ctrl-C\\); it goes on`));
    assert.ok(
      (await nodeContainers(node)).some((c) => c.serve === 'talk' && c.running),
      'talk still runs',
    );
  });

  test('bad --tail and --since are refused before anything is read', async () => {
    const r = await gpures(['serves', 'logs', 'talk', '--tail', '10001', '--since', 'yesterday'], env);
    assert.equal(r.code, 2, show(r));
    assert.match(r.stderr, /^--tail: a whole number of lines in 1\.\.10000 \(got '10001'\)$/m);
    assert.match(r.stderr, /^--since: .*\(got 'yesterday'\)$/m);
  });
});

describe('gpures serves logs on the simulated box (GPURES_SIM_BOX)', () => {
  test("reads the sim server's lines, follows those written after it started, and ends when the server exits", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gpures-logs-sim-'));
    const node = uniqueNode('logsim');
    const manifest = join(dir, 'serves.toml');
    writeFileSync(manifest, renderManifest(node, [GPU], [{ name: 'sim', vram_mib: 1000 }]));
    const runtime = new SimRuntime({ stateDir: join(dir, 'serves') });
    const name = containerName(node, 'sim');
    // No Temporal there: the ledger's read fails at once, and says so.
    const env = {
      GPURES_MANIFEST: manifest,
      GPURES_SIM_BOX: runtime.stateDir,
      GPURES_STATE_DIR: join(dir, 'state'),
      TEMPORAL_ADDRESS: `127.0.0.1:${await freePort()}`,
    };
    try {
      await runtime.ensureRunning({
        name,
        image: 'sim',
        cmd: ['--model', 'test/sim', '--served-model-name', 'sim', '--host', '0.0.0.0', '--port', '8000'],
        env: { SIM_START_DELAY_MS: '0' },
        labels: { [LABEL.node]: node, [LABEL.serve]: 'sim' },
        bind: '127.0.0.1',
        hostPort: await freePort(),
        containerPort: 8000,
      });
      await waitUntil('the sim server ready', async () => /ready: serving sim/.test(await runtime.logsTail(name, 5)), 30_000, 50);
      const f = follower(['serves', 'logs', 'sim', '--follow'], env);
      await waitUntil('the follower printed the ready line', () => Promise.resolve(/ready: serving sim$/m.test(f.stdout())), 30_000, 50);
      assert.doesNotMatch(f.stdout(), /SIGTERM/);
      // The stop's SIGTERM makes the server write its drain lines, then exit.
      await runtime.stop(name, 5);
      const r = await f.run;
      assert.equal(r.code, 0, show(r));
      assert.match(r.stdout, /sim-vllm\[\d+\]: SIGTERM: not accepting new connections/);
      assert.match(r.stderr, new RegExp(`container ${name} exited with exit code \\d+: no more lines`));
      // --since by the lines' stamps: an hour-old line written ahead of the server's (and its unstamped frame) is left out.
      const logFile = join(runtime.stateDir, `${name}.log`);
      writeFileSync(
        logFile,
        `${new Date(Date.now() - 3_600_000).toISOString()} sim-vllm[1]: an old line\n    at an old frame\n${readFileSync(logFile, 'utf8')}`,
      );
      const recent = await gpures(['serves', 'logs', 'sim', '--since', '10m'], env);
      assert.equal(recent.code, 0, show(recent));
      assert.doesNotMatch(recent.stdout, /an old (line|frame)/, show(recent));
      assert.match(recent.stdout, /ready: serving sim$/m);
      assert.match(recent.stdout, /drained; exiting$/m);
      assert.doesNotMatch(recent.stderr, /--since/);
      const tail = await gpures(['serves', 'logs', 'sim', '--tail', '1'], env);
      assert.equal(tail.code, 0, show(tail));
      assert.match(tail.stdout, /^\S+ sim-vllm\[\d+\]: drained; exiting\n$/);
      assert.match(tail.stderr, new RegExp(`container ${name} exited with exit code \\d+; its last lines:`));
      await runtime.remove(name);
      const gone = await gpures(['serves', 'logs', 'sim'], env);
      assert.equal(gone.code, 1, show(gone));
      assert.equal(gone.stdout, '');
      assert.match(
        gone.stderr,
        new RegExp(
          `^sim has no container \\(${name}\\) on the simulated box at ${runtime.stateDir} \\(GPURES_SIM_BOX\\): what its ledger holds could not be read: `,
        ),
      );
    } finally {
      await runtime.remove(name);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
