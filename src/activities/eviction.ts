// Activities of an on-demand acquisition: the router's quiesce and readmit, the drain wait, and
// the physical check that a victim's VRAM came back. (The ledger's updates are in index.ts.)
import { ApplicationFailure, Context } from '@temporalio/activity';
import { containerName, serveBaseUrl } from '../domain/serve';
import type { ServeSpec } from '../domain/types';
import type { ContainerRuntime } from '../adapters/containers/port';
import type { GpuProbe, ListingReuse, ReadingAge } from '../adapters/gpu/port';
import { RECENT_READING_MS } from '../domain/physical';
import type { ManifestSource } from '../adapters/manifest/port';
import type { RouterAdmin } from '../adapters/router-admin/port';
import type { ServeProbe } from '../adapters/serve-probe/port';
import { imageMissing } from '../adapters/errors';
import type { DrainResult, GpuReading, QuiesceMarks, QuiesceWhy, ServeProcesses, TierState, VramReading, VramReleaseResult } from '../shared/contracts';
import { neededMib, ownReading, ownUnseen, serveProcessesOf, stillHeld } from '../domain/vram-release';
import type { DrainBeat, VramBeat } from '../shared/progress';
import { nonRetryable, permanentAsFailure } from './failure';
import { earlierProgress, heartbeating, progress } from './heartbeat';
import { loadManifest } from './resolve';
import { Failure } from '../shared/failures';
import { eviction, migNotRead } from '../shared/wording';
import type { OwnContainer } from '../domain/fence';
import { underTheName } from './own-container';
import { withTimeout } from '../worker/time-bound';
import type { LeftAlone } from './own-container';

export interface EvictionDeps {
  runtime: ContainerRuntime;
  manifest: ManifestSource;
  probe: ServeProbe;
  router?: RouterAdmin;
  gpu?: GpuProbe;
  pollIntervalMs?: number;
}

/** What an eviction needs, found present before anything on the box is touched. */
export interface EvictionPreflight {
  image: string;
  /** Null when no victim is running: there is no VRAM to see come back, so no nvidia-smi needed. */
  gpu: GpuReading | null;
  /** Each victim's router tier, confirmed able to readmit it later (model_identity set). */
  tiers: { serve: string; tier: string }[];
}

/**
 * What a drain's attempt heartbeats each poll: a retry after a dead worker resumes from these, so
 * the figures at the drain's start are the first attempt's (the retry may well find 0 in flight).
 * The rest of DrainBeat (the deadline, when read) is for a follower's live line.
 */
interface DrainProgress extends DrainBeat {
  first: { router: number; vllm: number | null };
}

function isDrainProgress(p: unknown): p is DrainProgress {
  const d = p as Partial<DrainProgress> | undefined;
  return typeof d?.startedAtEpochMs === 'number' && typeof d.polls === 'number' && typeof d.first?.router === 'number';
}

/** The worker's router admin, or the failure that says how to configure one. */
export function configuredRouter(router: RouterAdmin | undefined): RouterAdmin {
  if (!router) throw nonRetryable(Failure.RouterNotConfigured, 'this worker has no router admin configured (GPURES_ROUTER_URL and GPURES_ROUTER_TOKEN)');
  return router;
}

/** The preflight's reading records that nvidia-smi answers, and the GPU then (src/domain/physical.ts). */
const RECENT_READING: ReadingAge = { maxAgeMs: RECENT_READING_MS };

/** The age a workflow allowed a reading, bounded by the domain's: a reading that decides is asked for fresh. */
export const ageOf = (input: { maxAgeMs?: number }): ReadingAge =>
  input.maxAgeMs === undefined ? {} : { maxAgeMs: Math.max(0, Math.min(input.maxAgeMs, RECENT_READING_MS)) };

/**
 * How old a process listing started ahead of its step may be when the step takes it up (the
 * release wait's, started by the stop as the victim went down; the measure's, by the health check
 * as the serve answered): a workflow task and a dispatch lie between, tens of ms. Older, something
 * held them (a busy worker, a slow server), and the step lists afresh.
 */
export const LISTED_AHEAD_MAX_AGE_MS = 2000;

