// Whether the card physically has the room for a cold start. The ledger admits on paper: its
// declared MiB against the budget, which keeps reserve_mib for memory held outside the ledger. A
// process outside it (another user's job, a leaked CUDA context, a serve started by hand) holding
// more than the reserve makes the ledger's free figure optimistic, and vLLM then refuses only
// once its container is up ("Free memory on device … is less than desired GPU memory
// utilization"), an acquisition's victims stopped for nothing. So before a cold start: what the
// ledger commits on the GPU (every reservation, the starting one included, whole: a serve still
// loading has not drawn all of it yet) plus what is held outside the ledger must fit the card.
// An acquisition that evicts reads it before its first quiesce too, as the card will be once its
// planned victims are down: a squatter no eviction can make room beside is refused then, with no
// serve evicted for nothing.
import { victimTookMib } from './eviction';
import type { Victim } from './eviction';
import type { LedgerState, Reservation } from './ledger';
import { committedMibOf, freedByEviction } from './ledger';
import type { ProcessOnGpu } from './vram-release';

/** A process nvidia-smi's --query-compute-apps lists, with its name: a refusal names it. */
export interface ListedProcess extends ProcessOnGpu {
  processName: string;
}

/** A process on the GPU that no serve of the ledger runs as. */
export interface ForeignProcess {
  pid: number;
  processName: string;
  usedMib: number;
}

/** Which reading decided what is held outside the ledger. */
export type RoomReading =
  /** The processes nvidia-smi lists, less those the ledger's serves run as (their containers' pids). */
  | {
      by: 'processes';
      /** The largest, at most MAX_FOREIGN of them (a history holds them); `outsideMib` counts them all. */
      foreign: ForeignProcess[];
      /** How many there were, where more than MAX_FOREIGN. */
      count?: number;
    }
  /**
   * The whole GPU's used less every other reservation counted whole (`why` the processes could not
   * say): no more than what is really held outside while every serve draws within its reservation
   * (one still loading draws less), so such a start that the budget and the reserve account for
   * passes; a serve drawing above its declared MiB shows here by its excess.
   */
  | {
      by: 'whole-gpu';
      why: string;
      othersCommittedMib: number;
      /** Read before an eviction: of `usedMib`, what the victims draw and give back (each as measured at its bring-up, else as declared). */
      victimsGiveMib?: number;
    };

/** The planned evictions a room read before them counts as done. */
export interface RoomOnceEvicted {
  victims: string[];
  /** What the ledger stops committing for them: each one's MiB, less the residual of one put to sleep. */
  freedMib: number;
}

export interface StartRoom {
  serve: string;
  gpuUuid: string;
  totalMib: number;
  usedMib: number;
  /** What the ledger commits on the GPU, the starting serve included. */
  committedMib: number;
  /** Held outside the ledger, by the reading that decided. */
  outsideMib: number;
  /** committed + outside past the card's total; 0: the card has the room. */
  shortMib: number;
  reading: RoomReading;
  /** Read before an acquisition's evictions: the figures are the card's once they are done. */
  onceEvicted?: RoomOnceEvicted;
}

export interface RoomFacts {
  serve: string;
  gpu: { uuid: string; totalMib: number; usedMib: number };
  /** The ledger of the GPU, read after the processes were listed: any serve listed was admitted by then. */
  ledger: LedgerState;
  /** Every compute process nvidia-smi listed, or why it listed none (a refused query). */
  apps: readonly ListedProcess[] | { unread: string };
  /** Each serve of the ledger: its container's host pids (empty: not running), or why they could not be read. */
  pids: Record<string, readonly number[] | { unread: string }>;
  /**
   * An acquisition's planned victims, still running (`serve` is the acquirer, its MiB held, not
   * committed yet): the room is read as it will be once they are evicted.
   */
  evicting?: readonly Victim[];
}

/** Foreign processes a verdict names: a GPU runs a few dozen compute processes at most. */
export const MAX_FOREIGN = 32;

