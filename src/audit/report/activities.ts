// One line per activity and per ledger update, as an operator reads it. The table is keyed by
// the names of `Activities` and typed from each activity's own input and result, so an activity
// renamed, removed or added without a line here fails to compile; anything a history holds that
// this code does not know is shown as compact JSON. Where a line states what a workflow's step
// also states (a stop, a readmit, a release), it is worded by src/shared/wording.ts, as there.
import { freeText, totals } from '../../domain/ledger';
import { measuredHow } from '../../domain/physical';
import type { OwnDraw } from '../../domain/physical';
import { roomLine } from '../../domain/start-room';
import type { StartRoom } from '../../domain/start-room';
import type { LedgerState } from '../../domain/ledger';
import type { StopDecision } from '../../domain/fence';
import type { AcquireDecision, LedgerAbortArgs, LedgerPhaseArgs, LedgerReleaseArgs, LedgerStartSlotArgs, LedgerVictimArgs } from '../../shared/messages';
import {
  abortEvictionUpdate,
  acquireUpdate,
  admitUpdate,
  beginStopUpdate,
  startSlotUpdate,
  fenceUpdate,
  releaseUpdate,
  setPhaseUpdate,
  victimReleasedUpdate,
} from '../../shared/messages';
import { bringDown, byClause, eviction, sleeping, start, usedClause } from '../../shared/wording';
import type { ActivityInput, ActivityName, ActivityResult, FailureEvidence } from './model';
import { compact, fields, ledgerIn, num, obj, str, strs, txt, vramReadingOf } from './read';
import type { Loose, Obj } from './read';

/** An activity's line from its result and input as decoded; undefined: show the result as JSON. */
type Summary<K extends ActivityName> = (
  result: Loose<NonNullable<ActivityResult<K>>> | undefined,
  input: Loose<ActivityInput<K>> | undefined,
) => string | undefined;

export function ledgerTotalsLine(l: LedgerState): string {
  const t = totals(l);
  return `committed ${t.committedMib} MiB, ${freeText(t)}${t.heldMib ? `, held ${t.heldMib} MiB` : ''}`;
}

function decisionLine(decision: unknown): string {
  const d = obj(decision) as Loose<AcquireDecision> | undefined;
  if (!d) return compact(decision);
  switch (d.decision) {
    case 'admitted':
      return `admitted ${txt(d.serve)} ${txt(d.vramMib)} MiB, free after ${txt(d.freeAfterMib)} MiB`;
    case 'denied':
      return `denied ${txt(d.serve)}: asked ${txt(d.vramMib)} MiB, free ${typeof d.freeMib === 'number' ? Math.max(0, d.freeMib) : txt(d.freeMib)} MiB, over budget by ${txt(d.shortfallMib)} MiB${
        d.evictableMib !== undefined ? `; evictable only ${txt(d.evictableMib)} MiB` : ''
      }`;
    case 'evicting': {
      const victims = Array.isArray(d.victims) ? d.victims.map((v) => `${txt(v?.serve)} (${txt(v?.vramMib)} MiB)`).join(', ') : '?';
      return `evicting ${victims} for ${txt(d.serve)}: ${txt(d.reason)}`;
    }
    case 'already-held':
      return `${txt(d.serve)} already held by ${txt(d.holder)} (${txt(d.phase)})`;
    default:
      return compact(decision);
  }
}

type GpuReading = ActivityResult<'readGpu'>;

function gpuLine(g: Loose<GpuReading> | null | undefined): string {
  const r = fields(g);
  if (!r) return 'no reading (no nvidia-smi on the worker)';
  return `${txt(r.uuid)}: used ${txt(r.usedMib)} MiB, free ${txt(r.freeMib)} of ${txt(r.totalMib)} MiB`;
}

/** A ledger activity's line: what it changed, then the totals of the ledger it read after. */
function withLedger(what: string, result: unknown): string | undefined {
  const l = ledgerIn(result);
  return l ? `${what}${ledgerTotalsLine(l)}` : undefined;
}

