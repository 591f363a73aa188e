// The namespace's registered search attributes, through the operator service. Every run started
// without its tags asks (src/workflows/run-tags.ts): a listing that has them all is kept a minute,
// one that lacks some is asked again next time, so a run started just after an operator registers
// them is tagged. (One removed within that minute would fail the upsert of a run started
// meanwhile until it is registered again: remove them only with no run starting.)
import type { Client } from '@temporalio/client';
import type { SearchAttributeRegistry } from './port';

const FRESH_MS = 60_000;

export class TemporalSearchAttributes implements SearchAttributeRegistry {
  private listed?: { at: number; names: Promise<Set<string>> };

  constructor(private readonly client: Client) {}

  private names(): Promise<Set<string>> {
    if (!this.listed || Date.now() - this.listed.at > FRESH_MS) {
      const names = this.client.connection.operatorService
        .listSearchAttributes({ namespace: this.client.options.namespace })
        .then((r) => new Set(Object.keys(r.customAttributes ?? {})));
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
