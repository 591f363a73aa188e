// Whether a victim's VRAM came back after its stop (or sleep), read from its own processes on the
// GPU where nvidia-smi lists them. The whole GPU's memory.used moves as much for any other serve
// starting or stopping on the same card during the drain: one starting hides the release (the
// acquisition waits out its release timeout), one stopping confirms a release that has not
// happened (the acquirer then starts on memory still held).

/** A process nvidia-smi's --query-compute-apps lists (src/shared/contracts' GpuProcess has its shape). */
export interface ProcessOnGpu {
  gpuUuid: string;
  pid: number;
  /** null where the driver does not report it (WSL2 prints [N/A]). */
  usedMib: number | null;
}

/**
 * A victim's own processes, read before its stop (or sleep) with the GPU reading the release is
 * measured against: what lets the release be confirmed by them rather than by the whole GPU.
 */
export interface ServeProcesses {
  /** The container's host pids (its main process and descendants), at most MAX_SERVE_PIDS. */
  pids: number[];
  /** Those nvidia-smi listed on the GPU, with what each held. */
  onGpu: ProcessOnGpu[];
  /** Why they cannot confirm the release (none listed on the GPU, none found): the whole GPU's reading does. */
  unseen?: string;
}

/** Which reading confirmed a victim's VRAM back. */
export type VramReading =
  /** None of the victim's processes (pids: those it had on the GPU) holds memory there any more (asleep: all but its residual given back). */
  | {
      by: 'own-processes';
      pids: number[];
      heldBeforeMib: number;
      heldNowMib: number;
      /** nvidia-smi refused the process query this reading: what they held is counted as still held, never as given back. */
      unread?: string;
    }
  /** memory.used of the whole GPU fell by the victim's MiB; `why` its own processes could not say. */
  | { by: 'whole-gpu'; why: string };

/** A release within 5 % of what was expected counts: a reading moves by a few MiB on its own. */
export const RELEASE_TOLERANCE = 0.05;

/** A container's pids carried in history: a serve's process tree is a few dozen at most. */
export const MAX_SERVE_PIDS = 256;

/** The MiB of `expectedMib` that must be seen back. */
export function neededMib(expectedMib: number): number {
  return Math.floor(Math.max(0, expectedMib) * (1 - RELEASE_TOLERANCE));
}

/** What the container's pids run as on the GPU, and why they cannot confirm a release (when not). */
export function serveProcessesOf(container: string, pids: readonly number[], apps: readonly ProcessOnGpu[], gpuUuid: string): ServeProcesses {
  const own = new Set(pids.slice(0, MAX_SERVE_PIDS));
  const onGpu = apps.filter((a) => a.gpuUuid === gpuUuid && own.has(a.pid)).map(({ pid, usedMib }) => ({ gpuUuid, pid, usedMib }));
  const base = { pids: [...own], onGpu };
  if (own.size === 0) return { ...base, unseen: `no process of ${container} found` };
  if (apps.length === 0)
    return { ...base, unseen: 'nvidia-smi lists no compute process (--query-compute-apps not supported by the driver, or processes hidden)' };
  if (onGpu.length === 0) {
    return {
      ...base,
      unseen: `nvidia-smi lists none of ${container}'s ${own.size} pids on ${gpuUuid} (a worker outside the host's pid namespace sees other pids)`,
    };
  }
  return base;
}

/**
 * Why the victim's own processes cannot confirm its release, or undefined when they can: they
 * were listed on the GPU before the stop, and for a sleeper (keepMib > 0, what it may keep) with
 * per-process figures to tell its residual from. Read before any stop of old runs: none.
 */
export function ownUnseen(own: ServeProcesses | undefined, keepMib: number): string | undefined {
  if (!own) return 'its processes were not read before the stop';
  if (own.unseen !== undefined) return own.unseen;
  if (keepMib > 0 && own.onGpu.some((p) => p.usedMib === null)) return "per-process used_memory is [N/A]: a sleeper's residual cannot be told";
  return undefined;
}

/** The MiB the listed processes hold; `unknown` where a figure is [N/A]. */
function heldMib(listed: readonly ProcessOnGpu[], unknown: number): number {
  return listed.some((p) => p.usedMib === null) ? unknown : listed.reduce((sum, p) => sum + (p.usedMib ?? 0), 0);
}

/**
 * The victim's processes now, against what they held before the stop. Stopped (keepMib 0): back
 * when none of its pids is listed on the GPU any more. Asleep: when they gave back all but
 * keepMib, within the tolerance (what they keep is then the residual seen).
 */
export function ownReading(
  own: ServeProcesses,
  apps: readonly ProcessOnGpu[],
  gpuUuid: string,
  expectedMib: number,
  keepMib: number,
): { reading: Extract<VramReading, { by: 'own-processes' }>; releasedMib: number; released: boolean } {
  const pids = new Set(own.pids);
  const listed = apps.filter((a) => a.gpuUuid === gpuUuid && pids.has(a.pid));
  // [N/A] figures (WSL2) only for a stop, which asks no more than whether any is listed.
  const heldBeforeMib = heldMib(own.onGpu, expectedMib + keepMib);
  const heldNowMib = listed.length === 0 ? 0 : heldMib(listed, heldBeforeMib);
  const releasedMib = heldBeforeMib - heldNowMib;
  const released = keepMib > 0 ? releasedMib >= neededMib(heldBeforeMib - keepMib) : listed.length === 0;
  return { reading: { by: 'own-processes', pids: own.onGpu.map((p) => p.pid), heldBeforeMib, heldNowMib }, releasedMib, released };
}

/**
 * A reading whose process query nvidia-smi refused (a driver error mid-wait): an empty list would
 * read as every process gone, so the victim's processes count as holding what they held before.
 */
export function stillHeld(
  own: ServeProcesses,
  why: string,
  gpuUuid: string,
  expectedMib: number,
  keepMib: number,
): { reading: Extract<VramReading, { by: 'own-processes' }>; releasedMib: number; released: false } {
  // Read as if listed again as they were before the stop: nothing given back.
  const { reading, releasedMib } = ownReading(own, own.onGpu, gpuUuid, expectedMib, keepMib);
  return { reading: { ...reading, unread: why }, releasedMib, released: false };
}

/** What the victim's own processes still hold, where they confirmed its release (a sleeper's residual seen). */
export function heldNowMib(v: { reading?: VramReading }): number | undefined {
  return v.reading?.by === 'own-processes' ? v.reading.heldNowMib : undefined;
}
