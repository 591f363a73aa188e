// The nvidia-smi adapter: pure CSV parsers on real-format lines, then the adapter running the
// fake nvidia-smi (bin/fake-nvidia-smi) whose memory follows sim serves started by SimRuntime.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import Docker from 'dockerode';
import { DockerRuntime } from '../src/adapters/containers/docker';
import { NvidiaSmi, parseComputeAppsCsv, parseGpuCsv } from '../src/adapters/gpu/nvidia-smi';
import { NvidiaSmiStream, parseTimestamp } from '../src/adapters/gpu/nvidia-smi-stream';
import { PermanentError } from '../src/adapters/errors';
import { TEST_IMAGES } from '../src/dev/toolchain';
import { LABEL } from '../src/domain/serve';
import { nvidiaSmiTimestamp } from '../src/sim/fake-nvidia-smi';
import type { FakeNvidiaSmiState } from '../src/sim/fake-nvidia-smi';
import { SimRuntime } from '../src/sim/runtime';
import { writeFileAtomic } from '../src/sim/state-dir';
import { contractServe, RUN_LABEL, uniqueRunId } from './support/runtime-contract';

const FAKE = resolve(__dirname, '..', '..', 'bin', 'fake-nvidia-smi');
const UUID_A = 'GPU-5f2c9a41-0000-4000-8000-000000000001';
const UUID_B = 'GPU-5f2c9a41-0000-4000-8000-000000000002';

function isPermanent(type: string, message?: RegExp) {
  return (err: unknown) => {
    assert.ok(err instanceof PermanentError, `expected PermanentError ${type}, got ${String(err)}`);
    assert.equal(err.type, type);
    if (message) assert.match(err.message, message);
    return true;
  };
}

describe('nvidia-smi CSV parsers', () => {
  test('parseGpuCsv reads the real --query-gpu lines', () => {
    const csv =
      '0, GPU-5f2c9a41-0000-4000-8000-000000000001, NVIDIA GeForce RTX 5090, 32607, 30057, 2550\r\n1, GPU-5f2c9a41-0000-4000-8000-000000000002, NVIDIA RTX PRO 6000 Blackwell Workstation Edition, 97887, 0, 97250\n\n';
    assert.deepEqual(parseGpuCsv(csv), [
      { index: 0, uuid: UUID_A, name: 'NVIDIA GeForce RTX 5090', totalMib: 32607, usedMib: 30057, freeMib: 2550 },
      { index: 1, uuid: UUID_B, name: 'NVIDIA RTX PRO 6000 Blackwell Workstation Edition', totalMib: 97887, usedMib: 0, freeMib: 97250 },
    ]);
    assert.deepEqual(parseGpuCsv(''), []);
    // A comma in the name does not shift the memory fields.
    assert.equal(parseGpuCsv(`0, ${UUID_A}, Odd, Name, 10, 4, 6`)[0]?.name, 'Odd, Name');
  });

  test('parseComputeAppsCsv reads processes; [N/A] memory (WSL2) is null', () => {
    const csv = `${UUID_A}, 4242, /usr/bin/python3, 11738\n${UUID_A}, 4343, python3, [N/A]\n${UUID_B}, 77, C:\\\\Windows\\\\explorer.exe, [Not Supported]\n`;
    assert.deepEqual(parseComputeAppsCsv(csv), [
      { gpuUuid: UUID_A, pid: 4242, processName: '/usr/bin/python3', usedMib: 11738 },
      { gpuUuid: UUID_A, pid: 4343, processName: 'python3', usedMib: null },
      { gpuUuid: UUID_B, pid: 77, processName: 'C:\\\\Windows\\\\explorer.exe', usedMib: null },
    ]);
    assert.deepEqual(parseComputeAppsCsv('\n'), []);
    assert.deepEqual(parseComputeAppsCsv('No running processes found\n'), []);
  });

  test('a malformed line is a NvidiaSmiUnreadable error naming the line', () => {
    assert.throws(
      () => parseGpuCsv(`0, ${UUID_A}, NVIDIA GeForce RTX 5090, 32607, 30057, 2550\n0, ${UUID_A}, NVIDIA GeForce RTX 5090, 32607 MiB, 30057, 2550`),
      isPermanent(
        'NvidiaSmiUnreadable',
        /line 2 .*memory\.total '32607 MiB'.*'0, GPU-5f2c9a41-0000-4000-8000-000000000001, NVIDIA GeForce RTX 5090, 32607 MiB, 30057, 2550'/,
      ),
    );
    assert.throws(
      () => parseGpuCsv('NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.'),
      isPermanent('NvidiaSmiUnreadable', /line 1 has 1 fields, expected 6/),
    );
    assert.throws(() => parseGpuCsv(`x, ${UUID_A}, n, 1, 1, 0`), isPermanent('NvidiaSmiUnreadable', /index 'x'/));
    assert.throws(() => parseGpuCsv('0, not-a-uuid, n, 1, 1, 0'), isPermanent('NvidiaSmiUnreadable', /uuid 'not-a-uuid'/));
    assert.throws(() => parseGpuCsv(`0, ${UUID_A}, n, [N/A], 1, 0`), isPermanent('NvidiaSmiUnreadable', /memory\.total '\[N\/A\]'/));
    assert.throws(() => parseComputeAppsCsv(`${UUID_A}, 12, python3`), isPermanent('NvidiaSmiUnreadable', /line 1 has 3 fields, expected 4/));
    assert.throws(() => parseComputeAppsCsv(`${UUID_A}, pid, python3, 10`), isPermanent('NvidiaSmiUnreadable', /pid 'pid'/));
    assert.throws(() => parseComputeAppsCsv(`${UUID_A}, 12, python3, 10 MiB`), isPermanent('NvidiaSmiUnreadable', /used_memory '10 MiB'/));
    // Only as the whole output: beside a process line it is not nvidia-smi's answer.
    assert.throws(
      () => parseComputeAppsCsv(`No running processes found\n${UUID_A}, 12, python3, 10`),
      isPermanent('NvidiaSmiUnreadable', /line 1 has 1 fields/),
    );
  });
});

