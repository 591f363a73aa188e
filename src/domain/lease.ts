// A lease's arithmetic: when it expires, what an idle lease's use moves, how an extension is
// bounded, and the operator's durations (90s, 30m, 2h, 1h30m) both ways. Pure: the lease
// workflow, the CLI and the API share it.
import { BOUNDS, boundRule, NAME_PATTERN, withinBound } from './bounds';
import { holdingRun } from './fence';
import { findReservation } from './ledger';
import type { LedgerState, ReservationPhase } from './ledger';

export type LeaseKind = 'fixed' | 'idle';

/**
 * What a lease carries across continue-as-new, all epoch ms. A fixed lease expires at notBefore;
 * an idle one at the later of notBefore (its first ttl, or an extension) and its last use + ttl.
 */
export interface LeaseClock {
  startedAtEpochMs: number;
  notBeforeEpochMs: number;
  /** The last use the lease saw at the router (or its start, when none was reported since). */
  lastUseSeenEpochMs: number;
}

export function newClock(seconds: number, nowMs: number): LeaseClock {
  return { startedAtEpochMs: nowMs, notBeforeEpochMs: nowMs + seconds * 1000, lastUseSeenEpochMs: nowMs };
}

export function expiresAt(kind: LeaseKind, seconds: number, c: LeaseClock): number {
  return kind === 'fixed' ? c.notBeforeEpochMs : Math.max(c.notBeforeEpochMs, c.lastUseSeenEpochMs + seconds * 1000);
}

/**
 * The use the router reports, folded in: a request in flight is use now; a last use newer than
 * the one seen moves it. A router that reports none leaves the lease counting from what it saw.
 */
export function withUse(c: LeaseClock, use: { inFlight: number; lastUsedAtEpochMs?: number | null }, nowMs: number): LeaseClock {
  const last = use.inFlight > 0 ? nowMs : (use.lastUsedAtEpochMs ?? null);
  return last !== null && last > c.lastUseSeenEpochMs ? { ...c, lastUseSeenEpochMs: Math.min(last, nowMs) } : c;
}

/**
 * Another caller's terms folded into a running lease: it lasts at least `seconds` from now. Never
 * shorter (a later expiry stands), and the kind is the lease's: an idle lease still runs on while
 * used past it. The clock unchanged when the lease already reaches that far.
 */
export function atLeastClock(kind: LeaseKind, ttlS: number, c: LeaseClock, seconds: number, nowMs: number): LeaseClock {
  const wanted = nowMs + seconds * 1000;
  return expiresAt(kind, ttlS, c) >= wanted ? c : { ...c, notBeforeEpochMs: wanted };
}

/**
 * The clock of a renewal that waited for its lease's end: its own terms from now, lasting at least
 * until what its holder's other callers asked meanwhile (`atLeastUntilMs`, counted from their asks).
 */
export function renewalClock(seconds: number, atLeastUntilMs: number, nowMs: number): LeaseClock {
  const c = newClock(seconds, nowMs);
  return { ...c, notBeforeEpochMs: Math.max(c.notBeforeEpochMs, atLeastUntilMs) };
}

/** An extension: by seconds past the current expiry, or to a time; undefined fields are not given. */
export interface LeaseExtension {
  byS?: number;
  toEpochMs?: number;
}

/** Why an extension is refused, or undefined: exactly one of by/to, and the new expiry within leaseS of now. */
export function extensionProblem(ext: unknown, currentExpiryMs: number, nowMs: number): string | undefined {
  const e = (typeof ext === 'object' && ext !== null ? ext : {}) as Record<string, unknown>;
  const given = ['byS', 'toEpochMs'].filter((k) => e[k] !== undefined);
  if (given.length !== 1) return 'give exactly one of byS (seconds past the current expiry) or toEpochMs (the new expiry)';
  const max = BOUNDS.leaseS.max;
  if (e['byS'] !== undefined && !withinBound(BOUNDS.leaseS, e['byS'])) return `byS: must be ${boundRule(BOUNDS.leaseS)} (got ${JSON.stringify(e['byS'])})`;
  if (e['toEpochMs'] !== undefined && !(typeof e['toEpochMs'] === 'number' && Number.isSafeInteger(e['toEpochMs']) && e['toEpochMs'] > nowMs))
    return `toEpochMs: must be a time after now, in epoch ms (got ${JSON.stringify(e['toEpochMs'])})`;
  if (typeof e['toEpochMs'] === 'number' && e['toEpochMs'] < currentExpiryMs)
    return `toEpochMs: ${new Date(e['toEpochMs']).toISOString()} is before the lease's current expiry ${new Date(currentExpiryMs).toISOString()}: an extension does not shorten a lease (\`serves release\` ends it now)`;
  const to = extendedExpiry(e, currentExpiryMs, nowMs);
  if (to - nowMs > max * 1000) return `the new expiry would be ${beyondReach(to - nowMs, max * 1000)}`;
  return undefined;
}

