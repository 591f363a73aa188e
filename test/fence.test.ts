// Reservations as fences, as pure functions: who holds a serve, what a bring-down may take, and
// which steps the ledger lets change a container.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { applyAdmit, backAsleep, decideAdmit, emptyLedger, totals, withoutReservation, withPhase } from '../src/domain/ledger';
import type { LedgerState, Reservation } from '../src/domain/ledger';
import { applyEvictionAborted, applyEvictionPlan, applyVictimReleased, planEviction } from '../src/domain/eviction';
import {
  applyStop,
  cancelHint,
  decideStop,
  fenceProblem,
  fenceStepProblem,
  holderOf,
  holderProblem,
  operationUnderWay,
  ownRunningAtStart,
  parseHolder,
} from '../src/domain/fence';

const GPU = { role: 'dark-fast', uuid: 'GPU-1', capacityMib: 32607, reserveMib: 4608 };
const U = holderOf('serves-up/n/o1', 'run-u');
const D = holderOf('serves-down/n/o1', 'run-d');
const A = holderOf('acquire/n/sd', 'run-a');

function admitted(state: LedgerState, serve: string, vramMib: number, holder: string): LedgerState {
  return applyAdmit(state, { serve, vramMib, class: 'evictable', holder });
}

describe('fencing tokens', () => {
  test('a holder names its run; workflow ids keep their slashes; a reconciled hold names none', () => {
    assert.deepEqual(parseHolder(U), { workflowId: 'serves-up/n/o1', runId: 'run-u' });
    assert.equal(parseHolder('reconciled from container gpures-n-o1'), undefined);
    assert.equal(parseHolder('no-slash'), undefined);
    // A bring-down's onlyIfHeldBy, from the UI's start form, must name a run.
    assert.equal(holderProblem(U), undefined);
    assert.equal(holderProblem('no-slash'), "a run's token, <workflow id>/<run id>");
    assert.equal(holderProblem(7), "a run's token, <workflow id>/<run id>");
    assert.equal(cancelHint(U), 'temporal workflow cancel --workflow-id serves-up/n/o1 --run-id run-u');
  });

  test('admitted, pending, stopping and evicting are operations under way; running and evicted are settled', () => {
    let l = admitted(emptyLedger('n', GPU), 'o1', 12000, U);
    assert.deepEqual(operationUnderWay(l, l.reservations[0]!), { serve: 'o1', phase: 'admitted', holder: U });
    l = withPhase(l, 'o1', 'running');
    assert.equal(operationUnderWay(l, l.reservations[0]!), undefined);
  });
});

