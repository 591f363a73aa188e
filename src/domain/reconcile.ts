// What a fresh ledger takes from the run it replaces, beside what the box shows: the restore
// links. A victim stopped for an acquisition has no container, and a sleeper's container does not
// say for whom it sleeps; only the lost run knew, and a restore finds its victims by them.
import type { LedgerState, LostRunUnread, Reservation, StartSlot } from './ledger';
import { findReservation } from './ledger';

/**
 * The reservations found on the box with the lost run's restore links: a sleeper found sleeping
 * takes the acquirer its entry was evicted for (evictedFor, evictedBy), and each serve the lost
 * run held as evicted that the box does not show runs comes back as that entry. Whether or not
 * its acquirer is found: a bring-down of the acquirer that stopped it while the ledger was lost
 * (a lease expiring, `serves down --restore`) restores from the ledger after its release, this
 * fresh one; dropped, its victim would stay down for good with nothing saying so. Kept, that
 * restore brings it back, or the ledger lists it as evicted for a serve no longer there (as the
 * lost run did after a `serves down` without --restore): `serves up` restores it.
 * A victim the lost run still held evicting is set aside the same way once the box shows it so:
 * no container running, it is evicted for that acquirer (its stop landed while the ledger was
 * lost); found asleep, it sleeps for it. Its acquisition's hand-over then finds it set aside, and
 * the acquirer's own hold, which the box cannot show, is not carried: like any run the lost ledger
 * had admitted, the acquisition is refused at its start's fence and fails, its victim listed for
 * the restore its failure names. Found running, it is the box's (its stop is refused at its fence).
 * Without the lost run (undefined: Temporal could not say), what was found. In the order of their names.
 */
export function withRestoreLinks(found: readonly Reservation[], lost: LedgerState | undefined): Reservation[] {
  const byServe = (rs: Reservation[]) => rs.sort((a, b) => a.serve.localeCompare(b.serve));
  if (!lost) return byServe([...found]);
  const linked = found.map((r) => {
    const was = findReservation(lost, r.serve);
    return r.phase === 'sleeping' && setAsideFor(was) ? { ...r, ...restoreLink(was) } : r;
  });
  const evicted = lost.reservations
    .filter((r) => (r.phase === 'evicted' || (r.phase === 'evicting' && r.evictedFor !== undefined)) && !found.some((f) => f.serve === r.serve))
    .map((r): Reservation => ({ ...r, phase: 'evicted' }));
  return byServe([...linked, ...evicted]);
}

/** An entry the lost run had set aside, or was setting aside, for an acquirer. */
function setAsideFor(was: Reservation | undefined): was is Reservation & { evictedFor: string } {
  return (was?.phase === 'sleeping' || was?.phase === 'evicting') && was.evictedFor !== undefined;
}

/** For whom a serve was set aside, and by which run. */
function restoreLink(r: Reservation): Pick<Reservation, 'evictedFor' | 'evictedBy'> {
  return { evictedFor: r.evictedFor, ...(r.evictedBy !== undefined ? { evictedBy: r.evictedBy } : {}) };
}

/**
 * What a fresh ledger's reconcile answers: the reservations, and, where the run it replaced could
 * not be read (or could, but had not read its own), why. Runs recorded before answered the
 * reservations alone.
 */
export interface Reconciled {
  reservations: Reservation[];
  lostRunUnread?: LostRunUnread;
  /** The lost run's start slot, where its holder still runs (carriedStartSlot). */
  startSlot?: StartSlot;
}

/**
 * The start slot a fresh ledger carries from the run it replaces: the lost run's, while its
 * holder's run still runs (a start profiling on the card, whose give reaches this ledger), or
 * may (Temporal could not say: a waiter asks again every 30 s and takes over an ended holder).
 * Its since is kept: the waiters' bound counts from the holder's take, not from the reconcile.
 * None where the holder has ended, or the lost run held none or could not be read.
 */
export function carriedStartSlot(lost: LedgerState | undefined, holderRuns: boolean | 'unknown'): { startSlot?: StartSlot } {
  const slot = lost?.startSlot;
  return slot && holderRuns !== false ? { startSlot: slot } : {};
}

export function reconciledOf(r: Reservation[] | Reconciled): Reconciled {
  return Array.isArray(r) ? { reservations: r } : r;
}
