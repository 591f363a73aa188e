// One line for each Query, Update and Signal the workflows handle, in the operator's words: the
// Temporal UI's Queries tab and `__temporal_workflow_metadata` show them beside the bare names.
// The ledger's Updates change what the GPU admits: they say so, for an operator tempted to send
// one from the UI.

export const LEDGER_HANDLERS = {
  snapshot: "This GPU's ledger: capacity, reserve, every reservation and its phase, and evictions under way.",
  admit: 'Reserves MiB for a serve coming up, or refuses it over budget (sent by `serves up`; changes the ledger).',
  acquire: 'Reserves MiB for an on-demand serve, picking evictable victims when short (sent by an acquisition; changes the ledger).',
  victimReleased: "Hands an evicted victim's MiB to its acquirer once its VRAM is seen back (sent by an acquisition; changes the ledger).",
  abortEviction: "Gives an eviction's victims back their reservations (sent by a failed acquisition; changes the ledger).",
  beginStop: 'Takes a serve for `serves down` before its stop, so no other run moves it meanwhile (changes the ledger).',
  fence: 'Checks that a run still holds a serve before it acts on the container (sent by the operations).',
  setPhase:
    "Moves a reservation's phase (admitted, running, stopping, evicting, sleeping…) for the run that holds it (sent by the operations; changes the ledger).",
  release: "Frees a serve's reservation once its container is down (sent by `serves down` and compensations; changes the ledger).",
  startSlot: "Takes or gives back the GPU's start slot: one cold start or wake at a time on the card (sent by the operations; changes the ledger).",
} as const;

export const LEASE_HANDLERS = {
  lease: "This lease: its serve, holder, kind, expiry and the serve's use it saw.",
  extend: 'Moves the expiry later (by seconds, or to a time), bounded (`gpures lease extend`).',
  release: 'Expires the lease now: its serve is brought down (`gpures lease release`).',
  renew: 'A new acquisition of the serve: the lease goes on under the new holder and terms.',
  atLeast: "Another caller's terms: the lease lasts at least that long from now, never shorter.",
  atLeastAnswered: "Another caller's terms, answered: whether the lease took them, or why not (expiring, another holder's).",
} as const;

export const OPERATION_HANDLERS = {
  progress: 'The steps this operation has completed, with their times and outcomes.',
  liveProgress: 'The steps completed and the step under way, with when it began (what `--follow` prints).',
  startSlotFreed: "Sent by the GPU's ledger to an operation waiting for the start slot: it was given back, ask again now.",
} as const;

export const ACQUISITION_HANDLERS = {
  joinLease: "A caller that joined this acquisition: its lease terms, honoured with the run's own, and who it is.",
  joined: 'A caller without lease terms that joined this acquisition (an operator): the router may no longer abandon it.',
  joinedAnswered: 'The same as joined, as an Update (sent once per run by `serves up`, its id fixed): answers whether the run had already been abandoned.',
  abandon:
    "The router's held requests for this serve have all gone: abandons the run, undone as a cancel would, if no victim's stop or sleep nor the serve's start has begun and nobody else joined; answers whether it did, and why not.",
} as const;

export const PROMOTION_HANDLERS = {
  steps: "This promotion's router, the step under way and the steps done, with their evidence.",
} as const;