describe('a bring-down takes its serve', () => {
  test('from running: it holds it as stopping, still committed', () => {
    const l = withPhase(admitted(emptyLedger('n', GPU), 'o1', 12000, U), 'o1', 'running');
    const d = decideStop(l, { serve: 'o1', holder: D });
    assert.deepEqual(d, { decision: 'taken', serve: 'o1', vramMib: 12000, from: 'running', previousHolder: U });
    const after = applyStop(l, { serve: 'o1', holder: D }, d);
    assert.equal(after.reservations[0]?.phase, 'stopping');
    assert.equal(after.reservations[0]?.holder, D);
    assert.equal(totals(after).committedMib, 12000);
    // Its retry finds it its own.
    assert.equal(decideStop(after, { serve: 'o1', holder: D }).decision, 'taken');
  });

  test('from under a bring-up still starting: busy, naming the bring-up; nothing changes', () => {
    const l = admitted(emptyLedger('n', GPU), 'o1', 12000, U);
    const d = decideStop(l, { serve: 'o1', holder: D });
    assert.deepEqual(d, { decision: 'busy', serve: 'o1', operation: { serve: 'o1', phase: 'admitted', holder: U } });
    assert.deepEqual(applyStop(l, { serve: 'o1', holder: D }, d), l);
  });

  test("only from a named run (a lease's expiry): taken while that run holds it running, else left alone, nothing changed", () => {
    const L = holderOf('acquire/n/o1', 'run-l');
    const running = withPhase(admitted(emptyLedger('n', GPU), 'o1', 12000, L), 'o1', 'running');
    const ours = decideStop(running, { serve: 'o1', holder: D, onlyIfHeldBy: L });
    assert.equal(ours.decision, 'taken');
    // Its retry, after the take, is answered as the take was.
    const taken = applyStop(running, { serve: 'o1', holder: D, onlyIfHeldBy: L }, ours);
    assert.equal(decideStop(taken, { serve: 'o1', holder: D, onlyIfHeldBy: L }).decision, 'taken');
    // Acquired anew by another run, still starting or running, or gone: not the named run's.
    const starting = admitted(emptyLedger('n', GPU), 'o1', 12000, U);
    const anew = withPhase(starting, 'o1', 'running');
    for (const [l, phase] of [
      [starting, 'admitted'],
      [anew, 'running'],
    ] as const) {
      const d = decideStop(l, { serve: 'o1', holder: D, onlyIfHeldBy: L });
      assert.deepEqual(d, { decision: 'not-held', serve: 'o1', heldBy: U, phase });
      assert.deepEqual(applyStop(l, { serve: 'o1', holder: D, onlyIfHeldBy: L }, d), l);
    }
    const none = emptyLedger('n', GPU);
    assert.deepEqual(decideStop(none, { serve: 'o1', holder: D, onlyIfHeldBy: L }), { decision: 'not-held', serve: 'o1' });
    assert.deepEqual(applyStop(none, { serve: 'o1', holder: D, onlyIfHeldBy: L }, { decision: 'not-held', serve: 'o1' }), none);
  });

  test('a hold whose run ended is taken over only when named', () => {
    const l = admitted(emptyLedger('n', GPU), 'o1', 12000, U);
    assert.equal(decideStop(l, { serve: 'o1', holder: D, takeOverFrom: 'someone-else/r' }).decision, 'busy');
    const d = decideStop(l, { serve: 'o1', holder: D, takeOverFrom: U });
    assert.equal(d.decision, 'taken');
    assert.equal(applyStop(l, { serve: 'o1', holder: D, takeOverFrom: U }, d).reservations[0]?.holder, D);
  });

  test("a victim is held by its acquirer's run; an evicted serve leaves its acquirer's restore list", () => {
    let l = withPhase(admitted(emptyLedger('n', GPU), 'vision', 12288, U), 'vision', 'running');
    l = withPhase(applyAdmit(l, { serve: 'fast', vramMib: 14336, class: 'resident', holder: 'f' }), 'fast', 'running');
    const plan = planEviction(l, 8192);
    assert.ok(plan.kind === 'evict');
    l = applyEvictionPlan(l, { serve: 'sd', vramMib: 8192, class: 'on-demand', holder: A }, plan.victims);
    const busy = decideStop(l, { serve: 'vision', holder: D });
    assert.deepEqual(busy, { decision: 'busy', serve: 'vision', operation: { serve: 'vision', phase: 'evicting', holder: A, evictedFor: 'sd' } });
    // The acquirer itself, waiting for its victims, is the acquisition's too.
    assert.deepEqual(decideStop(l, { serve: 'sd', holder: D }), { decision: 'busy', serve: 'sd', operation: { serve: 'sd', phase: 'pending', holder: A } });

    l = applyVictimReleased(l, 'vision', 'sd');
    const d = decideStop(l, { serve: 'vision', holder: D });
    assert.deepEqual(d, { decision: 'evicted', serve: 'vision', evictedFor: 'sd' });
    // Off sd's restore list, held by the bring-down (0 MiB) until its release.
    assert.deepEqual(
      applyStop(l, { serve: 'vision', holder: D }, d).reservations.find((r) => r.serve === 'vision'),
      { serve: 'vision', vramMib: 0, class: 'evictable', phase: 'stopping', holder: D },
    );
  });

  test('an acquirer taken over while its victims drain holds 0 MiB, or, acquired asleep, its residual: its process sleeps on until the stop', () => {
    const SLEEP = { level: 1 as const, residualMib: 600 };
    let l = withPhase(admitted(emptyLedger('n', GPU), 'vision', 12288, U), 'vision', 'running');
    l = withPhase(applyAdmit(l, { serve: 'fast', vramMib: 14336, class: 'resident', holder: 'f' }), 'fast', 'running');
    const plan = planEviction(l, 8192);
    assert.ok(plan.kind === 'evict');
    // sd asleep beside them, held at `heldMib` (its residual, or what it was seen to keep), then acquired.
    const pending = (asleep: boolean, heldMib = SLEEP.residualMib) => {
      const sleeping: Reservation = {
        serve: 'sd',
        vramMib: 8192,
        class: 'evictable',
        phase: 'sleeping',
        holder: U,
        sleptAtLevel: 1,
        sleep: { ...SLEEP, residualMib: heldMib },
      };
      const before = asleep ? { ...l, reservations: [...l.reservations, sleeping] } : l;
      return applyEvictionPlan(before, { serve: 'sd', vramMib: 8192, class: 'evictable', holder: A, sleep: SLEEP }, plan.victims);
    };
    const take = (state: LedgerState, keeps: boolean) => {
      const req = { serve: 'sd', holder: D, takeOverFrom: A };
      const d = decideStop(state, req);
      assert.equal(d.decision, 'taken');
      return applyStop(state, req, d, { pendingAsleepKeepsResidual: keeps }).reservations.find((r) => r.serve === 'sd')?.vramMib;
    };
    assert.equal(take(pending(false), true), 0, 'it never started');
    assert.equal(take(pending(true), true), 600);
    assert.equal(take(pending(true, 5600), true), 5600, 'what the ledger held it at asleep, not the residual it declares');
    assert.equal(take(pending(true), false), 0, 'before the patch');
  });

  test('a take-over holds a victim it finds asleep, its release never confirmed, whole; before the patch at its declared residual', () => {
    const SLEEP = { level: 2 as const, residualMib: 600 };
    let l = withPhase(applyAdmit(emptyLedger('n', GPU), { serve: 'vision', vramMib: 12288, class: 'evictable', holder: U, sleep: SLEEP }), 'vision', 'running');
    l = withPhase(applyAdmit(l, { serve: 'fast', vramMib: 14336, class: 'resident', holder: 'f' }), 'fast', 'running');
    const plan = planEviction(l, 8192);
    assert.ok(plan.kind === 'evict');
    l = applyEvictionPlan(l, { serve: 'sd', vramMib: 8192, class: 'on-demand', holder: A }, plan.victims);
    const req = { serve: 'sd', holder: D, takeOverFrom: A, victimsAsleep: ['vision'] };
    const d = decideStop(l, req);
    const held = (whole: boolean) => totals(applyStop(l, req, d, { asleepVictimsHeldWhole: whole })).committedMib - 14336;
    assert.deepEqual([held(true), held(false)], [12288, 600]);
  });

  test('an aborted eviction hands its victims back settled, with no acquirer left on them', () => {
    let l = withPhase(admitted(emptyLedger('n', GPU), 'vision', 12288, U), 'vision', 'running');
    l = withPhase(applyAdmit(l, { serve: 'fast', vramMib: 14336, class: 'resident', holder: 'f' }), 'fast', 'running');
    const plan = planEviction(l, 8192);
    assert.ok(plan.kind === 'evict');
    l = applyEvictionAborted(applyEvictionPlan(l, { serve: 'sd', vramMib: 8192, class: 'on-demand', holder: A }, plan.victims), 'sd');
    assert.deepEqual(
      l.reservations.find((r) => r.serve === 'vision'),
      { serve: 'vision', vramMib: 12288, class: 'evictable', phase: 'running', holder: U },
    );
  });
});

