// What the worker says at start about the GPUs its manifest declares, from one nvidia-smi reading.
// Started with nvidia-smi missing, or with a uuid or a capacity copied from another box, it ran
// without a word: the operator learnt it from an eviction failing at its preflight, or from
// `gpures ledger` saying "nvidia-smi: not available". Warnings only: the worker runs either way
// (a serve that evicts nothing needs no reading).
import type { GpuProbe } from '../adapters/gpu/port';
import type { GpuSpec } from '../domain/types';
import type { GpuReading } from '../shared/contracts';
import { withTimeout } from './time-bound';

/** How long the start-up reading may take: a stream's first block, or a spawn. */
export const GPU_CHECK_TIMEOUT_MS = 10_000;

/** The warnings for one reading (or why there was none), in the manifest's terms. */
export function gpuStartProblems(declared: readonly GpuSpec[], reading: { gpus: readonly GpuReading[] } | { error: string }, binary: string): string[] {
  if ('error' in reading) {
    return [
      `nvidia-smi (${binary}, GPURES_NVIDIA_SMI) cannot be read: ${reading.error}; ` +
        'until it can, an eviction fails at its preflight and no serve is measured',
    ];
  }
  const reported = reading.gpus.map((g) => g.uuid).join(', ') || 'none';
  return declared.flatMap((g, i) => {
    // nvidia-smi --query-gpu lists whole GPUs: a MIG instance's uuid is not among them.
    if (g.uuid.startsWith('MIG-')) return [];
    const r = reading.gpus.find((x) => x.uuid === g.uuid);
    if (!r) {
      return [
        `gpus[${i}].uuid ${g.uuid} (gpu_role '${g.role}') is not a GPU nvidia-smi reports (${reported}): ` +
          'an eviction on it fails at its preflight; copy the uuid from `nvidia-smi -L`',
      ];
    }
    if (g.capacityMib > r.totalMib) {
      return [
        `gpus[${i}].capacity_mib ${g.capacityMib} MiB (gpu_role '${g.role}') is more than the ${r.totalMib} MiB nvidia-smi reports for it: ` +
          'the ledger would admit what the card cannot hold',
      ];
    }
    return [];
  });
}

/** Reads the GPUs once, bounded, and words what does not match the manifest. */
export async function checkGpusAtStart(gpu: GpuProbe, declared: readonly GpuSpec[], binary: string): Promise<string[]> {
  try {
    const gpus = await withTimeout(gpu.readGpus(), GPU_CHECK_TIMEOUT_MS, `no answer within ${GPU_CHECK_TIMEOUT_MS / 1000} s`);
    return gpuStartProblems(declared, { gpus }, binary);
  } catch (err) {
    return gpuStartProblems(declared, { error: (err as Error).message }, binary);
  }
}