/** A bring-down's claim on its serve, as the ledger decided it. */
function stopLine(answer: Obj | undefined): string {
  const d = answer as Loose<StopDecision> | undefined;
  switch (d?.decision) {
    case 'taken':
      return `${txt(d.serve)} taken to stop (${txt(d.vramMib)} MiB, was ${txt(d.from)})`;
    case 'absent':
      return `${txt(d.serve)}: no reservation, held at 0 MiB while a stray container is stopped`;
    case 'evicted':
      return `${txt(d.serve)}: evicted${d.evictedFor ? ` for ${txt(d.evictedFor)}` : ''}, stays down`;
    case 'busy':
      return `${txt(d.serve)} busy: held by ${txt(obj(d.operation)?.['holder'])}`;
    case 'not-held':
      return `${txt(d.serve)} left alone: ${d.phase ? `${txt(d.phase)}, held by ${txt(d.heldBy)}` : 'not in the ledger'}`;
    default:
      return compact(answer);
  }
}

/** A take's answer: its decision, and the start slot where the take asked for it too (since take-answers). */
function takeLine(answer: Obj | undefined): string {
  const slot = obj(answer?.['slot']);
  return `${stopLine(answer)}${slot ? `; ${slotAnswerLine(slot['taken'], slot['heldBy'])}` : ''}`;
}

/** A release's answer: the MiB it gave back, or that it held none. */
function releaseLine(released: unknown, vramMib: unknown): string {
  if (!released) return bringDown.released(undefined, false);
  return typeof vramMib === 'number' ? bringDown.released(vramMib, false) : `released ${txt(vramMib)} MiB`;
}

/** A take of the GPU's start slot: taken, or who held it. */
function slotAnswerLine(taken: unknown, heldBy: unknown): string {
  if (taken === true) return 'start slot taken';
  const h = obj(heldBy);
  return h ? `start slot held by ${txt(h['serve'])} (${txt(h['holder'])})` : 'start slot not held';
}

/** A give answered with the slot held by another run changed nothing: its holder had been taken over. */
function giveLine(serve: string, heldBy: unknown): string {
  const h = obj(heldBy);
  return h ? `${serve}'s give of the start slot changed nothing: held by ${txt(h['serve'])} (${txt(h['holder'])})` : `start slot given back by ${serve}`;
}

/**
 * A `running` that asked to give the start slot back (slot-given-with-running), read from the
 * ledger after it: a ledger built before giveStartSlot keeps it (its run then gives it by an
 * Update of its own), and a run taken over holds none to give.
 */
function slotWithPhaseLine(holder: unknown, after: LedgerState | undefined): string {
  if (!after) return 'start slot asked back';
  const slot = after.startSlot;
  if (slot === undefined) return 'start slot given back';
  return slot.holder === holder
    ? 'start slot kept (this ledger gives it only by its own Update)'
    : `start slot held by ${slot.serve} (${slot.holder}), not this run`;
}

/** An admission's take of the start slot (admit-takes-slot), where it asked one. */
function slotWithAdmitLine(slot: unknown): string {
  const s = obj(slot);
  return s ? `; ${slotAnswerLine(s['taken'], s['heldBy'])}` : '';
}

/** Activities whose result says enough as JSON. */
const asJson = (): undefined => undefined;