describe('a bring-down holds even a serve with no reservation', () => {
  test('absent: a stopping entry of 0 MiB held by the bring-down, so a bring-up racing it is refused; its retry finds it its own', () => {
    const l = emptyLedger('n', GPU);
    const d = decideStop(l, { serve: 'o1', holder: D, class: 'evictable' });
    assert.deepEqual(d, { decision: 'absent', serve: 'o1' });
    const after = applyStop(l, { serve: 'o1', holder: D, class: 'evictable' }, d);
    assert.deepEqual(after.reservations, [{ serve: 'o1', vramMib: 0, class: 'evictable', phase: 'stopping', holder: D }]);
    assert.equal(totals(after).committedMib, 0);
    assert.deepEqual(decideAdmit(after, { serve: 'o1', vramMib: 12000, class: 'evictable', holder: U }), {
      decision: 'already-held',
      serve: 'o1',
      phase: 'stopping',
      holder: D,
    });
    assert.deepEqual(decideStop(after, { serve: 'o1', holder: D }), { decision: 'absent', serve: 'o1' });
  });

  test('an acquisition that ended mid-eviction, taken over: victims down stay evicted, victims running are running again; the acquirer holds 0 MiB', () => {
    let l = withPhase(admitted(emptyLedger('n', GPU), 'vision', 12288, U), 'vision', 'running');
    l = withPhase(admitted(l, 'e1', 6000, 'e'), 'e1', 'running');
    l = withPhase(applyAdmit(l, { serve: 'fast', vramMib: 9000, class: 'resident', holder: 'f' }), 'fast', 'running');
    l = applyEvictionPlan(l, { serve: 'sd', vramMib: 16000, class: 'on-demand', holder: A }, [
      { serve: 'vision', vramMib: 12288 },
      { serve: 'e1', vramMib: 6000 },
    ]);
    assert.equal(decideStop(l, { serve: 'sd', holder: D }).decision, 'busy');
    const req = { serve: 'sd', holder: D, takeOverFrom: A, victimsDown: ['e1'] };
    const d = decideStop(l, req);
    assert.deepEqual(d, { decision: 'taken', serve: 'sd', vramMib: 16000, from: 'pending', previousHolder: A, victimsRunning: ['vision'] });
    const after = applyStop(l, req, d);
    // Retried after a continue-as-new: the same answer, victims to readmit included, not 'absent'.
    assert.deepEqual(decideStop(after, req), d);
    assert.deepEqual(
      after.reservations.map((r) => `${r.serve} ${r.phase} ${r.vramMib} ${r.evictedFor ?? '-'}`),
      ['vision running 12288 -', 'e1 evicted 6000 sd', 'fast running 9000 -', 'sd stopping 0 -'],
    );
    assert.deepEqual(totals(after), { budgetMib: 27999, committedMib: 21288, heldMib: 0, freeMib: 6711 });
  });
});

