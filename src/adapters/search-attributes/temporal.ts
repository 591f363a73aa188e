// The namespace's registered search attributes, through the operator service. Every run started
// without its tags asks (src/workflows/run-tags.ts): a listing that has them all is kept a minute,
// one that lacks some is asked again next time, so a run started just after an operator registers
// them is tagged. (One removed within that minute would fail the upsert of a run started
// meanwhile until it is registered again: remove them only with no run starting.)
import type { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import type { SearchAttributeRegistry } from './port';

const FRESH_MS = 60_000;
/** A listing that takes longer says none: the run goes on untagged rather than waiting. */
const LIST_DEADLINE_MS = 2000;
/** Our attributes are Keyword: one registered with another type would fail every upsert of it. */
const KEYWORD = temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD;

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
        .then((r) => new Set(Object.entries(r.customAttributes ?? {}).flatMap(([name, type]) => (type === KEYWORD ? [name] : []))));
      // A failed listing is not kept: the next run asks again.
      names.catch(() => (this.listed = undefined));
      this.listed = { at: Date.now(), names };
    }
    return this.listed.names;
  }

  async registered(names: readonly string[]): Promise<string[]> {
    try {
      const known = await this.names();
      const registered = names.filter((n) => known.has(n));
      if (registered.length < names.length) this.listed = undefined;
      return registered;
    } catch {
      // No operator access (Temporal Cloud API keys without it, say): say none, and the run goes untagged.
      return [];
    }
  }
}
