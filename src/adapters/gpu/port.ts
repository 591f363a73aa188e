// The GPU as activities see it: nvidia-smi (nvidia-smi.ts) implements it. Its readings are
// recorded in history, so their types are in src/shared/contracts.
import type { GpuProcess, GpuReading } from '../../shared/contracts';

export interface GpuProbe {
  readGpus(): Promise<GpuReading[]>;
  /** Empty where the driver or the pid namespace hides processes. */
  computeApps(): Promise<GpuProcess[]>;
}
