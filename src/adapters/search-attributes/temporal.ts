// The namespace's registered search attributes, through the operator service. Every run started
// without its tags asks (src/workflows/run-tags.ts): a listing that has them all is kept a minute,
// one that lacks some is asked again next time, so a run started just after an operator registers
// them is tagged. (One removed within that minute would fail the upsert of a run started
// meanwhile until it is registered again: remove them only with no run starting.)
import type { Client } from '@temporalio/client';
import { encodeSearchAttributeIndexedValueType } from '@temporalio/common/lib/search-attributes';
import { temporal } from '@temporalio/proto';
import { ALL_SEARCH_ATTRIBUTES } from '../../shared/run-tags';
import { grpcCode, GrpcStatus } from '../grpc-status';
import type { SearchAttributeRegistry } from './port';

const FRESH_MS = 60_000;
/** One listing's bound; a slow one is asked again (the local activity's retries), then the run goes on untagged. */
const LIST_DEADLINE_MS = 2000;
/** Each attribute counts only under its own type (Keyword, GpuresVictims a KeywordList): one registered with another would fail every upsert of it. */
const KEYWORD = temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD;
const TYPE_OF = new Map(ALL_SEARCH_ATTRIBUTES.map((k) => [k.name, encodeSearchAttributeIndexedValueType(k.type) ?? KEYWORD]));
/** The type `name` is registered with: its own, Keyword for one not ours. */
export const indexedTypeOf = (name: string): temporal.api.enums.v1.IndexedValueType => TYPE_OF.get(name) ?? KEYWORD;
const typed = (name: string, type: temporal.api.enums.v1.IndexedValueType): boolean => type === indexedTypeOf(name);

export class TemporalSearchAttributes implements SearchAttributeRegistry {
  private listed?: { at: number; names: Promise<Set<string>> };

  /** `namespace`: the worker's, which may differ from the client's default. */
  constructor(
    private readonly client: Client,
    private readonly namespace = client.options.namespace,
  ) {}

  private names(): Promise<Set<string>> {
    if (!this.listed || Date.now() - this.listed.at > FRESH_MS) {
      const names = this.client
        .withDeadline(Date.now() + LIST_DEADLINE_MS, () => this.client.connection.operatorService.listSearchAttributes({ namespace: this.namespace }))
        .then((r) => new Set(Object.entries(r.customAttributes ?? {}).flatMap(([name, type]) => (typed(name, type) ? [name] : []))));
      // A failed listing is not kept: the next run asks again.
      names.catch(() => (this.listed = undefined));
      this.listed = { at: Date.now(), names };
    }
    return this.listed.names;
  }

  /**
   * Throws when the server could not answer now (a listing past its deadline on a loaded or
   * restarting server): the caller asks again, rather than a run going untagged for a slow moment.
   */
  async registered(names: readonly string[]): Promise<string[]> {
    try {
      const known = await this.names();
      const registered = names.filter((n) => known.has(n));
      if (registered.length < names.length) this.listed = undefined;
      return registered;
    } catch (err) {
      // No operator access (Temporal Cloud API keys without it, say): say none, and the run goes untagged.
      if (deniedForGood(err)) return [];
      throw err;
    }
  }
}

/** The server's answer will not change by asking again: no access to the operator service, or none on this server. */
function deniedForGood(err: unknown): boolean {
  const code = grpcCode(err);
  return code === GrpcStatus.PERMISSION_DENIED || code === GrpcStatus.UNAUTHENTICATED || code === GrpcStatus.UNIMPLEMENTED || code === GrpcStatus.NOT_FOUND;
}