const SUMMARIES: { [K in ActivityName]: Summary<K> } = {
  resolveServe: (r) => {
    const s = fields(r?.serve);
    if (!s) return undefined;
    const tier = s.routerTier ? `, router tier ${txt(s.routerTier)}` : '';
    return `${txt(s.name)}: ${txt(s.class)}, ${txt(s.vramMib)} MiB on '${txt(r?.gpu?.role)}' (${txt(r?.gpu?.uuid)})${tier}`;
  },
  ledgerSnapshot: (r) => withLedger('', r),
  // A local activity's input is not in history: its summary is the ledger it answered.
  ledgerSetPhase: (r, i) => withLedger(i ? `${txt(i.args?.serve)} → ${txt(i.args?.phase)}; ` : '', r),
  ledgerVictimReleased: (r, i) =>
    withLedger(
      i ? `${txt(i.args?.victim)}'s MiB handed to ${txt(i.args?.acquirer)}${i.args?.asleepAt ? ` (asleep at level ${txt(i.args.asleepAt)})` : ''}; ` : '',
      r,
    ),
  ledgerAbortEviction: (r, i) => {
    const stayed = strs(i?.args?.stopped);
    const slept = Object.keys(obj(i?.args?.slept) ?? {});
    return withLedger(
      `eviction for ${txt(i?.args?.acquirer)} abandoned${stayed?.length ? ` (stayed evicted: ${stayed.join(', ')})` : ''}${slept.length ? ` (stayed asleep: ${slept.join(', ')})` : ''}; `,
      r,
    );
  },
  ledgerAdmit: (r) =>
    r
      ? `${decisionLine(r.decision)}${r.wasAsleep ? ` (restoring a serve asleep at level ${txt(r.wasAsleep)})` : r.wasEvicted ? ' (restoring an evicted serve)' : ''}${slotWithAdmitLine(r.startSlot)}`
      : undefined,
  ledgerAcquire: (r) => (r ? decisionLine(r.decision) : undefined),
  ledgerRelease: (r) => (r ? releaseLine(r.released, r.vramMib) : undefined),
  // Since take-answers the answer carries the ledger (twice): its line, as its Update's; before, as JSON.
  ledgerBeginStop: (r) => withLedger(`${takeLine(obj(r))}; `, r),
  measureOwnProcesses: (r) => (r ? measuredHow(r as OwnDraw) : undefined),
  ledgerStartSlot: (r) => (r ? slotAnswerLine(r.taken, 'heldBy' in r ? r.heldBy : undefined) : undefined),
  reconcileLedger: asJson,
  endOperation: asJson,
  preflightEviction: (r) => {
    if (!r) return undefined;
    const tiers = Array.isArray(r.tiers) ? r.tiers.map((t) => `, tier ${txt(fields(t)?.tier)} can readmit ${txt(fields(t)?.serve)}`).join('') : '';
    return `image ${txt(r.image)} present, ${r.gpu ? `nvidia-smi ${gpuLine(r.gpu)}` : 'no victim running (no VRAM to confirm)'}${tiers}`;
  },
  quiesceTier: (r) => {
    if (!r) return undefined;
    if (r.state === 'quiesced' && typeof r.tier === 'string' && typeof r.inFlight === 'number') return eviction.quiesced(r.tier, r.inFlight);
    return `tier ${txt(r.tier)} ${txt(r.state)} with ${txt(r.inFlight)} in flight`;
  },
  quiesceIfRouted: asJson,
  quiesceMarks: (r) =>
    r
      ? `quiesce marks ${
          Object.entries(r)
            .map(([serve, m]) => `${serve} ${txt(obj(m)?.['mark'] ?? `unread: ${txt(obj(m)?.['unread'])}`)}`)
            .join(', ') || 'none (no router, or none reported)'
        }`
      : undefined,
  drainServe: (r) => {
    if (!r) return undefined;
    const router = `router in flight ${txt(r.routerInFlightAtStart)} → ${txt(r.routerInFlightAtEnd)}`;
    const vllm = `vLLM running ${txt(r.vllmRunningAtStart)} → ${txt(r.vllmRunningAtEnd)}`;
    return `${r.drained ? 'drained' : 'NOT drained'} after ${txt(r.waitedMs)} ms: ${router}, ${vllm}`;
  },
  serveAsleep: (r, i) => `${txt(i?.serve)} ${r ? 'sleeps' : 'does not sleep'}`,
  planSleep: (r) => (r ? `sleep at level ${txt(r.level)}${r.fellBack ? `: ${txt(r.fellBack)}` : ''}` : undefined),
  sleepServe: (r) =>
    r && typeof r.level === 'number' ? sleeping.slept({ level: r.level, alreadyAsleep: Boolean(r.alreadyAsleep), waitedMs: num(r.waitedMs) ?? 0 }) : undefined,
  wakeServe: (r) =>
    r && typeof r.level === 'number' ? sleeping.woke({ level: r.level, alreadyAwake: Boolean(r.alreadyAwake), waitedMs: num(r.waitedMs) ?? 0 }) : undefined,
  inspectServe: (r) => (r ? `container ${txt(r.name)} ${txt(r.status)}` : 'no container'),
  readGpu: (r) => `nvidia-smi ${gpuLine(r)}`,
  measureGpu: (r) => `nvidia-smi ${gpuLine(r)}`,
  readBeforeStop: (r) =>
    `nvidia-smi ${gpuLine(r)}${r?.processes ? `; its own processes: ${r.processes.unseen ?? ((r.processes.onGpu ?? []).map((p) => `pid ${p.pid}`).join(', ') || 'none on the GPU')}` : ''}`,
  readStartRoom: (r) => {
    if (!r) return `not checked: ${gpuLine(null)}`;
    // A history's result is read as it is: one this code cannot word is shown as JSON.
    try {
      return `nvidia-smi ${gpuLine(r.reading)}; ${roomLine(r.room as unknown as StartRoom)}`;
    } catch {
      return undefined;
    }
  },
  stopServeContainer: (r) =>
    r
      ? eviction.stopped({
          containerName: txt(r.containerName),
          stop: txt(r.stop),
          remove: txt(r.remove),
          ...(typeof r.downAfterRefusal === 'string' ? { downAfterRefusal: r.downAfterRefusal } : {}),
        })
      : undefined,
  confirmVramReleased: (r) => {
    if (!r) return undefined;
    const reading = vramReadingOf(r.reading);
    const used = usedClause({ usedBeforeMib: txt(r.usedBeforeMib), usedAfterMib: txt(r.usedAfterMib), reading }, txt(r.expectedMib));
    return `nvidia-smi: ${txt(r.releasedMib)} MiB back on ${txt(r.gpuUuid)} (${used}) after ${txt(r.waitedMs)} ms${byClause(reading)}`;
  },
  startServeContainer: (r, i) => {
    if (!r) return undefined;
    const gpuUuid = i?.gpu?.uuid;
    // The bring-up's own step names the GPU it pinned; a history without it says only that it did.
    const c = { containerName: txt(r.containerName), created: Boolean(r.created), gpuPinned: Boolean(r.gpuPinned) };
    if (typeof gpuUuid === 'string') return start.started(c, gpuUuid);
    return `container ${txt(r.containerName)} ${r.created ? 'created' : 'already running'}${r.gpuPinned ? ', GPU pinned' : ''}`;
  },
  waitHealthy: (r, i) => {
    if (!r) return undefined;
    const api = i?.serve?.api;
    // A serve with no HTTP was never asked for a 200: it is said to have stayed running, as its step says.
    const how = api === 'none' ? start.healthy(api, { url: txt(r.url), probes: num(r.probes) ?? 0 }) : `200 from ${txt(r.url)} after ${txt(r.probes)} probes`;
    return `${how} (${txt(r.waitedMs)} ms)`;
  },
  verifyIdentity: (r) => {
    if (!r) return undefined;
    return `/v1/models at ${txt(r.url)}: observed ${(strs(r.observed) ?? []).map((m) => `'${m}'`).join(', ')}, expected '${txt(r.expected)}'`;
  },
  readmitIfQuiesced: (r, i) => {
    if (!r) return undefined;
    const known = r.action === 'readmitted' || r.action === 'already-active' || r.action === 'no-router';
    if (r.action === 'quiesced-since') return `tier ${txt(i?.tier)} quiesced again since mark ${txt(i?.quiesceMark)}: left quiesced`;
    return known ? start.readmit(txt(i?.tier), { action: r.action ?? '', observedModel: str(r.observedModel) }) : txt(r.action);
  },
  leaseAtLeast: (r, i) =>
    r
      ? `${txt(i?.workflowId)} asked to last at least ${txt(fields(i?.terms)?.seconds)} s: ${
          r.applied ? `applied (${txt(r.how)})` : `not applied, the lease ${txt(obj(r)?.['state'])} (${txt(obj(r)?.['why'])})`
        }`
      : undefined,
  tierUse: (r, i) =>
    r
      ? `tier ${txt(i?.tier)}: ${txt(r.inFlight)} in flight, last used ${r.lastUsedAtEpochMs ? new Date(Number(r.lastUsedAtEpochMs)).toISOString() : 'never'}`
      : undefined,
  registeredSearchAttributes: (r) => (Array.isArray(r) ? `registered search attributes: ${r.join(', ') || 'none'}` : undefined),
  promoteDescribe: (r) => {
    const c = fields(r?.container);
    if (!c) return undefined;
    const unverified = fields(fields(r?.live)?.unverified);
    const live = `live mapping_version '${txt(fields(r?.live)?.mappingVersion)}'${unverified ? ` (${txt(unverified.run)}'s write, never verified)` : ''}`;
    return `container ${txt(c.name)} runs ${txt(c.image)} (restart count ${txt(c.restartCount)}); ${live}${r?.imageChanged ? '; target image differs' : ''}`;
  },
  promoteCandidate: (r) => {
    if (!r) return undefined;
    return `candidate ${txt(r.bytes)} bytes, sha256 ${txt(r.sha256).slice(0, 12)}…, mapping_version '${txt(r.mappingVersion)}'`;
  },
  promoteValidate: (r) => (r ? `${r.passed ? 'passed' : 'FAILED'}: exit ${txt(r.exitCode)} in ${txt(r.durationMs)} ms` : undefined),
  promoteBackup: (r) => {
    if (!r) return undefined;
    return r.path ? `backup ${txt(r.path)}${r.created ? '' : ' (already made by this run)'}` : 'no live config: nothing to back up';
  },
  promoteWrite: (r) => (r ? txt(r.outcome) : undefined),
  promoteRestore: (r) => (r ? txt(r.outcome) : undefined),
  promoteVerified: (r, i) => (r ? `journaled verified: sha256 ${txt(i?.sha256).slice(0, 12)}${r.journaled ? '' : ' (already)'}` : undefined),
  promoteRecreate: (r) => (r ? `recreated from ${txt(r.image)} (id ${txt(r.id).slice(0, 12)})` : undefined),
  promoteReload: (r) => (r ? `reloaded: mapping_version '${txt(r.mappingVersion)}'` : undefined),
  promoteVerify: (r) => {
    if (!r) return undefined;
    const how = `(${txt(r.polls)} polls, ${txt(r.waitedMs)} ms)`;
    return `mapping_version '${txt(r.mappingVersion)}' ${txt(r.streak)}× in a row, restart count ${txt(r.restartCount)} ${how}`;
  },
  promoteInspect: (r) => (r ? `container ${txt(r.name)} ${txt(r.status)}, restart count ${txt(r.restartCount)}` : 'no container'),
};

/** An activity this code declares: a history may name one it no longer has. */
export function isActivityName(type: string): type is ActivityName {
  return Object.hasOwn(SUMMARIES, type);
}

/** One line per activity, as an operator reads it; anything unknown is compact JSON. */
export function summarizeActivity(type: string, input: unknown, result: unknown): string {
  // The one place decoded values meet the table: each entry reads its fields as possibly missing.
  const summary = isActivityName(type) ? (SUMMARIES[type] as (result: Obj | undefined, input: Obj | undefined) => string | undefined) : undefined;
  return summary?.(obj(result), obj(input)) ?? compact(result);
}

/** A ledger update's line from its request and result, keyed by the updates' own names. */
const UPDATE_SUMMARIES: Record<string, ((request: Obj | undefined, result: Obj | undefined, tail: string) => string) | undefined> = {
  [admitUpdate.name]: (_req, res, tail) => `${decisionLine(res?.['decision'])}${slotWithAdmitLine(res?.['startSlot'])}${tail}`,
  [acquireUpdate.name]: (_req, res, tail) => `${decisionLine(res?.['decision'])}${tail}`,
  [setPhaseUpdate.name]: (request, res, tail) => {
    const req = request as Loose<LedgerPhaseArgs> | undefined;
    return `${txt(req?.serve)} → ${txt(req?.phase)}${req?.giveStartSlot === true ? `; ${slotWithPhaseLine(req.holder, ledgerIn(res))}` : ''}${tail}`;
  },
  [releaseUpdate.name]: (request, res, tail) => {
    const req = request as Loose<LedgerReleaseArgs> | undefined;
    return `${txt(req?.serve)}: ${releaseLine(res?.['released'], res?.['vramMib'])}${tail}`;
  },
  [victimReleasedUpdate.name]: (request, _res, tail) => {
    const req = request as Loose<LedgerVictimArgs> | undefined;
    return `${txt(req?.victim)}'s MiB handed to ${txt(req?.acquirer)}${tail}`;
  },
  [fenceUpdate.name]: (_req, res, tail) => `${txt(res?.['serve'])} still held by this run (${txt(res?.['phase'])})${tail}`,
  [beginStopUpdate.name]: (_req, res, tail) => `${takeLine(res)}${tail}`,
  [startSlotUpdate.name]: (request, res, tail) => {
    const req = request as Loose<LedgerStartSlotArgs> | undefined;
    return req?.take === false
      ? `${giveLine(txt(req.serve), res?.['heldBy'])}${tail}`
      : `${txt(req?.serve)}: ${slotAnswerLine(res?.['taken'], res?.['heldBy'])}${tail}`;
  },
  [abortEvictionUpdate.name]: (request, _res, tail) => `eviction for ${txt((request as Loose<LedgerAbortArgs> | undefined)?.acquirer)} abandoned${tail}`,
};

export function updateSummary(name: string, request: unknown, result: unknown, failure: FailureEvidence | undefined): string {
  if (failure) return `rejected: ${failure.message}`;
  const l = ledgerIn(result);
  const tail = l ? `; ${ledgerTotalsLine(l)}` : '';
  const summary = Object.hasOwn(UPDATE_SUMMARIES, name) ? UPDATE_SUMMARIES[name] : undefined;
  return summary ? summary(obj(request), obj(result), tail) : compact(result);
}
