// What the worker says at start about the router it was given, from one tier-state read of each
// routed serve's tier. Started with a GPURES_ROUTER_TOKEN that is not the router's, or a router
// that is down, it ran without a word, and the first `serves down` of a routed serve failed at its
// quiesce. Warnings only: the worker runs either way (the router may come up after it).
import { PermanentError } from '../adapters/errors';
import type { RouterAdmin } from '../adapters/router-admin/port';
import type { ServeSpec } from '../domain/types';
import { Failure } from '../shared/failures';
import { withTimeout } from './time-bound';

/** How long each tier's read may take at start. */
export const ROUTER_CHECK_TIMEOUT_MS = 10_000;

const UNTIL = 'until then the quiesce, drain and guarded readmit of routed serves fail';

const within = <T>(call: Promise<T>): Promise<T> => withTimeout(call, ROUTER_CHECK_TIMEOUT_MS, `no answer within ${ROUTER_CHECK_TIMEOUT_MS / 1000} s`);

/** Reads each routed serve's tier once; a wrong token or a silent router is said once, an unknown tier per serve. */
export async function checkRouterAtStart(router: RouterAdmin, routerUrl: string, serves: readonly ServeSpec[]): Promise<string[]> {
  const problems: string[] = [];
  const asked = new Set<string>();
  for (const serve of serves) {
    const tier = serve.routerTier;
    if (tier === undefined || asked.has(tier)) continue;
    asked.add(tier);
    try {
      await within(router.tierState(tier));
    } catch (err) {
      const type = err instanceof PermanentError ? err.type : undefined;
      if (type === Failure.UnknownTier) {
        problems.push(`serve '${serve.name}': its router_tier '${tier}' is not a tier of the router at ${routerUrl} (${(err as Error).message}); ${UNTIL}`);
        continue;
      }
      // A refused token or a router not answering is the same for every tier: said once.
      problems.push(
        `${type === Failure.RouterAuthFailed ? '' : `the router at ${routerUrl} (GPURES_ROUTER_URL) does not answer: `}${(err as Error).message}; ${UNTIL}`,
      );
      break;
    }
  }
  return problems;
}
