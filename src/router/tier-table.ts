// The router's live mapping and each tier's state: whether it is quiesced, and how many requests
// are in flight on it. Quiesced tiers are kept in the state file (when there is one) across
// restarts; a mode change counts only once it is saved.
import { readFile, rename, writeFile } from 'node:fs/promises';
import type { TierMode, TierState } from '../shared/contracts';
import type { RouterConfig, RouterTier } from '../config/router-model';

export interface RouterSnapshot {
  mappingVersion: string;
  tiers: TierState[];
}

/** Per-tier runtime state; it survives reloads for tiers that still exist. */
export interface TierRuntime {
  mode: TierMode;
  inFlight: number;
  /** When a routed request last began or ended; what an idle lease is judged by. */
  lastUsedAtEpochMs: number | null;
  /**
   * Quiesces so far, each counted even when the tier was quiesced already: whoever quiesces relies
   * on it from then on. The router's own readmit and undo lift only a quiesce nobody made since
   * its acquisition began (on-demand.ts). In memory: an acquisition does not outlive the router.
   */
  quiesces: number;
}

const fresh = (mode: TierMode = 'active'): TierRuntime => ({ mode, inFlight: 0, lastUsedAtEpochMs: null, quiesces: 0 });

/** The tiers a previous run left quiesced; none when the file does not exist yet. */
async function loadQuiesced(file: string): Promise<Set<string>> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return new Set();
    throw err;
  }
  let data: { quiesced?: unknown } | null;
  try {
    data = JSON.parse(text) as { quiesced?: unknown } | null;
  } catch (err) {
    throw new Error(`${file} (--state): not JSON: ${(err as Error).message}`);
  }
  if (!Array.isArray(data?.quiesced) || !data.quiesced.every((t) => typeof t === 'string')) {
    throw new Error(`${file} (--state): quiesced must be a list of tier names`);
  }
  return new Set(data.quiesced);
}

export class TierTable {
  private readonly modeListeners: ((name: string, mode: TierMode) => void)[] = [];

  private constructor(
    private current: RouterConfig,
    private runtime: Map<string, TierRuntime>,
    private readonly stateFile: string | undefined,
  ) {}

  /** The table of a config, with the tiers the state file says are quiesced; saves it at once. */
  static async open(config: RouterConfig, stateFile: string | undefined): Promise<TierTable> {
    const persisted = stateFile ? await loadQuiesced(stateFile) : new Set<string>();
    const runtime = new Map<string, TierRuntime>(config.tiers.map((t) => [t.name, fresh(persisted.has(t.name) ? 'quiesced' : 'active')]));
    const table = new TierTable(config, runtime, stateFile);
    // A state file that cannot be written fails the start, not the first eviction.
    await table.save();
    return table;
  }

  get config(): RouterConfig {
    return this.current;
  }

  runtimeOf(name: string): TierRuntime {
    let rt = this.runtime.get(name);
    if (!rt) {
      rt = fresh();
      this.runtime.set(name, rt);
    }
    return rt;
  }

  state(tier: RouterTier): TierState {
    const rt = this.runtimeOf(tier.name);
    return {
      tier: tier.name,
      state: rt.mode,
      inFlight: rt.inFlight,
      backend: tier.backend,
      modelIdentity: tier.modelIdentity,
      lastUsedAtEpochMs: rt.lastUsedAtEpochMs,
    };
  }

  snapshot(): RouterSnapshot {
    return { mappingVersion: this.current.mappingVersion, tiers: this.current.tiers.map((t) => this.state(t)) };
  }

  /** Called after each mode change has been saved: the on-demand queue waits for 'active'. */
  onModeChange(listener: (name: string, mode: TierMode) => void): void {
    this.modeListeners.push(listener);
  }

  /** A failed write leaves memory and file as they were. Callers serialize it (the admin mutex). */
  async setMode(name: string, mode: TierMode): Promise<void> {
    const rt = this.runtimeOf(name);
    const previous = rt.mode;
    rt.mode = mode;
    try {
      await this.save();
    } catch (err) {
      rt.mode = previous;
      throw err;
    }
    if (mode === 'quiesced') rt.quiesces += 1;
    for (const l of this.modeListeners) l(name, mode);
  }

  /**
   * Switches to a reloaded config. Tiers that still exist keep their mode (a quiesced tier stays
   * quiesced) and their in-flight count; new tiers start active.
   */
  async replace(config: RouterConfig): Promise<void> {
    const next = new Map<string, TierRuntime>();
    for (const t of config.tiers) next.set(t.name, this.runtime.get(t.name) ?? fresh());
    this.current = config;
    this.runtime = next;
    await this.save();
  }

  private async save(): Promise<void> {
    if (!this.stateFile) return;
    const quiesced = [...this.runtime]
      .filter(([, rt]) => rt.mode === 'quiesced')
      .map(([name]) => name)
      .sort();
    const tmp = `${this.stateFile}.${process.pid}.tmp`;
    await writeFile(tmp, `${JSON.stringify({ quiesced }, null, 2)}\n`);
    await rename(tmp, this.stateFile);
  }
}
