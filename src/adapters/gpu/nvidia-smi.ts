// GpuProbe over the nvidia-smi binary: execFile with argument arrays (never a shell) and the
// CSV query forms, parsed by pure functions the tests exercise on real-format lines.
import { execFile } from 'node:child_process';
import type { GpuProcess, GpuReading } from '../../shared/contracts';
import type { GpuProbe, ListingReuse } from './port';
import { PermanentError } from '../errors';
import { Failure } from '../../shared/failures';

export const NvidiaSmiFailure = {
  /** The binary does not exist (or cannot be executed) at the configured path. */
  Missing: Failure.NvidiaSmiMissing,
  /** Its output is not the CSV the query asked for. */
  Unreadable: Failure.NvidiaSmiUnreadable,
} as const;

export const GPU_QUERY_FIELDS = ['index', 'uuid', 'name', 'memory.total', 'memory.used', 'memory.free'] as const;
export const COMPUTE_APPS_QUERY_FIELDS = ['gpu_uuid', 'pid', 'process_name', 'used_memory'] as const;
export const CSV_FORMAT = 'csv,noheader,nounits';

export const GPU_QUERY_ARGS: readonly string[] = [`--query-gpu=${GPU_QUERY_FIELDS.join(',')}`, `--format=${CSV_FORMAT}`];
/** The stream's query: each line led by nvidia-smi's `timestamp` (when the query was made), so a reading's age is known. */
export const STAMPED_GPU_QUERY_ARGS: readonly string[] = [`--query-gpu=timestamp,${GPU_QUERY_FIELDS.join(',')}`, `--format=${CSV_FORMAT}`];
export const COMPUTE_APPS_QUERY_ARGS: readonly string[] = [`--query-compute-apps=${COMPUTE_APPS_QUERY_FIELDS.join(',')}`, `--format=${CSV_FORMAT}`];

/** What nvidia-smi prints where a value is unavailable (WSL2 per-process memory, some drivers). */
const NOT_AVAILABLE = /^\[(N\/A|Not Supported|Unknown Error|Insufficient Permissions)\]$/i;

function lines(csv: string): { line: string; number: number }[] {
  return csv
    .split(/\r?\n/)
    .map((line, i) => ({ line: line.trim(), number: i + 1 }))
    .filter(({ line }) => line !== '');
}

function unreadable(query: string, number: number, line: string, why: string): PermanentError {
  return new PermanentError(NvidiaSmiFailure.Unreadable, `nvidia-smi ${query} output line ${number} ${why}: '${line}'`);
}

function mib(query: string, number: number, line: string, field: string, raw: string): number {
  if (!/^\d+$/.test(raw)) throw unreadable(query, number, line, `has ${field} '${raw}', not a whole number of MiB`);
  return Number(raw);
}

/** Parses `--query-gpu=index,uuid,name,memory.total,memory.used,memory.free --format=csv,noheader,nounits`. */
export function parseGpuCsv(csv: string): GpuReading[] {
  const query = '--query-gpu';
  return lines(csv).map(({ line, number }) => {
    const cells = line.split(',').map((c) => c.trim());
    if (cells.length < 6) throw unreadable(query, number, line, `has ${cells.length} fields, expected 6 (${GPU_QUERY_FIELDS.join(', ')})`);
    // A GPU name could hold a comma: the fixed fields sit at both ends.
    const [indexRaw = '', uuid = ''] = cells;
    const name = cells.slice(2, -3).join(', ');
    const [totalRaw = '', usedRaw = '', freeRaw = ''] = cells.slice(-3);
    if (!/^\d+$/.test(indexRaw)) throw unreadable(query, number, line, `has index '${indexRaw}', not a number`);
    if (!/^(GPU|MIG)-[0-9A-Za-z-]+$/.test(uuid)) throw unreadable(query, number, line, `has uuid '${uuid}', not a GPU UUID`);
    if (name === '') throw unreadable(query, number, line, 'has an empty name');
    return {
      index: Number(indexRaw),
      uuid,
      name,
      totalMib: mib(query, number, line, 'memory.total', totalRaw),
      usedMib: mib(query, number, line, 'memory.used', usedRaw),
      freeMib: mib(query, number, line, 'memory.free', freeRaw),
    };
  });
}

