// The summary each activity carries into the Temporal UI (src/domain/activity-summary.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { activitySummary } from '../src/domain/activity-summary';

test('names the serve (a name or a spec), the victim and the tier; nothing to name, no summary', () => {
  assert.equal(activitySummary('drainServe', { tier: 'vision-local', serve: { name: 'vision', vramMib: 12288 } }), 'drainServe vision (tier vision-local)');
  assert.equal(activitySummary('confirmVramReleased', { gpuUuid: 'GPU-1', victim: 'vision' }), 'confirmVramReleased vision');
  assert.equal(activitySummary('quiesceTier', { tier: 'vision-local' }), 'quiesceTier tier vision-local');
  assert.equal(activitySummary('readGpu', { gpuUuid: 'GPU-1' }), 'readGpu GPU-1');
  assert.equal(activitySummary('promoteReload', { router: 'router' }), undefined);
  assert.equal(activitySummary('registeredSearchAttributes', undefined), undefined);
  assert.equal(activitySummary('startServeContainer', { serve: 'x'.repeat(3000) }), `startServeContainer ${'x'.repeat(100)}…`);
});