export function extendedExpiry(e: LeaseExtension, currentExpiryMs: number, nowMs: number): number {
  return e.toEpochMs ?? Math.max(currentExpiryMs, nowMs) + (e.byS ?? 0) * 1000;
}

const UNIT_S: Record<string, number> = { d: 86_400, h: 3_600, m: 60, s: 1 };

/** `90s`, `30m`, `2h`, `1h30m`, `1d`, or a plain number of seconds; undefined when it is none of those. */
export function parseDuration(text: string): number | undefined {
  const t = text.trim();
  if (/^\d+$/.test(t)) return Number(t);
  if (!/^(\d+[dhms])+$/.test(t)) return undefined;
  let total = 0;
  for (const [, n, u] of t.matchAll(/(\d+)([dhms])/g)) total += Number(n) * (UNIT_S[u ?? 's'] ?? 1);
  return Number.isSafeInteger(total) ? total : undefined;
}

/**
 * `1h59m`, `4m12s`, `45s`, `2d3h`, `1122d`: the largest unit and the one below it, rounded down,
 * as `serves status` prints time left. The second is the next unit, never one further down: 1122
 * days, 0 hours and 38 minutes is `1122d` (a skipped zero read `1122d38m`, as if 38 minutes were
 * the remainder), and it is left off when zero (`7d`, `2h`).
 */
export function formatDuration(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  const units = Object.entries(UNIT_S);
  const first = units.findIndex(([, size]) => s >= size);
  if (first < 0) return '0s';
  const [[u1, size1], next] = [units[first] as [string, number], units[first + 1]];
  const n1 = Math.floor(s / size1);
  const n2 = next ? Math.floor((s - n1 * size1) / next[1]) : 0;
  return `${n1}${u1}${next && n2 > 0 ? `${n2}${next[0]}` : ''}`;
}

/**
 * A time too far ahead, in words: `7d from now, 1s past the 7d a lease reaches at most`. The
 * excess is named, since both figures are rounded to two units and may print alike.
 */
export function beyondReach(aheadMs: number, maxMs: number): string {
  // Past by less than a second is past: 1s, not 0s.
  const [ahead, over, max] = [aheadMs, Math.ceil((aheadMs - maxMs) / 1000) * 1000, maxMs].map(formatDuration);
  // Two units each: 7d6m51s ahead reads `7d`, which beside the `7d` at most read as no overshoot.
  return ahead === max
    ? `${over} past the ${max} a lease reaches at most, counted from now`
    : `${ahead} from now, ${over} past the ${max} a lease reaches at most`;
}

/** What the lease query answers: what the CLI prints beside the serve. */
export interface LeaseView {
  serve: string;
  kind: LeaseKind;
  /** The acquisition run that holds the serve under this lease. */
  holder: string;
  expiresAtEpochMs: number;
  /** Idle leases: the time to live without a routed request. */
  idleTtlS?: number;
  /** Idle leases: the last use seen at the router (the lease's start when none was). */
  lastUseSeenEpochMs?: number;
  /** running: waiting for its expiry; expiring: the serve is being brought down. */
  state: 'running' | 'expiring';
}

/**
 * Whether a lease still stands for its serve, as it will judge at its expiry (leaseHold): bringing
 * the serve down already, or its acquisition holds the serve running, or may get it back (a
 * `serves down` that took it, an eviction of it, under way). One brought down by hand, evicted or
 * asleep for another serve keeps a lease that will end without acting: nothing of it to show,
 * extend or release.
 */
export function leaseStands(v: LeaseView, state: LedgerState): boolean {
  return v.state === 'expiring' || leaseHold(state, v.serve, v.holder).hold !== 'gone';
}

/**
 * The run that has a standing lease's serve for now (leaseHold's in flux: a `serves down` that took
 * it, an eviction of it), or undefined: at its expiry the lease waits for that run and acts only if
 * it gives the serve back, so its time left alone would promise a bring-down that may not come.
 */
export function inFluxBy(v: LeaseView, state: LedgerState): string | undefined {
  const found = leaseHold(state, v.serve, v.holder);
  return found.hold === 'in-flux' ? found.by : undefined;
}

const leaseName = (v: LeaseView): string => (v.kind === 'idle' ? 'idle lease' : 'lease');

/** leaseText, with what another run having the serve for now (inFluxBy) means for the lease. */
export function leaseLine(v: LeaseView, by: string | undefined, nowMs: number): string {
  if (by === undefined) return leaseText(v, nowMs);
  if (v.state === 'expiring') {
    return `${leaseName(v)}: expired, waiting for ${by}, which has ${v.serve} now: it brings ${v.serve} down only if that run gives it back`;
  }
  return `${leaseText(v, nowMs)}; ${by} has ${v.serve} now: the lease acts only if it gives ${v.serve} back`;
}

