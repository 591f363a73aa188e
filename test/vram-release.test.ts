// The pure parts of a victim's VRAM release by its own processes: which of a container's pids
// nvidia-smi lists, when they count as released, why the whole GPU decides instead; docker top's
// pids; the fake nvidia-smi's held pids.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ownReading, ownUnseen, serveProcessesOf } from '../src/domain/vram-release';
import { pidsOfTop } from '../src/adapters/containers/docker';
import { renderComputeAppsCsv, renderGpuCsv, withHeldPids } from '../src/sim/fake-nvidia-smi';
import type { FakeNvidiaSmiState } from '../src/sim/fake-nvidia-smi';

const GPU = 'GPU-aaaaaaaa-0000-0000-0000-000000000001';
const OTHER = 'GPU-aaaaaaaa-0000-0000-0000-000000000002';
const app = (pid: number, usedMib: number | null, gpuUuid = GPU) => ({ gpuUuid, pid, processName: 'python3', usedMib });

test("serveProcessesOf: the container's pids listed on its GPU; why not, where none is", () => {
  const seen = serveProcessesOf('gpures-n-vision', [100, 101, 102], [app(101, 12000), app(500, 8000), app(102, 300, OTHER)], GPU);
  assert.deepEqual(seen, { pids: [100, 101, 102], onGpu: [{ gpuUuid: GPU, pid: 101, usedMib: 12000 }] });
  assert.equal(ownUnseen(seen, 0), undefined);
  assert.match(serveProcessesOf('c', [], [app(1, 1)], GPU).unseen ?? '', /no process of c found/);
  assert.match(serveProcessesOf('c', [100], [], GPU).unseen ?? '', /lists no compute process/);
  assert.match(serveProcessesOf('c', [100], [app(7, 1)], GPU).unseen ?? '', /none of c's 1 pids on GPU-\S+ \(a worker outside the host's pid namespace/);
  assert.match(ownUnseen(undefined, 0) ?? '', /not read before the stop/);
  // [N/A] figures do for a stop (is any listed?), not for a sleeper's residual.
  const na = serveProcessesOf('c', [100], [app(100, null)], GPU);
  assert.equal(ownUnseen(na, 0), undefined);
  assert.match(ownUnseen(na, 600) ?? '', /\[N\/A\]/);
});

test('ownReading: a stop is back when no pid of its is listed, whatever the rest of the GPU does', () => {
  const own = serveProcessesOf('c', [100, 101], [app(101, 12288)], GPU);
  const still = ownReading(own, [app(101, 12288), app(900, 14336)], GPU, 12288, 0);
  assert.equal(still.released, false);
  assert.deepEqual(still.reading, { by: 'own-processes', pids: [101], heldBeforeMib: 12288, heldNowMib: 12288 });
  const gone = ownReading(own, [app(900, 14336), app(901, 12288)], GPU, 12288, 0);
  assert.equal(gone.released, true);
  assert.equal(gone.releasedMib, 12288);
  // Even a few MiB left under its pid is not back.
  assert.equal(ownReading(own, [app(101, 4)], GPU, 12288, 0).released, false);
});

test('ownReading: asleep, back when all but the residual came back (within 5 %); what it keeps is the figure', () => {
  const own = serveProcessesOf('c', [100], [app(100, 12288)], GPU);
  const kept = ownReading(own, [app(100, 600)], GPU, 11688, 600);
  assert.equal(kept.released, true);
  assert.equal(kept.reading.heldNowMib, 600);
  assert.equal(ownReading(own, [app(100, 1100)], GPU, 11688, 600).released, true, '500 MiB over: within 5 % of 11688');
  assert.equal(ownReading(own, [app(100, 5600)], GPU, 11688, 600).released, false, 'a leak of 5000 MiB');
});

test("pidsOfTop: docker top's PID column, wherever it is", () => {
  assert.deepEqual(
    pidsOfTop({
      Titles: ['UID', 'PID', 'PPID', 'C', 'STIME', 'TTY', 'TIME', 'CMD'],
      Processes: [
        ['root', '4242', '4220', '0', '10:00', '?', '00:00:00', '/sbin/docker-init -- vllm'],
        ['root', '4250', '4242', '9', '10:00', '?', '00:01:00', 'python3 -m vllm'],
      ],
    }),
    [4242, 4250],
  );
  assert.deepEqual(pidsOfTop({ Titles: ['USER', 'COMMAND'], Processes: [['root', 'x']] }), []);
});

test('the fake nvidia-smi: a held pid stays listed and counted after its process is gone, and is not counted twice while it runs', () => {
  const state: FakeNvidiaSmiState = {
    gpus: [{ index: 0, uuid: GPU, name: 'NVIDIA GeForce RTX 5090', totalMib: 32607, baseUsedMib: 1200 }],
    heldPids: [{ gpuUuid: GPU, pid: 4242, vramMib: 12288 }],
  };
  const running = withHeldPids(state, [{ gpuUuid: GPU, pid: 4242, vramMib: 12288 }]);
  assert.match(renderGpuCsv(state, running), /, 32607, 13488, 19119\n$/);
  const gone = withHeldPids(state, []);
  assert.equal(renderComputeAppsCsv(state, gone), `${GPU}, 4242, python3, 12288\n`);
  assert.match(renderGpuCsv(state, gone), /, 32607, 13488, 19119\n$/);
});