/** Parses `--query-compute-apps=gpu_uuid,pid,process_name,used_memory --format=csv,noheader,nounits`; `[N/A]` memory is null. */
/**
 * The default table's words for a GPU without compute processes. No source shows the CSV query
 * printing them (it prints nothing), but parsers of it guard against them (gpustat, netdata): read
 * as none listed, which is what they say, rather than as unreadable output that the release wait
 * would count as still held until its timeout.
 */
const NO_PROCESSES = /^No running (compute )?processes found$/i;

export function parseComputeAppsCsv(csv: string): GpuProcess[] {
  const query = '--query-compute-apps';
  const given = lines(csv);
  if (given.length === 1 && NO_PROCESSES.test(given[0]?.line ?? '')) return [];
  return given.map(({ line, number }) => {
    const cells = line.split(',').map((c) => c.trim());
    if (cells.length < 4) throw unreadable(query, number, line, `has ${cells.length} fields, expected 4 (${COMPUTE_APPS_QUERY_FIELDS.join(', ')})`);
    const [gpuUuid = '', pidRaw = ''] = cells;
    const processName = cells.slice(2, -1).join(', ');
    const usedRaw = cells[cells.length - 1] ?? '';
    if (!/^(GPU|MIG)-[0-9A-Za-z-]+$/.test(gpuUuid)) throw unreadable(query, number, line, `has gpu_uuid '${gpuUuid}', not a GPU UUID`);
    if (!/^\d+$/.test(pidRaw)) throw unreadable(query, number, line, `has pid '${pidRaw}', not a number`);
    return {
      gpuUuid,
      pid: Number(pidRaw),
      processName,
      usedMib: NOT_AVAILABLE.test(usedRaw) ? null : mib(query, number, line, 'used_memory', usedRaw),
    };
  });
}

export interface NvidiaSmiOptions {
  /** Path or name (looked up on PATH) of the binary. */
  binary?: string;
  timeoutMs?: number;
  /** Extra environment for the binary (on top of this process's). */
  env?: Record<string, string>;
}

interface ExecOutcome {
  stdout: string;
  stderr: string;
  /** Exit code; null when the process was killed (timeout) or did not start. */
  code: number | null;
  error?: { killed?: boolean; signal?: NodeJS.Signals | null };
}

/** Whether a listing whose process was started at `atMs` will do for `reuse`, at `nowMs`. */
export function listingReusable(atMs: number, reuse: ListingReuse, nowMs: number): boolean {
  return atMs >= reuse.afterEpochMs && nowMs >= atMs && nowMs - atMs <= reuse.maxAgeMs;
}

/** A listing's CSV parsed, or undefined where it is not the CSV asked for (the caller's own parse says why). */
function parsedOrUndefined(stdout: string): GpuProcess[] | undefined {
  try {
    return parseComputeAppsCsv(stdout);
  } catch {
    return undefined;
  }
}

export class NvidiaSmi implements GpuProbe {
  readonly binary: string;
  readonly timeoutMs: number;
  private readonly env: Record<string, string> | undefined;
  /** The latest listing nvidia-smi gave (exit 0), and when its process was started: its query was made no earlier. */
  private latestApps: { atMs: number; apps: GpuProcess[] } | undefined;
  /**
   * The listing under way, and when its process was started: a caller whose `reuse` it meets waits
   * for it instead of spawning another (a listing started where a stop or a health check has just
   * seen the serve down or up, for the step after it). Undefined once it ends; its outcome is
   * undefined where it was no clean listing (a refusal, a timeout), and the caller then spawns its own.
   */
  private pendingApps: { atMs: number; listing: Promise<GpuProcess[] | undefined> } | undefined;
  /** Process listings spawned, and served from the latest one (`reuse`): what the tests and the benchmark count. */
  readonly listings = { spawned: 0, reused: 0 };

  constructor(options: NvidiaSmiOptions = {}) {
    this.binary = options.binary ?? 'nvidia-smi';
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.env = options.env;
  }