/** The verdict: the figures, which reading decided, and the shortfall (0 when it fits). */
export function startRoom(f: RoomFacts): StartRoom {
  const commits = (r: Reservation) => committedOnceEvicted(r, f.serve, f.evicting);
  const committedMib = f.ledger.reservations.reduce((s, r) => s + commits(r), 0);
  const decided = byProcesses(f);
  const othersCommittedMib = f.ledger.reservations.filter((r) => r.serve !== f.serve).reduce((s, r) => s + commits(r), 0);
  // The whole GPU's used less what the victims give back: a victim reserved with headroom draws,
  // and gives back, less than the ledger stops committing for it.
  const victimsGiveMib = f.evicting?.reduce((s, v) => s + givesBackMib(v), 0);
  const byGpu = (why: string): RoomReading => ({ by: 'whole-gpu', why, othersCommittedMib, ...(victimsGiveMib !== undefined ? { victimsGiveMib } : {}) });
  const reading = typeof decided === 'string' ? byGpu(decided) : foreignReading(decided);
  const outsideMib =
    typeof decided === 'string' ? Math.max(0, f.gpu.usedMib - (victimsGiveMib ?? 0) - othersCommittedMib) : decided.reduce((s, p) => s + p.usedMib, 0);
  return {
    serve: f.serve,
    gpuUuid: f.gpu.uuid,
    totalMib: f.gpu.totalMib,
    usedMib: f.gpu.usedMib,
    committedMib,
    outsideMib,
    shortMib: Math.max(0, committedMib + outsideMib - f.gpu.totalMib),
    reading,
    ...(f.evicting ? { onceEvicted: { victims: f.evicting.map((v) => v.serve), freedMib: f.evicting.reduce((s, v) => s + freedByEviction(v), 0) } } : {}),
  };
}

/**
 * What a reservation commits once the planned evictions are done: a victim its sleep's residual
 * (nothing, stopped), the acquirer its whole MiB (held now, admitted once they are down), any
 * other as now. No evictions planned: as now.
 */
function committedOnceEvicted(r: Reservation, serve: string, evicting: readonly Victim[] | undefined): number {
  if (!evicting) return committedMibOf(r);
  if (r.serve === serve) return r.vramMib;
  const victim = evicting.find((v) => v.serve === r.serve);
  return victim ? victim.vramMib - freedByEviction(victim) : committedMibOf(r);
}

/** What a victim's eviction gives back on the card: what it was seen to take at its bring-up (else its MiB), less a sleeper's residual. */
function givesBackMib(v: Victim): number {
  return Math.max(0, victimTookMib(v, v.vramMib) - (v.sleep?.residualMib ?? 0));
}

/** The largest foreign processes, as many as a verdict names. */
function foreignReading(foreign: ForeignProcess[]): RoomReading {
  const sorted = [...foreign].sort((a, b) => b.usedMib - a.usedMib || a.pid - b.pid);
  return { by: 'processes', foreign: sorted.slice(0, MAX_FOREIGN), ...(sorted.length > MAX_FOREIGN ? { count: sorted.length } : {}) };
}

/** The processes outside the ledger, or why the processes cannot say (the whole GPU then decides). */
function byProcesses(f: RoomFacts): ForeignProcess[] | string {
  if ('unread' in f.apps) return `nvidia-smi did not list its compute processes (${f.apps.unread})`;
  const listed = f.apps.filter((a) => a.gpuUuid === f.gpu.uuid);
  if (listed.length === 0) return `nvidia-smi lists no compute process on ${f.gpu.uuid} (processes hidden: a worker outside the host's pid namespace)`;
  const ledgerPids = new Set<number>();
  for (const [serve, pids] of Object.entries(f.pids)) {
    if ('unread' in pids) return `the processes of ${serve} could not be read (${pids.unread})`;
    for (const pid of pids) ledgerPids.add(pid);
  }
  // Serves running but none listed: the pids nvidia-smi names are another namespace's, and the
  // serves' own processes would be taken for foreign ones.
  if (ledgerPids.size > 0 && !listed.some((a) => ledgerPids.has(a.pid)))
    return `nvidia-smi lists none of the ledger's serves' ${ledgerPids.size} pids on ${f.gpu.uuid} (a worker outside the host's pid namespace sees other pids)`;
  const outside = listed.filter((a) => !ledgerPids.has(a.pid));
  if (outside.some((a) => a.usedMib === null)) return 'per-process used_memory is [N/A]: what the processes outside the ledger hold cannot be told';
  return outside.map((a) => ({ pid: a.pid, processName: a.processName, usedMib: a.usedMib ?? 0 }));
}

