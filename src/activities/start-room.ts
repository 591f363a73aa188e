// The physical check before a cold start (src/domain/start-room.ts): does the card have the room
// for what the ledger commits on it plus what is held outside the ledger. Read in this order: the
// GPU and its compute processes, then the ledger, then the pids of the ledger's serves, so a
// serve whose process is listed was admitted by the time the ledger is read (its start is fenced
// on its admission), and its container's pids are read after it was listed: a serve of the ledger
// still loading (a concurrent bring-up's) is never taken for a foreign process.
import { ApplicationFailure } from '@temporalio/activity';
import type { ContainerRuntime } from '../adapters/containers/port';
import type { GpuProbe } from '../adapters/gpu/port';
import type { LedgerPort } from '../adapters/ledger/port';
import { containerName } from '../domain/serve';
import { startRoom } from '../domain/start-room';
import { serveProcessesOf } from '../domain/vram-release';
import type { OwnDraw } from '../domain/physical';
import type { RoomFacts, StartRoom } from '../domain/start-room';
import type { Victim } from '../domain/eviction';
import type { GpuSpec } from '../domain/types';
import type { GpuReading } from '../shared/contracts';
import { Failure } from '../shared/failures';
import { withTimeout } from '../worker/time-bound';
import { ageOf, listedSince, PROCESS_READ_MS } from './eviction';
import { permanentAsFailure } from './failure';

export interface StartRoomDeps {
  runtime: ContainerRuntime;
  gpu?: GpuProbe;
  ledger: LedgerPort;
}

/**
 * How long a shortfall is read again, from the first reading that showed it, before the start is
 * refused: memory a process gave back just before (a serve stopped, a job ended) shows in
 * nvidia-smi with a lag of up to seconds, and a process still listed after its container is gone
 * is taken for one outside the ledger until it leaves the list.
 */
export const ROOM_SETTLE_MS = 3000;
/** Between two readings of a shortfall: Ollama's own VRAM poll. */
const ROOM_POLL_MS = 250;
/**
 * How old the release wait's process listing may be for the room before an acquirer's start: the
 * steps between (the ledger's hand-over, two workflow tasks) take a few hundred ms; older, the
 * hand-over was slow (a ledger reconciling), and the card is listed again.
 */
export const ROOM_LISTING_REUSE_MS = 2000;

/** The GPU's reading the bring-up's measure step compares against, and the verdict. */
export interface StartRoomResult {
  reading: GpuReading;
  room: StartRoom;
}

const why = (err: unknown) => ({ unread: err instanceof Error ? err.message : String(err) });

export function createStartRoomActivities(deps: StartRoomDeps) {
  /** Each serve of the ledger: its container's host pids, or why they could not be read. */
  const pidsOf = async (node: string, serves: readonly string[]): Promise<RoomFacts['pids']> => {
    const list = deps.runtime.processes?.bind(deps.runtime);
    const reads = serves.map(async (serve): Promise<[string, number[] | { unread: string }]> => {
      if (!list) return [serve, { unread: "this worker's container runtime cannot list a container's processes" }];
      const late = `docker top did not answer within ${PROCESS_READ_MS / 1000} s`;
      return [serve, await withTimeout(list(containerName(node, serve)), PROCESS_READ_MS, late).catch(why)];
    });
    return Object.fromEntries(await Promise.all(reads));
  };

  return {
    /**
     * A started serve's draw by its own processes: its container's pids (docker top) against
     * nvidia-smi's compute processes on its GPU. Why not, where they cannot say (no process list,
     * pids hidden, per-process MiB not reported): the measure then takes the whole GPU's delta.
     */
    async measureOwnProcesses(input: {
      node: string;
      serve: string;
      gpuUuid: string;
      /** When the serve answered healthy (waitHealthy started a listing then): a listing started since will do. */
      listedAfterEpochMs?: number;
    }): Promise<OwnDraw> {
      const probe = deps.gpu;
      if (!probe) return { unread: 'no nvidia-smi on this worker' };
      const container = containerName(input.node, input.serve);
      const reuse = listedSince(input.listedAfterEpochMs);
      const [apps, pids] = await Promise.all([probe.computeApps({ refusalThrows: true, ...reuse }).catch(why), pidsOf(input.node, [input.serve])]);
      if ('unread' in apps) return apps;
      const mine = pids[input.serve];
      if (!mine || 'unread' in mine) return { unread: mine?.unread ?? 'its pids were not read' };
      const own = serveProcessesOf(container, mine, apps, input.gpuUuid);
      if (own.unseen) return { unread: own.unseen };
      if (own.onGpu.some((p) => p.usedMib === null)) return { unread: 'nvidia-smi reports no per-process MiB ([N/A])' };
      return { mib: own.onGpu.reduce((sum, p) => sum + (p.usedMib ?? 0), 0), pids: own.onGpu.map((p) => p.pid) };
    },

    /**
     * Before a cold start's container: the GPU's reading (the baseline the measured delta is taken
     * from, `maxAgeMs` as measureGpu's), and whether the card holds what the ledger commits on it,
     * the starting serve included, plus what is held outside the ledger. A shortfall is read again
     * for up to ROOM_SETTLE_MS before it stands. Null where this worker has no nvidia-smi, or it
     * does not know the GPU: no check, as no baseline. `evicting`: an acquisition's planned victims,
     * read before any of them is touched: the room as it will be once they are evicted.
     * `listedAfterEpochMs`: an acquisition's last victim stop; the compute processes listed since
     * (its release wait's listing, on this worker, at most ROOM_LISTING_REUSE_MS old) will do for
     * the first pass instead of a spawn. A listing taken while a victim's process was still
     * listed counts it outside the ledger (a shortfall, read again fresh), never as room.
     */
    async readStartRoom(input: {
      node: string;
      gpu: GpuSpec;
      serve: string;
      maxAgeMs?: number;
      evicting?: Victim[];
      listedAfterEpochMs?: number;
    }): Promise<StartRoomResult | null> {
      const probe = deps.gpu;
      if (!probe) return null;
      // From the first shortfall seen, not the call: a first pass slowed by its reads (a spawn
      // without persistence mode, docker top) still reads the GPU again before it refuses.
      let settleBy: number | undefined;
      let reuse = input.listedAfterEpochMs !== undefined ? { afterEpochMs: input.listedAfterEpochMs, maxAgeMs: ROOM_LISTING_REUSE_MS } : undefined;
      for (let age = ageOf(input); ; age = {}, reuse = undefined) {
        let gpus: GpuReading[];
        const apps = probe.computeApps({ refusalThrows: true, ...(reuse ? { reuse } : {}) }).catch(why);
        try {
          gpus = await permanentAsFailure(() => probe.readGpus(age));
        } catch (err) {
          await apps;
          if (err instanceof ApplicationFailure && err.type === Failure.NvidiaSmiMissing) return null;
          throw err;
        }
        const reading = gpus.find((g) => g.uuid === input.gpu.uuid);
        if (!reading) return null;
        const listed = await apps;
        const ledger = await deps.ledger.snapshot(input.node, input.gpu, 10_000);
        const pids = await pidsOf(
          input.node,
          ledger.reservations.map((r) => r.serve),
        );
        const room = startRoom({ serve: input.serve, gpu: reading, ledger, apps: listed, pids, ...(input.evicting ? { evicting: input.evicting } : {}) });
        settleBy ??= Date.now() + ROOM_SETTLE_MS;
        if (room.shortMib === 0 || Date.now() >= settleBy) return { reading, room };
        await new Promise((resolve) => setTimeout(resolve, ROOM_POLL_MS));
      }
    },
  };
}
