// GpuProbe over one long-lived `nvidia-smi --query-gpu=… -lms MS` per node, read as a stream of
// readings instead of a process per reading: a spawn costs 100–300 ms (the driver initialised
// afresh each time), a reading from the stream half an interval.
//
// A reading is the first whole block of lines whose query nvidia-smi stamped (its `timestamp`
// field) later than the call: as fresh as a process spawned then, without the spawn. A caller
// that can use one a little older says how much (maxAgeMs), and gets the latest block at once
// when it is that recent: half an interval of waiting saved per reading.
// Where the stream cannot give one (the binary refuses -lms, exits, stalls past its bound, prints
// what is not the CSV), the reading is a one-shot spawn, whose errors are the ones callers know,
// and the stream is started again no sooner than a second later.
import { spawn } from 'node:child_process';
import type { ChildProcessByStdio } from 'node:child_process';
import type { Readable } from 'node:stream';
import type { GpuProcess, GpuReading } from '../../shared/contracts';
import type { GpuProbe, ListingReuse, ReadingAge } from './port';
import { NvidiaSmi, parseGpuCsv, STAMPED_GPU_QUERY_ARGS } from './nvidia-smi';
import type { NvidiaSmiOptions } from './nvidia-smi';

export interface NvidiaSmiStreamOptions extends NvidiaSmiOptions {
  /** nvidia-smi's loop interval (-lms); GPURES_NVIDIA_SMI_LOOP_MS bounds it to 20..10000 ms. */
  intervalMs: number;
}
/** A stream that failed is not started again for this long: a binary without -lms is not respawned per reading. */
const RESTART_BACKOFF_MS = 1000;

/** A stamped line: when nvidia-smi made the query (epoch ms, NaN when unreadable), its GPU index, the plain CSV line. */
function stampedLine(line: string): { atMs: number; index: number; rest: string } {
  const comma = line.indexOf(',');
  const rest = line.slice(comma + 1).trim();
  return { atMs: parseTimestamp(line.slice(0, comma).trim()), index: Number(rest.slice(0, rest.indexOf(','))), rest };
}

/** nvidia-smi's timestamp, "YYYY/MM/DD HH:MM:SS.msec" in local time. */
export function parseTimestamp(stamp: string): number {
  const m = /^(\d{4})\/(\d{2})\/(\d{2}) (\d{2}):(\d{2}):(\d{2})\.(\d{3})$/.exec(stamp);
  if (!m) return NaN;
  const [y, mo, d, h, mi, sec, ms] = m.slice(1).map(Number) as [number, number, number, number, number, number, number];
  return new Date(y, mo - 1, d, h, mi, sec, ms).getTime();
}

/** Someone waiting for a reading queried later than afterMs. */
type Waiter = { afterMs: number; resolve: (r: GpuReading[]) => void; reject: (e: Error) => void; timer: NodeJS.Timeout };

export class NvidiaSmiStream implements GpuProbe {
  readonly streams = true;
  readonly intervalMs: number;
  private readonly once: NvidiaSmi;
  private readonly options: NvidiaSmiOptions;
  private child: ChildProcessByStdio<null, Readable, null> | undefined;
  /** How many GPUs a block has: learnt from the one-shot reading that starts the stream. */
  private gpuCount = 0;
  private partial = '';
  private lines: { atMs: number; index: number; rest: string }[] = [];
  private waiters = new Set<Waiter>();
  /** The last whole block of the running stream, and when nvidia-smi queried it. */
  private latest: { atMs: number; reading: GpuReading[] } | undefined;
  private notBeforeEpochMs = 0;
  private closed = false;
  /** Readings served from the stream, and by a one-shot spawn: what the benchmark prints. */
  readonly served = { stream: 0, spawned: 0 };

  constructor(options: NvidiaSmiStreamOptions) {
    this.intervalMs = Math.max(1, Math.round(options.intervalMs));
    this.options = options;
    this.once = new NvidiaSmi(options);
  }

  get binary(): string {
    return this.once.binary;
  }

  async readGpus(age: ReadingAge = {}): Promise<GpuReading[]> {
    if (this.child && this.gpuCount > 0) {
      const latest = this.latest;
      // A block stamped ahead of now (the clock stepped back) is not known to be recent.
      const ageMs = latest ? Date.now() - latest.atMs : NaN;
      if (latest && age.maxAgeMs !== undefined && ageMs >= 0 && ageMs <= age.maxAgeMs) {
        this.served.stream += 1;
        return latest.reading.map((g) => ({ ...g }));
      }
      try {
        const reading = await this.nextBlock();
        this.served.stream += 1;
        return reading;
      } catch {
        this.stop(); // stalled or unreadable: the one-shot below says what is wrong, if anything
      }
    }
    const reading = await this.once.readGpus();
    this.served.spawned += 1;
    this.gpuCount = reading.length;
    if (!this.child && !this.closed && reading.length > 0 && Date.now() >= this.notBeforeEpochMs) this.start();
    return reading;
  }

