// A stand-in for nvidia-smi on a box without a GPU (bin/fake-nvidia-smi runs it). It answers the
// two query forms the NvidiaSmi adapter uses, in the real CSV format, from a JSON state file
// named by FAKE_NVIDIA_SMI_STATE:
//
//   { "gpus": [{ "index": 0, "uuid": "GPU-…", "name": "NVIDIA GeForce RTX 5090", "totalMib": 32607, "baseUsedMib": 5700 }],
//     "simStateDir": "/path",          // SimRuntime state: running sim serves draw their gpures.vram_mib, or what their draw file says (a sleeping serve)
//     "docker": true,                  // running Docker containers labelled gpures.gpu_uuid draw theirs too
//     "heldMib": { "GPU-…": 12288 },   // VRAM that is not released (a stuck process, the lag after an exit)
//     "heldPids": [{ "gpuUuid": "GPU-…", "pid": 4242, "vramMib": 12288 }], // a process's VRAM the driver has not freed:
//                                      // listed under its pid and counted in memory.used, running or not
//     "fixedUsedMib": { "GPU-…": 30057 }, // memory.used pinned at this value whatever runs (a frozen reading)
//     "computeAppsUnsupported": true,  // --query-compute-apps fails, as on some drivers
//     "perProcessNA": true }           // per-process used_memory is [N/A], as on WSL2
//
// memory.used = baseUsedMib + heldMib[uuid] + the serves' gpures.vram_mib on that GPU + heldPids'
// MiB there of pids no serve runs as (or fixedUsedMib[uuid] where set);
// memory.free = memory.total - memory.used, never below 0. Exit codes follow nvidia-smi's:
// 2 invalid arguments, 3 not supported, 9 no driver (here: no readable state), 255 other.
import { readFileSync } from 'node:fs';
import { LABEL } from '../domain/serve';
import { COMPUTE_APPS_QUERY_FIELDS, CSV_FORMAT, GPU_QUERY_FIELDS } from '../adapters/gpu/nvidia-smi';
import { listSimContainers, readSimDrawMib } from './state-dir';

export interface FakeGpu {
  index: number;
  uuid: string;
  name: string;
  totalMib: number;
  baseUsedMib: number;
}

export interface FakeNvidiaSmiState {
  gpus: FakeGpu[];
  simStateDir?: string;
  docker?: boolean;
  heldMib?: Record<string, number>;
  /**
   * Processes whose VRAM the driver has not freed (a context not yet torn down after its exit, a
   * stuck process): each is listed by --query-compute-apps under its pid and counted in
   * memory.used, whether it still runs or not (while it runs as a serve, the serve's draw is it).
   */
  heldPids?: FakeServeDraw[];
  /** memory.used of a GPU pinned at this value, overriding the sum (e.g. VRAM held after a stop). */
  fixedUsedMib?: Record<string, number>;
  computeAppsUnsupported?: boolean;
  perProcessNA?: boolean;
}

/** A serve drawing VRAM on a GPU, as the fake driver sees it. */
export interface FakeServeDraw {
  gpuUuid: string;
  pid: number;
  vramMib: number;
}

export interface FakeIo {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
}

class Exit extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
  }
}

const INVALID_ARGS = "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.";

type Query = 'gpu' | 'stamped-gpu' | 'compute-apps';

/** nvidia-smi's `-lms` / `--loop-ms`: print a reading, sleep this long, repeat until killed. */
const LOOP_FLAGS = ['-lms', '--loop-ms'];

/**
 * Accepts exactly the adapter's two query forms (in either argument order, `--flag value` or
 * `--flag=value`), optionally looping (`-lms MS`, as the stream adapter runs it).
 */
export function parseFakeArgs(argv: readonly string[]): { query: Query; loopMs?: number } {
  const opts = new Map<string, string>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? '';
    const eq = arg.indexOf('=');
    const [given, value] = eq > 0 ? [arg.slice(0, eq), arg.slice(eq + 1)] : [arg, argv[++i]];
    const flag = LOOP_FLAGS.includes(given) ? '-lms' : given;
    if (!['--query-gpu', '--query-compute-apps', '--format', '-lms'].includes(flag) || value === undefined || opts.has(flag)) throw new Exit(2, INVALID_ARGS);
    opts.set(flag, value);
  }
  const loop = opts.get('-lms');
  if (loop !== undefined && !/^\d+$/.test(loop)) throw new Exit(2, INVALID_ARGS);
  return { query: queryOf(opts), ...(loop !== undefined ? { loopMs: Math.max(1, Number(loop)) } : {}) };
}

