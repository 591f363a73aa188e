// The pure part of the start slot (src/domain/start-slot.ts) as stops take it: what a stop's or an
// acquisition's hold records, how long a run waiting for it waits, and every way its holder ends.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { decideStartSlot, evictionHoldS, SLOT_MARGIN_S, SLOT_WAIT_CAP_S, slotAfter, slotLine, slotWaitBoundMs } from '../src/domain/start-slot';
import type { HolderEnd } from '../src/domain/start-slot';
import { emptyLedger, formatLedger } from '../src/domain/ledger';
import type { LedgerState, StartSlot } from '../src/domain/ledger';
import {
  lastTold,
  MAX_SLOT_WAITERS,
  NO_SLOT_WAITERS,
  toldAskMsProblem,
  waiterGone,
  waiterRefused,
  waiterTook,
  waiterToTell,
  waiterToTellNext,
} from '../src/domain/slot-waiters';

/** The slot a decision left held (a failed assertion where none is). */
function held(state: LedgerState): StartSlot {
  assert.ok(state.startSlot, 'no start slot held');
  return state.startSlot;
}

const gpu = { role: 'gpu0', uuid: 'GPU-aaaaaaaa-0000-0000-0000-000000000001', capacityMib: 32607, reserveMib: 4608 };

test("a stop's take records what it does and how long it may hold the slot; a start waiting counts that, not the stopped serve's start timeout", () => {
  const { decision, state } = decideStartSlot(
    emptyLedger('n', gpu),
    { serve: 'vision', holder: 'serves-down/n/vision/r1', take: true, startTimeoutS: 600, doing: 'stopping', holdS: 120 },
    1_000,
  );
  assert.deepEqual(decision, { taken: true });
  assert.deepEqual(state.startSlot, { serve: 'vision', holder: 'serves-down/n/vision/r1', sinceMs: 1_000, startTimeoutS: 600, doing: 'stopping', holdS: 120 });
  assert.equal(slotWaitBoundMs(held(state)), (120 + SLOT_MARGIN_S) * 1000);
  assert.equal(slotLine(held(state), 'gpu0', 13_400), 'start slot: vision is stopping on gpu0 since 12 s');
  assert.match(formatLedger(state).at(-1) ?? '', /^start slot: vision is stopping \(serves-down\/n\/vision\/r1\) since /);
  // A start's take records neither: its bound is its start timeout, as before.
  const start = held(decideStartSlot(emptyLedger('n', gpu), { serve: 'ocr', holder: 'h2', take: true, startTimeoutS: 300 }, 0).state);
  assert.deepEqual(start, { serve: 'ocr', holder: 'h2', sinceMs: 0, startTimeoutS: 300 });
  assert.equal(slotWaitBoundMs(start), (300 + SLOT_MARGIN_S) * 1000);
});

test("an acquisition's hold counts every victim's stop (and sleep) with its release check, the later victims' drains and its own start", () => {
  const bounds = { drainTimeoutS: 120, releaseTimeoutS: 30, sleepTimeoutS: 60, stopMarginS: 60, startTimeoutS: 600 };
  // One victim stopped: its stop 30 + 60, its release 30, the start 600.
  assert.equal(evictionHoldS({ ...bounds, victims: [{ stopTimeoutS: 30, sleeps: false }] }), 720);
  // A second victim put to sleep: its drain 120, its sleep 60 and release 30, and the stop it may fall back to (10 + 60 + 30).
  assert.equal(
    evictionHoldS({
      ...bounds,
      victims: [
        { stopTimeoutS: 30, sleeps: false },
        { stopTimeoutS: 10, sleeps: true },
      ],
    }),
    720 + 120 + 90 + 100,
  );
  const { state } = decideStartSlot(
    emptyLedger('n', gpu),
    { serve: 'comfyui', holder: 'acquire/n/comfyui/r1', take: true, startTimeoutS: 600, doing: 'evicting', holdS: 1700 },
    0,
  );
  assert.equal(slotLine(held(state), 'gpu0', 0), 'start slot: comfyui is evicting to start on gpu0 since 0 s');
  // Past the cap, whatever the bounds add up to.
  assert.equal(slotWaitBoundMs(held(state)), SLOT_WAIT_CAP_S * 1000);
  // Its own start's take (a retry by its holder) keeps its since.
  const again = decideStartSlot(state, { serve: 'comfyui', holder: 'acquire/n/comfyui/r1', take: true, startTimeoutS: 600 }, 50_000);
  assert.deepEqual(again.decision, { taken: true });
  assert.equal(again.state.startSlot?.sinceMs, 0);
});

test('every way the run holding the start slot ends frees it, and nothing else does (slotAfter, the one rule the ledger applies)', () => {
  const a = 'acquire/n/od/r1';
  const other = 'serves-up/n/ocr/r2';
  const { state } = decideStartSlot(emptyLedger('n', gpu), { serve: 'od', holder: a, take: true, startTimeoutS: 600, doing: 'evicting', holdS: 900 }, 0);
  const ends: [string, HolderEnd][] = [
    ['its own give', { step: 'give', holder: a }],
    ['a release it asks (its serve, or one another run holds by now)', { step: 'release', holder: a }],
    ["its eviction's abort (a failed acquisition's compensation)", { step: 'abortEviction', holder: a }],
    ['a bring-down taking its serve over, its run seen ended', { step: 'beginStop', taken: true, takeOverFrom: a }],
  ];
  for (const [how, end] of ends) assert.equal(slotAfter(state, end).startSlot, undefined, how);
  // The give's decision goes through the same rule.
  assert.equal(decideStartSlot(state, { serve: 'od', holder: a, take: false }, 1).state.startSlot, undefined);
  const notEnds: [string, HolderEnd][] = [
    ["another run's give", { step: 'give', holder: other }],
    ["another run's release", { step: 'release', holder: other }],
    ['a release from before fencing (no holder)', { step: 'release', holder: undefined }],
    ["another run's abort", { step: 'abortEviction', holder: other }],
    ['an abort from before fencing (no holder)', { step: 'abortEviction', holder: undefined }],
    ['a take-over the ledger refused', { step: 'beginStop', taken: false, takeOverFrom: a }],
    ['a stop that takes nothing over', { step: 'beginStop', taken: true, takeOverFrom: undefined }],
    ['a take-over of another run', { step: 'beginStop', taken: true, takeOverFrom: other }],
  ];
  for (const [how, end] of notEnds) assert.equal(slotAfter(state, end), state, how);
  // A take naming it in takeOverFrom hands the slot on rather than freeing it.
  const taken = decideStartSlot(state, { serve: 'ocr', holder: other, take: true, startTimeoutS: 300, takeOverFrom: a }, 2);
  assert.deepEqual([taken.decision, taken.state.startSlot?.holder], [{ taken: true }, other]);
});

