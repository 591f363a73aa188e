// Activities for bring-up and bring-down, built by a factory over our own ports so tests hand
// in real-but-local adapters (a private dockerd, a dev server) and a simulated box can too.
import { Context } from '@temporalio/activity';
import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import type { LedgerState, LostRunUnread, Reservation } from '../domain/ledger';
import { LOG_BOUNDS } from '../domain/bounds';
import { failedStartTail } from '../domain/logs';
import { containerName, LABEL, redactSecrets, redactServe, SERVE_API_KEY_ENV, serveBaseUrl, serveCommand, serveHealthUrl, serveLabels } from '../domain/serve';
import type { GpuSpec, ServeClass, ServeSpec } from '../domain/types';
import { SERVE_CLASSES } from '../domain/types';
import { Failure, Transient } from '../shared/failures';
import type {
  LedgerAbortArgs,
  LedgerAcquireArgs,
  LedgerAcquireResult,
  LedgerAdmitArgs,
  LedgerAdmitResult,
  LedgerPhaseArgs,
  LedgerReleaseArgs,
  LedgerReleaseResult,
  LedgerStartSlotAnswer,
  LedgerStartSlotArgs,
  LedgerStopAnswer,
  LedgerStopArgs,
  LedgerVictimArgs,
} from '../shared/messages';
import { fenceStepProblem, holderOf, parseHolder } from '../domain/fence';
import type { OwnContainer } from '../domain/fence';
import { workflowIds } from '../shared/messages';
import { cancelReason } from '../shared/wording';
import { createEvictionActivities } from './eviction';
import { underTheName } from './own-container';
import { observedEviction } from './eviction-metrics';
import { createLeaseActivities } from './lease';
import { loadManifest, loadServe as loadServeFrom } from './resolve';
import { createPromotionActivities } from './promotion';
import { createRunTagActivities } from './run-tags';
import { createSleepActivities, sleepsNow } from './sleep';
import { createStartRoomActivities } from './start-room';
import { residualHeldAfresh, sleptAtLevelAfresh } from '../domain/sleep';
import { carriedStartSlot, withRestoreLinks } from '../domain/reconcile';
import { withTimeout } from '../worker/time-bound';
import type { Reconciled } from '../domain/reconcile';
import { healthPollDelayMs } from '../domain/health-poll';
import type { ContainerRuntime, ContainerState } from '../adapters/containers/port';
import type { FailedStartLogs } from '../adapters/failed-starts/port';
import type { GpuProbe } from '../adapters/gpu/port';
import type { LedgerPort, LostRun } from '../adapters/ledger/port';
import type { ActivityMetrics } from '../adapters/metrics/port';
import type { ManifestSource } from '../adapters/manifest/port';
import type { OperationControl } from '../adapters/operations/port';
import type { LeaseControl } from '../adapters/leases/port';
import type { RouterAdmin } from '../adapters/router-admin/port';
import type { RouterDeployment, RouterTarget } from '../adapters/router-deployment/port';
import type { ServeProbe } from '../adapters/serve-probe/port';
import type { ServeSleep } from '../adapters/serve-sleep/port';
import type { SearchAttributeRegistry } from '../adapters/search-attributes/port';
import { ServeUnreachable } from '../adapters/errors';
import type { OperationEnd, OperationEndMode, ResolvedServe, StopResult } from '../shared/contracts';
import type { HealthBeat } from '../shared/progress';
import { nonRetryable, permanentAsFailure, transient } from './failure';
import { activityContext, earlierProgress, heartbeating, progress } from './heartbeat';
import { fencedOrDown } from './fence';

export interface ActivityDeps {
  runtime: ContainerRuntime;
  probe: ServeProbe;
  manifest: ManifestSource;
  ledger: LedgerPort;
  /** The operations holding serves (Temporal): a bring-down cancels and waits out the one holding its serve. */
  operations: OperationControl;
  /** The router's admin API; needed only to evict serves that back a router tier. */
  router?: RouterAdmin;
  /** The serves' running leases (Temporal); needed only to apply a caller's lease terms to one that runs. */
  leases?: LeaseControl;
  /** nvidia-smi; needed only to confirm an evicted serve's VRAM came back. */
  gpu?: GpuProbe;
  /** vLLM's sleep-mode endpoints; needed only for serves evicted by sleeping. */
  sleep?: ServeSleep;
  /** How often health is polled while waiting, and other waits' poll; tests shorten it. Without it, /health by src/domain/health-poll.ts. */
  pollIntervalMs?: number;
  /** Router promotion (docs/promotion.md): Docker and the live config's files, and the routers this worker may promote. */
  routerDeployment?: RouterDeployment;
  routerTargets?: RouterTarget[];
  /** The admin client of a router target (HTTP, wired by the worker); needed only to reload and verify. */
  routerAdminFor?: (target: RouterTarget, timeoutMs: number) => RouterAdmin;
  /** The worker's metrics: how long drains and VRAM-release waits took (docs/metrics.md). */
  metrics?: ActivityMetrics;
  /** The namespace's registered search attributes: a run started untagged is tagged only with those. Without it, runs stay as started. */
  searchAttributes?: SearchAttributeRegistry;
  /** Where a failed start's last lines are kept when its compensation removes the container; none kept without it. */
  failedStarts?: FailedStartLogs;
}