describe('the fence a start must show', () => {
  test('only the run holding the serve as admitted may start its container', () => {
    const l = admitted(emptyLedger('n', GPU), 'o1', 12000, U);
    assert.equal(fenceProblem(l, 'o1', U, ['admitted']), undefined);
    assert.match(fenceProblem(l, 'o1', D, ['admitted']) ?? '', /held by serves-up\/n\/o1\/run-u \(admitted\), not serves-down\/n\/o1\/run-d/);
    assert.match(fenceProblem(emptyLedger('n', GPU), 'o1', U, ['admitted']) ?? '', /'o1' holds no reservation on 'dark-fast'/);
    assert.match(fenceProblem(withPhase(l, 'o1', 'running'), 'o1', U, ['admitted']) ?? '', /is running, not admitted/);
  });
});

describe('a start retried after its ledger restarted', () => {
  // The first attempt created the container (labelled U) and its worker died; a fresh ledger took it over as running for U.
  const l = withPhase(admitted(emptyLedger('n', GPU), 'o1', 12000, U), 'o1', 'running');

  test('finds its own container running: it goes on where the ledger has the rule, and was refused before', () => {
    assert.equal(ownRunningAtStart(l, 'o1', U, 'start'), true);
    assert.equal(fenceStepProblem(l, { serve: 'o1', holder: U, step: 'start' }, true), undefined);
    assert.equal(
      fenceStepProblem(l, { serve: 'o1', holder: U, step: 'start' }),
      "start of o1 refused: the reservation of 'o1' is running, not admitted; nothing was created",
    );
  });

  test('another run, or another step, finds no such leave', () => {
    assert.equal(ownRunningAtStart(l, 'o1', D, 'start'), false);
    assert.match(fenceStepProblem(l, { serve: 'o1', holder: D, step: 'start' }, true) ?? '', /held by serves-up\/n\/o1\/run-u \(running\), not serves-down/);
    assert.equal(ownRunningAtStart(l, 'o1', U, 'wake'), false);
    assert.match(fenceStepProblem(l, { serve: 'o1', holder: U, step: 'wake' }, true) ?? '', /is running, not admitted; it was not woken$/);
    // Still starting: admitted, as before.
    assert.equal(ownRunningAtStart(admitted(emptyLedger('n', GPU), 'o1', 12000, U), 'o1', U, 'start'), false);
  });
});

