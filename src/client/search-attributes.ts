// Search attributes that let the Temporal UI filter operations by serve, node and verb
// (`GpuresServe = "vision"`). A server only accepts attributes it has registered: the dev
// server registers them at start (src/dev/dev-server.ts), `gpures demo --temporal-address`
// registers them when missing (registerSearchAttributes); on another server register them with
// `temporal operator search-attribute create --name GpuresServe --type Keyword` (and the others;
// GpuresVictims is a KeywordList), and until then operations simply start without them.
import type { Client } from '@temporalio/client';
import { TypedSearchAttributes } from '@temporalio/common';
import type { SearchAttributeType } from '@temporalio/common';
import { indexedTypeOf, TemporalSearchAttributes } from '../adapters/search-attributes/temporal';
import { ALL_SEARCH_ATTRIBUTES, runTagPairs, SEARCH_ATTRIBUTE_NAMES, SEARCH_ATTRIBUTES } from '../shared/run-tags';
import type { RunTags } from '../shared/run-tags';
import { pollUntil } from './poll';

export { ALL_SEARCH_ATTRIBUTES, SEARCH_ATTRIBUTES };

/** A type as `temporal operator search-attribute create --type` and `start-dev --search-attribute` spell it. */
const CLI_TYPE: Partial<Record<SearchAttributeType, string>> = { KEYWORD: 'Keyword', KEYWORD_LIST: 'KeywordList' };
export const cliTypeOf = (k: { type: SearchAttributeType }): string | undefined => CLI_TYPE[k.type];

/** `--search-attribute` flags for `temporal server start-dev`. */
export const DEV_SERVER_SEARCH_ATTRIBUTE_FLAGS = ALL_SEARCH_ATTRIBUTES.flatMap((k) => ['--search-attribute', `${k.name}=${cliTypeOf(k)}`]);

const registered = new WeakMap<Client, Promise<boolean>>();

/** How long a just-registered attribute may take to be accepted by the frontend (its cache refreshes on its own). */
const REGISTERED_WAIT_MS = 30_000;

/**
 * Registers whichever of the attributes this namespace lacks, and waits until the server lists
 * them. Answers the names it added; throws with the server's reason when it may not (no operator
 * access), so a caller that needs them can say why.
 */
export async function registerSearchAttributes(client: Client): Promise<string[]> {
  const namespace = client.options.namespace;
  const listed = async () => (await client.connection.operatorService.listSearchAttributes({ namespace })).customAttributes ?? {};
  const present = await listed();
  const missing = ALL_SEARCH_ATTRIBUTES.filter((k) => present[k.name] === undefined);
  if (missing.length === 0) return [];
  await client.connection.operatorService.addSearchAttributes({
    namespace,
    searchAttributes: Object.fromEntries(missing.map((k) => [k.name, indexedTypeOf(k.name)])),
  });
  const names = missing.map((k) => k.name).join(', ');
  await pollUntil(`${names} listed after registering them`, REGISTERED_WAIT_MS, async () => {
    const now = await listed();
    return missing.every((k) => now[k.name] !== undefined);
  });
  registered.delete(client);
  return missing.map((k) => k.name);
}

async function hasOurAttributes(client: Client): Promise<boolean> {
  // No operator access (e.g. Temporal Cloud API keys without it), or no answer now: start without
  // attributes, and the run tags itself (src/workflows/run-tags.ts).
  const names = await new TemporalSearchAttributes(client).registered(SEARCH_ATTRIBUTE_NAMES).catch((): string[] => []);
  return names.length === SEARCH_ATTRIBUTE_NAMES.length;
}

/** The attributes of a run's tags, when this namespace has them registered; a yes is kept per client, a no asked again. */
export async function operationSearchAttributes(client: Client, tags: RunTags): Promise<TypedSearchAttributes | undefined> {
  let known = registered.get(client);
  if (!known) {
    known = hasOurAttributes(client);
    registered.set(client, known);
  }
  if (!(await known)) {
    registered.delete(client);
    return undefined;
  }
  return new TypedSearchAttributes(runTagPairs(tags));
}