export interface StartedContainer {
  containerId: string;
  containerName: string;
  created: boolean;
  gpuPinned: boolean;
}

export interface HealthResult {
  url: string;
  probes: number;
  waitedMs: number;
  /** When it answered 200 (an HTTP serve's; absent before it was kept): a process listing started since sees what it took. */
  healthyAtEpochMs?: number;
}

export interface IdentityResult {
  /** The serve asked: a local activity's input is not in history, its result is. */
  serve?: string;
  url: string;
  expected: string;
  observed: string[];
}

/** What a stop's attempt heartbeats before it issues the stop. */
interface StopProgress {
  stopIssuedAtEpochMs: number;
  attempt: number;
}

/** How long a serve with api = "none" must stay running to count as started. */
export const NO_API_SETTLE_MS = 2000;

/** The steps an operation records once admitted: a bring-up's admission, an acquisition's (or its eviction plan). */
const PAST_ADMISSION = ['admit', 'plan'];

/**
 * How long a fresh ledger's reconcile waits for the state of the run it replaces (a visibility
 * list and a query that replays that run): a third of the activity's 30 s. Past it, each sleeper
 * found is held whole, for no acquirer, and the victims stopped for an acquisition are not known.
 */
const LOST_RUN_READ_MS = 10_000;

/** How long a fresh ledger's reconcile waits for Temporal to say whether the lost run's start slot's holder still runs. */
const SLOT_HOLDER_READ_MS = 5_000;
/**
 * How long a start step cancelled by its worker's stop asks whether its run still holds the serve,
 * the check for another worker to answer included. The stop's 10 s (WORKER_STOP_MS) hold up to 3 s
 * for local steps to end, what is left of the container's create and start, this, and a removal.
 */
const STOPPING_LEDGER_READ_MS = 3_000;

/**
 * What a fresh ledger tells the operator of the run it replaced, where its restore links may be
 * missing: that run could not be read; none is listed while serves of the GPU run on the box (a
 * ledger ran before, its history gone); or it could, and had not read its own predecessor either
 * (still so). Nothing where it was read, or where there never was one.
 */
function unreadNote(lost: LostRun, servesFound: number): { lostRunUnread?: LostRunUnread } {
  const now = (why: string) => ({ lostRunUnread: { why, atMs: Date.now() } });
  if (lost.read === 'unread') return now(lost.why);
  if (lost.read === 'none') return servesFound > 0 ? now('no earlier run of this ledger is listed, yet serves of its GPU run: its history is gone') : {};
  return lost.state.lostRunUnread ? { lostRunUnread: lost.state.lostRunUnread } : {};
}