/**
 * `lease: 1h59m left`, `idle lease: 4m12s left (ttl 5m)`, `idle lease: up for at least 29m58s (extended), then down at the
 * first moment after that with no routed request in the last 1m`, `lease: expired, bringing the serve down`.
 */
export function leaseText(v: LeaseView, nowMs: number): string {
  const name = leaseName(v);
  if (v.state === 'expiring') return `${name}: expired, bringing ${v.serve} down`;
  const left = formatDuration(v.expiresAtEpochMs - nowMs);
  if (v.kind !== 'idle' || v.idleTtlS === undefined) return `${name}: ${left} left`;
  const ttl = formatDuration(v.idleTtlS * 1000);
  // Extended (serves extend, a lease_s joined): the expiry is a floor, not the last use + ttl, and
  // a request after it still keeps the serve up, so '31m left (ttl 1m)' read as a contradiction.
  // The idle time is not counted from the floor: at the floor the lease asks the router, and goes
  // down then unless a request came within the ttl before it (expiresAt: the later of the floor
  // and the last use + ttl), so 'then down once idle for 1m' read as a minute past the floor.
  const extended = v.lastUseSeenEpochMs !== undefined && v.expiresAtEpochMs > v.lastUseSeenEpochMs + v.idleTtlS * 1000;
  return extended
    ? `${name}: up for at least ${left} (extended), then down at the first moment after that with no routed request in the last ${ttl}`
    : `${name}: ${left} left (ttl ${ttl})`;
}

/** An acquisition's `lease`: `{ kind: 'fixed', seconds }` within leaseS, or `{ kind: 'idle' }`; the problem, or undefined. */
export function leaseRequestProblem(v: unknown): string | undefined {
  const o = (typeof v === 'object' && v !== null && !Array.isArray(v) ? v : undefined) as Record<string, unknown> | undefined;
  if (o?.['kind'] === 'idle' && Object.keys(o).length === 1) return undefined;
  if (o?.['kind'] === 'fixed' && Object.keys(o).length === 2 && withinBound(BOUNDS.leaseS, o['seconds'])) return undefined;
  return `{ "kind": "fixed", "seconds": ${boundRule(BOUNDS.leaseS).replace('a whole number of seconds in ', '')} } or { "kind": "idle" }`;
}

/** The lease workflow's input problems, for a start from the UI's form as much as from an acquisition. */
export function leaseInputProblems(input: unknown): string[] {
  if (typeof input !== 'object' || input === null || Array.isArray(input))
    return ['the input must be one JSON object, { "serve", "holder", "kind": "fixed" | "idle", "seconds" }'];
  const o = input as Record<string, unknown>;
  const problems: string[] = [];
  if (typeof o['serve'] !== 'string' || !NAME_PATTERN.test(o['serve'])) problems.push(`serve: a serve name from the manifest (got ${String(o['serve'])})`);
  problems.push(...termsProblems(o));
  const clock = o['clock'];
  if (clock !== undefined) {
    const c = (typeof clock === 'object' && clock !== null ? clock : {}) as Record<string, unknown>;
    const times = ['startedAtEpochMs', 'notBeforeEpochMs', 'lastUseSeenEpochMs'];
    if (!times.every((k) => Number.isSafeInteger(c[k]) && (c[k] as number) >= 0))
      problems.push(`clock: { ${times.join(', ')} }, epoch milliseconds as a continue-as-new carries them`);
  }
  if (o['renewal'] !== undefined && o['renewal'] !== true) problems.push(`renewal: true, or not given (got ${JSON.stringify(o['renewal'])})`);
  const max = o['maxHistoryEvents'];
  if (max !== undefined && !(Number.isSafeInteger(max) && (max as number) >= 20 && (max as number) <= 2000))
    problems.push(`maxHistoryEvents: a whole number of events in 20..2000, or not given (got ${JSON.stringify(max)})`);
  if (o['expiring'] !== undefined) problems.push(...expiringProblems(o['expiring']));
  const known = ['serve', 'holder', 'kind', 'seconds', 'clock', 'renewal', 'maxHistoryEvents', 'expiring'];
  for (const k of Object.keys(o)) if (!known.includes(k)) problems.push(`${k}: unknown field (known: ${known.join(', ')})`);
  return problems;
}

