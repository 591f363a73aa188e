// vLLM's sleep mode, imitated for the simulated box: the same endpoints (POST /sleep?level=N,
// POST /wake_up[?tags=weights|kv_cache], GET /is_sleeping, and level 2's weight reload through
// POST /collective_rpc {"method": "reload_weights"}), served only where vLLM serves them
// (VLLM_SERVER_DEV_MODE=1, and --enable-sleep-mode for them to do anything), and the memory they
// move: what the serve draws on its GPU, written to a draw file the fake nvidia-smi reads, and
// what level 1 takes of host RAM. A sleep can be made to leak (keep MiB it should free) and a wake
// to fail or take its time, as the field has seen vLLM do (vLLM #32714, #47654, #17117).

/** The model's memory in parts, as vLLM's sleep-mode allocator tags it. */
export interface SimMemory {
  /** The declared draw when awake (the serve's vram_mib). */
  vramMib: number;
  /** The weights' share of it: offloaded to host RAM by level 1, discarded by level 2. */
  weightsMib: number;
  /** What stays on the GPU whatever sleeps: the CUDA context, graphs, buffers. */
  residualMib: number;
  /** What a sleep fails to free on top of the residual. */
  leakMib: number;
}

export interface SleepModeOptions {
  /** VLLM_SERVER_DEV_MODE=1: the endpoints exist. */
  devMode: boolean;
  /** --enable-sleep-mode: the memory is under the sleep allocator, so a sleep can free it. */
  enabled: boolean;
  memory?: SimMemory;
  sleepDelayMs: number;
  wakeDelayMs: number;
  /** The weights' reload from disk after a level-2 sleep. */
  reloadDelayMs: number;
  /** Every wake_up fails (500), as a wake that hits an OOM does. */
  wakeFails: boolean;
}

export type SleepTag = 'weights' | 'kv_cache';

/**
 * vLLM's published figures for Phi-3-vision on an A100 (vLLM's sleep-mode post, Oct 2025): a cold
 * reload, and a wake from level 1; and the 8.63 GiB of weights level 1 keeps in host RAM. What the
 * demo's --sleep and the sleep benchmark set the simulated load and wake from.
 */
export const PHI3_VISION_A100 = { coldLoadMs: 58_100, wakeLevel1Ms: 820, weightsMib: 8837 } as const;

/** What the sleep state answers to the HTTP layer. */
export class SleepModeError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export interface Draw {
  /** On the GPU now. */
  gpuMib: number;
  /** In host RAM now (level 1's offloaded weights). */
  hostRamMib: number;
  level: 0 | 1 | 2;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export class SleepMode {
  /** 0: awake. */
  private level: 0 | 1 | 2 = 0;
  private weightsOnGpu = true;
  private kvOnGpu = true;
  /** After level 2 the weights' memory comes back empty: they must be reloaded before serving. */
  private weightsValid = true;
  private busy: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly opts: SleepModeOptions,
    private readonly onDraw: (draw: Draw) => void = () => undefined,
  ) {}

  get endpoints(): boolean {
    return this.opts.devMode;
  }

  sleeping(): boolean {
    return this.level !== 0;
  }

  /** Whether the engine can answer a request: weights and KV cache on the GPU, the weights loaded. */
  serving(): boolean {
    return this.weightsOnGpu && this.kvOnGpu && this.weightsValid;
  }

  draw(): Draw {
    const m = this.opts.memory;
    if (!m) return { gpuMib: 0, hostRamMib: 0, level: this.level };
    const kvMib = Math.max(0, m.vramMib - m.weightsMib - m.residualMib);
    const leak = this.weightsOnGpu && this.kvOnGpu ? 0 : m.leakMib;
    const gpuMib = Math.min(m.vramMib, m.residualMib + (this.weightsOnGpu ? m.weightsMib : 0) + (this.kvOnGpu ? kvMib : 0) + leak);
    const hostRamMib = this.level === 1 && !this.weightsOnGpu ? m.weightsMib : 0;
    return { gpuMib, hostRamMib, level: this.level };
  }

  /** One call at a time, as vLLM's engine takes them. */
  private serial<T>(fn: () => Promise<T>): Promise<T> {
    const next = this.busy.then(fn, fn);
    this.busy = next.catch(() => undefined);
    return next;
  }

