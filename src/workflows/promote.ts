// router promote: validate → backup → write → reloadAndVerify. The validate-only run of the target
// image judges the candidate before anything is touched; the live config is backed up, then
// written atomically; the router is reloaded (recreated from the target image when it differs)
// and verified against crash loops. Any failure after the write rolls back with the same
// reloadAndVerify, of the backup on the previous image, then fails with the reason. See
// docs/promotion.md.
//
// The rollback is one ordered procedure rather than saga compensations: the config must be back
// before the previous image starts, the reverse of the order the steps were taken in.
import { ActivityFailure, ApplicationFailure, CancellationScope, isCancellation, patched, setHandler, workflowInfo } from '@temporalio/workflow';
import type { CandidateConfig } from '../activities/promotion';
import type { BackupResult, RouterDescription } from '../shared/contracts';
import { holderOf } from '../domain/fence';
import { promoteInputProblems, unverifiedLiveToRefuse } from '../domain/promotion';
import { Failure } from '../shared/failures';
import type { PromoteFailureDetails, PromoteInput, PromoteResult, RollbackReport, ValidationRun } from '../shared/promotion';
import { promotionStepsQuery, promoteWorkflowId } from '../shared/promotion';
import { nodeOfTaskQueue } from '../shared/messages';
import { PATCHES } from './patches';
import { promotion } from '../shared/wording';
import { act, containers, files, waiting } from './proxies';
import { rootCause } from './saga';
import { StepLog } from './step-log';
import { PROMOTION_HANDLERS } from '../shared/handler-descriptions';

export async function promoteWorkflow(input: PromoteInput): Promise<PromoteResult> {
  const { workflowId, runId } = workflowInfo();
  const run = { workflowId, runId };
  const log = new StepLog();
  log.current = 'input';
  setHandler(promotionStepsQuery, () => ({ router: typeof input?.router === 'string' ? input.router : '?', current: log.current, steps: log.steps }), {
    description: PROMOTION_HANDLERS.steps,
  });

  const problems = promoteInputProblems(input);
  if (problems.length) {
    log.record('input', `invalid: ${problems.join('; ')}`);
    throw fail(Failure.PromotionInputInvalid, `router promote: ${problems.join('; ')}`, { step: 'input', steps: log.steps });
  }
  const router = input.router;
  // One promotion at a time per router rests on the id (the CLI starts with conflict policy FAIL):
  // a run under any other would write the live config beside the one under it.
  const node = nodeOfTaskQueue(workflowInfo().taskQueue);
  const ownId = node === undefined ? undefined : promoteWorkflowId(node, router);
  if (ownId !== undefined && workflowId !== ownId && patched(PATCHES.promoteOnlyUnderItsId)) {
    const message =
      `router promote ${router}: started as workflow ${workflowId}, but a promotion of router '${router}' on node '${node}' runs only as ${ownId}: ` +
      'under another id it would run beside that one, each writing the live config; nothing was changed (start it with `gpures router promote`, or under that id)';
    log.record('input', `invalid: ${message}`);
    throw fail(Failure.PromotionInputInvalid, message, { step: 'input', steps: log.steps });
  }
  const p: Promotion = { input, router, op: `router promote ${router}`, run, log };

  const { d, candidate, validation } = await untouchedIfFails(p, undefined, () => resolveAndValidate(p));
  const mappingVersion = judge(p, validation, candidate);
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
    const message = `${p.op}: ${input.image} validates mapping_version '${mappingVersion}'; nothing was changed (--validate-only)`;
    log.begin('done');
    log.record('done', message);
    return { ...base, outcome: 'validated', message, steps: log.steps };
  }

  // Runs since this journal `verified` when they succeed; a write left without it was never verified.
  const journalsVerified = patched(PATCHES.promoteJournalsVerified);
  log.begin('backup');
  const backup = await untouchedIfFails(p, validation, () => backUp(p, d));
  const write = await writeCandidate(p, d, candidate, backup, validation, journalsVerified);

  // From here on a failure rolls back.
  const verify = { windowS: input.verify?.windowS ?? d.target.verifyWindowS, streak: input.verify?.streak ?? d.target.healthzStreak };
  const recreate = d.imageChanged || !d.container.running;
  try {
    const image = { ref: input.image, id: d.targetImageId };
    const live = await reloadAndVerify(p, d, {
      steps: '',
      image,
      recreate,
      expectMappingVersion: mappingVersion,
      opKey: `${holderOf(workflowId, runId)}/promote`,
      ...verify,
    });
    if (journalsVerified) await files.promoteVerified({ router, sha256: candidate.sha256, run });
    const message = promotion.live(p.op, mappingVersion, input.image, live.reload, verify.windowS, backup.path);
    log.begin('done');
    log.record('done', message);
    return {
      ...base,
      outcome: 'promoted',
      message,
      backupPath: backup.path,
      write,
      reload: live.reload,
      containerId: live.verify.containerId,
      verify: live.verify,
      steps: log.steps,
    };
  } catch (err) {
    const failedAt = log.current;
    const cause = rootCause(err);
    log.record(failedAt, `failed: ${cause.message}`);
    const rollback = await CancellationScope.nonCancellable(() => rollBack(p, d, backup, candidate.sha256, recreate, verify));
    if (isCancellation(err)) throw err;
    const observed = err instanceof ActivityFailure && err.cause instanceof ApplicationFailure ? err.cause.details?.[0] : undefined;
    throw fail(cause.type, `${p.op} failed at ${failedAt}: ${cause.message}; ${promotion.rolledBack(rollback, d.container.image, backup.path)}`, {
      step: failedAt,
      steps: log.steps,
      validation,
      backupPath: backup.path,
      rollback,
      observed,
    });
  }
}

