// Time left on each lease, beside the ledger's lines: a lease counts only while its acquisition
// still holds the serve (one brought down by hand keeps a lease that will end without acting).
import { formatLedger } from '../domain/ledger';
import type { LedgerState } from '../domain/ledger';
import { leaseText } from '../domain/lease';
import type { LeaseView } from '../domain/lease';

export interface HeldLease extends LeaseView {
  /** `lease: 1h59m left`, `idle lease: 4m12s left (ttl 5m)`. */
  text: string;
}

export function heldLeases(ledgers: readonly LedgerState[], leases: ReadonlyMap<string, LeaseView>, nowMs: number): Map<string, HeldLease> {
  const out = new Map<string, HeldLease>();
  for (const l of ledgers) {
    for (const r of l.reservations) {
      const v = leases.get(r.serve);
      if (v && (v.holder === r.holder || v.state === 'expiring')) out.set(r.serve, { ...v, text: leaseText(v, nowMs) });
    }
  }
  return out;
}

export function leasesOn(l: LedgerState, held: ReadonlyMap<string, HeldLease>): HeldLease[] {
  return l.reservations.flatMap((r) => held.get(r.serve) ?? []);
}

/** The ledger's own lines unchanged, a leased serve's with its time left after it. */
export function withLeaseLines(l: LedgerState, held: ReadonlyMap<string, HeldLease>): string[] {
  // formatLedger prints its header, then one line per reservation in order.
  return formatLedger(l).map((line, i) => {
    const lease = i > 0 ? held.get(l.reservations[i - 1]?.serve ?? '') : undefined;
    return lease ? `${line}  ${lease.text}` : line;
  });
}
