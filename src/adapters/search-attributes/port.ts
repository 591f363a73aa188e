// Which search attributes the namespace has registered: a run may only be tagged with those (an
// upsert of any other fails its workflow task, again and again). Temporal (temporal.ts) implements it.

export interface SearchAttributeRegistry {
  /** Those of `names` the namespace has registered; none when it cannot tell (no operator access). */
  registered(names: readonly string[]): Promise<string[]>;
}