function runFake(args: string[], env: Record<string, string>): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((ok) => {
    execFile(FAKE, args, { env: { ...process.env, ...env } }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : -1) : 0;
      ok({ code, stdout, stderr });
    });
  });
}

describe('NvidiaSmi adapter against the fake nvidia-smi', () => {
  const runId = uniqueRunId();
  let dir: string;
  let statePath: string;
  let runtime: SimRuntime;
  let smi: NvidiaSmi;
  const base: FakeNvidiaSmiState = {
    gpus: [
      { index: 0, uuid: UUID_A, name: 'NVIDIA GeForce RTX 5090', totalMib: 32607, baseUsedMib: 5700 },
      { index: 1, uuid: UUID_B, name: 'NVIDIA RTX PRO 6000 Blackwell Workstation Edition', totalMib: 97887, baseUsedMib: 600 },
    ],
  };
  const writeState = (patch: Partial<FakeNvidiaSmiState> = {}) =>
    writeFileAtomic(statePath, JSON.stringify({ ...base, simStateDir: join(dir, 'serves'), ...patch }));

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'gpures-smi-'));
    statePath = join(dir, 'nvidia-smi.json');
    runtime = new SimRuntime({ stateDir: join(dir, 'serves') });
    smi = new NvidiaSmi({ binary: FAKE, env: { FAKE_NVIDIA_SMI_STATE: statePath } });
    writeState();
  });

  after(async () => {
    for (const c of await runtime.list({})) await runtime.remove(c.name);
    rmSync(dir, { recursive: true, force: true });
  });

  async function usedOf(uuid: string): Promise<number | undefined> {
    return (await smi.readGpus()).find((g) => g.uuid === uuid)?.usedMib;
  }

  test('an idle box reads the base draw; free = total - used', async () => {
    writeState();
    assert.deepEqual(await smi.readGpus(), [
      { index: 0, uuid: UUID_A, name: 'NVIDIA GeForce RTX 5090', totalMib: 32607, usedMib: 5700, freeMib: 26907 },
      { index: 1, uuid: UUID_B, name: 'NVIDIA RTX PRO 6000 Blackwell Workstation Edition', totalMib: 97887, usedMib: 600, freeMib: 97287 },
    ]);
    assert.deepEqual(await smi.computeApps(), []);
  });

  test('used follows a running sim serve on its GPU, and falls back after it stops', async () => {
    writeState();
    const serve = await contractServe(runId, 'vision', 'sim', { SIM_START_DELAY_MS: '0' }, { gpuUuid: UUID_A, labels: { [LABEL.vramMib]: '1234' } });
    const { created } = await runtime.ensureRunning(serve.spec);
    assert.ok(created);
    assert.equal(await usedOf(UUID_A), 5700 + 1234);
    assert.equal(await usedOf(UUID_B), 600);
    const [record] = await runtime.list({ [RUN_LABEL]: runId });
    assert.ok(record?.running);
    const apps = await smi.computeApps();
    assert.equal(apps.length, 1);
    assert.equal(apps[0]?.gpuUuid, UUID_A);
    assert.equal(apps[0]?.processName, 'python3');
    assert.equal(apps[0]?.usedMib, 1234);
    assert.ok((apps[0]?.pid ?? 0) > 0);

    writeState({ perProcessNA: true });
    assert.deepEqual(
      (await smi.computeApps()).map((a) => a.usedMib),
      [null],
    );
    writeState();

    assert.equal(await runtime.stop(serve.spec.name, 5), 'stopped');
    assert.equal(await usedOf(UUID_A), 5700);
    assert.deepEqual(await smi.computeApps(), []);
    await runtime.remove(serve.spec.name);
  });

  test('heldMib keeps VRAM used after the serve is gone; fixedUsedMib pins the reading; free never below 0', async () => {
    writeState({ heldMib: { [UUID_A]: 12288 } });
    assert.equal(await usedOf(UUID_A), 5700 + 12288);
    writeState({ fixedUsedMib: { [UUID_A]: 30057 } });
    const [a] = await smi.readGpus();
    assert.deepEqual([a?.usedMib, a?.freeMib], [30057, 2550]);
    writeState({ heldMib: { [UUID_A]: 40000 } });
    assert.equal((await smi.readGpus())[0]?.freeMib, 0);
  });

  test('a driver refusing the compute-apps query gives no processes, not an error', async () => {
    writeState({ computeAppsUnsupported: true });
    assert.deepEqual(await smi.computeApps(), []);
    assert.equal((await smi.readGpus()).length, 2);
  });

  /** An adapter over the fake, and the box's count of the processes it started (not the adapter's: each appends a line). */
  const countingSpawns = (name: string) => {
    const count = join(dir, `${name}-spawns`);
    const counting = join(dir, `${name}-nvidia-smi`);
    writeFileSync(counting, `#!/bin/sh\necho >> '${count}'\nexec '${FAKE}' "$@"\n`);
    chmodSync(counting, 0o755);
    return {
      counted: new NvidiaSmi({ binary: counting, env: { FAKE_NVIDIA_SMI_STATE: statePath } }),
      spawns: () => readFileSync(count, 'utf8').split('\n').length - 1,
    };
  };

  test('a process listing is reused only where the caller allows it: started after the change it names, young enough; a refusal is asked again', async () => {
    writeState();
    const { counted, spawns } = countingSpawns('listing');
    const before = Date.now();
    const seen: number[] = [];
    const list = async (reuse?: { afterEpochMs: number; maxAgeMs: number }) => {
      assert.deepEqual(await counted.computeApps({ refusalThrows: true, ...(reuse ? { reuse } : {}) }), []);
      seen.push(spawns());
    };
    await list(); // the first
    await list(); // no reuse asked: listed again
    await list({ afterEpochMs: before, maxAgeMs: 60_000 }); // the latest, started after `before`
    await list({ afterEpochMs: Date.now(), maxAgeMs: 60_000 }); // a change since the latest: listed again
    await list({ afterEpochMs: before, maxAgeMs: 5 }); // the latest's process started more than 5 ms ago
    const refusedAt = Date.now();
    writeState({ computeAppsUnsupported: true });
    await assert.rejects(counted.computeApps({ refusalThrows: true }), /exited with code/);
    writeState();
    await list({ afterEpochMs: refusedAt, maxAgeMs: 60_000 }); // the refusal was not kept
    console.log(`  spawns after each listing: ${seen.join(', ')}; adapter: ${JSON.stringify(counted.listings)}`);
    assert.deepEqual(seen, [1, 2, 2, 3, 4, 6]);
    assert.deepEqual(counted.listings, { spawned: 6, reused: 1 });
  });

  test('a listing under way is taken up by a caller whose reuse it meets, not by one it predates; a refused one is listed again', async () => {
    writeState();
    const { counted, spawns } = countingSpawns('ahead');
    // Started ahead (a stop seeing its container down), then asked for one started since then: the same process.
    const downAt = Date.now();
    const ahead = counted.computeApps({ refusalThrows: true });
    assert.deepEqual(await counted.computeApps({ refusalThrows: true, reuse: { afterEpochMs: downAt, maxAgeMs: 60_000 } }), []);
    await ahead;
    assert.equal(spawns(), 1);
    // One under way that started before the change the caller names: listed again.
    const early = counted.computeApps({ refusalThrows: true });
    await new Promise((r) => setTimeout(r, 5));
    assert.deepEqual(await counted.computeApps({ refusalThrows: true, reuse: { afterEpochMs: Date.now(), maxAgeMs: 60_000 } }), []);
    await early;
    assert.equal(spawns(), 3);
    // One under way that the driver refuses: never read as "none listed"; the caller lists again, and is refused too.
    writeState({ computeAppsUnsupported: true });
    const refusedAt = Date.now();
    const refused = counted.computeApps().catch((err: unknown) => err);
    await assert.rejects(counted.computeApps({ refusalThrows: true, reuse: { afterEpochMs: refusedAt, maxAgeMs: 60_000 } }), /exited with code/);
    assert.deepEqual(await refused, []);
    writeState();
    console.log(`  spawns: ${spawns()}; adapter: ${JSON.stringify(counted.listings)}`);
    assert.equal(spawns(), 5);
    assert.deepEqual(counted.listings, { spawned: 5, reused: 1 });
  });

  test('the fake rejects other arguments like nvidia-smi (exit 2)', async () => {
    writeState();
    const env = { FAKE_NVIDIA_SMI_STATE: statePath };
    const other = await runFake(['-L'], env);
    assert.equal(other.code, 2);
    assert.match(other.stderr, /Invalid combination of input arguments/);
    const field = await runFake(['--query-gpu=index,temperature.gpu', '--format=csv,noheader,nounits'], env);
    assert.equal(field.code, 2);
    assert.match(field.stderr, /Field "temperature.gpu" is not a valid field to query/);
    const both = await runFake(['--query-gpu=index', '--query-compute-apps=pid', '--format=csv'], env);
    assert.equal(both.code, 2);
    const ok = await runFake(['--format=csv,noheader,nounits', '--query-gpu=index,uuid,name,memory.total,memory.used,memory.free'], env);
    assert.equal(ok.code, 0);
    assert.equal(ok.stdout.split('\n')[0], `0, ${UUID_A}, NVIDIA GeForce RTX 5090, 32607, 5700, 26907`);
  });

  test('a missing binary is NvidiaSmiMissing naming the path', async () => {
    const path = join(dir, 'no-such-nvidia-smi');
    const missing = new NvidiaSmi({ binary: path });
    await assert.rejects(missing.readGpus(), isPermanent('NvidiaSmiMissing', new RegExp(path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))));
    await assert.rejects(missing.computeApps(), isPermanent('NvidiaSmiMissing'));
  });

  test('a failing query or a hung binary is a retryable error with the reason', async () => {
    const noState = new NvidiaSmi({ binary: FAKE, env: { FAKE_NVIDIA_SMI_STATE: join(dir, 'absent.json') } });
    await assert.rejects(noState.readGpus(), (err: unknown) => {
      assert.ok(err instanceof Error && !(err instanceof PermanentError));
      assert.match(err.message, /exited with code 9: NVIDIA-SMI has failed: cannot read the fake state file/);
      return true;
    });
    const hung = join(dir, 'hung-nvidia-smi');
    writeFileSync(hung, '#!/bin/sh\nexec sleep 5\n');
    chmodSync(hung, 0o755);
    const slow = new NvidiaSmi({ binary: hung, timeoutMs: 200 });
    await assert.rejects(slow.readGpus(), /timed out after 200 ms/);
    await assert.rejects(slow.computeApps(), /timed out after 200 ms/);
  });
});

