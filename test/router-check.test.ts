// The worker's start-up check of its router, on its own (cli-eviction runs it in a real worker
// process against the reference router with a wrong token).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PermanentError } from '../src/adapters/errors';
import type { RouterAdmin } from '../src/adapters/router-admin/port';
import type { ServeSpec } from '../src/domain/types';
import { Failure } from '../src/shared/failures';
import { checkRouterAtStart } from '../src/worker/router-check';

const serve = (name: string, routerTier?: string) => ({ name, ...(routerTier ? { routerTier } : {}) }) as ServeSpec;
const URL = 'http://127.0.0.1:8000';

function router(answer: (tier: string) => Error | undefined): RouterAdmin & { asked: string[] } {
  const asked: string[] = [];
  const tierState = (tier: string) => {
    asked.push(tier);
    const err = answer(tier);
    return err ? Promise.reject(err) : Promise.resolve({ tier, state: 'active' as const, inFlight: 0, backend: 'x', modelIdentity: true });
  };
  return { asked, tierState } as unknown as RouterAdmin & { asked: string[] };
}

test('every routed tier asked once; an unknown tier said per serve; nothing for a serve without a tier', async () => {
  const r = router((tier) =>
    tier === 'gone-local' ? new PermanentError(Failure.UnknownTier, "router tier state of tier 'gone-local' answered 404: unknown tier") : undefined,
  );
  const problems = await checkRouterAtStart(r, URL, [serve('a', 'a-local'), serve('b', 'a-local'), serve('job'), serve('gone', 'gone-local')]);
  assert.deepEqual(r.asked, ['a-local', 'gone-local']);
  assert.deepEqual(problems, [
    "serve 'gone': its router_tier 'gone-local' is not a tier of the router at http://127.0.0.1:8000 (router tier state of tier 'gone-local' answered 404: unknown tier); until then the quiesce, drain and guarded readmit of routed serves fail",
  ]);
});

test('a router that does not answer: said once, naming GPURES_ROUTER_URL, the other tiers not asked', async () => {
  const r = router(() => new Error('router GET http://127.0.0.1:8000/admin/tiers/a-local failed: fetch failed: connect ECONNREFUSED 127.0.0.1:8000'));
  const problems = await checkRouterAtStart(r, URL, [serve('a', 'a-local'), serve('b', 'b-local')]);
  assert.deepEqual(r.asked, ['a-local']);
  assert.deepEqual(problems, [
    'the router at http://127.0.0.1:8000 (GPURES_ROUTER_URL) does not answer: router GET http://127.0.0.1:8000/admin/tiers/a-local failed: fetch failed: connect ECONNREFUSED 127.0.0.1:8000; until then the quiesce, drain and guarded readmit of routed serves fail',
  ]);
});
