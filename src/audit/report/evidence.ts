// The model's sections, each read from what the history holds (collect.ts): outcome and steps,
// ledger before/after, the eviction's victims, observed identity, nvidia-smi, the promotion and
// what a restore brought back. The workflow's own result wins where it records a fact; the
// activities fill in what it does not.
import { callerOf } from './caller';
import { emptyLedger, formatLedger, withoutReservation } from '../../domain/ledger';
import { roomLine } from '../../domain/start-room';
import type { StartRoom } from '../../domain/start-room';
import type { HistoryJson } from '../events';
import { collect, isOf } from './collect';
import { leaseLedgerAfter, leaseOperation } from './lease';
import type { Collected } from './collect';
import type { ActivityResult, AuditReport, DrainResult, IdentityEvidence, PromotionEvidence, StepEvidence, VictimEvidence, VramReleaseResult } from './model';
import { fields, isLedgerState, isoMs, ledgerIn, num, obj, path, rootOf, str, strs, txt } from './read';
import type { Loose, Obj } from './read';

/** The outcome as the operator read it, and the workflow's own step log (a denial's admission when it has none). */
function outcomeAndSteps(c: Collected): { outcome: AuditReport['outcome']; steps: StepEvidence[] } {
  const { status, failure, res, failureDetails, events, activities } = c;
  const root = failure ? rootOf(failure) : undefined;
  const outcome: AuditReport['outcome'] =
    status === 'completed'
      ? { message: str(res?.['message']) ?? 'completed' }
      : failure
        ? {
            message: failure.message,
            ...(failure.type ? { failureType: failure.type } : {}),
            ...(str(failureDetails?.['step']) ? { failedStep: str(failureDetails?.['step']) } : {}),
            ...(failure.cause ? { cause: { type: rootOf(failure.cause).type, message: rootOf(failure.cause).message } } : {}),
          }
        : { message: status === 'running' ? `still running: the history ends at event ${events.length}` : status };
  if (root && root !== failure && !outcome.cause) outcome.cause = { type: root.type, message: root.message };

  let steps: StepEvidence[] = [];
  const stepList = res?.['steps'] ?? failureDetails?.['steps'];
  if (Array.isArray(stepList)) {
    steps = stepList.flatMap((s) => {
      const o = obj(s);
      return o && typeof o['step'] === 'string' ? [{ step: o['step'], at: str(o['at']), outcome: str(o['outcome']) ?? '' }] : [];
    });
  }
  if (!steps.length && failure?.type === 'AdmissionDenied') {
    // A denial throws before the step log is returned: the admission itself is the step.
    const admit = activities.find((x) => isOf(x, 'ledgerAdmit', 'ledgerAcquire') && x.status === 'completed');
    if (admit) steps.push({ step: 'admit', at: admit.closedAt, outcome: admit.summary });
  }
  return { outcome, steps };
}

/** Ledger lines before and after: from the result, else from the ledger states the activities (or, for the ledger itself, its updates) returned. */
function ledgerEvidence(c: Collected): AuditReport['ledger'] {
  const { id, input, serve, activities, updates, res, failureDetails } = c;
  const ledgerStates = activities.flatMap((x) => {
    const l = x.status === 'completed' ? ledgerIn(x.result) : undefined;
    return l ? [{ activity: x, state: l }] : [];
  });
  const updateStates = updates.flatMap((u) => {
    const l = ledgerIn(u.result);
    return l ? [l] : [];
  });
  let before = strs(res?.['ledgerBefore']) ?? strs(failureDetails?.['ledger']);
  // A lease's own reads all precede its bring-down: the ledger after is the bring-down's.
  let after = strs(res?.['ledgerAfter']) ?? leaseLedgerAfter(c);
  let gpuRole = str(res?.['gpuRole']);
  if (id.workflowType === 'ledgerWorkflow') {
    const li = obj(input);
    const gpu = obj(li?.['gpu']) as Parameters<typeof emptyLedger>[1] | undefined;
    const start = isLedgerState(li?.['state']) ? li['state'] : li && gpu ? emptyLedger(txt(li['node']), gpu) : undefined;
    if (start) before = formatLedger(start);
    const last = updateStates[updateStates.length - 1];
    if (last) after = formatLedger(last);
    gpuRole = str(path(li, 'gpu', 'role'));
  } else {
    const firstState = ledgerStates[0];
    if (!before && firstState) {
      // An admission's answer already holds the serve: before is that minus the serve.
      const admitted = isOf(firstState.activity, 'ledgerAdmit', 'ledgerAcquire') && path(firstState.activity.result, 'decision', 'decision') === 'admitted';
      before = formatLedger(admitted && serve ? withoutReservation(firstState.state, serve) : firstState.state);
    }
    const lastState = ledgerStates[ledgerStates.length - 1];
    if (!after && lastState) after = formatLedger(lastState.state);
    gpuRole ??= lastState?.state.gpuRole;
  }
  return { ...(gpuRole ? { gpuRole } : {}), ...(before ? { before } : {}), ...(after ? { after } : {}) };
}

