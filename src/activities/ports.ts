// The outside systems activities need, as interfaces of our own: the Docker adapter and the
// HTTP probe implement them here; a simulated box can implement them without Docker or a GPU.
import { Failure } from '../shared/failures';

export interface ContainerSpec {
  name: string;
  image: string;
  cmd: string[];
  env: Record<string, string>;
  labels: Record<string, string>;
  /** Host address and port the container port is published on. */
  bind: string;
  hostPort: number;
  containerPort: number;
  /** GPU to pin by UUID where the runtime has GPUs; ignored where it has none. */
  gpuUuid?: string;
}

export interface ContainerState {
  id: string;
  name: string;
  running: boolean;
  status: string;
  exitCode: number;
  restartCount: number;
  labels: Record<string, string>;
}

export interface ContainerRuntime {
  /** Creates and starts the container, or returns the one already running under that name. */
  ensureRunning(spec: ContainerSpec): Promise<{ id: string; created: boolean; gpuPinned: boolean }>;
  /** Whether the image is on this host, so a start that would fail on it is refused before anything is changed. */
  hasImage(image: string): Promise<boolean>;
  inspect(name: string): Promise<ContainerState | undefined>;
  /** Graceful stop (SIGTERM, then SIGKILL after timeoutS); a stopped or absent container is fine. */
  stop(name: string, timeoutS: number): Promise<'stopped' | 'already-stopped' | 'absent'>;
  remove(name: string): Promise<'removed' | 'absent'>;
  list(labels: Record<string, string>): Promise<ContainerState[]>;
  logsTail(name: string, lines: number): Promise<string>;
}

export interface HealthProbe {
  ok: boolean;
  status?: number;
  error?: string;
}

/**
 * Nothing answered at a serve's URL: the connection was refused, reset or timed out. `code` is
 * the system's (ECONNREFUSED, ECONNRESET, UND_ERR_SOCKET, TIMEOUT, …): whether the container is
 * gone is for the caller to find out.
 */
export class ServeUnreachable extends Error {
  constructor(
    readonly url: string,
    readonly code: string,
    detail: string,
  ) {
    super(`${url}: ${code}${detail && detail !== code ? ` (${detail})` : ''}`);
    this.name = 'ServeUnreachable';
  }
}

export interface ServeProbe {
  health(url: string, timeoutMs: number): Promise<HealthProbe>;
  /** Ids reported by an OpenAI-compatible /v1/models; ServeUnreachable when nothing answers. */
  modelIds(baseUrl: string, timeoutMs: number): Promise<string[]>;
  /** vLLM's vllm:num_requests_running summed over models; null where the serve has no /metrics. */
  requestsRunning(baseUrl: string, timeoutMs: number): Promise<number | null>;
}

export interface ManifestSource {
  /** Returns the manifest's text and the file name used in error messages. */
  read(): Promise<{ text: string; file: string }>;
}

/** Thrown by adapters for failures that retrying cannot fix; activities map them to failure types. */
export class PermanentError extends Error {
  constructor(
    readonly type: string,
    message: string,
  ) {
    super(message);
    this.name = type;
  }
}

export function imageMissing(image: string): PermanentError {
  return new PermanentError(Failure.ImageMissing, `image '${image}' is not on this Docker host; pull or load it first`);
}

// ---- router admin contract (docs/router-admin-api.md) ----

export type TierMode = 'active' | 'quiesced';

export interface TierState {
  tier: string;
  state: TierMode;
  /** Requests whose response has not finished yet. */
  inFlight: number;
  backend: string;
  modelIdentity: boolean;
}

export type ReadmitRefusal = 'identity_not_configured' | 'identity_mismatch' | 'unhealthy';

export type ReadmitOutcome =
  | { ok: true; tier: string; observedModel: string }
  | { ok: false; tier: string; reason: ReadmitRefusal; message: string };

export interface RouterAdmin {
  /** New requests to the tier get 503; requests in flight go on. Idempotent. */
  quiesce(tier: string): Promise<TierState>;
  tierState(tier: string): Promise<TierState>;
  /** The router probes the backend's health and /v1/models identity before it routes again. */
  readmit(tier: string): Promise<ReadmitOutcome>;
  reload(): Promise<{ mappingVersion: string }>;
  healthz(): Promise<{ ok: boolean; mappingVersion: string }>;
}

// ---- GPU probe (nvidia-smi) ----

export interface GpuReading {
  index: number;
  uuid: string;
  name: string;
  totalMib: number;
  usedMib: number;
  freeMib: number;
}

export interface GpuProcess {
  gpuUuid: string;
  pid: number;
  processName: string;
  /** null where the driver does not report it (WSL2 prints [N/A]). */
  usedMib: number | null;
}

export interface GpuProbe {
  readGpus(): Promise<GpuReading[]>;
  /** Empty where the driver or the pid namespace hides processes. */
  computeApps(): Promise<GpuProcess[]>;
}

/** How an operation's workflow run stands: what a bring-down needs to wait out or take over from. */
export type OperationStatus = 'running' | 'closed';

/** The operations (workflow runs) that hold serves: asked and cancelled through Temporal. */
export interface OperationControl {
  status(workflowId: string, runId: string): Promise<{ status: OperationStatus; closedAs?: string }>;
  /** Requests cancellation; the operation's compensations then give back what it took. */
  cancel(workflowId: string, runId: string): Promise<void>;
}