/** The `reuse` of a listing started ahead at or after `afterEpochMs`, where a step was told one was. */
export const listedSince = (afterEpochMs: number | undefined): { reuse?: ListingReuse } =>
  afterEpochMs !== undefined ? { reuse: { afterEpochMs, maxAgeMs: LISTED_AHEAD_MAX_AGE_MS } } : {};

/** How long a drain that has ended waits for its victim's process read (a docker top, an nvidia-smi spawn); a room check, for its serves' docker top. */
export const PROCESS_READ_MS = 5000;

/** The read, or past PROCESS_READ_MS an unseen one (the read itself never fails): the whole GPU then confirms the release. */
function withinProcessRead(reading: Promise<ServeProcesses>): Promise<ServeProcesses> {
  const late = `its processes were not read within ${PROCESS_READ_MS / 1000} s of the drain's end (docker top or nvidia-smi did not answer)`;
  return withTimeout(reading, PROCESS_READ_MS, late).catch((err: unknown) => ({ pids: [], onGpu: [], unseen: err instanceof Error ? err.message : late }));
}

export function createEvictionActivities(deps: EvictionDeps) {
  const pollMs = deps.pollIntervalMs ?? 1000;
  const router = (): RouterAdmin => configuredRouter(deps.router);
  const gpuProbe = (): GpuProbe => {
    if (!deps.gpu) throw nonRetryable(Failure.NvidiaSmiMissing, 'this worker has no GPU probe configured (GPURES_NVIDIA_SMI)');
    return deps.gpu;
  };
  const readGpu = async (uuid: string, age: ReadingAge = {}): Promise<GpuReading> => {
    const gpus = await permanentAsFailure(() => gpuProbe().readGpus(age));
    const g = gpus.find((x) => x.uuid === uuid);
    const has = `has: ${gpus.map((x) => x.uuid).join(', ') || 'none'}`;
    if (!g) throw nonRetryable(Failure.GpuNotFound, uuid.startsWith('MIG-') ? `${migNotRead(uuid)} (${has})` : `nvidia-smi reports no GPU ${uuid} (${has})`);
    return g;
  };

  /** A process query nvidia-smi refused during a release wait (a permanent failure, its binary gone, still fails the step). */
  const unlisted = (err: unknown): { unread: string } => {
    if (err instanceof ApplicationFailure) throw err;
    return { unread: err instanceof Error ? err.message : String(err) };
  };

  /** Never fails the eviction: processes that cannot be read leave the whole GPU to confirm the release. */
  const serveProcesses = async (container: string, uuid: string): Promise<ServeProcesses> => {
    const list = deps.runtime.processes?.bind(deps.runtime);
    if (!list) return { pids: [], onGpu: [], unseen: "this worker's container runtime cannot list a container's processes" };
    try {
      const [pids, apps] = await Promise.all([list(container), gpuProbe().computeApps()]);
      return serveProcessesOf(container, pids, apps, uuid);
    } catch (err) {
      return { pids: [], onGpu: [], unseen: `its processes could not be read: ${err instanceof Error ? err.message : String(err)}` };
    }
  };

  return heartbeating({
    /**
     * Checks, before any victim is quiesced, what would otherwise fail only after it was stopped:
     * the acquirer's image is on the host, nvidia-smi reads the GPU (the VRAM check after each
     * stop needs it), and each victim's router tier can readmit it (model_identity is set; a tier
     * without it would refuse every readmit, leaving the victim out of the router for good).
     */
    async preflightEviction(input: { acquirer: string; gpuUuid: string; victims: string[] }): Promise<EvictionPreflight> {
      const manifest = await loadManifest(deps.manifest);
      const { serve } = manifest.resolve(input.acquirer);
      await permanentAsFailure(async () => {
        if (!(await deps.runtime.hasImage(serve.image))) throw imageMissing(serve.image);
      });
      const tiers: { serve: string; tier: string }[] = [];
      let anyRunning = false;
      for (const name of input.victims) {
        const victim = manifest.resolve(name);
        if ((await deps.runtime.inspect(containerName(victim.node, name)))?.running) anyRunning = true;
        const tier = victim.serve.routerTier;
        if (!tier) continue;
        const state = await permanentAsFailure(() => router().tierState(tier));
        if (!state.modelIdentity) {
          throw nonRetryable(
            Failure.TierNotReadmittable,
            `tier '${tier}' of ${name} has no model_identity at the router: evicted, ` +
              `${name} could never be readmitted (set model_identity for the tier and promote the router config)`,
          );
        }
        tiers.push({ serve: name, tier });
      }
      const gpu = anyRunning ? await readGpu(input.gpuUuid, RECENT_READING) : null;
      return { image: serve.image, gpu, tiers };
    },

    async quiesceTier(input: { tier: string }): Promise<TierState> {
      return permanentAsFailure(() => router().quiesce(input.tier));
    },

    /**
     * The last step of bringing a serve up: a tier left quiesced (by an eviction) re-enters
     * rotation only through the router's guarded readmit. A refusal is a failure that names the
     * router's reason, so the workflow stops the serve again rather than leave it unreachable.
     */
    async readmitIfQuiesced(input: {
      tier: string;
      /** Lift only this quiesce (quiesceMarks): one made since is someone else's, and the tier is left quiesced for them. */
      quiesceMark?: string;
    }): Promise<{ action: 'already-active' | 'readmitted' | 'no-router' | 'quiesced-since'; observedModel?: string }> {
      if (!deps.router) return { action: 'no-router' };
      const r = deps.router;
      const state = await permanentAsFailure(() => r.tierState(input.tier));
      if (state.state === 'active') return { action: 'already-active' };
      // Without a mark of its own (a bring-up's readmit, which quiesced nothing), the mark seen now:
      // this attempt, should it reach the router late (its call timed out and a retry readmitted),
      // lifts only the quiesce it saw, never an eviction's made since.
      const mark = input.quiesceMark ?? state.quiesceMark;
      if (mark !== undefined && state.quiesceMark !== mark) return { action: 'quiesced-since' };
      const outcome = await permanentAsFailure(() => r.readmit(input.tier, mark));
      if (!outcome.ok && outcome.reason === 'quiesced_since') return { action: 'quiesced-since' };
      if (!outcome.ok)
        throw nonRetryable(Failure.ReadmitRefused, `router refused to readmit tier '${input.tier}': ${outcome.reason}: ${outcome.message}`, outcome);
      return { action: 'readmitted', observedModel: outcome.observedModel };
    },

    /**
     * The quiesce mark of each serve's router tier: what a guarded readmit sends back to lift only
     * the quiesce seen now. A serve without a tier, or whose router reports no marks, has no entry
     * (its readmit is unguarded, as before marks); one whose router could not be read has `unread`,
     * the error, rather than failing the step: the caller leaves that tier quiesced.
     */
    async quiesceMarks(input: { serves: string[] }): Promise<QuiesceMarks> {
      const r = deps.router;
      if (!r) return {};
      const marks: QuiesceMarks = {};
      const unread = (err: unknown) => ({ unread: err instanceof Error ? err.message : String(err) });
      // A manifest that no longer reads, or no longer names a victim, leaves that tier quiesced
      // like a router that does not answer: the take still lands, and its let-go gives the serve back.
      let manifest: Awaited<ReturnType<typeof loadManifest>>;
      try {
        manifest = await loadManifest(deps.manifest);
      } catch (err) {
        for (const name of input.serves) marks[name] = unread(err);
        return marks;
      }
      for (const name of input.serves) {
        try {
          const tier = manifest.resolve(name).serve.routerTier;
          if (!tier) continue;
          const mark = (await r.tierState(tier)).quiesceMark;
          if (mark !== undefined) marks[name] = { mark };
        } catch (err) {
          marks[name] = unread(err);
        }
      }
      return marks;
    },

    /**
     * Quiesces the tier where this worker has a router; null where it has none. With `own` (a
     * compensation's quiesce): only while the serve's container is the run's own or gone; a
     * container of another run's under the name serves the tier for that run, which is left alone.
     */
    async quiesceIfRouted(input: {
      tier: string;
      own?: OwnContainer & { node: string; serve: string };
      /** Why, for the router to say (a bring-down's: operator-down, lease-ended); none keeps the old meaning. */
      why?: QuiesceWhy;
    }): Promise<TierState | LeftAlone | null> {
      const r = deps.router;
      if (!r) return null;
      const under = input.own ? await underTheName(deps.runtime, input.own.node, input.own.serve, input.own) : undefined;
      if (under && 'leftAlone' in under) return under;
      return permanentAsFailure(() => r.quiesce(input.tier, input.why));
    },

    /**
     * Waits until the router has no request in flight to the tier and vLLM runs none, up to the
     * deadline. Returns drained: false at the deadline rather than failing: whether a timeout is
     * fatal (DrainTimeout) or forced through is the workflow's decision.
     */
    async drainServe(input: {
      tier?: string;
      serve: ServeSpec;
      deadlineEpochMs: number;
      processesOn?: { node: string; gpuUuid: string };
    }): Promise<DrainResult> {
      const ctx = Context.current();
      // A victim's own processes on the GPU, read while it still runs, beside the wait: the drain
      // ends when both have (the read never fails: what it cannot say leaves the whole GPU to
      // confirm), waiting at most PROCESS_READ_MS for it past its own end (docker top has no timeout).
      const on = input.processesOn;
      const reading = on ? serveProcesses(containerName(on.node, input.serve.name), on.gpuUuid) : undefined;
      const withProcesses = async <T extends object>(r: T): Promise<T & { processes?: ServeProcesses }> =>
        reading ? { ...r, processes: await withinProcessRead(reading) } : r;
      const baseUrl = serveBaseUrl(input.serve);
      const earlier = earlierProgress<unknown>();
      const resumed = isDrainProgress(earlier) ? earlier : undefined;
      const started = resumed?.startedAtEpochMs ?? Date.now();
      let polls = resumed?.polls ?? 0;
      let first = resumed?.first;
      for (;;) {
        const routerInFlight = input.tier ? (await permanentAsFailure(() => router().tierState(input.tier as string))).inFlight : 0;
        const vllmRunning = await deps.probe.requestsRunning(baseUrl, 2000);
        polls += 1;
        first ??= { router: routerInFlight, vllm: vllmRunning };
        const result = {
          tier: input.tier,
          polls,
          waitedMs: Date.now() - started,
          routerInFlightAtStart: first.router,
          vllmRunningAtStart: first.vllm,
          routerInFlightAtEnd: routerInFlight,
          vllmRunningAtEnd: vllmRunning,
        };
        if (routerInFlight === 0 && !vllmRunning) return withProcesses({ ...result, drained: true, drainedAtEpochMs: Date.now() });
        progress({
          startedAtEpochMs: started,
          polls,
          first,
          routerInFlight,
          vllmRunning,
          deadlineEpochMs: input.deadlineEpochMs,
          atEpochMs: Date.now(),
        } satisfies DrainProgress);
        if (Date.now() >= input.deadlineEpochMs) return withProcesses({ ...result, drained: false });
        // Short polls: the stop should follow the last response closely.
        await ctx.sleep(Math.min(pollMs, 100, Math.max(0, input.deadlineEpochMs - Date.now())));
      }
    },

    /** maxAgeMs: how old a reading will do (the stream's latest block); without it, one queried after the call. */
    async readGpu(input: { uuid: string; maxAgeMs?: number }): Promise<GpuReading> {
      return readGpu(input.uuid, ageOf(input));
    },

    /**
     * A bring-down's reading before its stop, taken while it holds the start slot: the GPU's (the
     * release check's baseline) and the serve's own processes on it, which confirm the release
     * where another process moves the whole GPU's figure. Null where this worker has no probe or
     * nvidia-smi lists no such GPU: the release is then not checked, as a start's room is not.
     */
    async readBeforeStop(input: { node: string; serve: string; gpuUuid: string }): Promise<(GpuReading & { processes: ServeProcesses }) | null> {
      if (!deps.gpu) return null;
      let g: GpuReading;
      try {
        g = await readGpu(input.gpuUuid);
      } catch (err) {
        if (err instanceof ApplicationFailure && (err.type === Failure.NvidiaSmiMissing || err.type === Failure.GpuNotFound)) return null;
        throw err;
      }
      return { ...g, processes: await withinProcessRead(serveProcesses(containerName(input.node, input.serve), input.gpuUuid)) };
    },

    /** A reading for the record where a probe works; null where this box has none. */
    async measureGpu(input: { uuid: string; maxAgeMs?: number }): Promise<GpuReading | null> {
      if (!deps.gpu) return null;
      try {
        return await readGpu(input.uuid, ageOf(input));
      } catch (err) {
        if (err instanceof ApplicationFailure && (err.type === Failure.NvidiaSmiMissing || err.type === Failure.GpuNotFound)) return null;
        throw err;
      }
    },

    /**
     * After a victim's stop (or sleep), waits until nvidia-smi shows its VRAM back on that GPU. By
     * its own processes where they were listed there before the stop (`own`, from drainServe's
     * processesOn): none of them holds memory on the GPU any more, or asleep, all but keepMib (its
     * residual) given back. Otherwise by the whole GPU: used fell by the expected MiB from the
     * reading before the drain, which another serve starting or stopping there moves as much.
     * Both within 5 %. Freed memory lags a process exit by up to seconds.
     */
    async confirmVramReleased(input: {
      gpuUuid: string;
      victim: string;
      usedBeforeMib: number;
      expectedMib: number;
      deadlineEpochMs: number;
      own?: ServeProcesses;
      /** What a sleeper may keep (its declared residual); 0 or absent after a stop. */
      keepMib?: number;
      /** When the stop saw the victim's container down (it started a listing then): the first reading may be a listing started since. */
      listedAfterEpochMs?: number;
    }): Promise<VramReleaseResult> {
      const ctx = Context.current();
      const earlier = earlierProgress<{ startedAtEpochMs?: unknown }>();
      const started = typeof earlier?.startedAtEpochMs === 'number' ? earlier.startedAtEpochMs : Date.now();
      const keepMib = Math.max(0, input.keepMib ?? 0);
      const why = ownUnseen(input.own, keepMib);
      const own = why === undefined ? input.own : undefined;
      // The first reading only: every later one is queried after the one before it.
      let reuse = listedSince(input.listedAfterEpochMs);
      for (; ; reuse = {}) {
        const listing = { refusalThrows: true, ...reuse };
        // By its own processes the GPU's figure is only for the record: the stream's latest will do.
        const [g, apps] = await Promise.all([
          readGpu(input.gpuUuid, own ? RECENT_READING : {}),
          own ? permanentAsFailure(() => gpuProbe().computeApps(listing)).catch(unlisted) : undefined,
        ]);
        const seen =
          !own || apps === undefined
            ? undefined
            : 'unread' in apps
              ? stillHeld(own, apps.unread, input.gpuUuid, input.expectedMib, keepMib)
              : ownReading(own, apps, input.gpuUuid, input.expectedMib, keepMib);
        const reading: VramReading = seen?.reading ?? { by: 'whole-gpu', why: why ?? '' };
        const releasedMib = seen ? seen.releasedMib : input.usedBeforeMib - g.usedMib;
        const result = {
          gpuUuid: input.gpuUuid,
          usedBeforeMib: input.usedBeforeMib,
          usedAfterMib: g.usedMib,
          releasedMib,
          expectedMib: input.expectedMib,
          waitedMs: Date.now() - started,
          reading,
        };
        if (seen ? seen.released : releasedMib >= neededMib(input.expectedMib)) return result;
        progress({ ...result, startedAtEpochMs: started, deadlineEpochMs: input.deadlineEpochMs, atEpochMs: Date.now() } satisfies VramBeat);
        if (Date.now() >= input.deadlineEpochMs) {
          // By its own processes the GPU was read at the stream's latest, which may predate the stop: the failure's figure is read now.
          const usedNow = own
            ? await readGpu(input.gpuUuid, {}).then(
                (r) => r.usedMib,
                () => undefined,
              )
            : g.usedMib;
          const failed = usedNow !== undefined ? { ...result, usedAfterMib: usedNow } : result;
          const afterS = Math.round((Date.now() - started) / 1000);
          throw nonRetryable(Failure.VramNotReleased, eviction.vramHeld(input.victim, failed, keepMib, afterS, usedNow !== undefined), failed);
        }
        // A stream paces the GPU's reads itself (each waits for its next reading): no sleep on top.
        // The processes' query is a spawn of its own, paced here.
        if (own || !gpuProbe().streams) await ctx.sleep(Math.min(pollMs, Math.max(0, input.deadlineEpochMs - Date.now())));
      }
    },
  });
}
