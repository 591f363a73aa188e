// Activities of a router promotion (docs/promotion.md), built over the RouterDeployment port and
// the router's admin API. Each is idempotent, so a worker killed mid-way and replaced converges:
// a backup is found again by its run key, a write whose content is already live is a no-op, a
// recreate recognizes the container it already made. The steps that change the live config file
// (backup, write, restore) and its journal are in promotion-files.ts.
import { dirname, resolve as resolvePath } from 'node:path';
import { Context } from '@temporalio/activity';
import { mappingVersionOf } from '../config/mapping-version';
import { checkRouterAgainstManifest, parseRouterConfig, routerCheckErrors } from '../config/router-config';
import type { RouterConfigResult } from '../config/router-model';
import type { ManifestSource } from '../adapters/manifest/port';
import { loadManifest } from './resolve';
import { formatIssue } from '../domain/types';
import { MAX_CONFIG_BYTES, PROMOTION_DEFAULTS, unverifiedWriteOf } from '../domain/promotion';
import { REDACTED } from '../domain/serve';
import { Failure } from '../shared/failures';
import type { ValidationRun, VerifyReport } from '../shared/promotion';
import type { RouterAdmin } from '../adapters/router-admin/port';
import { imageMissing } from '../adapters/errors';
import { nonRetryable, permanentAsFailure } from './failure';
import { heartbeating, progress } from './heartbeat';
import type { RecreateResult, RouterDeployment, RouterTarget } from '../adapters/router-deployment/port';
import { journalPath } from '../adapters/router-deployment/port';
import type { PublicRouterTarget, RouterContainer, RouterDescription } from '../shared/contracts';
import { configFilesOf, createConfigFileSteps, runKey, sha256 } from './promotion-files';
import type { ConfigFiles, RunRef } from './promotion-files';

/** How long POST /admin/reload may take: well inside the 30 s its activity is given. */
const RELOAD_TIMEOUT_MS = 20_000;

export interface PromotionDeps {
  /** Docker and the live config's filesystem; needed only for promotions. */
  routerDeployment?: RouterDeployment;
  /** The routers this worker may promote, by deployment name. */
  routerTargets?: RouterTarget[];
  /** The admin client of a target (the worker's: HTTP with the target's URL and token); needed only to reload and verify. */
  routerAdminFor?: (target: RouterTarget, timeoutMs: number) => RouterAdmin;
  pollIntervalMs?: number;
  /** The worker's manifest: a candidate must agree with it as the live config must at the worker's start. */
  manifest?: ManifestSource;
}

export interface CandidateConfig {
  content: string;
  sha256: string;
  bytes: number;
  mappingVersion: string | null;
}

/** A router's output goes into history: its admin token, should it print it, must not. */
function withoutToken(t: RouterTarget, text: string): string {
  return t.adminToken.length >= 8 ? text.split(t.adminToken).join(REDACTED) : text;
}

/**
 * Why a file is not a router config: its first problem by dotted path, without the value found
 * there ("must be … (got "…")") or the name of the entry it is in. The file may be any in the
 * config directory, the manifest beside it with its serves' env and args among them, and this
 * goes into history.
 */