describe('NvidiaSmiStream: one nvidia-smi -lms per node, read as a stream', () => {
  let dir: string;
  let statePath: string;
  const streams: NvidiaSmiStream[] = [];
  const state: FakeNvidiaSmiState = {
    gpus: [
      { index: 0, uuid: UUID_A, name: 'NVIDIA GeForce RTX 5090', totalMib: 32607, baseUsedMib: 5700 },
      { index: 1, uuid: UUID_B, name: 'NVIDIA RTX PRO 6000, Blackwell', totalMib: 97887, baseUsedMib: 600 },
    ],
  };
  // Renamed into place: a -lms loop that read half a file would exit, and the reading after it be a spawn.
  const writeState = (patch: Partial<FakeNvidiaSmiState> = {}) => writeFileAtomic(statePath, JSON.stringify({ ...state, ...patch }));
  const stream = (binary = FAKE, intervalMs = 50) => {
    const s = new NvidiaSmiStream({ binary, intervalMs, env: { FAKE_NVIDIA_SMI_STATE: statePath } });
    streams.push(s);
    return s;
  };
  /** The pids of running `fake-nvidia-smi … -lms` processes whose environment names this test's state file. */
  const loops = async (): Promise<number[]> => {
    const { stdout } = await new Promise<{ stdout: string }>((res) => execFile('pgrep', ['-f', '--', '-lms'], (_e, stdout) => res({ stdout: String(stdout) })));
    return stdout
      .split('\n')
      .filter(Boolean)
      .map(Number)
      .filter((pid) => {
        try {
          return readFileSync(`/proc/${pid}/environ`, 'utf8').includes(statePath);
        } catch {
          return false;
        }
      });
  };

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'gpures-smi-stream-'));
    statePath = join(dir, 'nvidia-smi.json');
    writeState();
  });

  after(() => {
    for (const s of streams) s.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test("timestamps: the fake prints nvidia-smi's format, read back to the millisecond", () => {
    const at = new Date(2026, 11, 2, 9, 5, 7, 42).getTime();
    assert.equal(nvidiaSmiTimestamp(at), '2026/12/02 09:05:07.042');
    assert.equal(parseTimestamp('2026/12/02 09:05:07.042'), at);
    assert.ok(Number.isNaN(parseTimestamp('Tue Dec  2 09:05:07 2026')));
  });

  test('the first reading is a spawn, the rest come from one -lms process, each queried after its call', async () => {
    writeState();
    const s = stream();
    assert.deepEqual(
      (await s.readGpus()).map((g) => g.usedMib),
      [5700, 600],
    );
    assert.deepEqual(s.served, { stream: 0, spawned: 1 });
    // Each write lands just before the call: a reading queried before it would show the last one.
    for (let i = 1; i <= 12; i++) {
      writeState({ heldMib: { [UUID_A]: i * 100 } });
      const [a, b] = await s.readGpus();
      assert.equal(a?.usedMib, 5700 + i * 100, `reading ${i}`);
      assert.equal(a?.freeMib, 32607 - 5700 - i * 100);
      assert.equal(b?.name, 'NVIDIA RTX PRO 6000, Blackwell');
    }
    assert.deepEqual(s.served, { stream: 12, spawned: 1 });
    assert.equal((await loops()).length, 1, 'one -lms process for the probe');
    s.close();
    await waitFor(async () => (await loops()).length === 0, 'the -lms process to end on close()');
    // Closed: a reading is still answered, by a spawn, and no stream is started again.
    assert.equal((await s.readGpus()).length, 2);
    assert.deepEqual(s.served, { stream: 12, spawned: 2 });
    assert.equal((await loops()).length, 0);
  });

  test('a reading that may be recent (maxAgeMs) is the latest block, not the next; without it, the next', async () => {
    writeState({ heldMib: { [UUID_A]: 100 } });
    // A long interval: the latest block stays the one queried before the write below.
    const s = stream(FAKE, 3000);
    assert.equal((await s.readGpus())[0]?.usedMib, 5800, 'the spawn that starts the stream');
    assert.equal((await s.readGpus())[0]?.usedMib, 5800, 'the first block queried after the call');
    writeState({ heldMib: { [UUID_A]: 900 } });
    assert.equal((await s.readGpus({ maxAgeMs: 60_000 }))[0]?.usedMib, 5800, 'the latest block, queried before the write');
    assert.equal((await s.readGpus())[0]?.usedMib, 6600, 'a block queried after the call sees the write');
    writeState({ heldMib: { [UUID_A]: 1200 } });
    // The latest block is then at least a few milliseconds old, whatever the machine's speed.
    await new Promise((r) => setTimeout(r, 5));
    assert.equal((await s.readGpus({ maxAgeMs: 0 }))[0]?.usedMib, 6900, 'a latest block older than maxAgeMs is not used');
    assert.deepEqual(s.served, { stream: 4, spawned: 1 });
    s.close();
  });

  test('a stream that dies is replaced; a reading in between is a spawn', async () => {
    writeState();
    const s = stream();
    await s.readGpus();
    await s.readGpus();
    const [first] = await loops();
    assert.ok(first, 'a -lms process runs');
    process.kill(first, 'SIGKILL');
    await waitFor(async () => !(await loops()).includes(first), 'the killed -lms process to be gone');
    writeState({ heldMib: { [UUID_A]: 700 } });
    assert.equal((await s.readGpus())[0]?.usedMib, 6400);
    assert.equal(s.served.spawned, 2, 'the reading after the loss was a spawn');
    // The restart waits out its backoff (1 s): the readings in it are spawns, then the stream is back.
    await new Promise((r) => setTimeout(r, 1100));
    await s.readGpus();
    const [second] = await loops();
    assert.ok(second && second !== first, 'a new -lms process runs');
    const before = s.served.stream;
    await s.readGpus();
    assert.equal(s.served.stream, before + 1);
  });

  test('an nvidia-smi without -lms: every reading is a spawn, the stream retried at most once a second', async () => {
    writeState();
    const old = join(dir, 'old-nvidia-smi');
    const tries = join(dir, 'lms-tries');
    writeFileSync(tries, '');
    writeFileSync(
      old,
      `#!/bin/sh\nfor a in "$@"; do [ "$a" = -lms ] && { echo x >> ${tries}; echo 'Invalid combination of input arguments.' >&2; exit 2; }; done\nexec ${FAKE} "$@"\n`,
    );
    chmodSync(old, 0o755);
    const s = stream(old);
    const started = Date.now();
    for (let i = 0; i < 8; i++) assert.equal((await s.readGpus())[0]?.usedMib, 5700);
    assert.equal(s.served.stream, 0);
    assert.equal(s.served.spawned, 8);
    const lmsTries = readFileSync(tries, 'utf8').split('\n').filter(Boolean).length;
    assert.ok(lmsTries >= 1 && lmsTries <= 1 + Math.ceil((Date.now() - started) / 1000), `${lmsTries} tries of -lms`);
  });
});