describe('the fence a stop must show', () => {
  /** o1 running, planned as a victim for sd by A. */
  function evicting(): LedgerState {
    const l = withPhase(admitted(emptyLedger('n', GPU), 'o1', 12288, U), 'o1', 'running');
    const plan = planEviction(l, 22000);
    assert.equal(plan.kind, 'evict');
    return plan.kind === 'evict' ? applyEvictionPlan(l, { serve: 'sd', vramMib: 22000, class: 'on-demand', holder: A }, plan.victims) : l;
  }

  test("a victim's stop: only by the acquisition that holds it evicting", () => {
    const l = evicting();
    assert.equal(fenceStepProblem(l, { serve: 'o1', holder: A, step: 'stop' }), undefined);
    assert.match(fenceStepProblem(l, { serve: 'o1', holder: D, step: 'stop' }) ?? '', /held by acquire\/n\/sd\/run-a \(evicting\), not serves-down/);
  });

  test("a bring-down's stop: only while its own take holds the serve stopping", () => {
    const l = withPhase(admitted(emptyLedger('n', GPU), 'o1', 12000, U), 'o1', 'running');
    const req = { serve: 'o1', holder: D };
    const taken = applyStop(l, req, decideStop(l, req));
    assert.equal(fenceStepProblem(taken, { serve: 'o1', holder: D, step: 'stop' }), undefined);
    assert.match(fenceStepProblem(taken, { serve: 'o1', holder: A, step: 'stop' }) ?? '', /held by serves-down\/n\/o1\/run-d \(stopping\)/);
  });

  test('a ledger restarted since the plan or the take holds the serve running for the run on its label: refused, nothing stopped', () => {
    // What a fresh ledger's reconcile records: running, held by the run that started the container.
    const fresh = withPhase(admitted(emptyLedger('n', GPU), 'o1', 12288, U), 'o1', 'running');
    assert.equal(
      fenceStepProblem(fresh, { serve: 'o1', holder: A, step: 'stop' }),
      "stop of o1 refused: the reservation of 'o1' is held by serves-up/n/o1/run-u (running), not acquire/n/sd/run-a; it was not stopped",
    );
    assert.equal(
      fenceStepProblem(fresh, { serve: 'o1', holder: U, step: 'stop' }),
      "stop of o1 refused: the reservation of 'o1' is running, not evicting or stopping; it was not stopped",
    );
    assert.match(
      fenceStepProblem(emptyLedger('n', GPU), { serve: 'o1', holder: A, step: 'stop' }) ?? '',
      /'o1' holds no reservation on 'dark-fast'; it was not stopped/,
    );
  });
});

