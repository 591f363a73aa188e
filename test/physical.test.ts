// The physical truth beside the ledger: the field report's honesty note as arithmetic.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { emptyLedger } from '../src/domain/ledger';
import type { LedgerState, Reservation } from '../src/domain/ledger';
import { formatMeasuredDelta, formatPhysical, physicalTruth } from '../src/domain/physical';

const GPU = { role: 'dark-fast', uuid: 'GPU-1', capacityMib: 32607, reserveMib: 4608 };
const reservation = (serve: string, vramMib: number, phase: Reservation['phase']): Reservation => ({
  serve,
  vramMib,
  class: 'resident',
  phase,
  holder: `serves-up/n/${serve}`,
});

function ledgerOf(...reservations: Reservation[]): LedgerState {
  return { ...emptyLedger('primary-node', GPU), reservations };
}

test("the report's full resident set: 5700 MiB beyond the serves, 1092 MiB over the reserve", () => {
  const l = ledgerOf(
    reservation('fast', 14336, 'running'),
    reservation('embeddings', 3200, 'running'),
    reservation('reranker', 3456, 'running'),
    reservation('ocr', 5120, 'running'),
  );
  const t = physicalTruth(l, { uuid: 'GPU-1', totalMib: 32607, usedMib: 26112 + 5700 });
  assert.deepEqual([t.servesMib, t.nonLedgerDrawMib, t.optimistic], [26112, 5700, true]);
  assert.deepEqual(formatPhysical(t), [
    '  nvidia-smi: used 31812 of 32607 MiB; non-ledger draw 5700 MiB against a reserve of 4608 MiB',
    "  warning: non-ledger draw exceeds the reserve by 1092 MiB: the ledger's free figure is that much optimistic",
  ]);
});

test('a draw within the reserve: no warning', () => {
  const t = physicalTruth(ledgerOf(reservation('fast', 14336, 'running')), { uuid: 'GPU-1', totalMib: 32607, usedMib: 14336 + 4608 });
  assert.equal(t.optimistic, false);
  assert.equal(formatPhysical(t).length, 1);
});

test('only serves sure to hold their VRAM count as held: running, not evicting, admitted, pending or evicted', () => {
  const l = ledgerOf(
    reservation('fast', 14336, 'running'),
    reservation('vision', 12288, 'evicting'),
    reservation('starting', 1000, 'admitted'),
    reservation('comfyui-sim', 8192, 'pending'),
    reservation('gone', 3000, 'evicted'),
  );
  const t = physicalTruth(l, { uuid: 'GPU-1', totalMib: 32607, usedMib: 30000 });
  assert.equal(t.servesMib, 14336);
  assert.deepEqual(
    t.inFlux.map((f) => `${f.serve} ${f.phase}`),
    ['vision evicting', 'starting starting'],
  );
  // H4's reading: an eviction's memory mostly freed while a start's grows; the range stays a range.
  const mid = physicalTruth(ledgerOf(reservation('ocr', 8192, 'evicting'), reservation('vision', 17408, 'admitted')), {
    uuid: 'GPU-1',
    totalMib: 32607,
    usedMib: 3000,
  });
  assert.deepEqual([mid.nonLedgerDrawMinMib <= mid.nonLedgerDrawMib, mid.nonLedgerDrawMib], [true, 3000]);
  assert.match(formatPhysical(mid)[0] ?? '', /non-ledger draw 0 to 3000 MiB \(up to 3000 MiB of it ocr evicting, vision starting\)/);
  // H5's readings. Running serves drawing less than they reserve: the top is not below zero.
  const under = physicalTruth(ledgerOf(reservation('fast', 14336, 'running'), reservation('chat', 1024, 'admitted')), {
    uuid: 'GPU-1',
    totalMib: 32607,
    usedMib: 14000,
  });
  assert.match(formatPhysical(under)[0] ?? '', /non-ledger draw 0 to 0 MiB \(up to 0 MiB of it chat starting\)/);
  // A serve evicted to sleep keeps its residual: held, and only the rest of it in flux.
  const toSleep: Reservation = { ...reservation('vision', 12288, 'evicting'), sleep: { level: 1, residualMib: 600 } };
  const sleeping = physicalTruth(ledgerOf(reservation('fast', 14336, 'running'), toSleep), { uuid: 'GPU-1', totalMib: 32607, usedMib: 14336 + 600 + 1200 });
  assert.deepEqual([sleeping.servesMib, sleeping.nonLedgerDrawMib, sleeping.inFlux[0]?.vramMib], [14936, 1200, 11688]);
});

test('a serve starting or stopping holds between none and all of its reservation: the draw is a range, and a warning only when even its least exceeds the reserve', () => {
  const l = ledgerOf(reservation('fast', 14336, 'running'), reservation('vision', 12288, 'admitted'), reservation('ocr', 5120, 'stopping'));
  // H3's reading mid-start: vision's memory partly allocated.
  const midStart = physicalTruth(l, { uuid: 'GPU-1', totalMib: 32607, usedMib: 32324 });
  assert.deepEqual([midStart.nonLedgerDrawMib, midStart.nonLedgerDrawMinMib, midStart.optimistic], [17988, 580, false]);
  assert.deepEqual(formatPhysical(midStart), [
    '  nvidia-smi: used 32324 of 32607 MiB; non-ledger draw 580 to 17988 MiB (up to 17408 MiB of it vision starting, ocr stopping) against a reserve of 4608 MiB',
  ]);
  // Even with both taken whole, 6000 MiB is no serve's.
  const over = physicalTruth(ledgerOf(reservation('vision', 12288, 'admitted')), { uuid: 'GPU-1', totalMib: 32607, usedMib: 12288 + 6000 });
  assert.equal(over.optimistic, true);
  assert.equal(
    formatPhysical(over)[1],
    "  warning: non-ledger draw exceeds the reserve by at least 1392 MiB: the ledger's free figure is that much optimistic",
  );
  // Nothing allocated yet: the least is not below zero.
  assert.match(formatPhysical(physicalTruth(l, { uuid: 'GPU-1', totalMib: 32607, usedMib: 15000 }))[0] ?? '', /non-ledger draw 0 to 664 MiB/);
});

test("a serve's measured delta: inside its reservation, or a warning naming the overrun", () => {
  assert.deepEqual(formatMeasuredDelta('vision', 11738, 12288), {
    exceeds: false,
    line: 'vision measured 11738 MiB device delta, inside its 12288 MiB reservation',
  });
  assert.deepEqual(formatMeasuredDelta('fast', 15000, 14336), {
    exceeds: true,
    line: 'warning: fast measured 15000 MiB device delta, 664 MiB above its 14336 MiB reservation',
  });
});
