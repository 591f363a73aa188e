// Whether an acquisition may be abandoned (the router's held requests have all gone): only while
// abandoning saves something and nobody else wants the serve. Once a victim's stop or sleep, or the
// acquirer's own start, has begun, the prompt cache is lost or the serve is coming up anyway:
// abandoning would undo work for nothing. A caller other than the router (an operator's POST, a
// `serves up` that joined, a run started from the UI) waits on the run: it goes on for them.

/** Who asks for an acquisition: the router for its held requests, or anyone else. */
export type AcquisitionCaller = 'router' | 'operator' | 'cli';

export interface AbandonState {
  /** Who started the run (the input's `trigger`); undefined for a run started without one (the UI, `temporal workflow start`, an older client). */
  startedBy?: AcquisitionCaller;
  /**
   * Callers that joined the run since, each once, in the order they first came; `unnamed`: a join
   * that did not say who (a client older than callers). At most one entry a kind of caller.
   */
  joinedBy: readonly (AcquisitionCaller | 'unnamed')[];
  /** The first step begun that abandoning would not undo (`stop vision`, `sleep vision`, `start ondemand`), if any. */
  committed?: string;
  /** The serve the run acquires and the victims it plans to evict, for the answer. */
  serve: string;
}

/**
 * Why an abandon was not taken, for callers to count and act on without reading the sentence:
 * the run's decision (not_for_router, joined, committed: final, asking again changes nothing), or
 * why it could not decide now (admitting, late: ask again) or any more (ending).
 */
export type AbandonRefusal = 'not_for_router' | 'joined' | 'committed' | 'ending' | 'admitting' | 'late';

export type AbandonDecision = { abandon: true } | { abandon: false; why: string; reason: 'not_for_router' | 'joined' | 'committed' };

const CALLER_WORDS: Record<AcquisitionCaller | 'unnamed', string> = {
  router: 'the router',
  operator: "an operator's POST /v1/acquisitions",
  cli: "an operator's `gpures serves up`",
  unnamed: 'a caller that did not say who it is (a client older than this)',
};

export function abandonDecision(s: AbandonState): AbandonDecision {
  if (s.startedBy !== 'router') {
    const by = s.startedBy
      ? CALLER_WORDS[s.startedBy]
      : 'a caller that did not say it was the router (the Temporal UI, `temporal workflow start`, an older client)';
    return { abandon: false, why: `it was started by ${by}, not for the router's held requests: it goes on for them`, reason: 'not_for_router' };
  }
  const other = s.joinedBy.find((c) => c !== 'router');
  if (other) return { abandon: false, why: `${CALLER_WORDS[other]} joined it and waits for ${s.serve}: it goes on for them`, reason: 'joined' };
  if (s.committed) return { abandon: false, why: `${s.committed} has begun: abandoning now would save nothing`, reason: 'committed' };
  return { abandon: true };
}

/** The callers after `caller` joins: each kind once, so a flood of joins keeps the run's memory bounded. */
export function withJoined(
  joinedBy: readonly (AcquisitionCaller | 'unnamed')[],
  caller: AcquisitionCaller | 'unnamed',
): readonly (AcquisitionCaller | 'unnamed')[] {
  return joinedBy.includes(caller) ? joinedBy : [...joinedBy, caller];
}

/** The caller a join names, or undefined for anything else (a join from a client older than callers: counted as someone else). */
export function callerOf(v: unknown): AcquisitionCaller | undefined {
  return v === 'router' || v === 'operator' || v === 'cli' ? v : undefined;
}
