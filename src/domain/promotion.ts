// Router promotion rules that need no I/O: input checks, backup file names and which backups to
// keep. PURE, with no package imports: the workflow imports it. Reading a config's
// mapping_version takes a TOML parser, so it lives in src/config/mapping-version.ts.

import { IMAGE_REFERENCE_RULE, isImageReference } from './bounds';

/** The fields of a promotion's input (src/shared/promotion.ts checks its PromoteInput names no other). */
export type PromoteInputField = 'router' | 'config' | 'image' | 'profile' | 'validateOnly' | 'verify';

/** The router deployment a worker promotes when its configuration names none. */
export const DEFAULT_ROUTER = 'router';

/** Largest candidate config accepted (it travels through workflow history). */
export const MAX_CONFIG_BYTES = 1024 * 1024;

/** Bounds of the verify step and of the backups kept, for a promotion's input and the worker's environment alike. */
export const MAX_VERIFY_WINDOW_S = 3600;
export const MAX_HEALTHZ_STREAK = 100;
export const MAX_BACKUPS_KEPT = 1000;

/** A text's size in UTF-8, as it is written to the config file (no TextEncoder: the workflow imports this). */
export function utf8Bytes(text: string): number {
  let bytes = 0;
  for (const ch of text) {
    const cp = ch.codePointAt(0) ?? 0;
    bytes += cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
  }
  return bytes;
}

export const PROMOTION_DEFAULTS = {
  verifyWindowS: 30,
  healthzStreak: 3,
  backupsKept: 5,
  validateTimeoutS: 60,
  stopTimeoutS: 10,
} as const;

/** A router deployment's name, as a promotion names it (and GPURES_ROUTER_NAME gives it). */
export const ROUTER_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

/** Every problem with a promotion input, as the operator reads it; empty when it is usable. */
export function promoteInputProblems(input: unknown): string[] {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) return ['input must be one JSON object { router, config, image, ... }'];
  const i = input as Partial<Record<PromoteInputField, unknown>>;
  const problems: string[] = [];
  if (typeof i.router !== 'string' || !ROUTER_NAME_PATTERN.test(i.router))
    problems.push(`router: a deployment name such as "router" (got ${JSON.stringify(i.router)})`);
  if (!isImageReference(i.image)) problems.push(`image: ${IMAGE_REFERENCE_RULE} (got ${JSON.stringify(i.image)})`);
  const c = i.config as { path?: unknown; content?: unknown } | undefined;
  if (typeof c !== 'object' || c === null) {
    problems.push('config: { "content": "..." } or { "path": "/file/on/the/worker" } is required');
  } else {
    const hasPath = c.path !== undefined;
    const hasContent = c.content !== undefined;
    if (hasPath === hasContent) problems.push('config: exactly one of content and path');
    if (hasPath && (typeof c.path !== 'string' || c.path === '')) problems.push('config.path: a non-empty string');
    if (hasContent && (typeof c.content !== 'string' || c.content.trim() === '')) problems.push('config.content: a non-empty string');
    if (typeof c.content === 'string' && utf8Bytes(c.content) > MAX_CONFIG_BYTES) problems.push(`config.content: larger than ${MAX_CONFIG_BYTES} bytes`);
  }
  if (i.profile !== undefined && typeof i.profile !== 'string') problems.push('profile: a string');
  if (i.validateOnly !== undefined && typeof i.validateOnly !== 'boolean') problems.push('validateOnly: true or false');
  const v = i.verify as { windowS?: unknown; streak?: unknown } | undefined;
  if (v !== undefined) {
    if (typeof v !== 'object' || v === null) problems.push('verify: { windowS?, streak? }');
    else {
      if (v.windowS !== undefined && !(typeof v.windowS === 'number' && v.windowS >= 0 && v.windowS <= MAX_VERIFY_WINDOW_S))
        problems.push(`verify.windowS: seconds in 0..${MAX_VERIFY_WINDOW_S}`);
      if (v.streak !== undefined && !(typeof v.streak === 'number' && Number.isInteger(v.streak) && v.streak >= 1 && v.streak <= MAX_HEALTHZ_STREAK))
        problems.push(`verify.streak: an integer in 1..${MAX_HEALTHZ_STREAK}`);
    }
  }
  return problems;
}

function pad(n: number, width = 2): string {
  return String(n).padStart(width, '0');
}

/** `20261130T051120123Z`: sorts chronologically as text. */
export function backupStamp(epochMs: number): string {
  const d = new Date(epochMs);
  return (
    `${d.getUTCFullYear()}${pad(d.getUTCMonth() + 1)}${pad(d.getUTCDate())}` +
    `T${pad(d.getUTCHours())}${pad(d.getUTCMinutes())}${pad(d.getUTCSeconds())}${pad(d.getUTCMilliseconds(), 3)}Z`
  );
}

/** `router.toml.20261130T051120123Z.<key>.bak`, next to the live file; key: 12 hex digits per run. */
export function backupFileName(liveBase: string, epochMs: number, runKey: string): string {
  return `${liveBase}.${backupStamp(epochMs)}.${runKey}.bak`;
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}

/** The run key of a backup of `liveBase`, or undefined when `name` is not one. */
export function backupRunKey(liveBase: string, name: string): string | undefined {
  const m = new RegExp(`^${escapeRegExp(liveBase)}\\.\\d{8}T\\d{9}Z\\.([0-9a-f]{12})\\.bak$`).exec(name);
  return m?.[1];
}

