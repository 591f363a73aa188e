// What a victim's VRAM release by its own processes reads: docker top's pids, the fake
// nvidia-smi's held pids.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { pidsOfTop } from '../src/adapters/containers/docker';
import { renderComputeAppsCsv, renderGpuCsv, withHeldPids } from '../src/sim/fake-nvidia-smi';
import type { FakeNvidiaSmiState } from '../src/sim/fake-nvidia-smi';

const GPU = 'GPU-aaaaaaaa-0000-0000-0000-000000000001';

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