/** One promotion: what its steps share. */
interface Promotion {
  input: PromoteInput;
  router: string;
  op: string;
  run: { workflowId: string; runId: string };
  log: StepLog;
}

/** Where the router goes and how it is judged: the candidate on the target image, or the backup on the previous one. */
interface Deployment {
  /** Step names' prefix: '' going forward, 'rollback: ' going back. */
  steps: string;
  image: { ref: string; id: string };
  recreate: boolean;
  expectMappingVersion: string | null;
  opKey: string;
  windowS: number;
  streak: number;
}

async function resolveAndValidate({
  input,
  router,
  run,
  log,
}: Promotion): Promise<{ d: RouterDescription; candidate: CandidateConfig; validation: ValidationRun }> {
  log.begin('resolve');
  const d = await act.promoteDescribe({ router, image: input.image });
  const candidate = await act.promoteCandidate({ router: input.router, config: input.config });
  // Backed up now, another run's unverified candidate would become the config this one rolls back
  // to. A validate-only run backs nothing up: it may look.
  const unverified = input.validateOnly ? undefined : unverifiedLiveToRefuse(d.live.unverified, candidate.sha256);
  if (unverified && d.live.unverified && patched(PATCHES.promoteRefusesUnverifiedLive)) {
    throw ApplicationFailure.create({
      type: Failure.LiveConfigConflict,
      message: promotion.unverifiedLive(d.target.configPath, { ...unverified, backupExists: d.live.unverified.backupExists }),
      nonRetryable: true,
    });
  }
  log.record('resolve', promotion.described(d, input.image));

  log.begin('validate');
  const validation = await waiting(d.target.validateTimeoutS).promoteValidate({ router, image: input.image, content: candidate.content, run });
  return { d, candidate, validation };
}

/** The validate-only run's verdict, and the mapping_version verification will look for. */
function judge({ input, op, log }: Promotion, validation: ValidationRun, candidate: CandidateConfig): string {
  const verdict = `${input.image} --validate-only ${validation.timedOut ? 'timed out' : `exit ${validation.exitCode}`} in ${validation.durationMs} ms`;
  if (!validation.passed) {
    log.record('validate', `failed: ${verdict}: ${lastLine(validation.output)}`);
    throw fail(Failure.ValidationFailed, `${op}: ${verdict} rejected the config: ${validation.output || '(no output)'}; nothing was changed`, {
      step: 'validate',
      steps: log.steps,
      validation,
    });
  }
  if (candidate.mappingVersion === null) {
    log.record('validate', `failed: the config declares no top-level mapping_version`);
    throw fail(
      Failure.ValidationFailed,
      `${op}: the config declares no top-level mapping_version, which verification needs (/healthz reports it); nothing was changed`,
      {
        step: 'validate',
        steps: log.steps,
        validation,
      },
    );
  }
  log.record('validate', `passed: ${verdict}: ${lastLine(validation.output)}`);
  return candidate.mappingVersion;
}

async function backUp({ router, run, log }: Promotion, d: RouterDescription): Promise<BackupResult> {
  const backup = await files.promoteBackup({ router, run });
  log.record('backup', promotion.backedUp(backup, d.target.configPath));
  return backup;
}

/** A step before the write that fails has changed nothing, and says so. */
async function untouchedIfFails<T>({ op, log }: Promotion, validation: ValidationRun | undefined, step: () => Promise<T>): Promise<T> {
  try {
    return await step();
  } catch (err) {
    const cause = rootCause(err);
    log.record(log.current, `failed: ${cause.message}`);
    if (isCancellation(err)) throw err;
    throw fail(cause.type, `${op} failed at ${log.current}: ${cause.message}; nothing was changed`, {
      step: log.current,
      steps: log.steps,
      ...(validation ? { validation } : {}),
    });
  }
}