  private run(args: readonly string[]): Promise<ExecOutcome> {
    return new Promise((resolve, reject) => {
      execFile(
        this.binary,
        args,
        {
          timeout: this.timeoutMs,
          maxBuffer: 4 * 1024 * 1024,
          encoding: 'utf8',
          windowsHide: true,
          ...(this.env ? { env: { ...process.env, ...this.env } } : {}),
        },
        (error, stdout, stderr) => {
          if (!error) {
            resolve({ stdout, stderr, code: 0 });
            return;
          }
          const code = (error as { code?: unknown }).code;
          if (code === 'ENOENT' || code === 'EACCES') {
            reject(
              new PermanentError(
                NvidiaSmiFailure.Missing,
                code === 'ENOENT'
                  ? `nvidia-smi not found at '${this.binary}' (is the NVIDIA driver installed, or the binary path configured?)`
                  : `nvidia-smi at '${this.binary}' is not executable`,
              ),
            );
            return;
          }
          if (typeof code === 'string') {
            reject(new Error(`running ${this.binary} failed: ${error.message}`));
            return;
          }
          resolve({ stdout, stderr, code: typeof code === 'number' ? code : null, error });
        },
      );
    });
  }

  private failure(args: readonly string[], out: ExecOutcome): Error {
    const how =
      out.code === null
        ? out.error?.killed
          ? `timed out after ${this.timeoutMs} ms`
          : `was killed by ${out.error?.signal ?? 'a signal'}`
        : `exited with code ${out.code}`;
    const said = `${out.stderr} ${out.stdout}`.trim().replace(/\s+/g, ' ');
    return new Error(`${this.binary} ${args.join(' ')} ${how}${said ? `: ${said.slice(0, 500)}` : ''}`);
  }

  async readGpus(): Promise<GpuReading[]> {
    const out = await this.run(GPU_QUERY_ARGS);
    if (out.code !== 0) throw this.failure(GPU_QUERY_ARGS, out);
    return parseGpuCsv(out.stdout);
  }

  /**
   * Empty where the driver refuses the query (a non-zero exit), unless `refusalThrows`; a timeout is
   * always an error. `reuse`: the latest listing where it qualifies (a refusal is never kept: it
   * is always asked again).
   */
  async computeApps(opts: { refusalThrows?: boolean; reuse?: ListingReuse } = {}): Promise<GpuProcess[]> {
    const reused = opts.reuse ? await this.reusable(opts.reuse) : undefined;
    if (reused) {
      this.listings.reused += 1;
      return reused;
    }
    const atMs = Date.now();
    this.listings.spawned += 1;
    const run = this.run(COMPUTE_APPS_QUERY_ARGS);
    const listing = run.then(
      (out) => (out.code === 0 ? parsedOrUndefined(out.stdout) : undefined),
      () => undefined,
    );
    this.pendingApps = { atMs, listing };
    void listing.then((apps) => {
      if (this.pendingApps?.listing === listing) this.pendingApps = undefined;
      // Of two spawns that overlap, the later started is the later query's.
      if (apps && (!this.latestApps || this.latestApps.atMs <= atMs)) this.latestApps = { atMs, apps: apps.map((a) => ({ ...a })) };
    });
    const out = await run;
    if (out.code === null || (out.code !== 0 && opts.refusalThrows)) throw this.failure(COMPUTE_APPS_QUERY_ARGS, out);
    if (out.code !== 0) return [];
    return parseComputeAppsCsv(out.stdout);
  }

  /** The latest listing, or the one under way once it ends, where `reuse` allows it; a copy. */
  private async reusable(reuse: ListingReuse): Promise<GpuProcess[] | undefined> {
    const latest = this.latestApps;
    if (latest && listingReusable(latest.atMs, reuse, Date.now())) return latest.apps.map((a) => ({ ...a }));
    const pending = this.pendingApps;
    if (!pending || pending.atMs < reuse.afterEpochMs) return undefined;
    const apps = await pending.listing;
    return apps && listingReusable(pending.atMs, reuse, Date.now()) ? apps.map((a) => ({ ...a })) : undefined;
  }
}
