// The router's live mapping and each tier's state: whether it is quiesced, and how many requests
// are in flight on it. Quiesced tiers are kept in the state file (when there is one) across
// restarts, with what their quiesce marks are made of; a mode change counts only once it is saved. So is how long each on-demand tier's last
// acquisition took, which the residency window's margin is reckoned by (on-demand.ts).
import { randomUUID } from 'node:crypto';
import { readFile, rename, writeFile } from 'node:fs/promises';
import { oneOf, show } from '../domain/inputs';
import { QUIESCE_REASONS } from '../shared/contracts';
import type { QuiesceReason, QuiesceWhy, TierMode, TierState } from '../shared/contracts';
import type { RouterConfig, RouterTier } from '../config/router-model';
import { notJsonReason } from '../config/bounded-read';

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
   * its acquisition began (on-demand.ts). Kept in the state file, as the quiesce mark is made of
   * it: an eviction's readmit sent after a restart must still lift the quiesce it made.
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
  /**
   * Why it is quiesced, when its last quiesce said (an operator's bring-down answers 503 without
   * Retry-After: nothing brings its serve back on its own). Kept in the state file with the mode;
   * cleared by a readmit.
   */
  why?: QuiesceWhy;
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
  /** The instance of the router that wrote the file; none in a file written before marks were kept. */
  instance?: string;
  quiesces: Map<string, number>;
  /** Why each quiesced tier was quiesced; none in a file written before reasons were kept. */
  reasons: Map<string, QuiesceWhy>;
}

const NOTHING_KEPT = (): PersistedState => ({ quiesced: new Set(), lastAcquisitionMs: new Map(), quiesces: new Map(), reasons: new Map() });

/** A serve's name as a quiesce may carry it: the manifest's names, bounded. */
const SERVE_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/;

/** The reason and serve of a quiesce, or the problem with them, naming the field (`reason`, `serve`). */
export function quiesceWhy(reason: unknown, serve: unknown): { why?: QuiesceWhy } | { problem: string } {
  if (reason === undefined) return serve === undefined ? {} : { problem: 'serve is given only with a reason' };
  const notOne = oneOf(QUIESCE_REASONS)(reason);
  if (notOne) return { problem: `reason must be ${notOne} (got ${show(reason)})` };
  if (serve !== undefined && !(typeof serve === 'string' && SERVE_NAME.test(serve))) {
    return { problem: `serve must be a serve's name: letters, digits, '.', '_', '-', at most 63 (${JSON.stringify(serve)})` };
  }
  return { why: { reason: reason as QuiesceReason, ...(serve !== undefined ? { serve } : {}) } };
}

const stderrLine = (line: string) => void process.stderr.write(`gpures-router: ${line}\n`);

/** How much of a value a warning line shows: a state file's strings are not bounded. */
const SHOWN_CHARS = 80;

/**
 * quiesce_reasons of a state file: tier names to { reason, serve? }, or the refusal naming the
 * file, the field and the entry. A reason this router does not know (a newer router's, kept across
 * a downgrade) is no reason to stay down: its tier loads quiesced without one (the old meaning,
 * back on its own), with a warning naming the file, the tier and the value.
 */
function keptReasons(file: string, value: unknown, warn: (line: string) => void): Map<string, QuiesceWhy> {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new Error(`${file} (--state): quiesce_reasons must map tier names to { reason, serve } (${JSON.stringify(value)})`);
  }
  const reasons = new Map<string, QuiesceWhy>();
  for (const [tier, entry] of Object.entries(value)) {
    const e = (typeof entry === 'object' && entry !== null ? entry : {}) as { reason?: unknown; serve?: unknown };
    if (typeof e.reason === 'string' && !(QUIESCE_REASONS as readonly string[]).includes(e.reason)) {
      const shown = JSON.stringify(e.reason.length > SHOWN_CHARS ? `${e.reason.slice(0, SHOWN_CHARS)}…` : e.reason);
      warn(
        `warning: ${file} (--state): quiesce_reasons.${tier.slice(0, SHOWN_CHARS)}: reason ${shown} is not one this router knows ` +
          `(${QUIESCE_REASONS.join(', ')}): the tier stays quiesced, without a reason (503 with Retry-After)`,
      );
      continue;
    }
    const r = quiesceWhy(e.reason ?? null, e.serve);
    if ('problem' in r || !r.why) throw new Error(`${file} (--state): quiesce_reasons.${tier}: ${'problem' in r ? r.problem : 'no reason'}`);
    reasons.set(tier, r.why);
  }
  return reasons;
}

/** A map of tier names to whole numbers, or the refusal naming the file, the field and the first entry that is not. */
function wholeNumbers(file: string, field: string, what: string, value: unknown): Map<string, number> {
  const isMap = typeof value === 'object' && value !== null && !Array.isArray(value);
  const entries: [string, unknown][] = isMap ? Object.entries(value) : [['', value]];
  const bad = entries.find(([, n]) => !(typeof n === 'number' && Number.isSafeInteger(n) && n >= 0));
  if (bad) {
    const [tier, n] = bad;
    throw new Error(`${file} (--state): ${field} must map tier names to whole numbers${what} (${tier ? `${tier}: ` : ''}${JSON.stringify(n)})`);
  }
  return new Map(entries as [string, number][]);
}

