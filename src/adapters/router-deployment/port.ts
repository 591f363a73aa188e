// The router deployment as the promotion activities see it: a port of our own (the Docker and
// filesystem adapter is docker-router.ts beside it), and the per-router settings the worker
// is configured with. The live config is a file in a HOST DIRECTORY bind-mounted into the router
// container (see docs/promotion.md: a directory, not the file, so an atomic rename is seen).
import type { RouterContainer } from '../../shared/contracts';

/** One router this worker may promote; from the worker's configuration, never from workflow input. */
export interface RouterTarget {
  /** Deployment name: what `--router` names and the workflow id carries. */
  name: string;
  /** The router container's name. */
  container: string;
  /** The live config on the Docker host (the worker's host); its directory is bind-mounted. */
  configPath: string;
  /** The same file as the router container sees it; the validate run mounts the candidate there. */
  containerConfigPath: string;
  /** Base URL of the router: GET /healthz, POST /admin/reload. */
  url: string;
  /** Bearer token of POST /admin/reload. Stays in the worker: never in input, result or history. */
  adminToken: string;
  /** Arguments of the validate-only run; `{config}` becomes containerConfigPath. Default `--validate-only --config {config}`. */
  validateArgs?: string[];
  validateTimeoutS?: number;
  /** Crash-loop verification window (default 30 s) and the healthz streak (default 3). */
  verifyWindowS?: number;
  healthzStreak?: number;
  /** Backups kept next to the live file (default 5). */
  backupsKept?: number;
  /** Graceful stop before a recreate (default 10 s). */
  stopTimeoutS?: number;
}

export interface ValidateRunSpec {
  /** Name of the throwaway container (one per promotion run). */
  name: string;
  image: string;
  args: string[];
  candidate: string;
  /** Host directory the candidate is staged in (the live config's, known to be visible to the daemon; by its real path). */
  stageDir: string;
  /** Where the candidate appears inside the container (the live file's in-container path). */
  containerPath: string;
  timeoutMs: number;
}

export interface ValidateRunOutcome {
  exitCode: number | null;
  output: string;
  timedOut: boolean;
  durationMs: number;
}

export interface RecreateResult {
  id: string;
  /** False when an earlier attempt of the same operation already recreated it. */
  recreated: boolean;
  /** The image reference the new container runs. */
  image: string;
}

/**
 * One line of the journal. Each effect is journaled write-ahead: `intent` before the file
 * changes, `done` once it has, so a worker killed in between leaves the intent for its retry to
 * find and complete. (Lines from before the phases count as `done`.) `verified` changes no file:
 * the run's router held the content (sha256) through its verify window.
 */
export interface JournalEntry {
  at: string;
  op: 'backup' | 'write' | 'restore' | 'verified';
  phase?: 'intent' | 'done';
  run: string;
  sha256: string;
  path?: string;
  /**
   * On a write: its run journals `verified` when the promotion succeeds, so the next promotion
   * can tell a write left unverified (its run terminated mid-verify) from one whose run predates
   * `verified` (absent: never taken for unverified).
   */
  verifies?: true;
  /** The activity attempt that wrote it (write and restore): a stale attempt is known by it (staleAttempt in src/domain/promotion.ts). */
  attempt?: number;
  /** When the activity that journaled it was first scheduled (Temporal's clock): orders runs for staleAttempt. */
  scheduledAtMs?: number;
}

export interface RouterDeployment {
  inspect(container: string): Promise<RouterContainer | undefined>;
  /**
   * The exit code of the container's last death since `sinceMs`, from the daemon's events: once a
   * restart policy has started it again, inspect reports exit code 0, and the crash's code is only there.
   */
  lastExitCode(container: string, sinceMs: number): Promise<number | undefined>;
  /** The id of a local image, or undefined when the Docker host does not have it. */
  imageId(image: string): Promise<string | undefined>;
  /** Runs the image once against the candidate, read-only and without network; always cleans up. */
  validate(spec: ValidateRunSpec, progress: (detail: unknown) => void): Promise<ValidateRunOutcome>;
  /**
   * Replaces the container by one from `image` with the same name, labels, env, command, ports,
   * mounts and restart policy (everything but the image). Idempotent per `opKey`: a container
   * already carrying it is the result of an earlier attempt and is kept (and started).
   * `image.id`, when given, is what runs if `image.ref` no longer points at it.
   */
  recreate(container: string, image: { ref: string; id?: string }, opts: { opKey: string; stopTimeoutS: number }): Promise<RecreateResult>;
  logsTail(container: string, lines: number): Promise<string>;

  // The live config file and its neighbours (backups, journal), on the worker's host. `dir` is the
  // router's config directory, by its real path: a path not directly in it, or reached through a
  // symbolic link (the directory's or its own), a non-regular file or one with several hard
  // links is refused with PermanentError UnsafeConfigPath before anything is read or written.
  readFile(dir: string, path: string): Promise<Buffer | undefined>;
  /**
   * Temp file in the same directory (named tempFilePrefix(path) + a unique tail), fsync, then
   * `beforeRename` (which may throw to give up: the temp file is removed), rename over `path`,
   * fsync the directory.
   */
  writeFileAtomic(dir: string, path: string, data: Buffer | string, mode?: number, beforeRename?: () => Promise<void>): Promise<void>;
  fileMode(dir: string, path: string): Promise<number | undefined>;
  listDir(dir: string): Promise<string[]>;
  removeFile(dir: string, path: string): Promise<void>;
  /**
   * Removes the live config: renamed aside first (to a temp file name, tempFilePrefix(path) + a
   * unique tail), then `beforeRemove` (which may throw to give up: what was moved aside is put
   * back, unless a file is there again), then the unlink of what was moved. Absent: nothing done.
   */
  removeFileFenced(dir: string, path: string, beforeRemove: () => Promise<void>): Promise<void>;
  /** Appends one line and fsyncs it, so an intent is on disk before the change it announces. */
  appendJournal(dir: string, livePath: string, entry: JournalEntry): Promise<void>;
  /** Every line so far (none when there is no journal yet). */
  readJournal(dir: string, livePath: string): Promise<JournalEntry[]>;
}

/**
 * What every temp file written on its way to `path` is named from: a later writer removes them,
 * so a rename an earlier writer checked and has not made yet (a frozen worker) can no longer land.
 */
export function tempFilePrefix(path: string): string {
  return `.${path.slice(path.lastIndexOf('/') + 1)}.tmp-`;
}

/** The journal of real effects (a backup made, a write or a restore done) next to the live file. */
export function journalPath(livePath: string): string {
  return `${livePath}.journal.jsonl`;
}