function queryOf(opts: ReadonlyMap<string, string>): Query {
  const format = opts.get('--format');
  const gpu = opts.get('--query-gpu');
  const apps = opts.get('--query-compute-apps');
  if (format === undefined || (gpu === undefined) === (apps === undefined)) throw new Exit(2, INVALID_ARGS);
  if (format !== CSV_FORMAT) throw new Exit(2, `fake-nvidia-smi supports only --format=${CSV_FORMAT} (got '${format}')`);
  const [query, asked, supported]: [Query, string, readonly string[]] =
    gpu !== undefined ? ['gpu', gpu, GPU_QUERY_FIELDS] : ['compute-apps', apps ?? '', COMPUTE_APPS_QUERY_FIELDS];
  const fields = asked.split(',');
  // The stream's form leads with the query's timestamp.
  const stamped = query === 'gpu' && fields[0] === 'timestamp';
  const bad = fields.slice(stamped ? 1 : 0).find((f) => !supported.includes(f));
  if (bad !== undefined) throw new Exit(2, `Field "${bad}" is not a valid field to query.`);
  if (fields.slice(stamped ? 1 : 0).join(',') !== supported.join(','))
    throw new Exit(2, `fake-nvidia-smi answers only --query-${query}=${query === 'gpu' ? '[timestamp,]' : ''}${supported.join(',')}`);
  return stamped ? 'stamped-gpu' : query;
}

/** nvidia-smi's timestamp field: local time, "YYYY/MM/DD HH:MM:SS.msec". */
export function nvidiaSmiTimestamp(epochMs: number): string {
  const d = new Date(epochMs);
  const two = (n: number) => String(n).padStart(2, '0');
  return (
    `${d.getFullYear()}/${two(d.getMonth() + 1)}/${two(d.getDate())} ` +
    `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}.${String(d.getMilliseconds()).padStart(3, '0')}`
  );
}

function isFiniteNumber(v: unknown): v is number {
  return typeof v === 'number' && Number.isFinite(v);
}

export function readFakeState(path: string | undefined): FakeNvidiaSmiState {
  if (!path) throw new Exit(9, 'NVIDIA-SMI has failed: FAKE_NVIDIA_SMI_STATE is not set (the fake driver has no state file).');
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    throw new Exit(9, `NVIDIA-SMI has failed: cannot read the fake state file ${path}: ${err instanceof Error ? err.message : String(err)}`);
  }
  const s = parsed as Partial<FakeNvidiaSmiState> | null;
  const gpusOk =
    Array.isArray(s?.gpus) &&
    s.gpus.every(
      (g: Partial<FakeGpu>) =>
        isFiniteNumber(g.index) && typeof g.uuid === 'string' && typeof g.name === 'string' && isFiniteNumber(g.totalMib) && isFiniteNumber(g.baseUsedMib),
    );
  if (!s || !gpusOk) throw new Exit(9, `NVIDIA-SMI has failed: ${path} needs gpus: [{ index, uuid, name, totalMib, baseUsedMib }]`);
  return s as FakeNvidiaSmiState;
}

function vramOf(labels: Record<string, string> | undefined): number {
  const n = Number(labels?.[LABEL.vramMib]);
  return Number.isFinite(n) && n > 0 ? n : 0;
}

/**
 * What a Docker fake-vLLM serve draws while it sleeps, from the /sleep-state its entrypoint
 * publishes (its residual and leak); undefined when awake, or for a serve that publishes none.
 */
async function dockerSleepDraw(hostPort: number): Promise<number | undefined> {
  // A timer that holds the process: a port whose container does not answer (docker-proxy accepts
  // for a serve with no HTTP) leaves fetch with no handle of its own, and node would exit mid-read.
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), 1000);
  try {
    const res = await fetch(`http://127.0.0.1:${hostPort}/sleep-state`, { signal: abort.signal });
    if (!res.ok) return undefined;
    const state = new Map(
      (await res.text()).split('\n').map((line): [string, number] => {
        const [key = '', value] = line.split('=');
        return [key, Number(value)];
      }),
    );
    return state.get('level') ? (state.get('residual') ?? 0) + (state.get('leak') ?? 0) : undefined;
  } catch {
    return undefined;
  } finally {
    clearTimeout(timer);
  }
}