async function writeCandidate(
  p: Promotion,
  d: RouterDescription,
  candidate: CandidateConfig,
  backup: BackupResult,
  validation: ValidationRun,
  journalsVerified: boolean,
): Promise<'written' | 'unchanged'> {
  const { router, run, op, log } = p;
  try {
    log.begin('write');
    const write = (
      await files.promoteWrite({
        router,
        content: candidate.content,
        expectSha256: backup.sha256,
        run,
        ...(journalsVerified ? { journalsVerified } : {}),
      })
    ).outcome;
    log.record('write', promotion.written(write, candidate.bytes, d.target.configPath));
    return write;
  } catch (err) {
    const cause = rootCause(err);
    log.record('write', `failed: ${cause.message}`);
    // A conflict means someone else's change is live: leave it. Otherwise make sure the backup is.
    let undone = 'nothing was changed';
    if (cause.type !== Failure.LiveConfigConflict) {
      try {
        const r = await CancellationScope.nonCancellable(() =>
          files.promoteRestore({ router, backupPath: backup.path, backupSha256: backup.sha256, writtenSha256: candidate.sha256, run }),
        );
        undone = r.outcome === 'unchanged' ? 'the live config is unchanged' : `the live config was ${r.outcome} from the backup`;
      } catch (e) {
        undone = `restoring the backup failed too: ${rootCause(e).message}`;
      }
    }
    if (isCancellation(err)) throw err;
    throw fail(cause.type, `${op} failed at write: ${cause.message}; ${undone}`, { step: 'write', steps: log.steps, validation, backupPath: backup.path });
  }
}

/** Recreate from the image (or reload the running router), then verify it holds the expected mapping without crash-looping. */
async function reloadAndVerify(
  { router, log }: Promotion,
  d: RouterDescription,
  to: Deployment,
  /** Told as soon as the reload acted, so a verify that fails still leaves what was done on record. */
  reloaded: (reload: 'recreated' | 'reloaded', image?: string) => void = () => undefined,
) {
  log.begin(`${to.steps}reload`);
  let reload: 'recreated' | 'reloaded';
  let image: string | undefined;
  let containerId: string;
  let baseline: number;
  if (to.recreate) {
    const r = await containers.promoteRecreate({ router, image: to.image, opKey: to.opKey });
    reload = 'recreated';
    image = r.image;
    containerId = r.id;
    baseline = 0;
    log.record(`${to.steps}reload`, promotion.recreated(d.target.container, r.image, r.id));
  } else {
    const r = await act.promoteReload({ router });
    reload = 'reloaded';
    containerId = r.containerId;
    baseline = r.restartCountBefore;
    log.record(`${to.steps}reload`, promotion.reloaded(d.target.url, r.mappingVersion));
  }

  reloaded(reload, image);
  log.begin(`${to.steps}verify`);
  const verify = await waiting(to.windowS + (to.streak + 2) * 5 + 30).promoteVerify({
    router,
    expectMappingVersion: to.expectMappingVersion,
    baselineRestartCount: baseline,
    expectContainerId: containerId,
    windowS: to.windowS,
    streak: to.streak,
  });
  log.record(`${to.steps}verify`, promotion.verified(verify, to.windowS));
  return { reload, image, verify };
}

/** Restore the backup, bring the previous image back (or reload), verify the old mapping. */
async function rollBack(
  p: Promotion,
  d: RouterDescription,
  backup: BackupResult,
  /** What this run wrote: the restore puts the backup back only over it. */
  writtenSha256: string,
  recreated: boolean,
  verify: { windowS: number; streak: number },
): Promise<RollbackReport> {
  const { router, run, log } = p;
  const report: RollbackReport = { ok: false };
  try {
    log.begin('rollback: restore');
    try {
      report.restored = (await files.promoteRestore({ router, backupPath: backup.path, backupSha256: backup.sha256, writtenSha256, run })).outcome;
      log.record('rollback: restore', promotion.restored(report.restored, d.target.configPath, backup.path));
    } catch (err) {
      // Someone else's config is live and stays; an image this run switched still goes back, under it.
      const cause = rootCause(err);
      if (!(recreated && cause.type === Failure.LiveConfigConflict && patched(PATCHES.rollbackImageUnderOthersConfig))) throw err;
      report.configKept = cause.message;
      log.record('rollback: restore', `refused: ${cause.message}; the previous image still goes back`);
    }

    log.begin('rollback: reload');
    const now = await act.promoteInspect({ router });
    const unsteady = !now || !now.running || now.restartCount > d.container.restartCount;
    const back = await reloadAndVerify(
      p,
      d,
      {
        steps: 'rollback: ',
        image: { ref: d.container.image, id: d.container.imageId },
        // A recreated router goes back to its old image too.
        recreate: recreated || unsteady,
        // Under a config kept, whatever mapping it names: the router healthy on it is the check.
        expectMappingVersion: report.configKept !== undefined ? null : (backup.mappingVersion ?? d.live.mappingVersion),
        opKey: `${holderOf(run.workflowId, run.runId)}/rollback`,
        ...verify,
      },
      (reload, image) => {
        report.reload = reload;
        if (image !== undefined) report.image = image;
      },
    );
    report.verify = back.verify;
    report.ok = true;
  } catch (err) {
    const cause = rootCause(err);
    report.error = `${log.current}: ${cause.type}: ${cause.message}`;
    log.record(log.current, `failed: ${cause.message}`);
  }
  return report;
}

function fail(type: string, message: string, details: PromoteFailureDetails): ApplicationFailure {
  return ApplicationFailure.create({ type, message, nonRetryable: true, details: [details] });
}

function lastLine(text: string): string {
  const lines = text.trim().split('\n');
  return lines[lines.length - 1] ?? '';
}
