// router promote: validate-only run of the target image against the candidate config → backup of
// the live config → atomic write → reload (recreate from the target image when it differs) →
// crash-loop verify. Any failure after the write rolls back: the backup restored atomically,
// the previous image recreated (or the router reloaded), verified again; then the workflow fails
// with the reason. Nothing is touched before the write. See docs/promotion.md.
//
// The rollback is one ordered procedure rather than saga compensations: the config must be back
// before the previous image starts, the reverse of the order the steps were taken in.
import { ActivityFailure, ApplicationFailure, CancellationScope, isCancellation, proxyActivities, setHandler, workflowInfo } from '@temporalio/workflow';
import type { ActivityOptions } from '@temporalio/workflow';
import type { Activities } from '../activities';
import type { BackupResult, RouterDescription } from '../shared/contracts';
import { promoteInputProblems } from '../domain/promotion';
import { Failure } from '../shared/failures';
import type { PromoteFailureDetails, PromoteInput, PromoteResult, RollbackReport, ValidationRun, VerifyReport } from '../shared/promotion';
import { promotionStepsQuery } from '../shared/promotion';
import { containerOps, quick, waitFor } from './options';
import { rootCause } from './saga';
import { StepLog } from './serve-steps';

/** File steps take milliseconds; the heartbeat timeout notices a lost worker in 5 s, not 30. */
const fileOps: ActivityOptions = { ...quick, heartbeatTimeout: '5s' };

const act = proxyActivities<Activities>(quick);
const files = proxyActivities<Activities>(fileOps);
const containers = proxyActivities<Activities>(containerOps);

function fail(type: string, message: string, details: PromoteFailureDetails): ApplicationFailure {
  return ApplicationFailure.create({ type, message, nonRetryable: true, details: [details] });
}

function lastLine(text: string): string {
  const lines = text.trim().split('\n');
  return lines[lines.length - 1] ?? '';
}

function short(id: string): string {
  return id.replace(/^sha256:/, '').slice(0, 12);
}

