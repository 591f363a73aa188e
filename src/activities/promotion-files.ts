// The live config's files during a promotion (docs/promotion.md): every access confined to its
// directory, a write-ahead journal beside it, and the three steps that change it (backup, write,
// restore). Each step is idempotent through the journal and the backup's run key, so a worker
// killed between a change and its journal line leaves what the retry needs to finish the entry.
import { createHash } from 'node:crypto';
import { basename, dirname, join, resolve as resolvePath } from 'node:path';
import { mappingVersionOf } from '../config/mapping-version';
import { backupFileName, backupRunKey, backupsToPrune, PROMOTION_DEFAULTS, staleAttempt } from '../domain/promotion';
import { Failure } from '../shared/failures';
import type { BackupResult } from '../shared/contracts';
import type { JournalEntry, RouterDeployment, RouterTarget } from '../adapters/router-deployment/port';
import { tempFilePrefix } from '../adapters/router-deployment/port';
import { nonRetryable, permanentAsFailure } from './failure';
import { activityContext } from './heartbeat';
import { holderOf } from '../domain/fence';

export interface RunRef {
  workflowId: string;
  runId: string;
}

export function sha256(data: Buffer | string): string {
  return createHash('sha256').update(data).digest('hex');
}

/** 12 hex digits naming one workflow run (id + run id) in backup and container names. */
export function runKey(run: RunRef): string {
  return sha256(holderOf(run.workflowId, run.runId)).slice(0, 12);
}

/** A journal entry but its time and phase: what one effect of one run is. */
type Effect = Omit<JournalEntry, 'at' | 'phase'>;

/** The journal of one live config, reached only inside its directory (see configFilesOf). */
interface Journal {
  journal(entry: JournalEntry): Promise<void>;
  readJournal(): Promise<JournalEntry[]>;
}

/** This run's lines for the effect: whether an earlier attempt announced it, and whether one finished it. */
async function journalState(j: Journal, effect: Effect): Promise<{ intent: boolean; done: boolean }> {
  const lines = (await j.readJournal()).filter((e) => e.run === effect.run && e.op === effect.op && e.sha256 === effect.sha256);
  return { intent: lines.some((e) => e.phase === 'intent'), done: lines.some((e) => (e.phase ?? 'done') === 'done') };
}

/**
 * The effect journaled write-ahead: its intent (unless an earlier attempt of this run left one),
 * the effect, then its completion. A worker killed between the change and the last line leaves
 * the intent, which the retry finds (completeJournaled) instead of losing the line.
 */
async function journaled(j: Journal, effect: Effect, change: () => Promise<void>): Promise<void> {
  if (!(await journalState(j, effect)).intent) await j.journal({ at: new Date().toISOString(), phase: 'intent', ...effect });
  await change();
  await j.journal({ at: new Date().toISOString(), phase: 'done', ...effect });
}

/** A change of the live file (a write, a restore) by one attempt of its step. */
type LiveEffect = Effect & { op: 'write' | 'restore'; attempt: number };

/** This activity's attempt (1 outside one): the journal's lines of a live-file change carry it. */
const currentAttempt = (): number => activityContext()?.info.attempt ?? 1;

/**
 * A change of the live file fenced against this attempt being stale (staleAttempt): a worker that
 * froze past its heartbeat timeout and goes on after the step was retried elsewhere, the run
 * rolled back or a later promotion begun. This attempt's intent is journaled first, then the temp
 * files of earlier writers are removed (a rename one of them checked and has not made yet fails),
 * then the journal is checked, before the change and again between the temp file and its rename.
 * A writer that checks after this intent sees it; one that checked before has its temp file removed.
 */
async function fencedLiveChange(
  files: ConfigFiles,
  livePath: string,
  effect: LiveEffect,
  change: (fence: () => Promise<void>) => Promise<void>,
): Promise<void> {
  await files.journal({ at: new Date().toISOString(), phase: 'intent', ...effect });
  const prefix = tempFilePrefix(livePath);
  for (const name of await files.list()) if (name.startsWith(prefix)) await files.remove(join(files.dir, name));
  const fence = async () => {
    const why = staleAttempt(await files.readJournal(), effect);
    if (why) {
      throw nonRetryable(
        Failure.LiveConfigConflict,
        `${livePath}: this ${effect.op} (attempt ${effect.attempt} of ${effect.run}) is stale: ${why}; not changing the live config`,
      );
    }
  };
  await fence();
  await change(fence);
  await files.journal({ at: new Date().toISOString(), phase: 'done', ...effect });
}

/** A retry that finds the effect in place: finishes an earlier attempt's entry. True when this run had announced it (it made the change). */
async function completeJournaled(j: Journal, effect: Effect): Promise<boolean> {
  const state = await journalState(j, effect);
  if (state.intent && !state.done) await j.journal({ at: new Date().toISOString(), phase: 'done', ...effect });
  return state.intent;
}

/**
 * A line with when its step was first scheduled (Temporal's clock, the same for every worker):
 * staleAttempt orders runs by it, since a frozen attempt of an older run may append its run's
 * first line after a later run's.
 */