describe('a sleeping serve under the fences', () => {
  const sleep = { level: 1 as const, residualMib: 600 };
  /** o1 running, evicted by sleeping for sd, which then runs. */
  function asleep(): LedgerState {
    let l = withPhase(applyAdmit(emptyLedger('n', GPU), { serve: 'o1', vramMib: 12288, class: 'evictable', holder: U, sleep }), 'o1', 'running');
    const plan = planEviction(l, 22000);
    assert.equal(plan.kind, 'evict');
    if (plan.kind !== 'evict') return l;
    l = applyEvictionPlan(l, { serve: 'sd', vramMib: 22000, class: 'on-demand', holder: A }, plan.victims);
    l = applyVictimReleased(l, 'o1', 'sd', 1);
    return withPhase(l, 'sd', 'running');
  }

  test('no start or wake may touch it until a restore admits it', () => {
    assert.match(fenceProblem(asleep(), 'o1', U, ['admitted']) ?? '', /'o1' sleeps for sd; only a restore \(an admission\) may wake it/);
  });

  test('a bring-down takes it at its residual, stops it, and releases that much', () => {
    const l = asleep();
    assert.equal(totals(l).committedMib, 22000 + 600);
    const d = decideStop(l, { serve: 'o1', holder: D });
    assert.deepEqual(d, { decision: 'taken', serve: 'o1', vramMib: 600, from: 'sleeping', previousHolder: U });
    const after = applyStop(l, { serve: 'o1', holder: D }, d);
    assert.deepEqual(
      after.reservations.find((r) => r.serve === 'o1'),
      { serve: 'o1', vramMib: 600, class: 'evictable', phase: 'stopping', holder: D, takenFrom: { phase: 'sleeping', holder: U, vramMib: 600 } },
    );
    assert.equal(totals(after).committedMib, 22000 + 600);
    // The take retried after the ledger continued as new (no server answer to replay): answered as
    // it was, so the bring-down still knows the serve sleeps (no drain) and whom it took it from.
    assert.deepEqual(decideStop(after, { serve: 'o1', holder: D }), d);
    assert.deepEqual(applyStop(after, { serve: 'o1', holder: D }, d), after);
    // Let go (its stop failed): running again, with nothing left of the take.
    assert.equal(withPhase(after, 'o1', 'running').reservations.find((r) => r.serve === 'o1')?.takenFrom, undefined);
  });

  test('a restore admission retried after a continue-as-new is recognised with what it found: evicted, asleep at its level', () => {
    const l = asleep();
    const restore = { serve: 'o1', vramMib: 12288, class: 'evictable' as const, holder: U, sleep };
    const after = applyAdmit(l, restore, 'admitted', 'restore');
    // And for whom it slept: a restore ended before its wake puts it back so (backAsleep).
    assert.deepEqual(after.reservations.find((r) => r.serve === 'o1')?.admittedFrom, {
      evicted: true,
      asleepAt: 1,
      asleepHeldMib: 600,
      evictedFor: 'sd',
      evictedBy: A,
    });
    const back = backAsleep(after, 'o1');
    const o1 = back?.reservations.find((r) => r.serve === 'o1');
    assert.deepEqual([o1?.phase, o1?.sleptAtLevel, o1?.evictedFor, o1?.evictedBy, o1?.admittedFrom], ['sleeping', 1, 'sd', A, undefined]);
    assert.equal(back && totals(back).committedMib, totals(l).committedMib);
    // Running, then taken by a bring-down: what the admission found is history.
    const running = withPhase(after, 'o1', 'running');
    const d = decideStop(running, { serve: 'o1', holder: D });
    assert.equal(d.decision, 'taken');
    assert.equal(applyStop(running, { serve: 'o1', holder: D }, d).reservations.find((r) => r.serve === 'o1')?.admittedFrom, undefined);
  });

  test("its restore needs only what the sleep gave back, and takes the sleeper's place", () => {
    const l = asleep();
    // Free: 27999 - 22600 = 5399; a cold start would need 12288, a wake 11688.
    const d = decideAdmit(l, { serve: 'o1', vramMib: 12288, class: 'evictable', holder: U, sleep });
    assert.deepEqual(d, { decision: 'denied', serve: 'o1', vramMib: 12288, freeMib: 5399, shortfallMib: 6289 });
    // sd gone: 27999 - 600 free.
    const roomy = withoutReservation(l, 'sd');
    const woke = decideAdmit(roomy, { serve: 'o1', vramMib: 12288, class: 'evictable', holder: U, sleep });
    assert.deepEqual(woke, { decision: 'admitted', serve: 'o1', vramMib: 12288, freeAfterMib: 27999 - 600 - 11688 });
    const after = applyAdmit(roomy, { serve: 'o1', vramMib: 12288, class: 'evictable', holder: U, sleep });
    assert.equal(after.reservations.filter((r) => r.serve === 'o1').length, 1);
    assert.equal(totals(after).committedMib, 12288);
  });
});
