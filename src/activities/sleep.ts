// Activities of eviction by sleeping (vLLM's sleep mode): choose the level, put a drained victim to
// sleep, and wake it for its restore. The VRAM check after a sleep is confirmVramReleased, as
// after a stop: vLLM's sleep leaks (vLLM #32714, #47654), so only nvidia-smi's word counts.
import { serveBaseUrl } from '../domain/serve';
import { levelOneSleepers, sleepLevelFor } from '../domain/sleep';
import type { SleepLevel, SleepPlan } from '../domain/sleep';
import type { GpuSpec, ServeSpec } from '../domain/types';
import type { LedgerPort } from '../adapters/ledger/port';
import type { ManifestSource } from '../adapters/manifest/port';
import type { ServeSleep } from '../adapters/serve-sleep/port';
import { ServeUnreachable, SleepEndpointError } from '../adapters/errors';
import { Failure } from '../shared/failures';
import type { SleepResult, WakeResult } from '../shared/contracts';
import { nonRetryable } from './failure';
import { fenceThisRun } from './fence';
import { loadManifest } from './resolve';

export interface SleepDeps {
  manifest: ManifestSource;
  ledger: LedgerPort;
  /** vLLM's sleep endpoints; needed only for serves with eviction = "sleep". */
  sleep?: ServeSleep;
}

/** Each /is_sleeping look: a serve that cannot answer that quickly is not one to trust with a sleep. */
const LOOK_MS = 5000;

/**
 * Whether the serve, evicted by sleeping, sleeps now: false for a serve that is not, where the
 * worker has no sleep-mode client, or when it does not answer (it then counts as awake, whole).
 */
export async function sleepsNow(endpoints: ServeSleep | undefined, serve: ServeSpec): Promise<boolean> {
  if (!serve.sleep || !endpoints) return false;
  return endpoints.isSleeping(serveBaseUrl(serve), LOOK_MS).catch(() => false);
}

export function createSleepActivities(deps: SleepDeps) {
  const endpoints = (): ServeSleep => {
    if (!deps.sleep) throw nonRetryable(Failure.SleepFailed, 'this worker has no sleep-mode client configured');
    return deps.sleep;
  };
  /** An endpoint's refusal will not change on a retry; a serve that did not answer may answer the next attempt. */
  const asFailure = (type: string, what: string, err: unknown): unknown =>
    err instanceof SleepEndpointError || !(err instanceof ServeUnreachable)
      ? nonRetryable(type, `${what}: ${err instanceof Error ? err.message : String(err)}`)
      : err;

  const fence = (node: string, gpu: GpuSpec, serve: string, step: 'sleep' | 'wake') => fenceThisRun(deps.ledger, node, gpu, serve, step);

  return {
    /**
     * The level the victim sleeps at now: its declared one, unless level 1 would take the node's
     * host RAM past its budget beside the serves already asleep at level 1 (read from every GPU's ledger).
     */
    async planSleep(input: { serve: string }): Promise<SleepPlan> {
      const loaded = await loadManifest(deps.manifest);
      const { manifest } = loaded;
      const { serve } = loaded.resolve(input.serve);
      if (!serve.sleep) throw nonRetryable(Failure.SleepFailed, `${serve.name} is not evicted by sleeping (eviction = "stop")`);
      const ledgers = await Promise.all(manifest.gpus.map((gpu) => deps.ledger.snapshot(manifest.node, gpu, 15_000)));
      const hostRamOf = (name: string) => manifest.serves.find((s) => s.name === name)?.sleep?.hostRamMib;
      return sleepLevelFor(serve.sleep, levelOneSleepers(ledgers, hostRamOf, serve.name), manifest.hostRamBudgetMib);
    },

    /** Whether the serve, evicted by sleeping, sleeps now; false for one that is not, or cannot tell. */
    async serveAsleep(input: { serve: string }): Promise<boolean> {
      return sleepsNow(deps.sleep, (await loadManifest(deps.manifest)).resolve(input.serve).serve);
    },

    /**
     * POST /sleep?level=N once the victim is drained, fenced (only the acquisition that holds the
     * victim as evicting may); a retry finds it asleep and does not sleep it again.
     */
    async sleepServe(input: { node: string; gpu: GpuSpec; serve: ServeSpec; level: SleepLevel; timeoutS: number }): Promise<SleepResult> {
      await fence(input.node, input.gpu, input.serve.name, 'sleep');
      const baseUrl = serveBaseUrl(input.serve);
      const started = Date.now();
      let issued = started;
      const what = `sleep of ${input.serve.name} at level ${input.level}`;
      try {
        if (await endpoints().isSleeping(baseUrl, LOOK_MS)) return { serve: input.serve.name, level: input.level, alreadyAsleep: true, waitedMs: 0 };
        issued = Date.now();
        await endpoints().sleep(baseUrl, input.level, input.timeoutS * 1000);
        if (!(await endpoints().isSleeping(baseUrl, LOOK_MS)))
          throw nonRetryable(Failure.SleepFailed, `${what}: /sleep answered, yet /is_sleeping says it is awake`);
      } catch (err) {
        throw asFailure(Failure.SleepFailed, what, err);
      }
      return { serve: input.serve.name, level: input.level, alreadyAsleep: false, issuedAtEpochMs: issued, waitedMs: Date.now() - started };
    },

    /**
     * The restore's wake: fenced like a start (the run must hold the serve as admitted), then
     * /wake_up (after level 2: weights, their reload, the KV cache). A serve found awake is left as it is.
     */
    async wakeServe(input: { node: string; gpu: GpuSpec; serve: ServeSpec; level: SleepLevel; deadlineEpochMs: number }): Promise<WakeResult> {
      await fence(input.node, input.gpu, input.serve.name, 'wake');
      const baseUrl = serveBaseUrl(input.serve);
      const started = Date.now();
      const what = `wake of ${input.serve.name} from level ${input.level}`;
      try {
        if (!(await endpoints().isSleeping(baseUrl, LOOK_MS))) return { serve: input.serve.name, level: input.level, alreadyAwake: true, waitedMs: 0 };
        // The workflow's deadline: a retry does not get the whole time again.
        const leftMs = input.deadlineEpochMs - Date.now();
        if (leftMs <= 0) throw nonRetryable(Failure.WakeFailed, `${what}: no time left of its deadline`);
        await endpoints().wake(baseUrl, input.level, leftMs);
      } catch (err) {
        throw asFailure(Failure.WakeFailed, what, err);
      }
      return { serve: input.serve.name, level: input.level, alreadyAwake: false, waitedMs: Date.now() - started };
    },
  };
}