/** What a previous run left: the tiers quiesced, and the last acquisition times; nothing when the file does not exist yet. */
async function loadState(file: string, warn: (line: string) => void): Promise<PersistedState> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return NOTHING_KEPT();
    throw err;
  }
  let data: { quiesced?: unknown; last_acquisition_ms?: unknown; router_instance?: unknown; quiesces?: unknown; quiesce_reasons?: unknown } | null;
  try {
    data = JSON.parse(text) as typeof data;
  } catch (err) {
    throw new Error(`${file} (--state): not JSON: ${notJsonReason(err)}`);
  }
  if (!Array.isArray(data?.quiesced) || !data.quiesced.every((t) => typeof t === 'string')) {
    throw new Error(`${file} (--state): quiesced must be a list of tier names`);
  }
  // Each written by routers since it was kept: an older file has none.
  const lastAcquisitionMs = wholeNumbers(file, 'last_acquisition_ms', ' of milliseconds', data.last_acquisition_ms ?? {});
  const instance = data.router_instance;
  if (instance !== undefined && !(typeof instance === 'string' && /^[A-Za-z0-9]+$/.test(instance))) {
    throw new Error(`${file} (--state): router_instance must be a word of letters and digits (${JSON.stringify(instance)})`);
  }
  const quiesces = wholeNumbers(file, 'quiesces', '', data.quiesces ?? {});
  const reasons = keptReasons(file, data.quiesce_reasons ?? {}, warn);
  return { quiesced: new Set(data.quiesced), lastAcquisitionMs, quiesces, reasons, ...(instance !== undefined ? { instance } : {}) };
}

export class TierTable {
  private readonly modeListeners: ((name: string, mode: TierMode) => void)[] = [];

  private constructor(
    private current: RouterConfig,
    private runtime: Map<string, TierRuntime>,
    private readonly stateFile: string | undefined,
    /**
     * In every quiesce mark: kept in the state file with the counts, so marks survive a restart. A
     * router without the file, or with one written before marks were kept, starts a new one: its
     * counts begun again never match an older mark (a guarded readmit sent with one answers
     * quiesced_since, and the tier stays quiesced until an unguarded readmit).
     */
    private readonly instance: string,
  ) {}

  /**
   * The table of a config, with the tiers the state file says are quiesced and their quiesce
   * counts; saves it at once. `warn` gets what the file held that this router leaves out (stderr
   * by default).
   */
  static async open(config: RouterConfig, stateFile: string | undefined, warn: (line: string) => void = stderrLine): Promise<TierTable> {
    const persisted: PersistedState = stateFile ? await loadState(stateFile, warn) : NOTHING_KEPT();
    const runtime = new Map<string, TierRuntime>(
      config.tiers.map((t) => {
        const rt = fresh(persisted.quiesced.has(t.name) ? 'quiesced' : 'active', persisted.lastAcquisitionMs.get(t.name));
        // Counts are kept only with the instance they count for.
        if (persisted.instance !== undefined) rt.quiesces = persisted.quiesces.get(t.name) ?? 0;
        const why = persisted.reasons.get(t.name);
        if (why && rt.mode === 'quiesced') rt.why = why;
        return [t.name, rt];
      }),
    );
    const table = new TierTable(config, runtime, stateFile, persisted.instance ?? randomUUID().slice(0, 8));
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
      ...(rt.why ? { quiesceReason: rt.why.reason, ...(rt.why.serve !== undefined ? { quiesceServe: rt.why.serve } : {}) } : {}),
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

  /**
   * A failed write leaves memory and file as they were. Callers serialize it (the admin mutex). A
   * quiesce's reason replaces the one before (none: the old meaning, back on its own); active
   * clears it.
   */
  async setMode(name: string, mode: TierMode, why?: QuiesceWhy): Promise<void> {
    const rt = this.runtimeOf(name);
    const previous = { mode: rt.mode, quiesces: rt.quiesces, why: rt.why };
    rt.mode = mode;
    rt.why = mode === 'quiesced' ? why : undefined;
    // Counted before the save: the mark a quiesce answers must be the one the file keeps.
    if (mode === 'quiesced') rt.quiesces += 1;
    try {
      await this.save();
    } catch (err) {
      rt.mode = previous.mode;
      rt.quiesces = previous.quiesces;
      rt.why = previous.why;
      throw err;
    }
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
    const byName = [...this.runtime].sort(([a], [b]) => a.localeCompare(b));
    const times = byName.filter(([, rt]) => rt.lastAcquisitionMs !== undefined);
    // Active tiers' counts too: a quiesce after the restart must not come back to a mark sent before it.
    const counted = byName.filter(([, rt]) => rt.quiesces > 0);
    const reasoned = byName.filter(([, rt]) => rt.mode === 'quiesced' && rt.why);
    const state = {
      quiesced,
      ...(times.length > 0 ? { last_acquisition_ms: Object.fromEntries(times.map(([name, rt]) => [name, rt.lastAcquisitionMs])) } : {}),
      router_instance: this.instance,
      ...(counted.length > 0 ? { quiesces: Object.fromEntries(counted.map(([name, rt]) => [name, rt.quiesces])) } : {}),
      ...(reasoned.length > 0 ? { quiesce_reasons: Object.fromEntries(reasoned.map(([name, rt]) => [name, rt.why])) } : {}),
    };
    const tmp = `${this.stateFile}.${process.pid}.tmp`;
    await writeFile(tmp, `${JSON.stringify(state, null, 2)}\n`);
    await rename(tmp, this.stateFile);
  }
}
