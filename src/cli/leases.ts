// Time left on each lease, beside the ledger's lines (which leases count: src/client/ledger-view.ts).
import { formatLedger } from '../domain/ledger';
import type { LedgerState } from '../domain/ledger';
import type { HeldLease } from '../client/ledger-view';

/** The ledger's own lines unchanged, a leased serve's with its time left after it. */
export function withLeaseLines(l: LedgerState, held: ReadonlyMap<string, HeldLease>): string[] {
  // formatLedger prints its header, then one line per reservation in order.
  return formatLedger(l).map((line, i) => {
    const lease = i > 0 ? held.get(l.reservations[i - 1]?.serve ?? '') : undefined;
    return lease ? `${line}  ${lease.text}` : line;
  });
}
