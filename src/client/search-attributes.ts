// Search attributes that let the Temporal UI filter operations by serve, node and verb
// (`GpuresServe = "vision"`). A server only accepts attributes it has registered: the dev
// server registers them at start (src/dev/dev-server.ts); on another server register them with
// `temporal operator search-attribute create --name GpuresServe --type Keyword` (and the others),
// and until then operations simply start without them.
import type { Client } from '@temporalio/client';
import { defineSearchAttributeKey, SearchAttributeType, TypedSearchAttributes } from '@temporalio/common';

export const SEARCH_ATTRIBUTES = {
  serve: defineSearchAttributeKey('GpuresServe', SearchAttributeType.KEYWORD),
  node: defineSearchAttributeKey('GpuresNode', SearchAttributeType.KEYWORD),
  operation: defineSearchAttributeKey('GpuresOperation', SearchAttributeType.KEYWORD),
};

/** `--search-attribute` flags for `temporal server start-dev`. */
export const DEV_SERVER_SEARCH_ATTRIBUTE_FLAGS = Object.values(SEARCH_ATTRIBUTES).flatMap((k) => ['--search-attribute', `${k.name}=Keyword`]);

const registered = new WeakMap<Client, Promise<boolean>>();

async function hasOurAttributes(client: Client): Promise<boolean> {
  try {
    const { customAttributes } = await client.connection.operatorService.listSearchAttributes({ namespace: client.options.namespace });
    return Object.values(SEARCH_ATTRIBUTES).every((k) => customAttributes?.[k.name] !== undefined);
  } catch {
    // No operator access (e.g. Temporal Cloud API keys without it): start without attributes.
    return false;
  }
}

/** The attributes for an operation, when this namespace has them registered; asked once per client. */
export async function operationSearchAttributes(client: Client, node: string, serve: string, operation: string): Promise<TypedSearchAttributes | undefined> {
  let known = registered.get(client);
  if (!known) {
    known = hasOurAttributes(client);
    registered.set(client, known);
  }
  if (!(await known)) return undefined;
  return new TypedSearchAttributes([
    { key: SEARCH_ATTRIBUTES.serve, value: serve },
    { key: SEARCH_ATTRIBUTES.node, value: node },
    { key: SEARCH_ATTRIBUTES.operation, value: operation },
  ]);
}