/** Victims and why: the ledger's plan, then each victim's quiesce, drain, stop and VRAM release; the result's own records win. */
function evictionEvidence(c: Collected): AuditReport['eviction'] {
  const { res, done } = c;
  const decision = fields(done('ledgerAcquire')[0]?.result?.decision);
  if (decision?.decision !== 'evicting' && res?.['evictionReason'] === undefined) return undefined;
  const evicting = decision?.decision === 'evicting' ? decision : undefined;
  const planned = Array.isArray(evicting?.victims) ? evicting.victims.map((v) => fields(v) ?? {}) : [];
  const recorded = Array.isArray(res?.['victims']) ? (res['victims'] as unknown[]).map((v) => obj(v) ?? {}) : [];
  const names = [...new Set([...planned.map((v) => str(v.serve)), ...recorded.map((v) => str(v['serve']))].filter((n): n is string => Boolean(n)))];
  const victims = names.map((name): VictimEvidence => {
    const rec = recorded.find((v) => v['serve'] === name);
    const plan = planned.find((v) => v.serve === name);
    const resolved = done('resolveServe').find((x) => x.result?.serve?.name === name);
    const tier = str(rec?.['tier']) ?? str(resolved?.result?.serve?.routerTier);
    const quiesce = tier ? done('quiesceTier').find((x) => x.input?.tier === tier) : undefined;
    const drainAct = done('drainServe').find((x) => x.input?.serve?.name === name);
    const stopAct = done('stopServeContainer').find((x) => x.input?.serve === name);
    const vramAct = done('confirmVramReleased').find((x) => x.input?.victim === name);
    const drain = (obj(rec?.['drain']) ?? drainAct?.result) as DrainResult | undefined;
    const stopIssued = num(rec?.['stopIssuedAtEpochMs']) ?? num(stopAct?.result?.issuedAtEpochMs);
    const vram = (obj(rec?.['vram']) ?? vramAct?.result) as VramReleaseResult | undefined;
    const vramMib = num(rec?.['vramMib'] ?? plan?.vramMib);
    const inFlightAtQuiesce = num(rec?.['inFlightAtQuiesce'] ?? quiesce?.result?.inFlight);
    const sleep = sleepEvidence(obj(rec?.['sleep']));
    return {
      serve: name,
      ...(vramMib !== undefined ? { vramMib } : {}),
      ...(tier ? { tier } : {}),
      ...(inFlightAtQuiesce !== undefined ? { inFlightAtQuiesce } : {}),
      ...(drain ? { drain } : {}),
      ...(stopAct ? { inFlightAtStop: num(rec?.['inFlightAtStop']) ?? drain?.routerInFlightAtEnd } : {}),
      stopped: Boolean(stopAct),
      ...(stopAct ? { stop: stopAct.evidence.summary } : {}),
      ...(stopIssued !== undefined ? { stopIssuedAt: new Date(stopIssued).toISOString() } : {}),
      ...(vram ? { vram } : {}),
      ...(sleep ? { sleep } : {}),
    };
  });
  const shortfallMib = decision && 'shortfallMib' in decision ? num(decision.shortfallMib) : undefined;
  return {
    reason: str(res?.['evictionReason']) ?? str(evicting?.reason),
    ...(shortfallMib !== undefined ? { shortfallMib } : {}),
    victims,
  };
}

/** A victim's sleep as its acquisition recorded it. */
function sleepEvidence(s: Obj | undefined): VictimEvidence['sleep'] {
  if (!s) return undefined;
  const issued = num(s['issuedAtEpochMs']);
  const figures = {
    level: num(s['level']),
    waitedMs: num(s['waitedMs']),
    residualDeclaredMib: num(s['residualDeclaredMib']),
    residualSeenMib: num(s['residualSeenMib']),
  };
  return {
    ...Object.fromEntries(Object.entries(figures).filter(([, v]) => v !== undefined)),
    ...(issued !== undefined ? { issuedAt: new Date(issued).toISOString() } : {}),
    ...(str(s['fellBack']) ? { fellBack: str(s['fellBack']) } : {}),
  };
}

