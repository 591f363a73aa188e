// The worker's domain metrics (docs/metrics.md), in prom-client: per GPU the ledger's figures and
// nvidia-smi's, read at scrape time; operations by kind and outcome, from every run's end (the
// Sink of src/workflows/operation-metrics.ts); and how long drains, VRAM-release waits and whole
// operations took.
import type { InjectedSinks } from '@temporalio/worker';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { ActivityMetrics } from '../adapters/metrics/port';
import type { GpuProbe } from '../adapters/gpu/port';
import type { ManifestSource } from '../adapters/manifest/port';
import { parseManifest } from '../config/manifest';
import { totals } from '../domain/ledger';
import type { LedgerState } from '../domain/ledger';
import { physicalTruth } from '../domain/physical';
import type { GpuSpec } from '../domain/types';
import type { GpuReading } from '../shared/contracts';
import type { OperationEnded, OperationSinks } from '../shared/operation-metrics';
import { singleFlight } from '../shared/single-flight';
import { withTimeout } from './time-bound';

/** The one read of a ledger metrics need: its snapshot as its worker answers it, starting nothing (LedgerClient.answer). */
export interface LedgerReader {
  answer(node: string, gpuRole: string, withinMs: number): Promise<LedgerState>;
}

export interface LedgerSources {
  node: string;
  manifest: ManifestSource;
  ledger: LedgerReader;
  gpu?: GpuProbe;
}

export interface WorkerMetricsOptions {
  /** How long a scrape waits for a ledger's (or nvidia-smi's) answer. Default 2000 ms, at most 10 s. */
  readTimeoutMs?: number;
  /** How long one reading serves scrapes that follow it (several Prometheus servers, a dashboard). Default 1000 ms, at most 60 s. */
  cacheMs?: number;
  /** prom-client's process and Node.js metrics too (process_*, nodejs_*): for the one WorkerMetrics of a `gpures worker` process. */
  processMetrics?: boolean;
}

/** Seconds: from a fast drain (a fraction of a second) to the 120 s default timeout and past it. */
const WAIT_BUCKETS = [0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300];
/** Seconds: a bring-up waits on model loads (minutes); a denial ends in under one; a lease holds for hours. */
const OPERATION_BUCKETS = [0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400];

const GPU_LABELS = ['node', 'gpu_role', 'gpu_uuid'] as const;

function bounded(name: string, value: number | undefined, fallback: number, max: number): number {
  const v = value ?? fallback;
  if (!Number.isInteger(v) || v < 0 || v > max) throw new RangeError(`WorkerMetrics: ${name} must be an integer from 0 to ${max} ms, got ${v}`);
  return v;
}

/** A read bounded at `ms`, rejecting as `<what>: no answer within <ms> ms`. */
const boundedRead = <T>(what: string, p: Promise<T>, ms: number): Promise<T> => withTimeout(p, ms, `${what}: no answer within ${ms} ms`);

export class WorkerMetrics {
  readonly registry = new Registry();
  private readonly readTimeoutMs: number;
  /** How long one reading serves the scrapes after it (the worker's /metrics caches the SDK core's text as long). */
  readonly cacheMs: number;
  private sources: LedgerSources | undefined;
  /** The per-GPU reading: scrapes share the one under way, and its figures serve for cacheMs after it ends. */
  private readonly refresh: () => Promise<void>;

  private readonly operations = new Counter({
    name: 'gpures_operations_total',
    help: 'Operation runs that ended on this worker, by kind and outcome, whoever started them',
    labelNames: ['kind', 'outcome'],
    registers: [this.registry],
  });
  private readonly failures = new Counter({
    name: 'gpures_operation_failures_total',
    help: "Failed operation runs by kind and failure type (src/shared/failures.ts; 'unknown' for anything else)",
    labelNames: ['kind', 'type'],
    registers: [this.registry],
  });
  private readonly operationSeconds = new Histogram({
    name: 'gpures_operation_duration_seconds',
    help: "Wall time of an operation run from its start to its end (bring-up and acquisition wall time: kind='bring-up', kind='acquisition')",
    labelNames: ['kind', 'outcome'],
    buckets: OPERATION_BUCKETS,
    registers: [this.registry],
  });
  private readonly drainSeconds = new Histogram({
    name: 'gpures_drain_duration_seconds',
    help: "How long a serve's drain took before its stop: outcome 'drained' or 'timeout'",
    labelNames: ['outcome'],
    buckets: WAIT_BUCKETS,
    registers: [this.registry],
  });
  private readonly vramReleaseSeconds = new Histogram({
    name: 'gpures_vram_release_wait_seconds',
    help: "How long nvidia-smi took to show an evicted serve's VRAM back: outcome 'released' or 'not_released'",
    labelNames: ['outcome'],
    buckets: WAIT_BUCKETS,
    registers: [this.registry],
  });

  private readonly gpuGauge = (name: string, help: string) => new Gauge({ name, help, labelNames: GPU_LABELS, registers: [this.registry] });
  private readonly capacity = this.gpuGauge('gpures_gpu_capacity_mib', "The GPU's capacity_mib in the ledger");
  private readonly reserve = this.gpuGauge('gpures_gpu_reserve_mib', "The GPU's reserve_mib: MiB the ledger never admits");
  private readonly committed = this.gpuGauge('gpures_gpu_committed_mib', 'MiB of reservations admitted, running, stopping or evicting');
  private readonly held = this.gpuGauge('gpures_gpu_held_mib', "MiB held for acquirers whose victims are still draining (the ledger's pending entries)");
  private readonly free = this.gpuGauge(
    'gpures_gpu_free_mib',
    'capacity - reserve - committed - held; negative while victims drain, their MiB counted both as committed and as held',
  );
  private readonly used = this.gpuGauge('gpures_gpu_used_mib', 'MiB nvidia-smi reports used on the device');
  private readonly draw = this.gpuGauge(
    'gpures_gpu_non_ledger_draw_mib',
    'nvidia-smi used minus what running serves hold and every serve starting, stopping or being evicted reserves: the draw at least',
  );
  private readonly ledgerUp = new Gauge({
    name: 'gpures_ledger_up',
    help: "1 when the GPU's ledger answered this scrape (reconciled), 0 when it did not (not running, no worker, still reconciling)",
    labelNames: ['node', 'gpu_role'],
    registers: [this.registry],
  });
  private readonly reservation = new Gauge({
    name: 'gpures_reservation_mib',
    help: "Each reservation in a GPU's ledger, by serve, class and phase",
    labelNames: ['node', 'gpu_role', 'serve', 'class', 'phase'],
    registers: [this.registry],
  });