function notARouterConfig(result: Extract<RouterConfigResult, { ok: false }>): string {
  const first = result.errors[0];
  if (!first) return 'not a router config';
  const message = first.message.replace(/ \(got [\s\S]*$/, '');
  return first.path ? `${first.path}: ${message}` : message;
}

function errText(err: unknown): string {
  if (err instanceof Error) return err.cause instanceof Error ? `${err.message}: ${err.cause.message}` : err.message;
  return String(err);
}

export function createPromotionActivities(deps: PromotionDeps) {
  const pollMs = deps.pollIntervalMs ?? 1000;
  const adminFor = (t: RouterTarget, timeoutMs: number): RouterAdmin => {
    if (!deps.routerAdminFor) throw nonRetryable(Failure.RouterNotConfigured, 'this worker has no router admin client configured');
    return deps.routerAdminFor(t, timeoutMs);
  };

  const deployment = (): RouterDeployment => {
    if (!deps.routerDeployment) throw nonRetryable(Failure.RouterNotConfigured, 'this worker has no router deployment configured');
    return deps.routerDeployment;
  };
  const target = (name: string): RouterTarget => {
    const targets = deps.routerTargets ?? [];
    const t = targets.find((x) => x.name === name);
    if (!t) {
      const known = targets.map((x) => x.name);
      throw nonRetryable(
        Failure.UnknownRouter,
        known.length
          ? `this worker has no router deployment named '${name}' (it has: ${known.join(', ')})`
          : `this worker has no router deployment configured (GPURES_ROUTER_CONFIG, see docs/promotion.md); asked for '${name}'`,
      );
    }
    return t;
  };
  const publicTarget = (t: RouterTarget): PublicRouterTarget => ({
    name: t.name,
    container: t.container,
    configPath: t.configPath,
    containerConfigPath: t.containerConfigPath,
    url: t.url,
    verifyWindowS: t.verifyWindowS ?? PROMOTION_DEFAULTS.verifyWindowS,
    healthzStreak: t.healthzStreak ?? PROMOTION_DEFAULTS.healthzStreak,
    backupsKept: t.backupsKept ?? PROMOTION_DEFAULTS.backupsKept,
    validateTimeoutS: t.validateTimeoutS ?? PROMOTION_DEFAULTS.validateTimeoutS,
  });
  const filesOf = (t: RouterTarget): ConfigFiles => configFilesOf(deployment(), t);

  /**
   * A candidate must be what this worker, and every CLI beside it, reads GPURES_ROUTER_CONFIG as at
   * start: a router config by parseRouterConfig, without the errors checkRouterAgainstManifest
   * finds against the worker's manifest (the T013 rule). An image whose validation is more lenient
   * would otherwise put it live, and the node's next worker would refuse to start on it. Its
   * problems may quote it: the candidate is recorded in history as the run's input in any case.
   */
  const requireWorkerReadable = async (candidate: RouterConfigResult, file: string): Promise<void> => {
    const problems = candidate.ok ? [] : candidate.errors;
    if (candidate.ok && deps.manifest) {
      const { manifest, file: manifestFile } = await loadManifest(deps.manifest);
      problems.push(...routerCheckErrors(checkRouterAgainstManifest(candidate.config, file, manifest, manifestFile)));
    }
    if (problems.length === 0) return;
    throw nonRetryable(
      Failure.PromotionInputInvalid,
      `${file} is not a router config this worker could start on (it reads the live one at start): ${problems.map(formatIssue).join('; ')}`,
    );
  };

  return heartbeating({
    async promoteDescribe(input: { router: string; image: string }): Promise<RouterDescription> {
      const t = target(input.router);
      const d = deployment();
      const container = await d.inspect(t.container);
      if (!container) {
        throw nonRetryable(
          Failure.RouterNotDeployed,
          `router '${t.name}': no container '${t.container}' on this Docker host; deploy the router first (a promotion replaces a running router)`,
        );
      }
      const targetImageId = await d.imageId(input.image);
      if (!targetImageId) throw nonRetryable(Failure.ImageMissing, imageMissing(input.image).message);
      const files = filesOf(t);
      const live = await files.read(t.configPath);
      // The journal is appended to after the first effect: refuse a planted link before any.
      await files.mode(journalPath(t.configPath));
      const liveSha = live ? sha256(live) : null;
      // A run terminated mid-verify runs no rollback: its candidate may be live, never verified.
      const unverified = unverifiedWriteOf(await files.readJournal(), liveSha);
      const backupExists = unverified?.backupPath ? (await files.mode(unverified.backupPath)) !== undefined : false;
      return {
        target: publicTarget(t),
        container,
        targetImageId,
        imageChanged: targetImageId !== container.imageId,
        live: live
          ? {
              exists: true,
              sha256: liveSha,
              bytes: live.length,
              mappingVersion: mappingVersionOf(live.toString('utf8')) ?? null,
              ...(unverified ? { unverified: { ...unverified, backupExists } } : {}),
            }
          : { exists: false, sha256: null, bytes: 0, mappingVersion: null },
      };
    },

    /**
     * The candidate's text: given inline, or read from a file in the live config's directory on
     * the worker's host. Only there, and only a file that is a router config: the text lands in
     * history, the worker runs as root, and the directory may hold other files (the manifest with
     * its serves' tokens); one that is not is refused before its text is returned, validated or quoted.
     */
    async promoteCandidate(input: { router: string; config: { path?: string; content?: string } }): Promise<CandidateConfig> {
      let content = input.config.content;
      let file = 'config.content';
      if (content === undefined) {
        const path = resolvePath(input.config.path ?? '');
        file = path;
        const files = filesOf(target(input.router));
        if (dirname(path) !== files.dir) {
          throw nonRetryable(
            Failure.PromotionInputInvalid,
            `config.path: ${path} is outside the router's config directory ${files.dir}; send the content instead, or stage the file there`,
          );
        }
        const data = await files.read(path);
        if (!data) throw nonRetryable(Failure.PromotionInputInvalid, `config.path: ${path} does not exist on the worker's host`);
        if (data.length > MAX_CONFIG_BYTES) throw nonRetryable(Failure.PromotionInputInvalid, `config.path: ${path} is larger than ${MAX_CONFIG_BYTES} bytes`);
        content = data.toString('utf8');
      }
      const parsed = parseRouterConfig(content, file);
      // A file of the directory (the manifest, perhaps) is refused by its first problem without the
      // value found there; content is the run's input, in history already.
      if (!parsed.ok && input.config.content === undefined)
        throw nonRetryable(Failure.PromotionInputInvalid, `config.path: ${file} is not a router config: ${notARouterConfig(parsed)}`);
      await requireWorkerReadable(parsed, file);
      return { content, sha256: sha256(content), bytes: Buffer.byteLength(content), mappingVersion: mappingVersionOf(content) ?? null };
    },

    /** The target image's own verdict on the candidate, in a throwaway container. Never throws for a failing verdict. */
    async promoteValidate(input: { router: string; image: string; content: string; run: RunRef }): Promise<ValidationRun> {
      const t = target(input.router);
      const args = (t.validateArgs ?? ['--validate-only', '--config', '{config}']).map((a) => a.replaceAll('{config}', t.containerConfigPath));
      const outcome = await permanentAsFailure(() =>
        deployment().validate(
          {
            name: `${t.container}-validate-${runKey(input.run)}`,
            image: input.image,
            args,
            candidate: input.content,
            stageDir: filesOf(t).dir,
            containerPath: t.containerConfigPath,
            timeoutMs: (t.validateTimeoutS ?? PROMOTION_DEFAULTS.validateTimeoutS) * 1000,
          },
          progress,
        ),
      );
      const output = withoutToken(t, outcome.output.length > 4000 ? `…${outcome.output.slice(-4000)}` : outcome.output);
      return {
        image: input.image,
        passed: !outcome.timedOut && outcome.exitCode === 0,
        exitCode: outcome.exitCode,
        output,
        timedOut: outcome.timedOut,
        durationMs: outcome.durationMs,
      };
    },

    ...createConfigFileSteps({ target, filesOf }),

    async promoteInspect(input: { router: string }): Promise<RouterContainer | null> {
      return (await deployment().inspect(target(input.router).container)) ?? null;
    },

    /** Same name, labels, env, command, ports, mounts and restart policy; another image. */
    async promoteRecreate(input: { router: string; image: { ref: string; id?: string }; opKey: string }): Promise<RecreateResult> {
      const t = target(input.router);
      return permanentAsFailure(() =>
        deployment().recreate(t.container, input.image, { opKey: input.opKey, stopTimeoutS: t.stopTimeoutS ?? PROMOTION_DEFAULTS.stopTimeoutS }),
      );
    },

    /** POST /admin/reload with the worker's token; the restart count just before is the verify baseline. */
    async promoteReload(input: { router: string }): Promise<{ mappingVersion: string; containerId: string; restartCountBefore: number }> {
      const t = target(input.router);
      const before = await deployment().inspect(t.container);
      if (!before) throw nonRetryable(Failure.RouterNotDeployed, `router '${t.name}': container '${t.container}' is gone`);
      // Inside the activity's 30 s (the workflow's `quick` options): a slow reload ends as the HTTP
      // timeout it is, with its reason, not as an activity timed out; a retry reloads the same file.
      const { mappingVersion } = await permanentAsFailure(() => adminFor(t, RELOAD_TIMEOUT_MS).reload());
      return { mappingVersion, containerId: before.id, restartCountBefore: before.restartCount };
    },

    /**
     * The crash-loop window: every poll the container must be running with a flat restart count,
     * and /healthz must end with `streak` answers in a row of 200 and the expected mapping_version.
     * Heartbeats each poll. CrashLoopDetected or HealthzMismatch otherwise.
     */
    async promoteVerify(input: {
      router: string;
      expectMappingVersion: string | null;
      baselineRestartCount: number;
      expectContainerId?: string;
      windowS: number;
      streak: number;
    }): Promise<VerifyReport> {
      const t = target(input.router);
      const d = deployment();
      const admin = adminFor(t, Math.max(1000, Math.min(5000, pollMs * 2)));
      const started = Date.now();
      const windowMs = input.windowS * 1000;
      // The streak may need a few polls after the window; past this the answer is a mismatch. At
      // least 3 s, so a router slow to come back on a loaded box is not called a mismatch.
      const graceMs = Math.max(3000, (input.streak + 2) * pollMs);
      let polls = 0;
      let streak = 0;
      let last = 'no answer yet';
      let lastVersion: string | null = null;
      const crash = async (c: RouterContainer | undefined, what: string): Promise<never> => {
        const tail = withoutToken(t, (await d.logsTail(t.container, 5)).split('\n').join(' | '));
        // Restarted and running again: inspect's exit code is the new run's 0, the daemon's events keep the crash's.
        const exitCode = c && c.restartCount > input.baselineRestartCount ? ((await d.lastExitCode(t.container, started - 1000)) ?? c.exitCode) : c?.exitCode;
        throw nonRetryable(
          Failure.CrashLoopDetected,
          `router container ${t.container} ${what} within ${((Date.now() - started) / 1000).toFixed(1)} s of verification: ` +
            `restart count ${input.baselineRestartCount} → ${c?.restartCount ?? '?'}` +
            `${c ? ` (status ${c.status}, last exit code ${exitCode})` : ''}${tail ? `; last output: ${tail}` : ''}`,
          {
            baselineRestartCount: input.baselineRestartCount,
            restartCount: c?.restartCount ?? null,
            status: c?.status ?? 'gone',
            exitCode: exitCode ?? null,
          },
        );
      };
      for (;;) {
        const c = await d.inspect(t.container);
        polls += 1;
        if (!c) return crash(undefined, 'disappeared');
        if (input.expectContainerId && c.id !== input.expectContainerId)
          return crash(c, `was replaced (id ${input.expectContainerId.slice(0, 12)} → ${c.id.slice(0, 12)})`);
        if (c.restartCount > input.baselineRestartCount) return crash(c, 'restarted');
        if (!c.running) return crash(c, `stopped`);
        try {
          const h = await admin.healthz();
          lastVersion = h.mappingVersion;
          if (h.ok && (input.expectMappingVersion === null || h.mappingVersion === input.expectMappingVersion)) streak += 1;
          else {
            streak = 0;
            last = `200 with mapping_version '${h.mappingVersion}'${h.ok ? '' : ' (status not ok)'}`;
          }
        } catch (err) {
          streak = 0;
          last = errText(err);
        }
        progress({ polls, streak, last });
        const elapsed = Date.now() - started;
        if (elapsed >= windowMs && streak >= input.streak) {
          return { mappingVersion: lastVersion, polls, streak, restartCount: c.restartCount, containerId: c.id, waitedMs: elapsed };
        }
        if (elapsed >= windowMs + graceMs) {
          throw nonRetryable(
            Failure.HealthzMismatch,
            `${t.url}/healthz did not answer 200 with mapping_version '${input.expectMappingVersion ?? '(any)'}' ` +
              `${input.streak} times in a row within ${input.windowS} s (${polls} polls); last answer: ${last}`,
            { expected: input.expectMappingVersion, observed: lastVersion, last, polls },
          );
        }
        await Context.current().sleep(pollMs);
      }
    },
  });
}

export type PromotionActivities = ReturnType<typeof createPromotionActivities>;
