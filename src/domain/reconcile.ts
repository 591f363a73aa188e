// What a fresh ledger takes from the run it replaces, beside what the box shows: the restore
// links. A victim stopped for an acquisition has no container, and a sleeper's container does not
// say for whom it sleeps; only the lost run knew, and a restore finds its victims by them.
import type { LedgerState, Reservation } from './ledger';
import { findReservation } from './ledger';

/**
 * The reservations found on the box with the lost run's restore links: a sleeper found sleeping
 * takes the acquirer its sleeping entry was evicted for (evictedFor, evictedBy), and each serve
 * the lost run held as evicted that the box does not show runs comes back as that entry. Whether
 * or not its acquirer is found: a bring-down of the acquirer that stopped it while the ledger was
 * lost (a lease expiring, `serves down --restore`) restores from the ledger after its release,
 * this fresh one; dropped, its victim would stay down for good with nothing saying so. Kept, that
 * restore brings it back, or the ledger lists it as evicted for a serve no longer there (as the
 * lost run did after a `serves down` without --restore): `serves up` restores it. Without the
 * lost run (undefined: Temporal could not say), what was found. In the order of their names.
 */
export function withRestoreLinks(found: readonly Reservation[], lost: LedgerState | undefined): Reservation[] {
  const byServe = (rs: Reservation[]) => rs.sort((a, b) => a.serve.localeCompare(b.serve));
  if (!lost) return byServe([...found]);
  const linked = found.map((r) => {
    const was = findReservation(lost, r.serve);
    return r.phase === 'sleeping' && was?.phase === 'sleeping' && was.evictedFor !== undefined ? { ...r, ...restoreLink(was) } : r;
  });
  const evicted = lost.reservations.filter((r) => r.phase === 'evicted' && !found.some((f) => f.serve === r.serve));
  return byServe([...linked, ...evicted]);
}

/** For whom a serve was set aside, and by which run. */
function restoreLink(r: Reservation): Pick<Reservation, 'evictedFor' | 'evictedBy'> {
  return { evictedFor: r.evictedFor, ...(r.evictedBy !== undefined ? { evictedBy: r.evictedBy } : {}) };
}