/** Backups to delete so the newest `keep` remain; the backup of `protectKey` is never among them. */
export function backupsToPrune(liveBase: string, names: string[], keep: number, protectKey: string): string[] {
  const backups = names.filter((n) => backupRunKey(liveBase, n) !== undefined).sort();
  const excess = backups.length - Math.max(1, keep);
  if (excess <= 0) return [];
  return backups.filter((n) => backupRunKey(liveBase, n) !== protectKey).slice(0, excess);
}

/** A line of the promotion journal as the rules below read it (the adapter's JournalEntry). */
export interface JournalLine {
  at: string;
  op: string;
  phase?: 'intent' | 'done';
  run: string;
  sha256: string;
  path?: string;
  /** On a write: its run journals `verified` once the router holds it, so a write without one was never verified. */
  verifies?: boolean;
  /** On a write or a restore: the activity attempt that made it; absent in lines from before attempts were journaled. */
  attempt?: number;
  /** When the step that journaled it was scheduled (Temporal's clock); absent in lines from before. */
  scheduledAtMs?: number;
}

/** Another promotion run's write that is live and was never verified, and the config before it. */
export interface UnverifiedWrite {
  /** `<workflow id>/<run id>` of the run that wrote it. */
  run: string;
  writtenAt: string;
  /** Its backup: the live config before its write (null: there was none). */
  backupPath: string | null;
  backupSha256: string | null;
}

/**
 * Whether the live file (by sha256) is a promotion's write that nothing verified since: the last
 * journaled write of this content is a write whose run promised to journal `verified` (a run
 * terminated mid-verify never does, and runs no rollback), and no `verified` of this content
 * follows it. A write from before the journal knew `verified` (no `verifies`) never counts: its
 * run may well have succeeded, and blocking on it would lock the operator out for good. A live
 * file that matches no journaled write is someone's own edit, or a config no promotion wrote.
 * Restores are passed over: a restore puts back the config before its run as it was, so one that
 * put an unverified write back (the rollback of a promotion that failed on its way back from it)
 * leaves it unverified.
 */
export function unverifiedWriteOf(journal: readonly JournalLine[], liveSha256: string | null): UnverifiedWrite | undefined {
  if (liveSha256 === null) return undefined;
  let at = -1;
  journal.forEach((e, i) => {
    if (e.op === 'write' && e.sha256 === liveSha256) at = i;
  });
  const w = journal[at];
  if (!w || w.verifies !== true) return undefined;
  if (journal.slice(at + 1).some((e) => e.op === 'verified' && e.sha256 === liveSha256)) return undefined;
  const backup = journal.find((e) => e.op === 'backup' && e.run === w.run && e.path !== undefined);
  return { run: w.run, writtenAt: w.at, backupPath: backup?.path ?? null, backupSha256: backup?.sha256 ?? null };
}

/**
 * The unverified write a promotion of `candidateSha256` must refuse to start from, if any. A
 * candidate equal to that run's backup is the way back (the config before it, put live and
 * verified by this promotion), so it goes ahead.
 */
export function unverifiedLiveToRefuse(unverified: UnverifiedWrite | undefined, candidateSha256: string): UnverifiedWrite | undefined {
  if (!unverified) return undefined;
  return unverified.backupSha256 !== null && unverified.backupSha256 === candidateSha256 ? undefined : unverified;
}

/** What staleAttempt reads of a journal line. */
export type StaleAttemptLine = Pick<JournalLine, 'op' | 'run' | 'attempt' | 'scheduledAtMs'>;

/**
 * Why an attempt to write or restore the live config is stale, from the journal; undefined when
 * it is not. A worker that froze (SIGSTOP, a paused VM) past the heartbeat timeout goes on later
 * with what it checked before: by then Temporal has retried the step on another worker, the run
 * may have rolled back, or a later promotion begun, and the live file it checked may be exactly
 * what it expected again (a rollback puts the backup back). Stale: a later attempt of this step
 * has journaled, a write whose run has journaled a restore, or any run whose first line comes
 * after this run's first (promotions of a router run one at a time: this one is over). A line of
 * an older run appearing late is that run's stale attempt, and does not make this one stale, even
 * when it is that run's first (lines carry when their step was scheduled: scheduledAtMs).
 */
export function staleAttempt(lines: readonly StaleAttemptLine[], self: { op: 'write' | 'restore'; run: string; attempt: number }): string | undefined {
  const later = lines.find((l) => l.run === self.run && l.op === self.op && (l.attempt ?? 0) > self.attempt);
  if (later) return `attempt ${later.attempt ?? '?'} of this ${self.op} took over from attempt ${self.attempt}`;
  if (self.op === 'write' && lines.some((l) => l.run === self.run && l.op === 'restore')) return 'this promotion has since restored its backup';
  // Each run's first line, and the earliest time a step of it was scheduled: an older run's first
  // line may come late (terminated while its only attempt that would journal was frozen), so where
  // both runs' lines say when their steps were scheduled, that orders them, not where lines landed.
  const firstOf = new Map<string, { at: number; scheduledAtMs?: number }>();
  lines.forEach((l, i) => {
    const f = firstOf.get(l.run) ?? { at: i };
    if (l.scheduledAtMs !== undefined && (f.scheduledAtMs === undefined || l.scheduledAtMs < f.scheduledAtMs)) f.scheduledAtMs = l.scheduledAtMs;
    firstOf.set(l.run, f);
  });
  const mine = firstOf.get(self.run) ?? { at: lines.length };
  const startsAfter = (o: { at: number; scheduledAtMs?: number }) =>
    o.scheduledAtMs !== undefined && mine.scheduledAtMs !== undefined ? o.scheduledAtMs > mine.scheduledAtMs : o.at > mine.at;
  const newer = [...firstOf].find(([run, f]) => run !== self.run && startsAfter(f));
  return newer ? `a later promotion (${newer[0]}) has journaled since` : undefined;
}
