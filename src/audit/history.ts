// Workflow histories as files: the JSON form every Temporal tool reads (`temporal workflow show
// --output json`, `historyFromJSON`, `Worker.runReplayHistories`), and the little the audit
// commands need to know about one without a server: its workflow id, type and event count.
import { readdirSync, statSync } from 'node:fs';
import { basename, join } from 'node:path';
import type { History } from '@temporalio/common/lib/proto-utils';
import { BoundedReadError, notJsonReason, readBoundedSync } from '../config/bounded-read';
import { isHistoryJson } from './events';
import type { HistoryJson } from './events';
import { historyFromJsonObject, historyToJsonObject } from './proto-json';

/** Past Temporal's own limit on a workflow's history (50 MB by default): no export is this large. */
export const MAX_HISTORY_BYTES = 64 * 1024 * 1024;

export class HistoryFileError extends Error {
  constructor(
    readonly file: string,
    /** What is wrong with the file, without its name: for a line that names it already. */
    readonly reason: string,
  ) {
    super(`${file}: ${reason}`);
  }
}

/** The SDK's own serialisation, as an object: what `audit export` writes. */
export function historyJson(history: History): HistoryJson {
  return historyToJsonObject(history) as HistoryJson;
}

/** The History object the replayer takes. */
export function historyProto(h: HistoryJson): History {
  return historyFromJsonObject(h);
}

/** Reads and checks a history file: parseable JSON, events, and loadable by the SDK's `historyFromJSON`. */
export function readHistoryFile(file: string): HistoryJson {
  return loadHistoryFile(file).json;
}

/** A history file in both forms: its JSON, and the History the replayer takes (converting it is the check that it loads). */
export function loadHistoryFile(file: string): { json: HistoryJson; history: History } {
  let text: string;
  try {
    text = readBoundedSync(file, 'a history file', MAX_HISTORY_BYTES);
  } catch (err) {
    throw new HistoryFileError(file, err instanceof BoundedReadError ? err.reason : `cannot read: ${(err as Error).message}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new HistoryFileError(file, `not JSON: ${notJsonReason(err)}`);
  }
  if (!isHistoryJson(parsed)) throw new HistoryFileError(file, 'not a workflow history (expected { "events": [ … ] } as `gpures audit export` writes it)');
  if (parsed.events.length === 0) throw new HistoryFileError(file, 'the history has no events');
  try {
    return { json: parsed, history: historyFromJsonObject(parsed) };
  } catch (err) {
    throw new HistoryFileError(file, `not loadable as a Temporal history: ${(err as Error).message}`);
  }
}

/** A file name from a workflow id: `/` becomes `__`, anything else outside [A-Za-z0-9._-] `_`. */
export function safeFileName(workflowId: string): string {
  const safe = workflowId
    .replace(/\//g, '__')
    .replace(/[^A-Za-z0-9._-]/g, '_')
    .replace(/^\.+/, '_')
    .slice(0, 180);
  return safe || '_';
}

/** Every `*.json` in the given files and directories (directories not recursed), in a stable order. */
export function historyFiles(paths: string[]): string[] {
  const out: string[] = [];
  for (const p of paths) {
    let st;
    try {
      st = statSync(p);
    } catch (err) {
      throw new HistoryFileError(p, `cannot read: ${(err as Error).message}`);
    }
    if (st.isDirectory()) {
      const names = readdirSync(p)
        .filter((n) => n.endsWith('.json'))
        .sort();
      out.push(...names.map((n) => join(p, n)));
    } else {
      out.push(p);
    }
  }
  return out;
}

/** A fallback workflow id from a file name `audit export` wrote (the inverse of safeFileName for plain ids). */
export function idFromFileName(file: string): string {
  return basename(file)
    .replace(/\.json$/, '')
    .replace(/__/g, '/');
}
