// Readers over values decoded from a history. A history may be older than the code reading it,
// so nothing in it is trusted to have today's shape: every field is read as possibly missing,
// and what is printed is checked to be a string or a number first.
import type { LedgerState } from '../../domain/ledger';
import type { VramReading } from '../../shared/contracts';
import { decodePayloads } from '../events';
import type { FailureEvidence } from './model';

export type Obj = Record<string, unknown>;

/** A value decoded from history: the shape the code declares today, any field of which an older history may lack. */
export type Loose<T> = T extends readonly (infer E)[] ? Loose<E>[] : T extends object ? { [P in keyof T]?: Loose<T[P]> } : T;

export function obj(v: unknown): Obj | undefined {
  return typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Obj) : undefined;
}
export function str(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}
export function num(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
}
export function strs(v: unknown): string[] | undefined {
  return Array.isArray(v) && v.every((x) => typeof x === 'string') ? v : undefined;
}
/** Any decoded value as text: strings as they are, anything else as JSON. */
export function txt(v: unknown): string {
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean' || v === null) return `${v}`;
  return v === undefined ? '?' : JSON.stringify(v);
}
export function path(v: unknown, ...keys: string[]): unknown {
  let cur: unknown = v;
  for (const k of keys) cur = obj(cur)?.[k];
  return cur;
}

export function compact(v: unknown, max = 160): string {
  const s = JSON.stringify(v) ?? 'undefined';
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
}

/** Event times carry nanoseconds; milliseconds are plenty for evidence. */
export function isoMs(t: string | undefined): string | undefined {
  if (!t) return undefined;
  return t.replace(/(\.\d{3})\d*Z$/, '$1Z');
}

export function isLedgerState(v: unknown): v is LedgerState {
  const o = obj(v);
  return Boolean(o && typeof o['gpuRole'] === 'string' && typeof o['capacityMib'] === 'number' && Array.isArray(o['reservations']));
}

/** The ledger state a result carries: itself, or its `ledger`. */
export function ledgerIn(v: unknown): LedgerState | undefined {
  if (isLedgerState(v)) return v;
  const l = obj(v)?.['ledger'];
  return isLedgerState(l) ? l : undefined;
}

export function failureOf(f: unknown): FailureEvidence | undefined {
  const o = obj(f);
  if (!o) return undefined;
  const info = obj(o['applicationFailureInfo']);
  const activityInfo = obj(o['activityFailureInfo']);
  const childInfo = obj(o['childWorkflowExecutionFailureInfo']);
  const timeoutInfo = obj(o['timeoutFailureInfo']);
  const type =
    str(info?.['type']) ??
    (activityInfo ? 'ActivityFailure' : undefined) ??
    (childInfo ? 'ChildWorkflowFailure' : undefined) ??
    (timeoutInfo ? `Timeout(${str(timeoutInfo['timeoutType']) ?? '?'})` : undefined) ??
    (obj(o['canceledFailureInfo']) ? 'Cancelled' : undefined) ??
    (obj(o['terminatedFailureInfo']) ? 'Terminated' : undefined);
  const cause = failureOf(o['cause']);
  return { ...(type ? { type } : {}), message: str(o['message']) ?? '', details: decodePayloads(info?.['details']), ...(cause ? { cause } : {}) };
}

/** The business failure under activity/child wrappers: its type and message. */
export function rootOf(f: FailureEvidence): FailureEvidence {
  let cur = f;
  while ((cur.type === 'ActivityFailure' || cur.type === 'ChildWorkflowFailure') && cur.cause) cur = cur.cause;
  return cur;
}

/** The value if it is an object (not an array), keeping the type its reader declares. */
export function fields<T>(v: T | null | undefined): (T & object) | undefined {
  return obj(v) as (T & object) | undefined;
}

/** A release's reading as recorded, when it has the shape confirmVramReleased gives it (none before it did). */
export function vramReadingOf(v: unknown): VramReading | undefined {
  const r = obj(v);
  const ownOk = Array.isArray(r?.['pids']) && num(r?.['heldBeforeMib']) !== undefined && num(r?.['heldNowMib']) !== undefined;
  if (r?.['by'] === 'own-processes' && ownOk) return r as unknown as VramReading;
  if (r?.['by'] === 'whole-gpu' && typeof r['why'] === 'string') return r as unknown as VramReading;
  return undefined;
}
