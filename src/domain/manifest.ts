// Facts about a validated manifest that every layer reads: its lookups, the serve defaults, what a
// bind address reaches and what vLLM's --gpu-memory-utilization will take. Loading and validating
// the file is src/config/manifest.ts.
//
// PURE: no package imports, no node built-ins, no I/O; workflow code may import it.

import type { GpuSpec, Manifest, ServeSpec } from './types';
import { findFlags } from './serve';

export const GPU_MEMORY_UTILIZATION_FLAG = '--gpu-memory-utilization';
/** vLLM's default --gpu-memory-utilization when the flag is absent. */
export const VLLM_DEFAULT_UTILIZATION = 0.9;

/** The manifest a command reads when neither --manifest nor GPURES_MANIFEST names one: in the working directory. */
export const DEFAULT_MANIFEST = 'serves.toml';
/** A manifest is a page of TOML: one past this is some other file (a router config's bound is MAX_CONFIG_BYTES). */
export const MAX_MANIFEST_BYTES = 1024 * 1024;

export const SERVE_DEFAULTS = {
  containerPort: 8000,
  bind: '127.0.0.1',
  healthPath: '/health',
  startTimeoutS: 600,
  stopTimeoutS: 30,
  /**
   * Twice a cold start on the seeds' box (a vLLM reload takes 38-58 s, a 26B model ~60 s): a serve
   * evicted and restored in a loop then spends at most a third of the GPU's time loading, and an
   * on-demand job refused for it waits at most two minutes, told exactly how long.
   */
  minResidencyS: 120,
} as const;

// ---------------------------------------------------------------------------------------------
// Lookups

export function findServe(manifest: Manifest, name: string): ServeSpec | undefined {
  return manifest.serves.find((s) => s.name === name);
}

/**
 * The GPU a serve is pinned to. A validated manifest guarantees it exists, so a miss means the
 * serve did not come from this manifest: that is a programming error and throws.
 */
export function gpuFor(manifest: Manifest, serve: ServeSpec): GpuSpec {
  const gpu = manifest.gpus.find((g) => g.role === serve.gpuRole);
  if (!gpu) {
    throw new Error(`serve '${serve.name}' references gpu_role '${serve.gpuRole}', which is not in manifest node '${manifest.node}'`);
  }
  return gpu;
}

/** What a GPU leaves for serves: its capacity less the reserve. */
export function gpuBudgetMib(gpu: GpuSpec): number {
  return gpu.capacityMib - gpu.reserveMib;
}

// ---------------------------------------------------------------------------------------------
// Bind addresses

export const IPV4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;

/** 127.0.0.0/8, ::1 (in any zero-padded spelling) and "localhost". */
export function isLoopback(bind: string): boolean {
  const b = bind.toLowerCase();
  if (b === 'localhost') return true;
  if (IPV4.test(b)) return b.startsWith('127.');
  return /^(0{0,4}:){2,7}0{0,3}1$/.test(b);
}

export function isWildcard(bind: string): boolean {
  return bind === '0.0.0.0' || /^(0{0,4}:){2,7}0{0,4}$/.test(bind.toLowerCase());
}

function canonicalBind(bind: string): string {
  const b = bind.toLowerCase();
  if (b === 'localhost') return '127.0.0.1';
  if (isLoopback(b) && !IPV4.test(b)) return '::1';
  return b;
}

/** Whether two host binds on the same port collide (a wildcard collides with everything). */
export function bindsOverlap(a: string, b: string): boolean {
  if (isWildcard(a) || isWildcard(b)) return true;
  if (a === 'localhost' || b === 'localhost') return isLoopback(a) && isLoopback(b);
  return canonicalBind(a) === canonicalBind(b);
}

// ---------------------------------------------------------------------------------------------
// vLLM --gpu-memory-utilization

export interface UtilizationFlag {
  /** The parsed value; undefined when missing or not a number. */
  value: number | undefined;
  /** The raw text of the value, if any. */
  raw: string | undefined;
  /** Index in args of the element holding the value (or the flag itself when the value is missing). */
  index: number;
}

/**
 * Every --gpu-memory-utilization occurrence in a vLLM arg list, in both the `--flag value` and
 * `--flag=value` forms (vLLM also accepts the underscore spelling).
 */
export function findGpuMemoryUtilization(args: readonly string[]): UtilizationFlag[] {
  return findFlags(args, (f) => f === GPU_MEMORY_UTILIZATION_FLAG).map(({ value: raw, valueIndex: index }) => ({
    value: raw !== undefined && /^\s*(\d+\.?\d*|\.\d+)(e[-+]?\d+)?\s*$/i.test(raw) ? Number(raw) : undefined,
    raw,
    index,
  }));
}

export const KV_CACHE_MEMORY_BYTES_FLAG = '--kv-cache-memory-bytes';

/**
 * The MiB of the first --kv-cache-memory-bytes, rounded up, where its value is a plain count of
 * bytes; undefined without one, or with a value written otherwise (vLLM also reads `1G` and the
 * like: left to vLLM, not guessed here).
 */
export function kvCacheMib(args: readonly string[]): { mib: number; raw: string } | undefined {
  const raw = findFlags(args, (f) => f === KV_CACHE_MEMORY_BYTES_FLAG)[0]?.value;
  if (raw === undefined || !/^\s*\d+\s*$/.test(raw)) return undefined;
  return { mib: Math.ceil(Number(raw) / (1024 * 1024)), raw: raw.trim() };
}

/** The least capacity_mib taken for a real GPU: no card nvidia-smi reports has less than 1 GiB. */
export const MIN_PLAUSIBLE_CAPACITY_MIB = 1024;

/** MiB vLLM will take at utilization u of a card of capacityMib, rounded down to whole MiB. */
export function utilizationMib(u: number, capacityMib: number): number {
  // The epsilon keeps float noise (0.29 * 100 = 28.999…) from rounding a whole MiB away.
  return Math.floor(u * capacityMib + 1e-9);
}

export function hasFlag(args: readonly string[], flag: string): boolean {
  return args.some((a) => a.replace(/_/g, '-') === flag || a.replace(/_/g, '-').startsWith(`${flag}=`));
}
