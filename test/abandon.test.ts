// The acquisition's decision whether to abandon itself for the router (src/domain/abandon.ts).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { abandonDecision, callerOf, withJoined } from '../src/domain/abandon';
import type { AcquisitionCaller } from '../src/domain/abandon';

describe('abandonDecision', () => {
  const base = { serve: 'ondemand', joinedBy: [] };

  test("the router's own run, nothing begun that an abandon would not undo: abandoned", () => {
    assert.deepEqual(abandonDecision({ ...base, startedBy: 'router' }), { abandon: true });
    // The router joining its own run again (a repeated POST) is still nobody else.
    assert.deepEqual(abandonDecision({ ...base, startedBy: 'router', joinedBy: ['router', 'router'] }), { abandon: true });
  });

  test('started by anyone but the router, or by a caller that did not say: refused', () => {
    for (const startedBy of ['operator', 'cli', undefined] as const) {
      const d = abandonDecision({ ...base, ...(startedBy ? { startedBy } : {}) });
      assert.equal(d.abandon, false, String(startedBy));
      assert.match(d.abandon ? '' : d.why, /^it was started by .*, not for the router's held requests/);
      assert.equal(d.abandon ? '' : d.reason, 'not_for_router');
    }
  });

  test('an operator joined: refused, naming who', () => {
    const cli = abandonDecision({ ...base, startedBy: 'router', joinedBy: ['router', 'cli'] });
    assert.deepEqual(cli, {
      abandon: false,
      why: "an operator's `gpures serves up` joined it and waits for ondemand: it goes on for them",
      reason: 'joined',
    });
    const post = abandonDecision({ ...base, startedBy: 'router', joinedBy: ['operator'] });
    assert.equal(post.abandon, false);
    const unnamed = abandonDecision({ ...base, startedBy: 'router', joinedBy: ['unnamed'] });
    assert.match(unnamed.abandon ? '' : unnamed.why, /did not say who it is/);
  });

  test("a victim's stop, a sleep or the serve's start begun: refused, it would save nothing", () => {
    assert.deepEqual(abandonDecision({ ...base, startedBy: 'router', committed: 'the stop of vision' }), {
      abandon: false,
      why: 'the stop of vision has begun: abandoning now would save nothing',
      reason: 'committed',
    });
  });

  test('joins are kept once a caller: a flood of them leaves at most one entry each, in the order they first came, and the same decision', () => {
    let joinedBy: readonly (AcquisitionCaller | 'unnamed')[] = [];
    const callers = ['router', 'cli', 'operator', 'unnamed'] as const;
    for (let i = 0; i < 1000; i++) joinedBy = withJoined(joinedBy, callers[i % 4 === 0 ? 0 : i % 7 === 0 ? 2 : 1]);
    assert.deepEqual(joinedBy, ['router', 'cli', 'operator']);
    joinedBy = withJoined(joinedBy, 'unnamed');
    assert.deepEqual(joinedBy, ['router', 'cli', 'operator', 'unnamed']);
    assert.equal(abandonDecision({ ...base, startedBy: 'router', joinedBy }).abandon, false);
    assert.deepEqual(withJoined(['router'], 'router'), ['router']);
  });

  test('callerOf names only the callers it knows', () => {
    assert.equal(callerOf('router'), 'router');
    assert.equal(callerOf('cli'), 'cli');
    assert.equal(callerOf(undefined), undefined);
    assert.equal(callerOf('Router'), undefined);
  });
});
