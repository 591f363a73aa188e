// The one question a run's tagging asks the worker (src/workflows/run-tags.ts): which of its
// search attributes the namespace has registered. A local activity, so its answer is recorded
// in the run's history and a replay upserts exactly what the run did.
import type { SearchAttributeRegistry } from '../adapters/search-attributes/port';

export function createRunTagActivities(deps: { searchAttributes?: SearchAttributeRegistry }) {
  return {
    /** Those of `names` this namespace has registered; none without a registry to ask. */
    async registeredSearchAttributes(input: { names: string[] }): Promise<string[]> {
      return deps.searchAttributes ? deps.searchAttributes.registered(input.names) : [];
    },
  };
}