/** An expiring lease's continue-as-new input (LeaseInput.expiring): each field within what a run can have carried. */
function expiringProblems(v: unknown): string[] {
  const e = (typeof v === 'object' && v !== null && !Array.isArray(v) ? v : undefined) as Record<string, unknown> | undefined;
  if (!e) return ['expiring: { released, failures, downUnderWay, waits?, renewal?, renewalAtLeastUntilEpochMs? }, as a continue-as-new carries it'];
  const problems: string[] = [];
  if (typeof e['released'] !== 'boolean') problems.push('expiring.released: true or false');
  if (!(Number.isSafeInteger(e['failures']) && (e['failures'] as number) >= 0 && (e['failures'] as number) <= 100))
    problems.push(`expiring.failures: a whole number in 0..100 (got ${JSON.stringify(e['failures'])})`);
  if (typeof e['downUnderWay'] !== 'boolean') problems.push('expiring.downUnderWay: true or false');
  const w = e['waits'] as Record<string, unknown> | undefined;
  if (w !== undefined) {
    const ok = typeof w === 'object' && w !== null && Number.isSafeInteger(w['sinceEpochMs']) && (w['sinceEpochMs'] as number) >= 0;
    if (!ok || !(Number.isSafeInteger(w['nextMs']) && (w['nextMs'] as number) >= 1 && (w['nextMs'] as number) <= 3_600_000))
      problems.push('expiring.waits: { sinceEpochMs, nextMs }, epoch ms and a wait of at most an hour');
  }
  if (e['renewal'] !== undefined) problems.push(...renewalProblems(e['renewal']).map((p) => `expiring.renewal: ${p}`));
  const until = e['renewalAtLeastUntilEpochMs'];
  if (until !== undefined && !(Number.isSafeInteger(until) && (until as number) >= 0))
    problems.push(`expiring.renewalAtLeastUntilEpochMs: epoch milliseconds (got ${JSON.stringify(until)})`);
  const known = ['released', 'failures', 'downUnderWay', 'waits', 'renewal', 'renewalAtLeastUntilEpochMs'];
  for (const k of Object.keys(e)) if (!known.includes(k)) problems.push(`expiring.${k}: unknown field (known: ${known.join(', ')})`);
  return problems;
}

/** A lease's terms as a start or a renewal gives them: its holder, its kind, and its seconds within their bound. */
function termsProblems(o: Record<string, unknown>): string[] {
  const problems: string[] = [];
  if (typeof o['holder'] !== 'string' || o['holder'] === '') problems.push('holder: the acquisition run (<workflow id>/<run id>) that holds the serve');
  if (o['kind'] !== 'fixed' && o['kind'] !== 'idle') problems.push(`kind: 'fixed' or 'idle' (got ${String(o['kind'])})`);
  const bound = o['kind'] === 'idle' ? BOUNDS.idleTtlS : BOUNDS.leaseS;
  if (!withinBound(bound, o['seconds'])) problems.push(`seconds: must be ${boundRule(bound)} (got ${String(o['seconds'])})`);
  return problems;
}

/** What is wrong with a renewal's terms (a signal, which cannot be refused: the lease drops one it cannot take). */
export function renewalProblems(next: unknown): string[] {
  if (typeof next !== 'object' || next === null || Array.isArray(next))
    return ['the renewal must be one JSON object, { "holder", "kind": "fixed" | "idle", "seconds" }'];
  return termsProblems(next as Record<string, unknown>);
}

/**
 * What an expiring lease finds of its serve in the ledger: still its acquisition's and running
 * (bring it down); in another operation's hands that may give it back (a bring-down that took it
 * and may let go, an eviction of it that may fail): wait and look again; or gone for good from
 * the lease (down, evicted, asleep, or another run's): leave it alone.
 */
export type LeaseHold =
  | { hold: 'ours' }
  /** `by`: the run that has it now, whose end (without giving it back) makes it gone too. */
  | { hold: 'in-flux'; why: string; by: string }
  | { hold: 'gone'; phase?: ReservationPhase; heldBy?: string };

export function leaseHold(state: LedgerState, serve: string, holder: string): LeaseHold {
  const r = findReservation(state, serve);
  if (!r) return { hold: 'gone' };
  if (r.phase === 'running' && r.holder === holder) return { hold: 'ours' };
  if (r.phase === 'stopping' && r.takenFrom?.phase === 'running' && r.takenFrom.holder === holder) {
    return {
      hold: 'in-flux',
      why: `${serve} is being stopped by ${r.holder}, which took it from ${holder} (a bring-down that lets go gives it back)`,
      by: r.holder,
    };
  }
  if (r.phase === 'evicting' && r.holder === holder) {
    const by = holdingRun(state, r);
    return { hold: 'in-flux', why: `${serve} is being evicted for ${r.evictedFor ?? '?'} by ${by} (an eviction that fails gives it back)`, by };
  }
  return { hold: 'gone', phase: r.phase, heldBy: holdingRun(state, r) };
}
