// `gpures audit replay`: recorded histories against the current workflow code, with the SDK's
// replayer (no server). A history the code can no longer reproduce is a nondeterminism: deploying
// that code would break every running workflow shaped like it, unless the change is behind
// `patched()`.
import { availableParallelism } from 'node:os';
import { basename } from 'node:path';
import { bundleWorkflowCode, DefaultLogger, Runtime, Worker } from '@temporalio/worker';
import { UNCOUNTED_SINKS } from '../worker/workflow-code';
import { loadWorkflowBundle } from '../worker/prebuilt-bundle';
import type { InjectedSinks, WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { eventAttributes, eventTypeName, historyIdentity } from './events';
import type { HistoryEventJson, HistoryJson } from './events';
import type { History } from '@temporalio/common/lib/proto-utils';
import { historyFiles, HistoryFileError, historyProto, idFromFileName, loadHistoryFile } from './history';
import { withoutLiveWorkerCosts } from './replay-costs';
import { reapReplayProcesses, replayProcessCount, startReplayProcess } from './replay-processes';
import type { ReplayProcess } from './replay-processes';
import { ReplayQueue } from './replay-queue';
import type { ReplaySource } from './replay-queue';
import { updateAnswersChanged, UpdateAnswerChanged } from './update-answers';
import type { UpdateAnswer, UpdateAnswerSinks } from '../shared/update-answers';

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

/**
 * The worker logs every failed replay as an error of its own; the outcome already says it. A
 * replay has nothing to drain: Ctrl-C (or SIGTERM) ends it at once, not after a second one.
 */
export function quietReplayRuntime(): void {
  try {
    Runtime.install({
      shutdownSignals: [],
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

function eventById(h: HistoryJson, id: number): { id: number; type: string; detail?: string } | undefined {
  const e = h.events.find((x) => Number(x.eventId) === id);
  return e ? describeEvent(e) : undefined;
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
  /** Replayers run side by side in this process (default: the machine's cores, at most 4). */
  lanes?: number;
  /** Processes that replay: 1 is this one, more are replayer processes this one hands histories to (default: one per core, at most 4, and per HISTORIES_PER_REPLAY_PROCESS histories). */
  processes?: number;
}

/** Replays in parallel past this many lanes gain nothing on the boxes this runs on, and cost a thread each. */
const MAX_REPLAY_LANES = 4;

function outcomeOf(file: string, workflowId: string, history: HistoryJson, replayed: Error | undefined, answers: readonly UpdateAnswer[]): ReplayOutcome {
  const id = historyIdentity(history, workflowId);
  const base = { file, workflowId, workflowType: id.workflowType, events: id.events };
  const error = replayed ?? updateAnswersChanged(history, answers);
  if (!error) return { ...base, ok: true };
  const event = error instanceof UpdateAnswerChanged ? eventById(history, error.eventId) : locateEvent(history, error.message);
  return { ...base, ok: false, errorName: error.name, error: coreMessage(error.message), ...(event ? { event } : {}) };
}

/**
 * One history as a replayer takes it: the History to replay and how its outcome reads once
 * replayed (the replayer's error, and the Update answers the replay gave again); or its outcome at
 * once (a file that is not a history).
 */
export type Prepared<T> = { workflowId: string; history: History; outcome: Replayed<T> } | { settled: T };
export type Replayed<T> = (error: Error | undefined, answers: readonly UpdateAnswer[]) => T;

/** A history file prepared where it is replayed: read, and converted once (the conversion is the check that it loads). */
export function prepareFile(file: string): Prepared<ReplayOutcome> {
  try {
    const { json, history } = loadHistoryFile(file);
    const workflowId = historyIdentity(json, idFromFileName(file)).workflowId;
    return { workflowId, history, outcome: (error, answers) => outcomeOf(file, workflowId, json, error, answers) };
  } catch (err) {
    // Its line names the file already (formatReplayOutcome).
    return { settled: fileNotReplayed(file, 'HistoryFileError', err instanceof HistoryFileError ? err.reason : String(err)) };
  }
}

const asError = (err: unknown): Error => (err instanceof Error ? err : new Error(String(err)));

/** A history's outcome when it was not replayed: its replayer failed, died or stalled while it held it. */
export type Failed<T> = (i: number, error: Error) => T;

/** A lane's replayer failed: the histories it held have no outcome from it. */
export class LaneFailed extends Error {
  constructor(
    readonly reason: unknown,
    readonly held: number[],
  ) {
    super(asError(reason).message);
  }
}

/** A replayer: the SDK's, fed from `source` one history at a time until it has none left. Rejects with LaneFailed. */
export async function replayLane<T>(
  source: ReplaySource<T>,
  prepare: (i: number) => Prepared<T>,
  failed: Failed<T>,
  workflowBundle: WorkflowBundleWithSourceMap,
  name: string,
): Promise<void> {
  // Histories go in one at a time and come out in the same order (the SDK replays one, yields its
  // result, then takes the next): pair them by position, and check the pairing by workflow id.
  const taken: { i: number; workflowId: string; outcome: Replayed<T> }[] = [];
  // The Updates each run answered again, by run id, until its result comes out.
  const answered = new Map<string, UpdateAnswer[]>();
  const updateAnswers: InjectedSinks<UpdateAnswerSinks>['updateAnswers'] = {
    replayed: {
      fn: (info, answer) => {
        const list = answered.get(info.runId) ?? [];
        if (!list.length) answered.set(info.runId, list);
        list.push(answer);
      },
      callDuringReplay: true,
    },
  };
  const settle = (i: number, outcome: () => T) => {
    let o: T;
    try {
      o = outcome();
    } catch (err) {
      o = failed(i, asError(err));
    }
    source.settle(i, o);
  };
  async function* histories() {
    for (let i = await source.take(); i !== undefined; i = await source.take()) {
      let p: Prepared<T>;
      try {
        p = prepare(i);
      } catch (err) {
        source.settle(i, failed(i, asError(err)));
        continue;
      }
      if ('settled' in p) {
        source.settle(i, p.settled);
        continue;
      }
      taken.push({ i, workflowId: p.workflowId, outcome: p.outcome });
      yield { workflowId: p.workflowId, history: p.history };
    }
  }
  try {
    for await (const r of Worker.runReplayHistories({ workflowBundle, replayName: name, sinks: { ...UNCOUNTED_SINKS, updateAnswers } }, histories())) {
      const t = taken[0];
      if (!t || t.workflowId !== r.workflowId) throw new Error(`the replayer answered for ${r.workflowId} where ${t?.workflowId ?? 'no history'} was replayed`);
      taken.shift();
      const answers = answered.get(r.runId) ?? [];
      answered.delete(r.runId);
      settle(t.i, () => t.outcome(r.error, answers));
    }
  } catch (err) {
    throw new LaneFailed(
      err,
      taken.map((t) => t.i),
    );
  }
}

/**
 * Replays what `queue` holds in lanes side by side in this process (default the machine's cores,
 * at most 4), without what the replayer spends on a live worker's needs (replay-costs.ts), until
 * every history in it is settled, by these lanes or by replayer processes taking from it too.
 */
async function replayInThisProcess<T>(
  queue: ReplayQueue<T>,
  prepare: (i: number) => Prepared<T>,
  failed: Failed<T>,
  workflowBundle: WorkflowBundleWithSourceMap,
  lanesAsked?: number,
): Promise<void> {
  const lanes = Math.max(1, Math.min(lanesAsked ?? availableParallelism(), MAX_REPLAY_LANES, queue.count));
  const lane = async (k: number) => {
    const source = queue.as(`lane ${k}`);
    try {
      await replayLane(source, prepare, failed, workflowBundle, `gpures-audit-lane-${k}`);
    } catch (err) {
      // What it held is that failure's, so no other replayer waits on it; the replay fails with it.
      if (!(err instanceof LaneFailed)) throw err;
      for (const i of err.held) source.settle(i, failed(i, asError(err.reason)));
      throw err.reason;
    }
  };
  // Every lane settles before the replay's costs are put back; then the first failure, if any.
  const settled = await withoutLiveWorkerCosts(() => Promise.allSettled(Array.from({ length: lanes }, (_, k) => lane(k + 1))));
  const failure = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failure) throw failure.reason;
}

/** Each history's error (undefined when it replayed), in the order given, replayed in this process's lanes. */
export async function replayInLanes(
  items: readonly { workflowId: string; history: HistoryJson }[],
  workflowBundle: WorkflowBundleWithSourceMap,
  lanes?: number,
): Promise<(Error | undefined)[]> {
  const queue = new ReplayQueue<Error | undefined>(items.length);
  const prepare = (i: number): Prepared<Error | undefined> => {
    const item = items[i] as { workflowId: string; history: HistoryJson };
    return {
      workflowId: item.workflowId,
      history: historyProto(item.history),
      outcome: (error, answers) => error ?? updateAnswersChanged(item.history, answers),
    };
  };
  await replayInThisProcess(queue, prepare, (_, error) => error, workflowBundle, lanes);
  return queue.outcomes;
}

/** A file's outcome when it was not replayed: not a history (HistoryFileError), or no replayer could finish it (ReplayerError). */
export function fileNotReplayed(file: string, errorName: 'HistoryFileError' | 'ReplayerError', error: string): ReplayOutcome {
  return { file, workflowId: idFromFileName(file), workflowType: 'unknown', events: 0, ok: false, errorName, error };
}

/**
 * Each file's outcome, in order: replayed in this process's lanes, or, for many files, in replayer
 * processes (replay-processes.ts; by default one per core and per HISTORIES_PER_REPLAY_PROCESS
 * files) taking from one queue; `settledBy` names the replayer of each (`lane K`, `process K`).
 */
export async function replayFiles(
  files: readonly string[],
  workflowBundle: WorkflowBundleWithSourceMap,
  opts: { lanes?: number; processes?: number; onSettled?: (i: number, by: string) => void } = {},
): Promise<{ outcomes: ReplayOutcome[]; settledBy: string[] }> {
  const queue = new ReplayQueue<ReplayOutcome>(files.length, opts.onSettled);
  const failed = (i: number, error: Error) => fileNotReplayed(files[i] as string, 'ReplayerError', error.message);
  const others: ReplayProcess[] = [];
  const count = replayProcessCount(files.length, opts.processes);
  let ended = false;
  try {
    // With replayer processes this one only hands out histories: it runs with whatever cap on V8's
    // young generation it was given (bin/gpures's 1 MiB, for the worker's RSS), under which a
    // replay spends a fifth of its thread collecting, and a replayer process runs without it
    // (replayerFlags). 660 histories on 2 cores: 8.95 s in two replayers against 10.63 in this
    // process and one (docs/performance.md, Audit replay).
    for (let k = 1; count > 1 && k <= count; k++) {
      others.push(startReplayProcess(queue, files, workflowBundle.code, `process ${k}`, failed));
    }
    // Every history settled, or every replayer process gone: what none could finish (every one of
    // them died, or none started) is replayed here.
    await Promise.race([Promise.all(others.map((p) => p.exited)), queue.done]);
    if (!queue.settled) await replayInThisProcess(queue, (i) => prepareFile(files[i] as string), failed, workflowBundle, opts.lanes);
    ended = true;
  } finally {
    // Told to end once every history is settled; a replayer stuck past that, or left by this process's failed replay, is killed.
    await reapReplayProcesses(others, ended);
  }
  return { outcomes: queue.outcomes, settledBy: queue.settledBy };
}

/** Replays every history in `paths` (files, or directories of `*.json`), one outcome per file, in order. */
export async function replayHistoryFiles(paths: string[], opts: ReplayOptions = {}): Promise<ReplayOutcome[]> {
  const files = historyFiles(paths);
  if (!files.length) return [];
  const workflowBundle = opts.workflowsPath
    ? await bundleWorkflowCode({ workflowsPath: opts.workflowsPath, logger: quietLogger })
    : (opts.workflowBundle ?? (await currentWorkflowBundle()));
  return (await replayFiles(files, workflowBundle, opts)).outcomes;
}

/** `ok  <workflowId> (<type>, N events)` or `FAIL <workflowId>: <why, naming the event>`. */
export function formatReplayOutcome(o: ReplayOutcome): string {
  // The file too: a directory of recordings holds several runs under one workflow id.
  if (o.ok) return `ok  ${o.workflowId} (${o.workflowType}, ${o.events} events; ${basename(o.file)})`;
  const at = o.event ? ` [at event ${o.event.id} ${o.event.type}${o.event.detail ? `: ${o.event.detail}` : ''}]` : '';
  const kind = o.errorName === 'DeterminismViolationError' ? 'nondeterminism: ' : o.errorName === 'HistoryFileError' ? '' : `${o.errorName ?? 'error'}: `;
  return `FAIL ${o.workflowId}: ${kind}${o.error ?? '?'}${at} (${basename(o.file)})`;
}
