// FailedStartLogs as a directory of files, one per container name (so one per serve of a node),
// each replaced by the next failure of that serve, at most LOG_BOUNDS.failedStart.files of them
// (the oldest go first: serves taken out of the manifest leave theirs). The directory and files
// are the worker user's alone (0700, 0600): the lines are redacted, yet a serve's output may hold
// prompts, and reading them should need what reading Docker's log needs, not less.
import { chmodSync, mkdirSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { BoundedReadError, readBoundedSync } from '../../config/bounded-read';
import { LOG_BOUNDS } from '../../domain/bounds';
import type { FailedStartLog } from '../../domain/logs';
import type { FailedStartLogs } from './port';

/** A container name as Docker takes it: no '/', no leading '.', so no name picks a path outside the directory. */
const CONTAINER_NAME = /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,200}$/;
const SUFFIX = '.failed-start.json';
/** The text's bound, its metadata and JSON's escapes. */
const MAX_FILE_BYTES = 2 * LOG_BOUNDS.failedStart.bytes + 16 * 1024;

export class FailedStartFiles implements FailedStartLogs {
  readonly where: string;

  constructor(dir: string) {
    this.where = resolve(dir);
  }

  private file(container: string): string {
    if (!CONTAINER_NAME.test(container)) throw new Error(`failed start's log: not a container name: '${container}'`);
    return join(this.where, `${container}${SUFFIX}`);
  }

  keep(log: FailedStartLog): void {
    const file = this.file(log.container);
    mkdirSync(this.where, { recursive: true, mode: 0o700 });
    // Written whole, then renamed: a reader never sees half a file.
    const tmp = `${file}.${process.pid}.tmp`;
    writeFileSync(tmp, JSON.stringify(log), { mode: 0o600 });
    chmodSync(tmp, 0o600);
    renameSync(tmp, file);
    this.prune();
  }

  read(container: string): FailedStartLog | undefined {
    const file = this.file(container);
    if (!statSync(file, { throwIfNoEntry: false })) return undefined;
    const text = readBoundedSync(file, "a failed start's kept lines", MAX_FILE_BYTES);
    const parsed = parseKept(text);
    if (!parsed || parsed.container !== container) throw new BoundedReadError(file, "not a failed start's kept lines");
    return parsed;
  }

  forget(container: string): void {
    rmSync(this.file(container), { force: true });
  }

  /** The oldest files beyond the bound go. */
  private prune(): void {
    const files = readdirSync(this.where)
      .filter((f) => f.endsWith(SUFFIX))
      .map((f) => ({ f, at: statSync(join(this.where, f), { throwIfNoEntry: false })?.mtimeMs ?? 0 }))
      .sort((a, b) => b.at - a.at);
    for (const { f } of files.slice(LOG_BOUNDS.failedStart.files)) rmSync(join(this.where, f), { force: true });
  }
}

function parseKept(text: string): FailedStartLog | undefined {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof v !== 'object' || v === null) return undefined;
  const o = v as Record<string, unknown>;
  const strings = ['container', 'serve', 'workflowId', 'runId', 'end', 'text'] as const;
  if (!strings.every((k) => typeof o[k] === 'string') || typeof o['atEpochMs'] !== 'number') return undefined;
  return o as unknown as FailedStartLog;
}