test('the waiters for the slot are told one at a time, the longest waiting first; told and silent until the next give, one loses its place', () => {
  let w = ['a', 'b', 'c', 'b'].reduce(waiterRefused, NO_SLOT_WAITERS);
  assert.deepEqual(w, { queue: ['a', 'b', 'c'] });
  const first = waiterToTell(w);
  assert.deepEqual([first.tell, first.waiters.told], ['a', 'a']);
  // Told, a came back and was refused (another asker first): first again at the next give.
  w = waiterRefused(first.waiters, 'a');
  assert.deepEqual(w, { queue: ['a', 'b', 'c'] });
  assert.equal(waiterToTell(w).tell, 'a');
  // Told and silent until the next give: b is told then, a no longer waits in the queue.
  const silent = waiterToTell(waiterToTell(w).waiters);
  assert.deepEqual([silent.tell, silent.waiters.queue], ['b', ['b', 'c']]);
  // A taker waits no more; a closed run is gone; with nobody left, nobody is told.
  w = waiterGone(waiterTook(silent.waiters, 'b'), 'c');
  assert.deepEqual(w, { queue: [] });
  assert.equal(waiterToTell(w).tell, undefined);
  // Past the bound, the rest are not enrolled (they poll).
  const full = Array.from({ length: MAX_SLOT_WAITERS + 3 }, (_, i) => `w${i}`).reduce(waiterRefused, NO_SLOT_WAITERS);
  assert.equal(full.queue.length, MAX_SLOT_WAITERS);
});

test('since slot-told-bounded: the next is told too while the told is silent; told twice without asking, one is dropped; one that asks late keeps its place', () => {
  const w0 = ['a', 'b', 'c'].reduce(waiterRefused, NO_SLOT_WAITERS);
  // A give tells the first; its bound passing with the slot free, the next too, then the last, then nobody.
  const give = waiterToTellNext(w0, true);
  assert.deepEqual([give.tell, give.waiters.unanswered, lastTold(give.waiters)], ['a', { a: 1 }, 'a']);
  const bound = waiterToTellNext(give.waiters, false);
  assert.deepEqual([bound.tell, bound.waiters.toldSinceGive], ['b', ['a', 'b']]);
  const third = waiterToTellNext(bound.waiters, false);
  assert.equal(third.tell, 'c');
  const none = waiterToTellNext(third.waiters, false);
  assert.equal(none.tell, undefined);
  assert.deepEqual(none.waiters.queue, ['a', 'b', 'c'], 'a waiter told once and silent was dropped');
  // b takes it; a asks late and is refused: it keeps its place, its silence forgotten; c, silent, stays told once.
  let w = waiterRefused(waiterTook(none.waiters, 'b'), 'a');
  assert.deepEqual([w.queue, w.unanswered], [['a', 'c'], { c: 1 }]);
  // The next give tells a first (its place kept), and c again in its turn: twice now without asking.
  const again = waiterToTellNext(w, true);
  assert.deepEqual([again.tell, again.waiters.toldSinceGive], ['a', ['a']]);
  const cTwice = waiterToTellNext(again.waiters, false);
  assert.deepEqual([cTwice.tell, cTwice.waiters.unanswered], ['c', { a: 1, c: 2 }]);
  // Told twice without asking, c is dropped at the next turn; a, told once, is told again at the next give.
  const dropped = waiterToTellNext(cTwice.waiters, false);
  assert.deepEqual([dropped.tell, dropped.waiters.queue], [undefined, ['a']]);
  w = waiterToTellNext(dropped.waiters, true).waiters;
  assert.deepEqual([w.queue, w.unanswered], [['a'], { a: 2 }]);
  assert.deepEqual(waiterToTellNext(w, true), { waiters: { queue: [] } }, 'a waiter told twice without asking was kept');
  // A closed run's signal failed: it is gone, and the last told is the one before it.
  const two = waiterToTellNext(waiterToTellNext(['x', 'y'].reduce(waiterRefused, NO_SLOT_WAITERS), true).waiters, false);
  assert.deepEqual([lastTold(two.waiters), lastTold(waiterGone(two.waiters, 'y'))], ['y', 'x']);
  // The old rule's mark is not the new one's: a told-silent waiter under slot-wakes-first is still passed over.
  assert.deepEqual(waiterToTell(waiterToTell(w0).waiters).waiters.queue, ['b', 'c']);
});

test("a ledger's bound for a told run to ask is whole milliseconds within its bound", () => {
  assert.equal(toldAskMsProblem(1000), undefined);
  for (const v of [49, 30_001, 1.5, '1000', null]) assert.equal(toldAskMsProblem(v), 'a whole number of milliseconds in 50..30000', String(v));
});
