// The GPU as activities see it: nvidia-smi (nvidia-smi.ts) implements it. Its readings are
// recorded in history, so their types are in src/shared/contracts.
import type { GpuProcess, GpuReading } from '../../shared/contracts';

/** How fresh a reading must be. */
export interface ReadingAge {
  /**
   * A reading queried at most this long before the call will do (a stream's latest block, with no
   * wait for the next). Without it the reading is queried after the call, as a spawn then would be.
   */
  maxAgeMs?: number;
}

/**
 * When the latest process listing will do instead of a spawn: its process was started at or
 * after `afterEpochMs` (so its query was made after then, a change the caller knows of included)
 * and at most `maxAgeMs` before the call.
 */
export interface ListingReuse {
  afterEpochMs: number;
  maxAgeMs: number;
}

export interface GpuProbe {
  readGpus(age?: ReadingAge): Promise<GpuReading[]>;
  /**
   * True where readGpus() waits for the next reading of a live stream (nvidia-smi-stream.ts): a
   * wait for VRAM to come back then reads again at once, paced by the stream, not by a sleep.
   */
  readonly streams?: boolean;
  /** Ends what the probe keeps running (the stream's process). */
  close?(): void;
  /**
   * Empty where the driver or the pid namespace hides processes; with `refusalThrows` a refused
   * query (a non-zero exit) throws instead, for a reader to whom an empty list means "all gone".
   */
  computeApps(opts?: { refusalThrows?: boolean; reuse?: ListingReuse }): Promise<GpuProcess[]>;
}
