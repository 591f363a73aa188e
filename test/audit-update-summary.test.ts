// The line an audit report gives a ledger Update (src/audit/report/activities.ts): what the ledger
// decided, read from its answer, not what the run asked.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { updateSummary } from '../src/audit/report/activities';

const ledger = (startSlot?: { serve: string; holder: string }) => ({
  node: 'box',
  gpuRole: 'dark-fast',
  gpuUuid: 'GPU-1',
  capacityMib: 32607,
  reserveMib: 4608,
  reservations: [],
  ...(startSlot ? { startSlot: { ...startSlot, sinceMs: 0, startTimeoutS: 600 } } : {}),
});
const running = { serve: 'vision', phase: 'running', holder: 'bring-up-vision-1', giveStartSlot: true };

test('a running that gives the start slot back says so only where the ledger after it has the slot free', () => {
  assert.match(
    updateSummary('setPhase', running, { serve: 'vision', ledger: ledger() }, undefined),
    /^vision → running; start slot given back; committed 0 MiB, free 27999 MiB$/,
  );
  // A ledger built before giveStartSlot keeps it: the run gives it by its own Update next.
  assert.match(
    updateSummary('setPhase', running, { serve: 'vision', ledger: ledger({ serve: 'vision', holder: 'bring-up-vision-1' }) }, undefined),
    /^vision → running; start slot kept \(this ledger gives it only by its own Update\);/,
  );
  assert.match(
    updateSummary('setPhase', running, { serve: 'vision', ledger: ledger({ serve: 'chat', holder: 'bring-up-chat-2' }) }, undefined),
    /^vision → running; start slot held by chat \(bring-up-chat-2\), not this run;/,
  );
  assert.equal(updateSummary('setPhase', running, { serve: 'vision' }, undefined), 'vision → running; start slot asked back');
  assert.equal(updateSummary('setPhase', { serve: 'vision', phase: 'running', holder: 'h' }, { serve: 'vision' }, undefined), 'vision → running');
});

test('a give of a start slot another run holds changed nothing, and its line says whose it is', () => {
  const give = { serve: 'vision', holder: 'bring-up-vision-1', take: false };
  assert.equal(updateSummary('startSlot', give, { taken: false }, undefined), 'start slot given back by vision');
  assert.equal(
    updateSummary('startSlot', give, { taken: false, heldBy: { serve: 'chat', holder: 'bring-up-chat-2', sinceMs: 0, startTimeoutS: 600 } }, undefined),
    "vision's give of the start slot changed nothing: held by chat (bring-up-chat-2)",
  );
});