  sleep(levelParam: string | null): Promise<void> {
    const level = levelParam === null ? 1 : Number(levelParam);
    if (level !== 1 && level !== 2) return Promise.reject(new SleepModeError(400, `level must be 1 or 2 (got ${JSON.stringify(levelParam)})`));
    return this.serial(async () => {
      this.requireEnabled();
      if (this.level !== 0) return;
      await sleep(this.opts.sleepDelayMs);
      this.level = level;
      this.weightsOnGpu = false;
      this.kvOnGpu = false;
      if (level === 2) this.weightsValid = false;
      this.onDraw(this.draw());
    });
  }

  /** Without tags, both; the engine is awake once both are back. */
  wakeUp(tags: readonly string[]): Promise<void> {
    const bad = tags.find((t) => t !== 'weights' && t !== 'kv_cache');
    if (bad !== undefined) return Promise.reject(new SleepModeError(400, `unknown tag ${JSON.stringify(bad)} (weights, kv_cache)`));
    const wanted = new Set<SleepTag>(tags.length ? (tags as SleepTag[]) : ['weights', 'kv_cache']);
    return this.serial(async () => {
      this.requireEnabled();
      if (this.opts.wakeFails) throw new SleepModeError(500, 'CUDA error: out of memory (simulated: SIM_WAKE_FAIL)');
      await sleep(this.opts.wakeDelayMs);
      if (wanted.has('weights')) this.weightsOnGpu = true;
      if (wanted.has('kv_cache')) this.kvOnGpu = true;
      if (this.weightsOnGpu && this.kvOnGpu) this.level = 0;
      this.onDraw(this.draw());
    });
  }

  /** collective_rpc's reload_weights: the weights read again into their (reallocated) memory. */
  reloadWeights(): Promise<void> {
    return this.serial(async () => {
      this.requireEnabled();
      if (!this.weightsOnGpu) throw new SleepModeError(400, 'the weights are not on the GPU: wake_up?tags=weights first');
      await sleep(this.opts.reloadDelayMs);
      this.weightsValid = true;
    });
  }

  private requireEnabled(): void {
    if (!this.opts.enabled) throw new SleepModeError(500, 'Sleep mode is not enabled: start the server with --enable-sleep-mode');
  }
}

/** The simulation's knobs are bounded like the box's own figures: an hour of delay, a TiB of memory. */
export const SIM_MS = { unit: 'milliseconds', max: 3_600_000 } as const;
export const SIM_MIB = { unit: 'MiB', max: 1_048_576 } as const;

/** A number in 0..max from the simulation's environment (its unit named in the error), or the fallback when unset. */
export function envNumber(env: NodeJS.ProcessEnv, key: string, fallback: number, bound: { unit: string; max: number }): number {
  const raw = env[key];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < 0 || n > bound.max) throw new Error(`invalid ${key}: ${raw} (${bound.unit}, 0..${bound.max})`);
  return n;
}

/**
 * VLLM_SERVER_DEV_MODE, and the simulation's knobs: SIM_VRAM_MIB (the declared draw; SimRuntime
 * sets it from the container's label), SIM_WEIGHTS_MIB (default 60% of it), SIM_SLEEP_RESIDUAL_MIB
 * (512), SIM_SLEEP_LEAK_MIB (0), SIM_SLEEP_DELAY_MS (100), SIM_WAKE_DELAY_MS (300),
 * SIM_RELOAD_DELAY_MS (1000), SIM_WAKE_FAIL (1: every wake fails).
 */
export function sleepModeFromEnv(enabled: boolean, env: NodeJS.ProcessEnv): SleepModeOptions {
  const vramMib = envNumber(env, 'SIM_VRAM_MIB', 0, SIM_MIB);
  const memory: SimMemory | undefined =
    vramMib > 0
      ? {
          vramMib,
          weightsMib: Math.min(vramMib, envNumber(env, 'SIM_WEIGHTS_MIB', Math.round(vramMib * 0.6), SIM_MIB)),
          residualMib: envNumber(env, 'SIM_SLEEP_RESIDUAL_MIB', 512, SIM_MIB),
          leakMib: envNumber(env, 'SIM_SLEEP_LEAK_MIB', 0, SIM_MIB),
        }
      : undefined;
  return {
    devMode: env['VLLM_SERVER_DEV_MODE'] === '1',
    enabled,
    ...(memory ? { memory } : {}),
    sleepDelayMs: envNumber(env, 'SIM_SLEEP_DELAY_MS', 100, SIM_MS),
    wakeDelayMs: envNumber(env, 'SIM_WAKE_DELAY_MS', 300, SIM_MS),
    reloadDelayMs: envNumber(env, 'SIM_RELOAD_DELAY_MS', 1000, SIM_MS),
    wakeFails: env['SIM_WAKE_FAIL'] === '1',
  };
}
