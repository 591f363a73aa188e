// The worker's start-up check of its manifest's GPUs against one nvidia-smi reading, on its own
// (cli.test runs it in a real worker process with the fake nvidia-smi).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { checkGpusAtStart, gpuStartProblems } from '../src/worker/gpu-check';
import type { GpuSpec } from '../src/domain/types';

const card = { index: 0, uuid: 'GPU-11111111-1111-1111-1111-111111111111', name: 'RTX 5090', totalMib: 32607, usedMib: 0, freeMib: 32607 };
const gpu = (over: Partial<GpuSpec>): GpuSpec => ({ role: 'dark-fast', uuid: card.uuid, capacityMib: 32607, reserveMib: 4608, ...over });

test('a GPU that matches, a capacity below the card (a share of it), and a MIG instance (not listed by --query-gpu): nothing to say', () => {
  const declared = [gpu({}), gpu({ role: 'part', capacityMib: 16000 }), gpu({ role: 'mig', uuid: 'MIG-22222222-2222-2222-2222-222222222222' })];
  assert.deepEqual(gpuStartProblems(declared, { gpus: [card] }, 'nvidia-smi'), []);
});

test('a reading that never comes is told as one that failed, within its bound', async () => {
  const silent = { readGpus: () => new Promise<never>(() => undefined), computeApps: () => Promise.resolve([]) };
  const started = Date.now();
  const problems = await checkGpusAtStart(silent, [gpu({})], '/usr/bin/nvidia-smi');
  assert.ok(Date.now() - started < 11_000);
  assert.deepEqual(problems, [
    'nvidia-smi (/usr/bin/nvidia-smi, GPURES_NVIDIA_SMI) cannot be read: no answer within 10 s; until it can, an eviction fails at its preflight and no serve is measured',
  ]);
});