/** Every model identity observed: GET /v1/models by the workflow, the router's guarded readmits, restored children. */
function identityEvidence(c: Collected): IdentityEvidence[] {
  const { children, ran, done } = c;
  const identity: IdentityEvidence[] = [];
  for (const x of ran('verifyIdentity')) {
    const failed = x.evidence.failure ? rootOf(x.evidence.failure).details[0] : undefined;
    // A mismatch fails the activity: its failure's details hold what it observed.
    const r = x.result ?? obj(failed);
    if (!r) continue;
    const expected = str(r.expected) ?? str(x.input?.serve?.servedModelName);
    const observed = strs(r.observed) ?? [];
    const ok = x.evidence.status === 'completed';
    identity.push({
      serve: str(r.serve) ?? str(x.input?.serve?.name),
      by: 'v1/models',
      ...(expected ? { expected } : {}),
      observed,
      ok,
      at: x.evidence.closedAt,
    });
  }
  for (const x of done('readmitIfQuiesced')) {
    if (x.result?.action !== 'readmitted') continue;
    const m = str(x.result.observedModel);
    identity.push({ tier: str(x.input?.tier), by: 'router readmit', observed: m ? [m] : [], ok: true, at: x.evidence.closedAt });
  }
  for (const ch of children) {
    const cr = obj(ch.result);
    const observed = strs(cr?.['observedModels']);
    if (!observed) continue;
    const tier = str(cr?.['readmittedTier']);
    identity.push({ serve: str(cr?.['serve']), tier, by: cr?.['readmittedTier'] ? 'router readmit' : 'v1/models', observed, ok: true, at: ch.closedAt });
  }
  return identity;
}

/** nvidia-smi readings (a room check's with its decision), victims' VRAM release records, and the measured delta of a started serve. */
function nvidiaSmiEvidence(c: Collected): AuditReport['nvidiaSmi'] {
  const { activities, res, done } = c;
  const readings = activities
    .filter((x) => isOf(x, 'readGpu', 'measureGpu', 'readStartRoom') && x.status === 'completed' && obj(x.result))
    .map((x) => {
      // A room check's result holds its reading beside the verdict.
      const g = (isOf(x, 'readStartRoom') ? obj(x.result)?.['reading'] : x.result) as ActivityResult<'readGpu'> | undefined;
      return {
        at: x.closedAt,
        activity: x.type,
        uuid: txt(g?.uuid),
        usedMib: num(g?.usedMib) ?? 0,
        freeMib: num(g?.freeMib) ?? 0,
        totalMib: num(g?.totalMib) ?? 0,
      };
    });
  const rooms = done('readStartRoom').flatMap((x) => {
    const room = obj(x.result?.room) as StartRoom | undefined;
    const line = room ? roomLineOf(room) : undefined;
    return room && line ? [{ at: x.evidence.closedAt, serve: txt(room.serve), allowed: !(room.shortMib > 0), line }] : [];
  });
  const releases = done('confirmVramReleased').map(
    (x) => ({ ...(x.result as VramReleaseResult | undefined), victim: str(x.input?.victim) }) as VramReleaseResult & { victim?: string },
  );
  const delta = num(res?.['measuredDeltaMib']);
  const measuredDelta = delta !== undefined ? { serve: str(res?.['serve']), deltaMib: delta, declaredMib: num(res?.['vramMib']) } : undefined;
  return { readings, ...(rooms.length ? { rooms } : {}), releases, ...(measuredDelta ? { measuredDelta } : {}) };
}

/** A room check's line, the figures and which reading decided; undefined for a history's result this code cannot word. */
function roomLineOf(room: StartRoom): string | undefined {
  try {
    return roomLine(room).replace(/^no room: /, '');
  } catch {
    return undefined;
  }
}

