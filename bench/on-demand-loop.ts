// Where a cold on-demand request's time went, from its arrival to its first byte, along the one
// path it waits on: the router's marks (src/router/on-demand.ts OnDemandMark, this machine's
// clock) up to its POST; the acquire run's history (bench/history-time.ts, the server's clock, on
// the same machine) from the run's start to its last step, the guarded readmit, starting; the
// router again from that readmit to the tier active, the held request released, and the client's
// first byte. Consecutive, so the shares add up to the first byte.
import { eventAttributes, eventTypeName } from '../src/audit/events';
import type { HistoryJson } from '../src/audit/events';
import { path, str } from '../src/audit/report/read';
import type { OnDemandMark } from '../src/router/on-demand';
import { historyTime } from './history-time';
import type { TimeShare } from './history-time';

/** The activity that is the run's last step on the request's path: the router lets the tier back. */
const READMIT = 'readmitIfQuiesced';

/** Each mark's first time (epoch ms) in one cold run. */
export type Marks = Partial<Record<OnDemandMark, number>>;

const epochMs = (iso: string | undefined): number => (iso ? Date.parse(iso) : NaN);

/**
 * The shares of one cold run, in order: `requestEpochMs` when the client sent the request,
 * `firstByteEpochMs` when its first byte came back, `marks` the router's, `history` the acquire run's.
 */
/**
 * The run's last readmit, scheduled and started (undefined until started). The server writes an
 * activity's started event with its completion, and that waits for a workflow task of the run under
 * way (the start slot's give, beside the readmit): the client's first byte can come before it.
 */
export function readmitEvents(h: HistoryJson): { scheduled: HistoryJson['events'][number]; started?: HistoryJson['events'][number] } {
  // The run's last readmit: a failed run's compensation readmits come before nothing that matters here.
  const scheduled = [...h.events]
    .reverse()
    .find((e) => eventTypeName(e.eventType) === 'ActivityTaskScheduled' && str(path(eventAttributes(e), 'activityType', 'name')) === READMIT);
  if (!scheduled) throw new Error(`the acquire run has no ${READMIT} activity`);
  const started = h.events.find(
    (e) => eventTypeName(e.eventType) === 'ActivityTaskStarted' && String(eventAttributes(e)['scheduledEventId']) === scheduled.eventId,
  );
  return started ? { scheduled, started } : { scheduled };
}

export function loopShares(h: HistoryJson, marks: Marks, requestEpochMs: number, firstByteEpochMs: number): TimeShare[] {
  const at = (m: OnDemandMark): number => {
    const t = marks[m];
    if (t === undefined) throw new Error(`the router passed no '${m}' mark in this run`);
    return t;
  };
  const { scheduled, started } = readmitEvents(h);
  if (!started) throw new Error(`the acquire run's ${READMIT} (event ${scheduled.eventId}) has no started event`);
  const readmitStarted = epochMs(started.eventTime);
  // The run up to its readmit's start: what the client's start call was is the router's POST to the API's start.
  const upToReadmit = { events: h.events.filter((e) => Number(e.eventId) <= Number(started.eventId)) };
  const run = historyTime(upToReadmit, at('posted'), readmitStarted)
    .filter((s) => s.label !== 'close to client')
    .map((s) => (s.label === 'client to start' ? { ...s, label: 'POST -> run started (API)' } : s));
  const router = (label: string, ms: number): TimeShare => ({ label, kind: 'client', ms });
  return [
    router('request -> held', at('held') - requestEpochMs),
    router('held -> POST (router)', at('posted') - at('held')),
    ...run,
    router('readmit -> tier active (router probes)', at('active') - readmitStarted),
    router('tier active -> released', at('released') - at('active')),
    router('released -> first byte', firstByteEpochMs - at('released')),
  ];
}
