// The router's live mapping and each tier's state: whether it is quiesced, and how many requests
// are in flight on it. Quiesced tiers are kept in the state file (when there is one) across
// restarts; a mode change counts only once it is saved. So is how long each on-demand tier's last
// acquisition took, which the residency window's margin is reckoned by (on-demand.ts).
import { randomUUID } from 'node:crypto';
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
  /**
   * How long the tier's last acquisition by this router took, from its start to the tier active;
   * kept in the state file, so a restarted router still holds a request only as long as the
   * acquisition after a residency window is expected to take (on-demand.ts).
   */
  lastAcquisitionMs?: number;
  /**
   * Its backend answered since this router started: a routed request got a response, or a guarded
   * readmit passed. An on-demand tier's mode alone does not say its serve is up: a tier never
   * quiesced (its serve never started, or the router's state file new) is active over a down
   * backend, and /v1/models would list it as answering now. In memory, as in-flight counts are.
   */
  answered: boolean;
}

const fresh = (mode: TierMode = 'active', lastAcquisitionMs?: number): TierRuntime => ({
  mode,
  inFlight: 0,
  lastUsedAtEpochMs: null,
  quiesces: 0,
  answered: false,
  ...(lastAcquisitionMs !== undefined ? { lastAcquisitionMs } : {}),
});

interface PersistedState {
  quiesced: Set<string>;
  lastAcquisitionMs: Map<string, number>;
}

/** What a previous run left: the tiers quiesced, and the last acquisition times; nothing when the file does not exist yet. */
async function loadState(file: string): Promise<PersistedState> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { quiesced: new Set(), lastAcquisitionMs: new Map() };
    throw err;
  }
  let data: { quiesced?: unknown; last_acquisition_ms?: unknown } | null;
  try {
    data = JSON.parse(text) as typeof data;
  } catch (err) {
    throw new Error(`${file} (--state): not JSON: ${(err as Error).message}`);
  }
  if (!Array.isArray(data?.quiesced) || !data.quiesced.every((t) => typeof t === 'string')) {
    throw new Error(`${file} (--state): quiesced must be a list of tier names`);
  }
  // Written by routers since it was kept: an older file has none.
  const times = data.last_acquisition_ms ?? {};
  const isMap = typeof times === 'object' && times !== null && !Array.isArray(times);
  const entries: [string, unknown][] = isMap ? Object.entries(times) : [['', times]];
  const bad = entries.find(([, ms]) => !(typeof ms === 'number' && Number.isSafeInteger(ms) && ms >= 0));
  if (bad) {
    const [tier, ms] = bad;
    throw new Error(
      `${file} (--state): last_acquisition_ms must map tier names to whole numbers of milliseconds (${tier ? `${tier}: ` : ''}${JSON.stringify(ms)})`,
    );
  }
  return { quiesced: new Set(data.quiesced), lastAcquisitionMs: new Map(entries as [string, number][]) };
}

export class TierTable {
  /** This router's start, in every quiesce mark: a count begun again by a restart never matches an older mark. */
  private readonly instance = randomUUID().slice(0, 8);
  private readonly modeListeners: ((name: string, mode: TierMode) => void)[] = [];

  private constructor(
    private current: RouterConfig,
    private runtime: Map<string, TierRuntime>,
    private readonly stateFile: string | undefined,
  ) {}

  /** The table of a config, with the tiers the state file says are quiesced; saves it at once. */
  static async open(config: RouterConfig, stateFile: string | undefined): Promise<TierTable> {
    const persisted: PersistedState = stateFile ? await loadState(stateFile) : { quiesced: new Set(), lastAcquisitionMs: new Map() };
    const runtime = new Map<string, TierRuntime>(
      config.tiers.map((t) => [t.name, fresh(persisted.quiesced.has(t.name) ? 'quiesced' : 'active', persisted.lastAcquisitionMs.get(t.name))]),
    );
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
      quiesceMark: this.quiesceMark(tier.name),
      backendAnswered: rt.answered,
    };
  }

  /** What a guarded readmit is sent back with: the quiesce it may lift (docs/router-admin-api.md). */
  quiesceMark(name: string): string {
    return `${this.instance}.${this.runtimeOf(name).quiesces}`;
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

  /** A guarded readmit passed: the tier routes again, to a backend that has just answered. */
  async readmitted(name: string): Promise<void> {
    await this.setMode(name, 'active');
    this.runtimeOf(name).answered = true;
  }

  /**
   * How long the tier's last acquisition took: in force at once, saved by the promise. Callers
   * serialize the save (the admin mutex), as setMode's.
   */
  setLastAcquisition(name: string, ms: number): () => Promise<void> {
    this.runtimeOf(name).lastAcquisitionMs = Math.round(ms);
    return () => this.save();
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
    const times = [...this.runtime].filter(([, rt]) => rt.lastAcquisitionMs !== undefined).sort(([a], [b]) => a.localeCompare(b));
    const state = {
      quiesced,
      ...(times.length > 0 ? { last_acquisition_ms: Object.fromEntries(times.map(([name, rt]) => [name, rt.lastAcquisitionMs])) } : {}),
    };
    const tmp = `${this.stateFile}.${process.pid}.tmp`;
    await writeFile(tmp, `${JSON.stringify(state, null, 2)}\n`);
    await rename(tmp, this.stateFile);
  }
}
