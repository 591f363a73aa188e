/**
 * How long a bring-up waits between /health probes. An installed worker polled every 1 s, so a
 * serve healthy 200 ms after its start waited up to a second more (llama-swap polls every 250 ms
 * after a first check). A serve still loading after HEALTH_POLL.fastForMs is a model load of tens
 * of seconds, where a 1 s wait costs a few per cent at most, and probing 4 times a second for the
 * rest of its start timeout would only add Docker inspections and HTTP probes.
 */
export const HEALTH_POLL = {
  fastMs: 250,
  fastForMs: 30_000,
  slowMs: 1000,
} as const;

/**
 * The wait before the next probe, `loadingMs` after the wait began: a configured interval (the
 * tests' and benches' pollIntervalMs) as given, else 250 ms for the first 30 s and 1 s after, never
 * past the deadline (`leftMs`, clamped at 0).
 */
export function healthPollDelayMs(loadingMs: number, leftMs: number, configuredMs?: number): number {
  const every = configuredMs ?? (loadingMs < HEALTH_POLL.fastForMs ? HEALTH_POLL.fastMs : HEALTH_POLL.slowMs);
  return Math.min(every, Math.max(0, leftMs));
}