  /** A spawn each (no stream lists processes), or the latest listing where `reuse` allows it. */
  computeApps(opts?: { refusalThrows?: boolean; reuse?: ListingReuse }): Promise<GpuProcess[]> {
    return this.once.computeApps(opts);
  }

  /** The process listings spawned and reused (NvidiaSmi's). */
  get listings(): { readonly spawned: number; readonly reused: number } {
    return this.once.listings;
  }

  /** Ends the stream; later readings are one-shot spawns. */
  close(): void {
    this.closed = true;
    this.stop();
  }

  private nextBlock(): Promise<GpuReading[]> {
    // Long enough for a loaded box's first block after a start; short enough that a stalled stream costs one wait.
    const boundMs = Math.max(2000, 3 * this.intervalMs);
    const afterMs = Date.now();
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        afterMs,
        resolve,
        reject,
        timer: setTimeout(() => {
          this.waiters.delete(waiter);
          reject(new Error(`no reading from ${this.binary} -lms ${this.intervalMs} within ${boundMs} ms`));
        }, boundMs),
      };
      this.waiters.add(waiter);
    });
  }

  private start(): void {
    const child = spawn(this.binary, [...STAMPED_GPU_QUERY_ARGS, '-lms', String(this.intervalMs)], {
      stdio: ['ignore', 'pipe', 'ignore'],
      windowsHide: true,
      ...(this.options.env ? { env: { ...process.env, ...this.options.env } } : {}),
    });
    this.child = child;
    this.partial = '';
    this.lines = [];
    this.latest = undefined;
    // The stream must not keep a process alive that has nothing else to do (a CLI, a test's end).
    child.unref();
    (child.stdout as Readable & { unref?: () => void }).unref?.();
    child.stdout.setEncoding('utf8');
    child.stdout.on('data', (chunk: string) => this.take(child, chunk));
    child.on('error', () => this.lost(child));
    child.on('exit', () => this.lost(child));
  }

  private take(child: ChildProcessByStdio<null, Readable, null>, chunk: string): void {
    if (child !== this.child) return;
    const text = this.partial + chunk;
    const end = text.lastIndexOf('\n');
    this.partial = text.slice(end + 1);
    for (const line of text.slice(0, end + 1).split('\n')) {
      if (line.trim() === '') continue;
      const stamped = stampedLine(line);
      // A block starts again at its first GPU: lines of a block cut short are not a reading.
      if (this.lines.length > 0 && stamped.index <= (this.lines[this.lines.length - 1]?.index ?? -1)) this.lines = [];
      this.lines.push(stamped);
      if (this.lines.length < this.gpuCount) continue;
      const block = this.lines;
      this.lines = [];
      let reading: GpuReading[];
      const atMs = Math.min(...block.map((l) => l.atMs));
      try {
        if (Number.isNaN(atMs)) throw new Error(`${this.binary} -lms printed a line without a readable timestamp: '${line}'`);
        reading = parseGpuCsv(block.map((l) => l.rest).join('\n'));
      } catch (err) {
        this.fail(err instanceof Error ? err : new Error(String(err)));
        return;
      }
      this.latest = { atMs, reading };
      for (const w of [...this.waiters]) {
        // Stamped in a later millisecond than the call: queried after it.
        if (atMs <= w.afterMs) continue;
        this.waiters.delete(w);
        clearTimeout(w.timer);
        w.resolve(reading.map((g) => ({ ...g })));
      }
    }
  }

  private lost(child: ChildProcessByStdio<null, Readable, null>): void {
    if (child !== this.child) return;
    this.fail(new Error(`${this.binary} -lms ${this.intervalMs} exited`));
  }

  private fail(err: Error): void {
    this.stop();
    const waiters = [...this.waiters];
    this.waiters.clear();
    for (const w of waiters) {
      clearTimeout(w.timer);
      w.reject(err);
    }
  }

  private stop(): void {
    const child = this.child;
    this.child = undefined;
    this.latest = undefined;
    this.notBeforeEpochMs = Date.now() + RESTART_BACKOFF_MS;
    if (child && child.exitCode === null) child.kill('SIGTERM');
  }
}