/** `pid 4242 python3 12288 MiB, …`, the largest first (at most five named). */
function foreignList(r: Extract<RoomReading, { by: 'processes' }>): string {
  const named = r.foreign.slice(0, 5).map((p) => `pid ${p.pid} ${p.processName} ${p.usedMib} MiB`);
  const more = (r.count ?? r.foreign.length) - named.length;
  return named.join(', ') + (more > 0 ? ` and ${more} more` : '');
}

/** What was held outside the ledger, and how it was read. */
function outsideText(r: StartRoom): string {
  if (r.reading.by === 'processes') {
    return r.reading.foreign.length
      ? `processes outside the ledger hold ${r.outsideMib} MiB (${foreignList(r.reading)})`
      : 'no process outside the ledger holds any';
  }
  const victims = r.reading.victimsGiveMib !== undefined ? `, ${r.reading.victimsGiveMib} MiB of it the victims' to give back` : '';
  return (
    `${r.outsideMib} MiB are held outside the ledger by the whole GPU's reading (used ${r.usedMib} MiB${victims}, ` +
    `${r.reading.othersCommittedMib} MiB of it at most the other serves'; its processes could not say which: ${r.reading.why})`
  );
}

/** `vision is evicted`, `vision and ocr are evicted`. */
function evictedText(e: RoomOnceEvicted): string {
  return `${e.victims.join(' and ')} ${e.victims.length === 1 ? 'is' : 'are'} evicted`;
}

/** The figures and which reading decided, against the card's total. */
function figures(r: StartRoom): string {
  const sum = `ledger commits ${r.committedMib} MiB on ${r.gpuUuid} (${r.serve} included), ${outsideText(r)}`;
  return r.shortMib > 0
    ? `${sum}: ${r.committedMib + r.outsideMib} MiB against the card's ${r.totalMib} MiB, short by ${r.shortMib} MiB`
    : `${sum}: ${r.committedMib + r.outsideMib} of the card's ${r.totalMib} MiB`;
}

/** The `room` step's line (the step's name says room; a shortfall says so): the figures and which reading decided. */
export function roomLine(r: StartRoom): string {
  const once = r.onceEvicted ? `once ${evictedText(r.onceEvicted)} (${r.onceEvicted.freedMib} MiB freed), ` : '';
  return `${r.shortMib > 0 ? 'no room: ' : ''}${once}${figures(r)}`;
}

/** The refusal: what holds the memory, the shortfall, and what to do. */
export function noRoomMessage(r: StartRoom, vramMib: number): string {
  const named = r.reading.by === 'processes' && r.reading.foreign.length > 0;
  const what = named
    ? `stop ${r.reading.by === 'processes' && r.reading.foreign.length === 1 ? 'that process' : 'those processes'}`
    : 'find what holds the GPU outside the ledger (nvidia-smi) and stop it';
  // Before an eviction: nothing was quiesced or stopped for a start the card could not hold anyway.
  const refused = r.onceEvicted
    ? `${r.serve} (${vramMib} MiB) refused before any eviction: the card cannot hold it even once ${evictedText(r.onceEvicted)} (${r.onceEvicted.freedMib} MiB freed): ${figures(r)}; no serve was evicted, nothing was started`
    : `start of ${r.serve} (${vramMib} MiB) refused: the card cannot hold it: ${figures(r)}; nothing was started`;
  return (
    `${refused}. ` +
    `To bring it up, ${what}, then bring it up again; if it is to stay, raise the GPU's reserve_mib by at least ${r.shortMib} MiB so the ledger admits only what fits beside it`
  );
}
