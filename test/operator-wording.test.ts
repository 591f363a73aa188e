// Sentences a newcomer operator read and could not act on, or that contradicted themselves: each
// must say what to do, or say only what its figures show.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { eviction } from '../src/shared/wording';

const STUCK = { drained: false, waitedMs: 5000, routerInFlightAtStart: 2, routerInFlightAtEnd: 1, vllmRunningAtEnd: 1 };

describe('operator wording', () => {
  test("a drain timeout names the operator's options: a longer --drain-timeout, or --force", () => {
    const m = eviction.drainTimeout('vision', STUCK, 5);
    assert.match(m, /^vision did not drain within 5 s \(1 in flight at the router, 1 running in vLLM\)/);
    assert.match(m, /--drain-timeout S \(drain_timeout_s\)/);
    assert.match(m, /--force \(force\)/);
  });
});