function withScheduledAt(entry: JournalEntry): JournalEntry {
  const scheduledAtMs = activityContext()?.info.scheduledTimestampMs;
  return scheduledAtMs === undefined || entry.scheduledAtMs !== undefined ? entry : { ...entry, scheduledAtMs };
}

/**
 * The live config's directory and its files, each call confined to it (UnsafeConfigPath: a
 * symbolic link, a path elsewhere, see RouterDeployment) and that refusal made non-retryable.
 */
export function configFilesOf(d: RouterDeployment, t: RouterTarget) {
  const dir = resolvePath(dirname(t.configPath));
  return {
    dir,
    read: (path: string) => permanentAsFailure(() => d.readFile(dir, path)),
    mode: (path: string) => permanentAsFailure(() => d.fileMode(dir, path)),
    write: (path: string, data: Buffer | string, mode: number, beforeRename?: () => Promise<void>) =>
      permanentAsFailure(() => d.writeFileAtomic(dir, path, data, mode, beforeRename)),
    list: () => permanentAsFailure(() => d.listDir(dir)),
    remove: (path: string) => permanentAsFailure(() => d.removeFile(dir, path)),
    removeFenced: (path: string, beforeRemove: () => Promise<void>) => permanentAsFailure(() => d.removeFileFenced(dir, path, beforeRemove)),
    journal: (entry: JournalEntry) => permanentAsFailure(() => d.appendJournal(dir, t.configPath, withScheduledAt(entry))),
    readJournal: () => permanentAsFailure(() => d.readJournal(dir, t.configPath)),
  };
}

export type ConfigFiles = ReturnType<typeof configFilesOf>;

const journalRun = (run: RunRef) => holderOf(run.workflowId, run.runId);