/** Running sim serves and (with docker: true) Docker containers, each with the VRAM it declares (or keeps asleep). */
export async function serveDraws(state: FakeNvidiaSmiState, opts: { pids?: boolean } = {}): Promise<FakeServeDraw[]> {
  const draws: FakeServeDraw[] = [];
  if (state.simStateDir) {
    for (const { record, running } of listSimContainers(state.simStateDir)) {
      const gpuUuid = record.gpuUuid ?? record.labels[LABEL.gpuUuid];
      if (running && gpuUuid) draws.push({ gpuUuid, pid: record.pid, vramMib: readSimDrawMib(state.simStateDir, record.name) ?? vramOf(record.labels) });
    }
  }
  if (state.docker) {
    const { default: Docker } = await import('dockerode');
    const docker = new Docker();
    // One listing for every GPU of the state: this runs on each poll of a VRAM-release wait.
    const uuids = new Set(state.gpus.map((g) => g.uuid));
    for (const c of await docker.listContainers({ filters: { label: [LABEL.gpuUuid], status: ['running'] } })) {
      const gpuUuid = c.Labels[LABEL.gpuUuid];
      if (!gpuUuid || !uuids.has(gpuUuid)) continue;
      // The pid only for --query-compute-apps: a -lms loop of the GPU query inspects nothing.
      const pid = opts.pids === false ? 0 : (await docker.getContainer(c.Id).inspect()).State.Pid;
      const published = c.Ports.find((p) => p.PublicPort)?.PublicPort;
      const asleep = published ? await dockerSleepDraw(published) : undefined;
      draws.push({ gpuUuid, pid, vramMib: asleep ?? vramOf(c.Labels) });
    }
  }
  return draws;
}

/** The serves' draws and the held pids no serve runs as: every process holding VRAM. */
export function withHeldPids(state: FakeNvidiaSmiState, draws: readonly FakeServeDraw[]): FakeServeDraw[] {
  const held = (state.heldPids ?? []).filter((h) => !draws.some((d) => d.gpuUuid === h.gpuUuid && d.pid === h.pid));
  return [...draws, ...held];
}

export function renderGpuCsv(state: FakeNvidiaSmiState, draws: readonly FakeServeDraw[]): string {
  return state.gpus
    .map((g) => {
      const serves = draws.filter((d) => d.gpuUuid === g.uuid).reduce((sum, d) => sum + d.vramMib, 0);
      const fixed = state.fixedUsedMib?.[g.uuid];
      const used = Math.round(fixed ?? g.baseUsedMib + (state.heldMib?.[g.uuid] ?? 0) + serves);
      const free = Math.max(0, Math.round(g.totalMib) - used);
      return `${g.index}, ${g.uuid}, ${g.name}, ${Math.round(g.totalMib)}, ${used}, ${free}\n`;
    })
    .join('');
}

export function renderComputeAppsCsv(state: FakeNvidiaSmiState, draws: readonly FakeServeDraw[]): string {
  const known = new Set(state.gpus.map((g) => g.uuid));
  return draws
    .filter((d) => known.has(d.gpuUuid))
    .map((d) => `${d.gpuUuid}, ${d.pid}, python3, ${state.perProcessNA ? '[N/A]' : String(d.vramMib)}\n`)
    .join('');
}

async function reading(query: Query, env: NodeJS.ProcessEnv): Promise<string> {
  // Taken before the state is read: a line stamped after a moment shows the state as of after it.
  const stamp = nvidiaSmiTimestamp(Date.now());
  const state = readFakeState(env['FAKE_NVIDIA_SMI_STATE']);
  if (query === 'compute-apps' && state.computeAppsUnsupported) throw new Exit(3, 'Failed to query compute applications: Not Supported');
  let draws: FakeServeDraw[];
  try {
    // Held pids are told apart from the serves' own by pid, so a reading with some needs them.
    draws = withHeldPids(state, await serveDraws(state, { pids: query === 'compute-apps' || Boolean(state.heldPids?.length) }));
  } catch (err) {
    throw new Exit(255, `Unknown Error: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (query === 'compute-apps') return renderComputeAppsCsv(state, draws);
  const csv = renderGpuCsv(state, draws);
  return query === 'gpu' ? csv : csv.replace(/^(?=.)/gm, `${stamp}, `);
}

/** Runs one invocation (or, with -lms, loops until killed); returns the exit code. */
export async function main(argv: readonly string[], env: NodeJS.ProcessEnv, io: FakeIo): Promise<number> {
  try {
    const { query, loopMs } = parseFakeArgs(argv);
    // As nvidia-smi: a loop reads the state afresh each time, and runs until it is killed or its
    // reader goes away (the bin's stdout then fails, and it exits).
    for (;;) {
      io.stdout(await reading(query, env));
      if (loopMs === undefined) return 0;
      await new Promise((resolve) => setTimeout(resolve, loopMs));
    }
  } catch (err) {
    if (err instanceof Exit) {
      io.stderr(`${err.message}\n`);
      return err.code;
    }
    throw err;
  }
}
