// Eviction by sleeping (vLLM's sleep mode): which level a victim sleeps at, and what its sleep
// should give back. Pure, so the choice is testable and its reason is the same wherever it is read.
import type { LedgerState, Reservation } from './ledger';
import { committedMibOf, findReservation } from './ledger';
import { pendingSleeperMib } from './fence';
import type { ServeSpec, SleepEviction } from './types';

export type SleepLevel = 1 | 2;

/** A serve asleep at level 1 somewhere on the node: its weights sit in host RAM. */
export interface LevelOneSleeper {
  serve: string;
  hostRamMib: number;
}

export interface SleepPlan {
  level: SleepLevel;
  /** Why the level differs from the declared one, when it does. */
  fellBack?: string;
}

/**
 * The declared level, unless a level-1 sleep would take more host RAM than the node's budget
 * leaves beside the serves already asleep at level 1: then level 2 (the weights are discarded and
 * reloaded from disk on wake), which takes none.
 */
export function sleepLevelFor(sleep: SleepEviction, asleep: readonly LevelOneSleeper[], budgetMib: number | undefined): SleepPlan {
  if (sleep.level === 2 || budgetMib === undefined) return { level: sleep.level };
  const takenMib = asleep.reduce((s, a) => s + a.hostRamMib, 0);
  const needMib = sleep.hostRamMib ?? 0;
  if (takenMib + needMib <= budgetMib) return { level: 1 };
  const who = asleep.length ? ` beside ${asleep.map((a) => `${a.serve} (${a.hostRamMib} MiB)`).join(', ')}` : '';
  return {
    level: 2,
    fellBack: `level 1 would take ${needMib} MiB of host RAM${who}: ${takenMib + needMib} MiB, over the node's host_ram_budget_mib of ${budgetMib}; sleeping at level 2`,
  };
}

/**
 * The serves of these ledgers asleep at level 1, with the host RAM each declared; and, as if
 * asleep already, other victims being evicted now that declare level 1 (two acquisitions on two
 * GPUs must not both count on the same host RAM). `except`: the victim being planned.
 */
export function levelOneSleepers(ledgers: readonly LedgerState[], hostRamOf: (serve: string) => number | undefined, except?: string): LevelOneSleeper[] {
  const levelOne = (r: Reservation): boolean =>
    r.serve !== except && ((r.phase === 'sleeping' && (r.sleptAtLevel ?? r.sleep?.level) === 1) || (r.phase === 'evicting' && r.sleep?.level === 1));
  return ledgers.flatMap((l) => l.reservations.filter(levelOne).map((r) => ({ serve: r.serve, hostRamMib: hostRamOf(r.serve) ?? 0 })));
}

/**
 * What the serve was seen to keep on the GPU once asleep: what it took less what its sleep gave
 * back. Above the declared residual, the manifest's figure is optimistic (vLLM's sleep leaks).
 */
export function residualSeen(tookMib: number, releasedMib: number, declaredMib: number, heldNowMib?: number): { mib: number; aboveDeclared: boolean } {
  // Its own processes' figure where they confirmed the release; else what the whole GPU did not give back.
  const mib = heldNowMib ?? Math.max(0, tookMib - releasedMib);
  return { mib, aboveDeclared: mib > declaredMib };
}

/** What an admission tells the ledger of a serve evicted by sleeping: what the planner must count it as freeing. */
export function admittedSleep(serve: Pick<ServeSpec, 'sleep'>): { sleep?: { level: SleepLevel; residualMib: number } } {
  return serve.sleep ? { sleep: { level: serve.sleep.level, residualMib: serve.sleep.residualMib } } : {};
}

/**
 * What a ledger started afresh holds a serve at that it finds asleep on the box, no operation
 * waking it: at least its declared residual, and at least what the ledger it replaces (`lost`, that
 * run's last state) held it at, which the box cannot tell a fresh ledger: the residual seen above
 * the declared one, its whole reservation while its release was never confirmed (still evicting),
 * what a bring-down or an acquisition of it held. Never past its reservation. Without that state
 * (Temporal cannot say), or where the lost ledger did not hold it asleep, all of its MiB: vLLM's
 * sleep leaks, and nothing seen says it gave them back.
 */
export function residualHeldAfresh(serve: string, vramMib: number, declaredMib: number, lost: LedgerState | undefined): number {
  const r = lost ? findReservation(lost, serve) : undefined;
  const held = r ? heldAsleepBy(r) : undefined;
  return Math.min(vramMib, Math.max(declaredMib, held ?? vramMib));
}

/**
 * The level a serve a fresh ledger finds asleep sleeps at, where it can be known: the one the
 * ledger it replaces (`lost`) put it to sleep at (or admitted its wake from); else 2 when it is
 * declared at 2, since a sleep only ever falls back from 1 to 2. The box cannot say more: vLLM's
 * /is_sleeping answers a boolean, and a level-1 sleep may have fallen back to 2 (the node's host
 * RAM budget). Unknown, the wake reloads the weights, right after either level; known at 1, it
 * wakes them from host RAM without the reload, and the host RAM it holds is counted as level 1's.
 */
export function sleptAtLevelAfresh(serve: string, declared: SleepLevel, lost: LedgerState | undefined): { sleptAtLevel?: SleepLevel } {
  const r = lost ? findReservation(lost, serve) : undefined;
  // An admission's word holds only until its wake: running again, the serve was woken since.
  const waking = r?.phase === 'admitted' || r?.phase === 'pending' ? r.admittedFrom?.asleepAt : undefined;
  const level = r?.sleptAtLevel ?? waking ?? (declared === 2 ? 2 : undefined);
  return level !== undefined ? { sleptAtLevel: level } : {};
}

/** What a ledger held a serve at that may be asleep now; undefined where it did not hold it asleep. */
function heldAsleepBy(r: Reservation): number | undefined {
  switch (r.phase) {
    case 'sleeping':
      return committedMibOf(r);
    case 'evicting':
    case 'stopping':
      return r.vramMib;
    case 'pending':
      return pendingSleeperMib(r);
    case 'admitted':
      return r.admittedFrom?.asleepHeldMib ?? r.vramMib;
    default:
      return undefined;
  }
}