export async function promoteWorkflow(input: PromoteInput): Promise<PromoteResult> {
  const { workflowId, runId } = workflowInfo();
  const run = { workflowId, runId };
  const log = new StepLog();
  log.current = 'input';
  setHandler(promotionStepsQuery, () => ({ router: typeof input?.router === 'string' ? input.router : '?', current: log.current, steps: log.steps }));

  const problems = promoteInputProblems(input);
  if (problems.length) {
    log.record('input', `invalid: ${problems.join('; ')}`);
    throw fail(Failure.PromotionInputInvalid, `router promote: ${problems.join('; ')}`, { step: 'input', steps: log.steps });
  }
  const router = input.router;
  const op = `router promote ${router}`;

  // ---- resolve and validate: nothing is touched ----------------------------------------------
  let d: RouterDescription;
  let candidate: Awaited<ReturnType<Activities['promoteCandidate']>>;
  let validation: ValidationRun;
  try {
    log.begin('resolve');
    d = await act.promoteDescribe({ router, image: input.image });
    candidate = await act.promoteCandidate({ router: input.router, config: input.config });
    const c = d.container;
    log.record(
      'resolve',
      `container ${c.name} runs ${c.image} (${c.running ? 'running' : c.status}, restart count ${c.restartCount}); ` +
        `live ${d.target.configPath} ${d.live.exists ? `has mapping_version '${d.live.mappingVersion ?? '?'}'` : 'is absent'}; ` +
        `${input.image} ${d.imageChanged ? `is a different image (${short(d.targetImageId)}): the router will be recreated` : `is the running image: the router will ${c.running ? 'reload' : 'be recreated (it is not running)'}`}`,
    );

    log.begin('validate');
    validation = await proxyActivities<Activities>(waitFor(d.target.validateTimeoutS)).promoteValidate({ router, image: input.image, content: candidate.content, run });
  } catch (err) {
    const cause = rootCause(err);
    log.record(log.current, `failed: ${cause.message}`);
    if (isCancellation(err)) throw err;
    throw fail(cause.type, `${op} failed at ${log.current}: ${cause.message}; nothing was changed`, { step: log.current, steps: log.steps });
  }
  const verdict = `${input.image} --validate-only ${validation.timedOut ? 'timed out' : `exit ${validation.exitCode}`} in ${validation.durationMs} ms`;
  if (!validation.passed) {
    log.record('validate', `failed: ${verdict}: ${lastLine(validation.output)}`);
    throw fail(Failure.ValidationFailed, `${op}: ${verdict} rejected the config: ${validation.output || '(no output)'}; nothing was changed`, { step: 'validate', steps: log.steps, validation });
  }
  const mappingVersion = candidate.mappingVersion;
  if (mappingVersion === null) {
    log.record('validate', `failed: the config declares no top-level mapping_version`);
    throw fail(Failure.ValidationFailed, `${op}: the config declares no top-level mapping_version, which verification needs (/healthz reports it); nothing was changed`, {
      step: 'validate',
      steps: log.steps,
      validation,
    });
  }
  log.record('validate', `passed: ${verdict}: ${lastLine(validation.output)}`);

  const windowS = input.verify?.windowS ?? d.target.verifyWindowS;
  const streak = input.verify?.streak ?? d.target.healthzStreak;
  const base = {
    router,
    image: input.image,
    previousImage: d.container.image,
    imageChanged: d.imageChanged,
    mappingVersion,
    previousMappingVersion: d.live.mappingVersion,
    ...(input.profile !== undefined ? { profile: input.profile } : {}),
    candidateSha256: candidate.sha256,
    validation,
  };
  if (input.validateOnly) {
    const message = `${op}: ${input.image} validates mapping_version '${mappingVersion}'; nothing was changed (--validate-only)`;
    log.begin('done');
    log.record('done', message);
    return { ...base, outcome: 'validated', message, steps: log.steps };
  }

  // ---- backup and write ------------------------------------------------------------------------
  let backup: BackupResult;
  try {
    log.begin('backup');
    backup = await files.promoteBackup({ router, run });
  } catch (err) {
    const cause = rootCause(err);
    log.record('backup', `failed: ${cause.message}`);
    if (isCancellation(err)) throw err;
    throw fail(cause.type, `${op} failed at backup: ${cause.message}; nothing was changed`, { step: 'backup', steps: log.steps, validation });
  }
  log.record(
    'backup',
    backup.path
      ? `${backup.created ? 'saved' : 'already saved by this run:'} ${backup.path}${backup.pruned.length ? `; ${backup.pruned.length} older backup(s) pruned` : ''}`
      : `no live config at ${d.target.configPath}: nothing to back up`,
  );

  let write: 'written' | 'unchanged';
  try {
    log.begin('write');
    write = (await files.promoteWrite({ router, content: candidate.content, expectSha256: backup.sha256, run })).outcome;
  } catch (err) {
    const cause = rootCause(err);
    log.record('write', `failed: ${cause.message}`);
    // A conflict means someone else's change is live: leave it. Otherwise make sure the backup is.
    let undone = 'nothing was changed';
    if (cause.type !== Failure.LiveConfigConflict) {
      try {
        const r = await CancellationScope.nonCancellable(() => files.promoteRestore({ router, backupPath: backup.path, backupSha256: backup.sha256, run }));
        undone = r.outcome === 'unchanged' ? 'the live config is unchanged' : `the live config was ${r.outcome} from the backup`;
      } catch (e) {
        undone = `restoring the backup failed too: ${rootCause(e).message}`;
      }
    }
    if (isCancellation(err)) throw err;
    throw fail(cause.type, `${op} failed at write: ${cause.message}; ${undone}`, { step: 'write', steps: log.steps, validation, backupPath: backup.path });
  }
  log.record('write', write === 'written' ? `wrote ${candidate.bytes} bytes to ${d.target.configPath} (temp file, fsync, rename, fsync dir)` : `${d.target.configPath} already holds this config`);

  // ---- reload and verify; from here on a failure rolls back -------------------------------------
  const recreate = d.imageChanged || !d.container.running;
  let reload: 'recreated' | 'reloaded' | undefined;
  const verifyOpts = waitFor(windowS + (streak + 2) * 5 + 30);
  try {
    log.begin('reload');
    let containerId: string;
    let baseline: number;
    if (recreate) {
      const r = await containers.promoteRecreate({ router, image: { ref: input.image, id: d.targetImageId }, opKey: `${workflowId}/${runId}/promote` });
      reload = 'recreated';
      containerId = r.id;
      baseline = 0;
      log.record('reload', `recreated container ${d.target.container} from ${r.image} (id ${short(r.id)})`);
    } else {
      const r = await act.promoteReload({ router });
      reload = 'reloaded';
      containerId = r.containerId;
      baseline = r.restartCountBefore;
      log.record('reload', `POST ${d.target.url}/admin/reload: the router answered mapping_version '${r.mappingVersion}'`);
    }

    log.begin('verify');
    const verify = await proxyActivities<Activities>(verifyOpts).promoteVerify({
      router,
      expectMappingVersion: mappingVersion,
      baselineRestartCount: baseline,
      expectContainerId: containerId,
      windowS,
      streak,
    });
    log.record('verify', verifyOutcome(verify, windowS));

    const message = `${op}: mapping_version '${mappingVersion}' is live on ${input.image} (${reload}), verified for ${windowS} s${backup.path ? `; backup ${backup.path}` : ''}`;
    log.begin('done');
    log.record('done', message);
    return { ...base, outcome: 'promoted', message, backupPath: backup.path, write, reload, containerId: verify.containerId, verify, steps: log.steps };
  } catch (err) {
    const failedAt = log.current;
    const cause = rootCause(err);
    log.record(failedAt, `failed: ${cause.message}`);
    const rollback = await CancellationScope.nonCancellable(() => rollBack());
    if (isCancellation(err)) throw err;
    const observed = err instanceof ActivityFailure && err.cause instanceof ApplicationFailure ? err.cause.details?.[0] : undefined;
    const summary = rollback.ok
      ? `rolled back: config ${rollback.restored === 'unchanged' ? 'already the backup' : rollback.restored} (${backup.path ?? 'no backup: there was no live file'}), ` +
        `${rollback.reload === 'recreated' ? `${rollback.image ?? d.container.image} recreated` : 'router reloaded'}, verified on mapping_version '${rollback.verify?.mappingVersion ?? '?'}'`
      : `ROLLBACK FAILED (${rollback.error ?? '?'}): the router needs attention; backup ${backup.path ?? '(none)'}`;
    throw fail(cause.type, `${op} failed at ${failedAt}: ${cause.message}; ${summary}`, { step: failedAt, steps: log.steps, validation, backupPath: backup.path, rollback, observed });
  }

  /** Restore the backup, bring the previous image back (or reload), verify the old mapping. */
  async function rollBack(): Promise<RollbackReport> {
    const report: RollbackReport = { ok: false };
    try {
      log.begin('rollback: restore');
      report.restored = (await files.promoteRestore({ router, backupPath: backup.path, backupSha256: backup.sha256, run })).outcome;
      log.record('rollback: restore', report.restored === 'unchanged' ? 'the live config already equals the backup' : `${report.restored} ${d.target.configPath} from ${backup.path ?? '(none)'}`);

      log.begin('rollback: reload');
      const now = await act.promoteInspect({ router });
      const unsteady = !now || !now.running || now.restartCount > d.container.restartCount;
      let containerId: string;
      let baseline: number;
      // A recreated router (reload === 'recreated' only when recreate) goes back to its old image too.
      if (recreate || unsteady) {
        const r = await containers.promoteRecreate({ router, image: { ref: d.container.image, id: d.container.imageId }, opKey: `${workflowId}/${runId}/rollback` });
        report.reload = 'recreated';
        report.image = r.image;
        containerId = r.id;
        baseline = 0;
        log.record('rollback: reload', `recreated container ${d.target.container} from ${r.image} (id ${short(r.id)})`);
      } else {
        const r = await act.promoteReload({ router });
        report.reload = 'reloaded';
        containerId = r.containerId;
        baseline = r.restartCountBefore;
        log.record('rollback: reload', `POST /admin/reload: the router answered mapping_version '${r.mappingVersion}'`);
      }

      log.begin('rollback: verify');
      const expected = backup.mappingVersion ?? d.live.mappingVersion;
      report.verify = await proxyActivities<Activities>(verifyOpts).promoteVerify({
        router,
        expectMappingVersion: expected,
        baselineRestartCount: baseline,
        expectContainerId: containerId,
        windowS,
        streak,
      });
      log.record('rollback: verify', verifyOutcome(report.verify, windowS));
      report.ok = true;
    } catch (err) {
      const cause = rootCause(err);
      report.error = `${log.current}: ${cause.type}: ${cause.message}`;
      log.record(log.current, `failed: ${cause.message}`);
    }
    return report;
  }
}

function verifyOutcome(v: VerifyReport, windowS: number): string {
  return `running, restart count flat at ${v.restartCount}, /healthz 200 with mapping_version '${v.mappingVersion ?? '?'}' ${v.streak} times in a row (${v.polls} polls over ${(v.waitedMs / 1000).toFixed(1)} s, window ${windowS} s)`;
}
