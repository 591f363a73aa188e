// `gpures audit replay`: recorded histories against the current workflow code, with the SDK's
// replayer (no server). A history the code can no longer reproduce is a nondeterminism: deploying
// that code would break every running workflow shaped like it, unless the change is behind
// `patched()`.
import { availableParallelism } from 'node:os';
import { basename } from 'node:path';
import { DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import { UNCOUNTED_SINKS } from '../worker/workflow-code';
import { loadWorkflowBundle } from '../worker/prebuilt-bundle';
import type { WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { eventAttributes, eventTypeName, historyIdentity } from './events';
import type { HistoryEventJson, HistoryJson } from './events';
import { historyFiles, HistoryFileError, historyProto, idFromFileName, readHistoryFile } from './history';
import { withoutLiveWorkerCosts } from './replay-costs';

export interface ReplayOutcome {
  file: string;
  workflowId: string;
  workflowType: string;
  events: number;
  ok: boolean;
  /** DeterminismViolationError, ReplayError, or HistoryFileError for a file that is not a history. */
  errorName?: string;
  error?: string;
  /** The history event the failure points at, where it could be found. */
  event?: { id: number; type: string; detail?: string };
}

export const quietLogger = {
  log: () => undefined,
  trace: () => undefined,
  debug: () => undefined,
  info: () => undefined,
  warn: () => undefined,
  error: () => undefined,
};

/** The worker logs every failed replay as an error of its own; the outcome already says it. */
export function quietReplayRuntime(): void {
  try {
    Runtime.install({
      logger: new DefaultLogger('ERROR', () => undefined),
      telemetryOptions: { logging: { filter: { core: 'ERROR', other: 'ERROR' }, forward: {} } },
    });
  } catch {
    // A runtime exists already (tests): keep its logger.
  }
}

let bundled: Promise<WorkflowBundleWithSourceMap> | undefined;

/** The workflows the worker runs (src/workflows): the build's bundle, or bundled once per process. */
export function currentWorkflowBundle(): Promise<WorkflowBundleWithSourceMap> {
  bundled ??= loadWorkflowBundle(quietLogger);
  return bundled;
}

function activityTypeOf(e: HistoryEventJson): string | undefined {
  const t = eventAttributes(e)['activityType'] as { name?: unknown } | undefined;
  return typeof t?.name === 'string' ? t.name : undefined;
}

function describeEvent(e: HistoryEventJson): { id: number; type: string; detail?: string } {
  const a = eventAttributes(e);
  const activity = activityTypeOf(e);
  const timer = typeof a['timerId'] === 'string' ? `timer ${a['timerId']}` : undefined;
  const child = (a['workflowType'] as { name?: unknown } | undefined)?.name;
  const marker = typeof a['markerName'] === 'string' ? `marker ${a['markerName']}` : undefined;
  const detail = activity
    ? `activity ${activity}${typeof a['activityId'] === 'string' ? ` (id ${a['activityId']})` : ''}`
    : (timer ?? marker ?? (typeof child === 'string' ? `workflow ${child}` : undefined));
  return { id: Number(e.eventId), type: eventTypeName(e.eventType), ...(detail ? { detail } : {}) };
}

/**
 * The event a nondeterminism message is about. Core names it by id (`event id 11`,
 * `HistoryEvent(id: 11, …)`), or by the activity type it expected, or not at all; then the
 * first command event of the history that the message quotes is the best guess.
 */
export function locateEvent(h: HistoryJson, message: string): { id: number; type: string; detail?: string } | undefined {
  const byId = /(?:event[ _]id[:= ]*|HistoryEvent\(id: ?|event #?)(\d+)/i.exec(message);
  if (byId) {
    const e = h.events.find((x) => Number(x.eventId) === Number(byId[1]));
    if (e) return describeEvent(e);
  }
  const quoted = [...message.matchAll(/'([^'\s]+)'/g)].map((m) => m[1] ?? '');
  for (const q of quoted) {
    const e = h.events.find((x) => eventTypeName(x.eventType) === 'ActivityTaskScheduled' && activityTypeOf(x) === q);
    if (e) return describeEvent(e);
  }
  return undefined;
}

/**
 * Core's own words out of the replayer's wrapping (`… Details: … Failure { message: "[TMPRL1100]
 * Nondeterminism error: …", … }`): just the `[TMPRL1100] …` sentence.
 */
export function coreMessage(s: string): string {
  const inner = /message: "((?:[^"\\]|\\.)*)"/.exec(s);
  const text = inner?.[1] ? inner[1].replace(/\\"/g, '"') : (s.split('\n')[0] ?? s);
  return text.replace(/Nondeterminism error: /, '');
}

export interface ReplayOptions {
  /** Replay against these workflows instead of src/workflows (a module path, bundled here). */
  workflowsPath?: string;
  workflowBundle?: WorkflowBundleWithSourceMap;
  /** Replayers run side by side (default: the machine's cores, at most 4). */
  lanes?: number;
}

/** Replays in parallel past this many lanes gain nothing on the boxes this runs on, and cost a thread each. */
const MAX_REPLAY_LANES = 4;

function outcomeOf(file: string, workflowId: string, history: HistoryJson, error: Error | undefined): ReplayOutcome {
  const id = historyIdentity(history, workflowId);
  const base = { file, workflowId, workflowType: id.workflowType, events: id.events };
  if (!error) return { ...base, ok: true };
  const event = locateEvent(history, error.message);
  return { ...base, ok: false, errorName: error.name, error: coreMessage(error.message), ...(event ? { event } : {}) };
}

/**
 * Replays each history, in lanes side by side (default the machine's cores, at most 4): a replayer
 * takes one history at a time, and lanes of them keep the SDK core's threads busy; without what
 * the replayer spends on a live worker's needs (replay-costs.ts). Returns each
 * history's error (undefined when it replayed), in the order given.
 */
export async function replayInLanes(
  histories: { workflowId: string; history: HistoryJson }[],
  code: { workflowsPath: string } | { workflowBundle: WorkflowBundleWithSourceMap },
  lanesAsked?: number,
): Promise<(Error | undefined)[]> {
  const errors: (Error | undefined)[] = new Array<Error | undefined>(histories.length);
  const lanes = Math.max(1, Math.min(lanesAsked ?? availableParallelism(), MAX_REPLAY_LANES, histories.length));
  // Every lane settles before the replay's costs are put back; then the first failure, if any.
  const settled = await withoutLiveWorkerCosts(() =>
    Promise.allSettled(
      Array.from({ length: lanes }, async (_, k) => {
        const mine = histories.map((h, i) => ({ ...h, i })).filter(({ i }) => i % lanes === k);
        // Histories go in one at a time and come out in the same order: pair them by position.
        let n = 0;
        const replay = Worker.runReplayHistories(
          { ...code, replayName: `gpures-audit-${k}`, sinks: UNCOUNTED_SINKS },
          mine.map((h) => ({ workflowId: h.workflowId, history: historyProto(h.history) })),
        );
        for await (const r of replay) {
          const h = mine[n++];
          if (h) errors[h.i] = r.error;
        }
      }),
    ),
  );
  const failed = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failed) throw failed.reason;
  return errors;
}

/** Replays every history in `paths` (files, or directories of `*.json`), one outcome per file, in order. */
export async function replayHistoryFiles(paths: string[], opts: ReplayOptions = {}): Promise<ReplayOutcome[]> {
  const files = historyFiles(paths);
  const loaded: { file: string; history?: HistoryJson; outcome?: ReplayOutcome; workflowId: string }[] = files.map((file) => {
    try {
      const history = readHistoryFile(file);
      return { file, history, workflowId: historyIdentity(history, idFromFileName(file)).workflowId };
    } catch (err) {
      const message = err instanceof HistoryFileError ? err.message : String(err);
      return {
        file,
        workflowId: idFromFileName(file),
        outcome: { file, workflowId: idFromFileName(file), workflowType: 'unknown', events: 0, ok: false, errorName: 'HistoryFileError', error: message },
      };
    }
  });
  const toReplay = loaded.filter((l): l is typeof l & { history: HistoryJson } => l.history !== undefined);
  const results = new Map<string, ReplayOutcome>();
  if (toReplay.length) {
    const bundleOpt = opts.workflowsPath ? { workflowsPath: opts.workflowsPath } : { workflowBundle: opts.workflowBundle ?? (await currentWorkflowBundle()) };
    const errors = await replayInLanes(
      toReplay.map((l) => ({ workflowId: l.workflowId, history: l.history })),
      bundleOpt,
      opts.lanes,
    );
    toReplay.forEach((l, i) => results.set(l.file, outcomeOf(l.file, l.workflowId, l.history, errors[i])));
  }
  return loaded.map(
    (l) =>
      l.outcome ??
      results.get(l.file) ?? {
        file: l.file,
        workflowId: l.workflowId,
        workflowType: 'unknown',
        events: l.history?.events.length ?? 0,
        ok: false,
        errorName: 'ReplayError',
        error: 'the replayer returned no result for this history',
      },
  );
}

/** `ok  <workflowId> (<type>, N events)` or `FAIL <workflowId>: <why, naming the event>`. */
export function formatReplayOutcome(o: ReplayOutcome): string {
  // The file too: a directory of recordings holds several runs under one workflow id.
  if (o.ok) return `ok  ${o.workflowId} (${o.workflowType}, ${o.events} events; ${basename(o.file)})`;
  const at = o.event ? ` [at event ${o.event.id} ${o.event.type}${o.event.detail ? `: ${o.event.detail}` : ''}]` : '';
  const kind = o.errorName === 'DeterminismViolationError' ? 'nondeterminism: ' : o.errorName === 'HistoryFileError' ? '' : `${o.errorName ?? 'error'}: `;
  return `FAIL ${o.workflowId}: ${kind}${o.error ?? '?'}${at} (${basename(o.file)})`;
}