async function waitFor(check: () => Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail(`timed out waiting for ${what}`);
}

// scripts/test.sh starts the private dockerd and points DOCKER_HOST at it.
describe('the fake nvidia-smi with docker: true', () => {
  const runId = uniqueRunId();
  const runtime = new DockerRuntime(new Docker());
  let dir: string;

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'gpures-smi-docker-'));
  });

  after(async () => {
    for (const c of await runtime.list({ [RUN_LABEL]: runId })) await runtime.remove(c.name);
    rmSync(dir, { recursive: true, force: true });
  });

  test('running containers labelled with the GPU draw their gpures.vram_mib', async () => {
    const statePath = join(dir, 'state.json');
    const state: FakeNvidiaSmiState = { gpus: [{ index: 0, uuid: UUID_B, name: 'NVIDIA RTX PRO 6000', totalMib: 97887, baseUsedMib: 100 }], docker: true };
    writeFileSync(statePath, JSON.stringify(state));
    const smi = new NvidiaSmi({ binary: FAKE, env: { FAKE_NVIDIA_SMI_STATE: statePath } });
    const serve = await contractServe(
      runId,
      'docker-draw',
      process.env['GPURES_TEST_IMAGE'] ?? TEST_IMAGES.fakeVllm,
      {},
      { labels: { [LABEL.gpuUuid]: UUID_B, [LABEL.vramMib]: '2000' } },
    );
    await runtime.ensureRunning(serve.spec);
    assert.equal((await smi.readGpus())[0]?.usedMib, 2100);
    const apps = await smi.computeApps();
    assert.equal(apps.length, 1);
    assert.equal(apps[0]?.usedMib, 2000);
    assert.ok((apps[0]?.pid ?? 0) > 0);
    await runtime.stop(serve.spec.name, 5);
    assert.equal((await smi.readGpus())[0]?.usedMib, 100);
  });
});