  constructor(opts: WorkerMetricsOptions = {}) {
    this.readTimeoutMs = bounded('readTimeoutMs', opts.readTimeoutMs, 2000, 10_000);
    this.cacheMs = bounded('cacheMs', opts.cacheMs, 1000, 60_000);
    this.refresh = singleFlight(() => this.readGpus(), this.cacheMs);
    if (opts.processMetrics) collectDefaultMetrics({ register: this.registry });
  }

  /** Where the per-GPU gauges are read from at scrape time (the worker wires its manifest, ledger client and nvidia-smi). */
  observeLedgers(sources: LedgerSources): void {
    this.sources = sources;
  }

  /** The worker's sinks: every run that ends is counted, whoever started it. */
  sinks(): InjectedSinks<OperationSinks> {
    return {
      operations: {
        ended: {
          // From the chain's start: a lease continues as new while it holds, and its last run is not its length.
          fn: (info, e: OperationEnded) => this.operationEnded(e, Date.now() - info.startTime.getTime()),
          callDuringReplay: false,
        },
      },
    };
  }

  operationEnded(e: OperationEnded, wallMs: number): void {
    this.operations.inc({ kind: e.kind, outcome: e.outcome });
    if (e.outcome === 'failed') this.failures.inc({ kind: e.kind, type: e.failureType ?? 'unknown' });
    this.operationSeconds.observe({ kind: e.kind, outcome: e.outcome }, Math.max(0, wallMs) / 1000);
  }

  private readonly ledgerReads = new Counter({
    name: 'gpures_ledger_reads_total',
    help: "GET /v1/ledger, by outcome: 'answered', 'failed' (the read failed: 503), 'busy' (too many at once: 503), 'refused' (not from this host, or not asked as the CLI asks)",
    labelNames: ['outcome'],
    registers: [this.registry],
  });

  /** One GET /v1/ledger, as it ended (./ledger-endpoint.ts). */
  ledgerRead(outcome: 'answered' | 'failed' | 'busy' | 'refused'): void {
    this.ledgerReads.inc({ outcome });
  }

  readonly activities: ActivityMetrics = {
    drainEnded: (e) => this.drainSeconds.observe({ outcome: e.drained ? 'drained' : 'timeout' }, e.waitedMs / 1000),
    vramReleaseEnded: (e) => this.vramReleaseSeconds.observe({ outcome: e.released ? 'released' : 'not_released' }, e.waitedMs / 1000),
  };

  /** The exposition text, the per-GPU gauges read first (one reading shared by scrapes within cacheMs). */
  async text(): Promise<string> {
    await this.refresh();
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  private async readGpus(): Promise<void> {
    const s = this.sources;
    if (!s) return;
    const read = await s.manifest.read().catch(() => undefined);
    const parsed = read ? parseManifest(read.text, read.file) : undefined;
    // A manifest that cannot be read or does not parse names no GPU: the gauges keep nothing stale.
    const gpus = parsed?.ok ? parsed.manifest.gpus : [];
    const devices = s.gpu ? boundedRead('nvidia-smi', s.gpu.readGpus(), this.readTimeoutMs).catch(() => undefined) : Promise.resolve(undefined);
    const ledgers = await Promise.all(
      gpus.map((g) => boundedRead(`ledger ${g.role}`, s.ledger.answer(s.node, g.role, this.readTimeoutMs), this.readTimeoutMs + 500).catch(() => undefined)),
    );
    const readings = await devices;
    for (const g of [this.capacity, this.reserve, this.committed, this.held, this.free, this.used, this.draw, this.ledgerUp, this.reservation]) g.reset();
    gpus.forEach((gpu, i) =>
      this.setGpu(
        s.node,
        gpu,
        ledgers[i],
        readings?.find((r) => r.uuid === gpu.uuid),
      ),
    );
  }

  private setGpu(node: string, gpu: GpuSpec, ledger: LedgerState | undefined, reading: GpuReading | undefined): void {
    const labels = { node, gpu_role: gpu.role, gpu_uuid: gpu.uuid };
    const answered = ledger !== undefined && !ledger.reconciling;
    this.ledgerUp.set({ node, gpu_role: gpu.role }, answered ? 1 : 0);
    if (reading) this.used.set(labels, reading.usedMib);
    if (!ledger || !answered) return;
    const t = totals(ledger);
    this.capacity.set(labels, ledger.capacityMib);
    this.reserve.set(labels, ledger.reserveMib);
    this.committed.set(labels, t.committedMib);
    this.held.set(labels, t.heldMib);
    this.free.set(labels, t.freeMib);
    if (reading) this.draw.set(labels, physicalTruth(ledger, reading).nonLedgerDrawMinMib);
    for (const r of ledger.reservations) this.reservation.set({ node, gpu_role: gpu.role, serve: r.serve, class: r.class, phase: r.phase }, r.vramMib);
  }
}