export function createActivities(deps: ActivityDeps) {
  const pollMs = deps.pollIntervalMs ?? 1000;

  /** Why a container stopped, for the failure message; its log tail may echo secrets (vLLM logs its args). */
  async function describeExit(name: string, serve: string, state: ContainerState | undefined): Promise<string> {
    if (!state) return `container ${name} is gone`;
    const tail = redactSecrets((await deps.runtime.logsTail(name, 5)).trim(), (await loadServe(serve)).serve);
    return `container ${name} ${state.status} with exit code ${state.exitCode}${tail ? `; last output: ${tail.split('\n').join(' | ')}` : ''}${keptHint(serve)}`;
  }

  /** How long keeping a failed start's last lines may take before its removal goes on without them. */
  const KEEP_FAILED_START_MS = 10_000;

  /** Where a failed start's message says its kept lines are: the removal that follows takes the container's log. */
  const keptHint = (serve: string): string =>
    deps.failedStarts ? ` (\`gpures serves logs ${serve}\` prints its last ${LOG_BOUNDS.failedStart.lines} lines, kept when the container is removed)` : '';

  const loadServe = (name: string) => loadServeFrom(deps.manifest, name);

  /**
   * nvidia-smi's process listing, started where the step that follows will want one queried after
   * what this step has just seen (a container down, a serve healthy), and left running: that step
   * takes it up (the probe's `reuse`) on this worker, or spawns its own. What it says is read there.
   */
  const listAhead = (): void => {
    void deps.gpu?.computeApps({ refusalThrows: true }).catch(() => undefined);
  };

  /**
   * A compensation's removal takes the container's log with it, while "why did the start fail" is
   * asked right after: its last lines (redacted, bounded) are kept first, where `gpures serves
   * logs` reads them. Never in a result or a failure: no line reaches a history. Keeping them is
   * best effort: a removal that failed for it would keep the MiB committed.
   */
  async function keepFailedStartLog(node: string, serve: string, name: string): Promise<void> {
    const store = deps.failedStarts;
    const run = activityContext()?.info.workflowExecution;
    if (!store || !run) return;
    try {
      // Bounded: a Docker slow to answer must not hold the removal, and the MiB behind it, for these lines.
      const [state, raw, { serve: spec }] = await withTimeout(
        Promise.all([deps.runtime.inspect(name), deps.runtime.logsTail(name, LOG_BOUNDS.failedStart.lines), loadServe(serve)]),
        KEEP_FAILED_START_MS,
        `no answer within ${KEEP_FAILED_START_MS / 1000} s`,
      );
      const text = failedStartTail(redactSecrets(raw, spec));
      const end = state ? `${state.status} with exit code ${state.exitCode}` : 'was gone';
      store.keep({ container: name, serve, workflowId: run.workflowId, runId: run.runId, atEpochMs: Date.now(), end, text });
    } catch (err) {
      activityContext()?.log.warn(
        `the last lines of ${name} (node ${node}) could not be kept before its removal: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
  }

  /**
   * A start turned healthy: an earlier failure's kept lines no longer say why the serve is down,
   * and `serves logs` would print them once this container is gone. Best effort, as keeping them.
   */
  function healthy(name: string, result: HealthResult): HealthResult {
    try {
      deps.failedStarts?.forget(name);
    } catch (err) {
      activityContext()?.log.warn(
        `the kept lines of an earlier failed start of ${name} could not be dropped: ${err instanceof Error ? err.message : String(err)}`,
      );
    }
    return result;
  }

  /**
   * The holder of a bring-up or an acquisition of `serve` that is running past its admission
   * (either may wake it), if one is; 'unknown' when Temporal could not say.
   */
  async function admittedOperationOn(node: string, serve: string): Promise<{ holder: string } | 'unknown' | undefined> {
    try {
      for (const workflowId of [workflowIds.bringUp(node, serve), workflowIds.acquire(node, serve)]) {
        const runId = await deps.operations.runningPast(workflowId, PAST_ADMISSION);
        if (runId) return { holder: holderOf(workflowId, runId) };
      }
      return undefined;
    } catch {
      return 'unknown';
    }
  }

  /** Whether the run holding the lost ledger's start slot still runs; 'unknown' when Temporal does not say within its bound. */
  async function slotHolderRuns(holder: string): Promise<boolean | 'unknown'> {
    const run = parseHolder(holder);
    if (!run) return false;
    const late = `no answer within ${SLOT_HOLDER_READ_MS / 1000} s`;
    return withTimeout(deps.operations.status(run.workflowId, run.runId), SLOT_HOLDER_READ_MS, late).then(
      (s) => s.status !== 'closed',
      () => 'unknown' as const,
    );
  }

  /** The ledger run a fresh one replaces (the reconcile's own run excepted), as Temporal answers. */
  async function lostLedger(input: { node: string; gpuRole: string }): Promise<LostRun> {
    const runId = activityContext()?.info.workflowExecution?.runId;
    return runId ? deps.ledger.lostRunState(input.node, input.gpuRole, runId, LOST_RUN_READ_MS) : { read: 'unread', why: 'not asked by a ledger run' };
  }

  // Each activity heartbeats while it runs (the eviction and promotion ones already do: nesting is a no-op).
  return heartbeating({
    ...observedEviction(createEvictionActivities(deps), deps.metrics),
    ...createPromotionActivities(deps),
    ...createLeaseActivities(deps),
    ...createRunTagActivities(deps),
    ...createSleepActivities(deps),
    ...createStartRoomActivities(deps),

    /**
     * The serve as the manifest declares it now, for the workflow's history: env values and
     * secret-bearing args are redacted there, and startServeContainer reads the real ones itself.
     */
    async resolveServe(input: { serve: string }): Promise<ResolvedServe> {
      const resolved = await loadServe(input.serve);
      return { ...resolved, serve: redactServe(resolved.serve) };
    },

    async ledgerAdmit(input: { node: string; args: LedgerAdmitArgs; updateId: string }): Promise<LedgerAdmitResult> {
      return deps.ledger.admit(input.node, input.args, input.updateId);
    },

    async ledgerSetPhase(input: { node: string; gpu: GpuSpec; args: LedgerPhaseArgs; updateId: string }): Promise<LedgerState> {
      return deps.ledger.setPhase(input.node, input.gpu, input.args, input.updateId);
    },

    async ledgerRelease(input: { node: string; gpu: GpuSpec; args: LedgerReleaseArgs; updateId: string }): Promise<LedgerReleaseResult> {
      return deps.ledger.release(input.node, input.gpu, input.args, input.updateId);
    },

    async ledgerAcquire(input: { node: string; args: LedgerAcquireArgs; updateId: string }): Promise<LedgerAcquireResult> {
      return deps.ledger.acquire(input.node, input.args, input.updateId);
    },

    async ledgerVictimReleased(input: { node: string; gpu: GpuSpec; args: LedgerVictimArgs; updateId: string }): Promise<LedgerState> {
      return deps.ledger.victimReleased(input.node, input.gpu, input.args, input.updateId);
    },

    async ledgerAbortEviction(input: { node: string; gpu: GpuSpec; args: LedgerAbortArgs; updateId: string }): Promise<LedgerState> {
      return deps.ledger.abortEviction(input.node, input.gpu, input.args, input.updateId);
    },

    async ledgerStartSlot(input: { node: string; gpu: GpuSpec; args: LedgerStartSlotArgs; updateId: string }): Promise<LedgerStartSlotAnswer> {
      return deps.ledger.startSlot(input.node, input.gpu, input.args, input.updateId);
    },

    async ledgerBeginStop(input: { node: string; gpu: GpuSpec; args: LedgerStopArgs; updateId: string }): Promise<LedgerStopAnswer> {
      return deps.ledger.beginStop(input.node, input.gpu, input.args, input.updateId);
    },

    /**
     * Ends the operation holding a serve: cancels it if it runs (mode cancel) or waits for it
     * (mode wait), heartbeating, until it has closed, so its compensations (container removed,
     * MiB released, tier readmitted) are done. A retried attempt does not cancel again.
     */
    async endOperation(input: { holder: string; timeoutS: number; mode?: OperationEndMode }): Promise<OperationEnd> {
      const mode = input.mode ?? 'cancel';
      const run = parseHolder(input.holder);
      const started = Date.now();
      if (!run) return { holder: input.holder, outcome: 'no-run', waitedMs: 0 };
      const closed = (closedAs: string | undefined, asked: boolean): OperationEnd => ({
        holder: input.holder,
        outcome: asked && closedAs === 'CANCELLED' ? 'cancelled' : 'ended',
        ...(closedAs ? { closedAs } : {}),
        waitedMs: Date.now() - started,
      });
      const first = await deps.operations.status(run.workflowId, run.runId);
      // Closed before this attempt looked: on a retry, by the cancel the earlier attempt sent.
      const retried = (activityContext()?.info.attempt ?? 1) > 1;
      if (first.status === 'closed') return closed(first.closedAs, mode === 'cancel' && retried);
      if (mode === 'status') return { holder: input.holder, outcome: 'running', waitedMs: 0 };
      if (mode === 'cancel') await deps.operations.cancel(run.workflowId, run.runId, cancelReason(activityContext()?.info.workflowExecution?.workflowId));
      const ctx = Context.current();
      for (;;) {
        const now = await deps.operations.status(run.workflowId, run.runId);
        if (now.status === 'closed') return closed(now.closedAs, mode === 'cancel');
        if (Date.now() - started > input.timeoutS * 1000) {
          throw nonRetryable(
            Failure.ServeBusy,
            mode === 'cancel'
              ? `${run.workflowId} (run ${run.runId}) was asked to cancel and has not ended within ${input.timeoutS} s; ` +
                  `it may still be giving back what it took`
              : `${run.workflowId} (run ${run.runId}) has not ended within ${input.timeoutS} s`,
          );
        }
        ctx.heartbeat({ waitedMs: Date.now() - started });
        await ctx.sleep(Math.min(pollMs, 250));
      }
    },

    async ledgerSnapshot(input: { node: string; gpu: GpuSpec }): Promise<LedgerState> {
      // Inside the activity's 30 s: a ledger still reconciling by then fails it with that reason, and it is retried.
      return deps.ledger.snapshot(input.node, input.gpu, 15_000);
    },

    /**
     * Running containers this project started for the GPU, as reservations: what a fresh ledger
     * starts from. A serve evicted by sleeping that says it sleeps is taken as sleeping (a restore
     * wakes it), not as running at its whole reservation, holding its declared residual or what the
     * ledger run it replaces held it at when that was more (residualHeldAfresh: a residual seen above
     * the declared one; whole when that run cannot be read); unless a bring-up or an acquisition of
     * it is running past its admission (by the ledger this one replaces): it may be waking past its
     * fence, so it is admitted whole to that run, which finishes against this ledger. One that has
     * not been admitted yet is admitted here, as any restore. When Temporal cannot say, it counts
     * whole: a wake may be under way. The restore links come from that run too (withRestoreLinks):
     * its victims stopped for an acquisition, and for whom each sleeper sleeps; and its start slot,
     * while the run holding it still runs (carriedStartSlot).
     */
    async reconcileLedger(input: { node: string; gpuRole: string }): Promise<Reconciled> {
      // The lost run's last state, read once: its victims stopped for an acquisition left no container.
      // Read first (it may take up to LOST_RUN_READ_MS): the box is listed after it, so a stop that
      // lands meanwhile is not taken for a running serve.
      const lostRun = await lostLedger(input);
      const lost = lostRun.read === 'state' ? lostRun.state : undefined;
      const containers = await deps.runtime.list({ [LABEL.node]: input.node, [LABEL.gpuRole]: input.gpuRole });
      // Read once for all of them; a manifest that cannot be read now takes none as asleep (each counts whole).
      const manifest = await loadManifest(deps.manifest).catch(() => undefined);
      const found: Reservation[] = [];
      for (const c of containers.filter((x) => x.running && Number(x.labels[LABEL.vramMib]) > 0 && x.labels[LABEL.serve])) {
        const serve = c.labels[LABEL.serve] ?? c.name;
        const r: Reservation = {
          serve,
          vramMib: Number(c.labels[LABEL.vramMib]),
          class: (SERVE_CLASSES as readonly string[]).includes(c.labels[LABEL.class] ?? '') ? (c.labels[LABEL.class] as ServeClass) : 'resident',
          phase: 'running',
          // The run that started it holds it still (its bring-up finishes against this ledger), else the container names the hold.
          holder: c.labels[LABEL.holder] ?? `reconciled from container ${c.name}`,
        };
        const spec = manifest?.manifest.serves.find((s) => s.name === serve);
        const sleep = spec && (await sleepsNow(deps.sleep, spec)) ? spec.sleep : undefined;
        if (!sleep) {
          found.push(r);
          continue;
        }
        const declared = { level: sleep.level, residualMib: sleep.residualMib };
        const waking = await admittedOperationOn(input.node, serve);
        // The level it sleeps at, from the ledger this one replaces (sleptAtLevelAfresh): the box
        // says only that it sleeps. Unknown, it is left unset, and its wake reloads the weights as
        // after level 2, right after either. What it keeps asleep, that ledger knew too (the
        // release check's reading), and nvidia-smi alone cannot say which serve on the GPU keeps what.
        const level = sleptAtLevelAfresh(serve, sleep.level, lost);
        if (waking === undefined)
          found.push({ ...r, phase: 'sleeping', ...level, sleep: { ...declared, residualMib: residualHeldAfresh(serve, r.vramMib, sleep.residualMib, lost) } });
        else if (waking === 'unknown') found.push({ ...r, phase: 'sleeping', ...level, sleep: { ...declared, residualMib: r.vramMib } });
        else
          found.push({ ...r, phase: 'admitted', holder: waking.holder, sleep: declared, admittedFrom: { evicted: true, asleepAt: level.sleptAtLevel ?? 2 } });
      }
      // A start profiling on the card when the ledger was lost keeps its slot while its run runs (its give reaches this ledger).
      const slotHolder = lost?.startSlot ? await slotHolderRuns(lost.startSlot.holder) : false;
      return { reservations: withRestoreLinks(found, lost), ...unreadNote(lostRun, found.length), ...carriedStartSlot(lost, slotHolder) };
    },

    async inspectServe(input: { node: string; serve: string }): Promise<ContainerState | null> {
      return (await deps.runtime.inspect(containerName(input.node, input.serve))) ?? null;
    },

    async startServeContainer(input: ResolvedServe): Promise<StartedContainer> {
      const { node, gpu } = input;
      // The unredacted spec, read here so its secrets never pass through history.
      const { serve } = await loadServe(input.serve.name);
      const name = containerName(node, serve.name);
      // The fence: the run that asks must hold the serve's reservation, checked by the ledger as
      // part of this step (and again by each retry), so a run whose reservation was taken away
      // fails here, before it creates anything.
      const run = Context.current().info.workflowExecution;
      if (!run)
        throw nonRetryable(Failure.ReservationLost, `start of ${serve.name} refused: no operation holds it (the start was not asked by a workflow run)`);
      const holder = holderOf(run.workflowId, run.runId);
      // A container of this run's goes now, by this step, when the serve is no longer this run's:
      // the fence refused, or the step was cancelled (its run may have ended without compensating,
      // terminated, and a `serves down` taken the hold over) and the ledger, asked by a query that a
      // cancel does not cut short, no longer holds the serve for this run admitted or running, as
      // the step's own `started` fence judges (another run's, evicted, asleep, gone). By its id: the
      // name may be another run's by the time the removal lands. Any other failure, or a cancel
      // while the run still holds the serve (a worker stopping, an attempt timed out), keeps it:
      // the retry adopts it, and the model's load is not paid twice.
      const stillOurs = (l: LedgerState) => fenceStepProblem(l, { serve: serve.name, holder, step: 'started' }) === undefined;
      const notOurs = async (err: unknown): Promise<boolean> => {
        if (err instanceof ApplicationFailure && err.type === Failure.ReservationLost) return true;
        if (!(err instanceof CancelledFailure)) return false;
        // A stopping worker's cancel: this worker polls no workflow task now, so only another
        // worker of the node answers (a deliberate pair, --allow-second-worker); the SDK tells the
        // server of the stop, which then sends the query to the node's queue, not to this
        // worker's sticky one. There, a `serves down` may have taken the serve over from this run
        // (terminated) and found nothing to stop while this step was creating the container.
        // None there (the node's only worker: no `serves down` runs before it exits, by when the
        // container is there for the down to stop; not asked then), no answer, or a ledger still
        // reconciling (it adopts the container for its run): kept, the retry's to adopt.
        if (Context.current().cancellationDetails?.workerShutdown) {
          const l = await deps.ledger
            .answerWhileStopping(node, gpu, STOPPING_LEDGER_READ_MS)
            .catch((e: unknown) => (e instanceof Error ? e : new Error(String(e))));
          if (!(l instanceof Error) && !l.reconciling) return !stillOurs(l);
          const why = l instanceof Error ? l.message.slice(0, 300) : 'the ledger is reconciling';
          activityContext()?.log.warn(`start of ${serve.name} cut by the worker's stop: ${name} kept for the retry to adopt (${why})`);
          return false;
        }
        return deps.ledger.snapshot(node, gpu, 10_000).then(
          (l) => !stillOurs(l),
          () => false,
        );
      };
      const removeOurs = async (err: unknown, startedNow?: { id: string; created: boolean }): Promise<never> => {
        if (!(await notOurs(err))) throw err;
        const c = startedNow?.created ? undefined : await deps.runtime.inspect(name);
        const ours = startedNow?.created ? startedNow.id : c?.labels[LABEL.holder] === holder ? c.id : undefined;
        if (ours) await deps.runtime.remove(name, ours);
        throw err;
      };
      await deps.ledger
        .fence(node, gpu, { serve: serve.name, holder, step: 'start' }, `${holder}/fence-start/${Context.current().info.attempt}`)
        .catch((err: unknown) => removeOurs(err));
      const started = await permanentAsFailure(() =>
        deps.runtime.ensureRunning({
          name,
          image: serve.image,
          cmd: serveCommand(serve),
          env: serve.env,
          labels: serveLabels(node, serve, gpu, workflowIds.ledger(node, gpu.role), holder),
          bind: serve.bind,
          hostPort: serve.port,
          containerPort: serve.containerPort,
          gpuUuid: gpu.uuid,
        }),
      );
      // Once more with the container up: a ledger restarted meanwhile (it reconciles from the
      // running containers) may no longer know this run, or a `serves down` took the serve over
      // from a run that ended (terminated) while this step created it.
      await deps.ledger
        .fence(node, gpu, { serve: serve.name, holder, step: 'started' }, `${holder}/fence-started/${Context.current().info.attempt}`)
        .catch((err: unknown) => removeOurs(err, started));
      return { containerId: started.id, containerName: name, created: started.created, gpuPinned: started.gpuPinned };
    },

    /**
     * Polls /health until 200, heartbeating each probe. The deadline comes from the workflow so a
     * retried attempt does not restart the clock; a container that exits fails at once.
     */
    async waitHealthy(input: {
      node: string;
      serve: ServeSpec;
      deadlineEpochMs: number;
      /** The measure by its own processes follows (a cold start's): nvidia-smi's process listing is started as soon as it answers. */
      listWhenHealthy?: boolean;
    }): Promise<HealthResult> {
      const ctx = Context.current();
      const name = containerName(input.node, input.serve.name);
      const url = serveHealthUrl(input.serve);
      const earlier = earlierProgress<Partial<HealthBeat>>();
      const started = typeof earlier?.startedAtEpochMs === 'number' ? earlier.startedAtEpochMs : Date.now();
      let probes = typeof earlier?.probes === 'number' ? earlier.probes : 0;
      let last = 'no probe yet';
      const beat = () => ({
        startedAtEpochMs: started,
        probes,
        deadlineEpochMs: input.deadlineEpochMs,
        timeoutS: input.serve.startTimeoutS,
        atEpochMs: Date.now(),
      });
      for (;;) {
        const state = await deps.runtime.inspect(name);
        if (!state?.running) throw nonRetryable(Failure.ContainerExited, await describeExit(name, input.serve.name, state));
        probes += 1;
        // Nothing to ask a serve without HTTP: a command that fails exits within moments, so
        // staying up that long is its readiness.
        if (input.serve.api === 'none') {
          if (Date.now() - started >= NO_API_SETTLE_MS || Date.now() >= input.deadlineEpochMs)
            return healthy(name, { url: `container ${name}`, probes, waitedMs: Date.now() - started });
          progress({ ...beat(), last: 'running' } satisfies HealthBeat);
          await ctx.sleep(Math.min(pollMs, NO_API_SETTLE_MS));
          continue;
        }
        const h = await deps.probe.health(url, 2000);
        if (h.ok) {
          // Healthy, it has taken its memory (vLLM allocates before /health answers): the measure's
          // listing is started now, beside this step's end, the workflow task and the dispatch.
          const healthyAtEpochMs = Date.now();
          if (input.listWhenHealthy) listAhead();
          return healthy(name, { url, probes, waitedMs: healthyAtEpochMs - started, healthyAtEpochMs });
        }
        last = h.status !== undefined ? `HTTP ${h.status}` : (h.error ?? 'no answer');
        progress({ ...beat(), last } satisfies HealthBeat);
        if (Date.now() >= input.deadlineEpochMs) {
          throw nonRetryable(
            Failure.HealthTimeout,
            `no 200 from ${url} within ${input.serve.startTimeoutS} s (${probes} probes, last: ${last})${keptHint(input.serve.name)}`,
          );
        }
        await ctx.sleep(healthPollDelayMs(Date.now() - started, input.deadlineEpochMs - Date.now(), deps.pollIntervalMs));
      }
    },

    /** The id /v1/models reports must equal served_model_name exactly: no prefix or case folding. */
    async verifyIdentity(input: { serve: ServeSpec }): Promise<IdentityResult> {
      const url = serveBaseUrl(input.serve);
      // The key vLLM wants on /v1 routes, read here from the manifest: history holds it redacted.
      const resolved = await loadServe(input.serve.name);
      const apiKey = resolved.serve.env[SERVE_API_KEY_ENV];
      let observed: string[];
      try {
        observed = await permanentAsFailure(() => deps.probe.modelIds(url, 5000, apiKey));
      } catch (err) {
        if (!(err instanceof ServeUnreachable)) throw err;
        // A container that is gone will not answer on a retry; one that runs may (a restart, a busy accept queue).
        const name = containerName(resolved.node, input.serve.name);
        const state = await deps.runtime.inspect(name);
        const details = { url: err.url, code: err.code };
        if (!state?.running)
          throw nonRetryable(Failure.ContainerExited, `identity probe ${err.message}: ${await describeExit(name, input.serve.name, state)}`, details);
        throw transient(Transient.IdentityUnreachable, `identity probe ${err.message}, while container ${name} is ${state.status}`, details);
      }
      const expected = input.serve.servedModelName;
      if (!observed.includes(expected)) {
        throw nonRetryable(
          Failure.IdentityMismatch,
          `${url}/v1/models reports ${observed.length ? observed.map((id) => `'${id}'`).join(', ') : 'no model'}, expected '${expected}'`,
          { serve: input.serve.name, url, expected, observed },
        );
      }
      return { serve: input.serve.name, url, expected, observed };
    },

    /**
     * The issue time goes out as this attempt's first heartbeat before the stop: should the worker
     * die after it, the retry reports the stop the first attempt issued, not its own look at a
     * container already stopped.
     */
    async stopServeContainer(input: {
      node: string;
      serve: string;
      timeoutS: number;
      own?: OwnContainer;
      fence?: GpuSpec;
      /** The release wait follows (a victim's stop): nvidia-smi's process listing is started as soon as the container is down. */
      listWhenDown?: boolean;
    }): Promise<StopResult> {
      const name = containerName(input.node, input.serve);
      // Fenced (a victim's stop, a bring-down's), by each attempt: the ledger must hold the serve
      // for this run as evicting or stopping. A ledger restarted since the eviction's plan or the
      // take holds it running for the run on its container's label, and a stop now would leave it
      // down with its MiB committed and nothing to bring it back. Compensations that remove a run's
      // own container pass no fence.
      // A retry after an attempt that issued the stop is not fenced again: the stop cannot be taken
      // back, and a ledger restarted meanwhile would refuse it as "not stopped" while it goes down.
      // That record is a heartbeat, which may never have reached the server: a retry refused with
      // the container already down takes the stop as done, and a first attempt refused with the
      // container down and nothing held for the serve finds it down already (fencedOrDown).
      const earlier = earlierProgress<Partial<StopProgress>>();
      const attempt = activityContext()?.info.attempt ?? 1;
      const stoppedEarlier = typeof earlier?.stopIssuedAtEpochMs === 'number' && typeof earlier.attempt === 'number';
      if (input.fence && !stoppedEarlier) {
        const down = await fencedOrDown({ ledger: deps.ledger, runtime: deps.runtime }, input.node, input.fence, input.serve, attempt);
        if (down) return { containerName: name, ...down, issuedAtEpochMs: Date.now() };
      }
      // A compensation's removal: only the run's own container. The one under the name may be
      // another run's by now, and is left running (a stop by name would take it away); with none
      // there, nothing that appears under the name after this look is touched.
      const under = input.own ? await underTheName(deps.runtime, input.node, input.serve, input.own) : undefined;
      const found = under && 'own' in under ? under.own : undefined;
      if (under && !found) {
        const leftAlone = 'leftAlone' in under ? { leftAlone: under.leftAlone } : {};
        return { containerName: name, stop: stoppedEarlier ? 'stopped' : 'absent', remove: 'absent', issuedAtEpochMs: Date.now(), ...leftAlone };
      }
      let issued: StopProgress;
      if (stoppedEarlier) {
        issued = { stopIssuedAtEpochMs: earlier.stopIssuedAtEpochMs as number, attempt: earlier.attempt as number };
      } else {
        issued = { stopIssuedAtEpochMs: Date.now(), attempt };
        progress(issued);
      }
      // By its id when it is the run's own: dockerd stops and removes that one and no other, though
      // another run's container may take the name between the look above and these calls.
      const observed = await deps.runtime.stop(name, input.timeoutS, found?.id);
      // Down: every process of the container has exited. The release wait's first listing must be
      // queried after that, and is started now, beside the removal, the workflow task and the
      // wait's dispatch, for the wait to take up (listedAfterEpochMs) instead of spawning its own.
      const downAtEpochMs = Date.now();
      if (input.listWhenDown) listAhead();
      // Stopped, so its last lines are all there (a vLLM traceback, the drain's end).
      if (found) await keepFailedStartLog(input.node, input.serve, name);
      const remove = await deps.runtime.remove(name, found?.id);
      return {
        containerName: name,
        stop: issued.attempt !== attempt ? 'stopped' : observed,
        remove,
        issuedAtEpochMs: issued.stopIssuedAtEpochMs,
        issuedByAttempt: issued.attempt,
        downAtEpochMs,
      };
    },
  });
}

export type Activities = ReturnType<typeof createActivities>;