/** A promotion's steps and backup: its result, or its failure's details, filled in from the activities. */
function promotionEvidence(c: Collected): PromotionEvidence | undefined {
  const { id, input, activities, status, res, failureDetails, done } = c;
  if (id.workflowType !== 'promoteWorkflow') return undefined;
  const src = res ?? failureDetails ?? {};
  const describe = done('promoteDescribe')[0]?.result;
  const candidate = done('promoteCandidate')[0]?.result;
  const validation = (obj(src['validation']) as Loose<ActivityResult<'promoteValidate'>> | undefined) ?? done('promoteValidate')[0]?.result;
  const backupAct = done('promoteBackup')[0]?.result;
  const i = obj(input) ?? {};
  // The first reload or recreate is the promotion's own; a rollback's come after the failure.
  const firstReload = activities.find((x) => isOf(x, 'promoteRecreate', 'promoteReload'));
  const reloadHow = str(src['reload']) ?? (firstReload ? (isOf(firstReload, 'promoteRecreate') ? 'recreated' : 'reloaded') : undefined);
  const imageChanged = src['imageChanged'] ?? describe?.imageChanged;
  const profile = str(src['profile'] ?? i['profile']);
  const candidateSha256 = str(src['candidateSha256'] ?? candidate?.sha256);
  const write = str(src['write'] ?? done('promoteWrite')[0]?.result?.outcome);
  return {
    router: str(src['router']) ?? str(i['router']),
    image: str(src['image']) ?? str(i['image']),
    previousImage: str(src['previousImage']) ?? str(fields(describe?.container)?.image),
    ...(typeof imageChanged === 'boolean' ? { imageChanged } : {}),
    mappingVersion: str(src['mappingVersion']) ?? str(candidate?.mappingVersion) ?? null,
    previousMappingVersion: str(src['previousMappingVersion']) ?? str(fields(describe?.live)?.mappingVersion) ?? null,
    ...(profile ? { profile } : {}),
    ...(candidateSha256 ? { candidateSha256 } : {}),
    ...(validation
      ? {
          validation: {
            passed: Boolean(validation.passed),
            exitCode: num(validation.exitCode) ?? null,
            durationMs: num(validation.durationMs) ?? 0,
            output: str(validation.output) ?? '',
            timedOut: Boolean(validation.timedOut),
          },
        }
      : {}),
    ...('backupPath' in src ? { backupPath: (src['backupPath'] as string | null) ?? null } : backupAct ? { backupPath: backupAct.path ?? null } : {}),
    ...(write ? { write } : {}),
    ...(reloadHow ? { reload: reloadHow } : {}),
    ...(src['observed'] !== undefined ? { observed: src['observed'] } : {}),
    ...(obj(src['verify']) ? { verify: obj(src['verify']) } : {}),
    ...(obj(src['rollback']) ? { rollback: obj(src['rollback']) } : {}),
    outcome:
      status === 'completed'
        ? (str(src['outcome']) ?? 'completed')
        : obj(src['rollback'])
          ? path(src, 'rollback', 'ok')
            ? 'failed, rolled back'
            : 'failed, ROLLBACK FAILED'
          : status,
  };
}

/** Serves a bring-down --restore brought back. */
function restoredOf(c: Collected): AuditReport['restored'] {
  const restored = c.res?.['restored'];
  if (!Array.isArray(restored)) return [];
  return restored.flatMap((r) => {
    const o = obj(r);
    if (!o) return [];
    const observedModels = strs(o['observedModels']);
    const one = { serve: txt(o['serve']), workflowId: txt(o['workflowId']), ok: Boolean(o['ok']), message: txt(o['message']) };
    return [{ ...one, ...(observedModels ? { observedModels } : {}) }];
  });
}

/** History → the report's model. Pure: no I/O. */
export function buildReport(h: HistoryJson, fallbackId?: string): AuditReport {
  const c = collect(h, fallbackId);
  const { id, events, startedAttrs, input, parent, serve, status, closedAt, children, updates, activities, patches } = c;
  const { outcome, steps } = outcomeAndSteps(c);
  const eviction = evictionEvidence(c);
  const promotion = promotionEvidence(c);
  return {
    workflow: {
      workflowId: id.workflowId,
      ...(id.runId ? { runId: id.runId } : {}),
      type: id.workflowType,
      taskQueue: str(path(startedAttrs, 'taskQueue', 'name')),
      startedAt: isoMs(events[0]?.eventTime),
      ...(closedAt ? { closedAt } : {}),
      status,
      events: events.length,
      ...(parent ? { parent } : {}),
      startedBy: callerOf(startedAttrs),
    },
    operation: leaseOperation(c),
    ...(serve ? { serve } : {}),
    input,
    outcome,
    steps,
    ledger: ledgerEvidence(c),
    ...(eviction ? { eviction } : {}),
    identity: identityEvidence(c),
    nvidiaSmi: nvidiaSmiEvidence(c),
    ...(promotion ? { promotion } : {}),
    restored: restoredOf(c),
    children,
    updates,
    activities,
    patches,
  };
}