/** The steps that change the live config; `target` and `filesOf` are the promotion factory's (they refuse an unknown router). */
export function createConfigFileSteps(of: { target: (name: string) => RouterTarget; filesOf: (t: RouterTarget) => ConfigFiles }) {
  const { target, filesOf } = of;
  return {
    /** A timestamped copy next to the live file, one per run: a retried attempt returns the one it made. */
    async promoteBackup(input: { router: string; run: RunRef }): Promise<BackupResult> {
      const t = target(input.router);
      const files = filesOf(t);
      const dir = files.dir;
      const base = basename(t.configPath);
      const key = runKey(input.run);
      const keep = t.backupsKept ?? PROMOTION_DEFAULTS.backupsKept;
      const names = await files.list();
      const mine = names.find((n) => backupRunKey(base, n) === key);
      if (mine) {
        const data = await files.read(join(dir, mine));
        if (data) {
          await completeJournaled(files, { op: 'backup', run: journalRun(input.run), sha256: sha256(data), path: join(dir, mine) });
          const pruned = backupsToPrune(base, names, keep, key);
          for (const p of pruned) await files.remove(join(dir, p));
          return { path: join(dir, mine), sha256: sha256(data), mappingVersion: mappingVersionOf(data.toString('utf8')) ?? null, created: false, pruned };
        }
      }
      const live = await files.read(t.configPath);
      if (!live) return { path: null, sha256: null, mappingVersion: null, created: false, pruned: [] };
      const name = backupFileName(base, Date.now(), key);
      const path = join(dir, name);
      const digest = sha256(live);
      const mode = (await files.mode(t.configPath)) ?? 0o644;
      await journaled(files, { op: 'backup', run: journalRun(input.run), sha256: digest, path }, () => files.write(path, live, mode));
      const pruned = backupsToPrune(base, [...names, name], keep, key);
      for (const p of pruned) await files.remove(join(dir, p));
      return { path, sha256: digest, mappingVersion: mappingVersionOf(live.toString('utf8')) ?? null, created: true, pruned };
    },

    /**
     * Atomic write of the candidate. Already live: a no-op. Otherwise the live file must still be
     * what was backed up (expectSha256; null: absent), or someone else changed it meanwhile.
     */
    async promoteWrite(input: {
      router: string;
      content: string;
      expectSha256: string | null;
      run: RunRef;
      /** The run journals `verified` when it succeeds (promoteVerified); absent in runs from before. */
      journalsVerified?: boolean;
    }): Promise<{ outcome: 'written' | 'unchanged'; sha256: string }> {
      const t = target(input.router);
      const files = filesOf(t);
      const digest = sha256(input.content);
      const effect: Effect = { op: 'write', run: journalRun(input.run), sha256: digest, ...(input.journalsVerified ? { verifies: true as const } : {}) };
      const live = await files.read(t.configPath);
      const liveSha = live ? sha256(live) : null;
      // Already live: this run's own write when an earlier attempt announced it, else someone's before.
      if (liveSha === digest) return { outcome: (await completeJournaled(files, effect)) ? 'written' : 'unchanged', sha256: digest };
      if (liveSha !== input.expectSha256) {
        throw nonRetryable(
          Failure.LiveConfigConflict,
          `${t.configPath} changed since the backup (now ${liveSha ? `sha256 ${liveSha.slice(0, 12)}` : 'absent'}, ` +
            `backed up ${input.expectSha256 ? `sha256 ${input.expectSha256.slice(0, 12)}` : 'absent'}); not overwriting someone else's change`,
        );
      }
      const mode = (await files.mode(t.configPath)) ?? 0o644;
      await fencedLiveChange(files, t.configPath, { ...effect, op: 'write', attempt: currentAttempt() }, (fence) =>
        files.write(t.configPath, input.content, mode, fence),
      );
      return { outcome: 'written', sha256: digest };
    },

    /**
     * The run's router held this content through its verify window: journaled once per run and
     * content, so the next promotion takes the live file for verified (see unverifiedWriteOf).
     * Changes no file; a retry that finds the line appends nothing.
     */
    async promoteVerified(input: { router: string; sha256: string; run: RunRef }): Promise<{ journaled: boolean }> {
      const files = filesOf(target(input.router));
      const effect: Effect = { op: 'verified', run: journalRun(input.run), sha256: input.sha256 };
      if ((await journalState(files, effect)).done) return { journaled: false };
      await files.journal({ at: new Date().toISOString(), phase: 'done', ...effect });
      return { journaled: true };
    },

    /**
     * Puts the backup back, atomically; a live file already equal to it is left alone. Given
     * `writtenSha256`, only over what this run wrote: a live file that is neither (an operator's
     * edit, another promotion's write since) is someone else's change, refused as the write
     * refuses one (LiveConfigConflict), and left alone.
     */
    async promoteRestore(input: {
      router: string;
      backupPath: string | null;
      backupSha256: string | null;
      /** What this run wrote; absent in calls from before the check (they restored over anything). */
      writtenSha256?: string;
      run: RunRef;
    }): Promise<{ outcome: 'restored' | 'unchanged' | 'removed' }> {
      const t = target(input.router);
      const files = filesOf(t);
      const othersChange = (live: Buffer | undefined, backupSha: string | null): void => {
        if (!live || input.writtenSha256 === undefined) return;
        const liveSha = sha256(live);
        if (liveSha === input.writtenSha256 || liveSha === backupSha) return;
        throw nonRetryable(
          Failure.LiveConfigConflict,
          `${t.configPath} changed since this promotion wrote it (now sha256 ${liveSha.slice(0, 12)}, written ${input.writtenSha256.slice(0, 12)}); ` +
            `not restoring ${input.backupPath ?? 'the absence of a live file'} over someone else's change: the live config and the router are left as they are`,
        );
      };
      const run = journalRun(input.run);
      // Restoring: the backup's content put back, or, with no backup (there was no live file
      // before the promotion), the one it wrote removed.
      let effect: Effect;
      let isBack: (live: Buffer | undefined) => boolean;
      let putBack: (fence: () => Promise<void>) => Promise<void>;
      if (input.backupPath === null) {
        effect = { op: 'restore', run, sha256: '' };
        isBack = (live) => live === undefined;
        // Moved aside, checked, then unlinked: an attempt frozen before the move, and stale when it
        // goes on, moves a later writer's file and puts it back (removeFileFenced).
        putBack = (fence) => files.removeFenced(t.configPath, fence);
      } else {
        const backup = await files.read(input.backupPath);
        if (!backup) throw nonRetryable(Failure.BackupMissing, `backup ${input.backupPath} is gone; restore ${t.configPath} by hand`);
        const digest = sha256(backup);
        if (input.backupSha256 && digest !== input.backupSha256) {
          throw nonRetryable(
            Failure.BackupMissing,
            `backup ${input.backupPath} changed since it was made (sha256 ${digest.slice(0, 12)}, ` +
              `expected ${input.backupSha256.slice(0, 12)}); restore ${t.configPath} by hand`,
          );
        }
        const mode = (await files.mode(input.backupPath)) ?? 0o644;
        effect = { op: 'restore', run, sha256: digest, path: input.backupPath };
        isBack = (live) => live !== undefined && sha256(live) === digest;
        putBack = (fence) => files.write(t.configPath, backup, mode, fence);
      }
      const backSha = input.backupPath === null ? null : effect.sha256;
      const outcome = (changed: boolean) => (input.backupPath === null ? 'removed' : changed ? 'restored' : 'unchanged');
      const live = await files.read(t.configPath);
      // Found as it was before the promotion: a retry finishes its earlier attempt's entry. A first
      // attempt of a run that wrote may still race that run's write: its step cancelled (the
      // workflow does not wait for a cancelled file step) goes on, past a check that found no
      // restore line. So the restore is journaled all the same, which makes that write stale, and
      // its temp file removed (fencedLiveChange); what it renamed before that is put back.
      if (isBack(live) && (input.writtenSha256 === undefined || (await journalState(files, effect)).intent))
        return { outcome: outcome(await completeJournaled(files, effect)) };
      othersChange(live, backSha);
      let changed = false;
      await fencedLiveChange(files, t.configPath, { ...effect, op: 'restore', attempt: currentAttempt() }, async (fence) => {
        const now = await files.read(t.configPath);
        if (isBack(now)) return;
        othersChange(now, backSha);
        changed = true;
        await putBack(fence);
      });
      return { outcome: outcome(changed) };
    },
  };
}
