// The container runtime activities start and stop serves with: Docker (docker.ts) implements it,
// and the simulated box (src/sim/runtime.ts) does without Docker or a GPU.

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
  /**
   * Graceful stop (SIGTERM, then SIGKILL after timeoutS); a stopped or absent container is fine.
   * With `onlyId`, only while the name is still that container's, as remove.
   */
  stop(name: string, timeoutS: number, onlyId?: string): Promise<'stopped' | 'already-stopped' | 'absent'>;
  /**
   * Removes it, running or not. With `onlyId`, only while the name is still that container's: one
   * created since under the same name (another run's) is left alone, and the answer is absent.
   */
  remove(name: string, onlyId?: string): Promise<'removed' | 'absent'>;
  list(labels: Record<string, string>): Promise<ContainerState[]>;
  logsTail(name: string, lines: number): Promise<string>;
  /**
   * The host pids of the container's processes (its main process and every descendant), as
   * nvidia-smi's --query-compute-apps names them from the host's pid namespace; empty when it does
   * not run. Absent where the runtime cannot tell: a victim's VRAM is then confirmed by the whole GPU.
   */
  processes?(name: string): Promise<number[]>;
}

/** What `gpures serves logs` asks of a container's output. */
export interface LogRequest {
  /** The last lines to start with (Docker's --tail). */
  tail: number;
  /** Only what was written at or after this instant (Docker's --since; the simulated box by its lines' own stamps). */
  sinceEpochMs?: number;
  /** Go on with what it writes until it stops, it is removed, or `signal` aborts. */
  follow: boolean;
  signal: AbortSignal;
}

/**
 * A container's output, stdout and stderr interleaved as written, read where the CLI runs: by
 * Docker (docker.ts) or the simulated box's files (src/sim/runtime.ts).
 */
export interface ContainerLogs {
  inspect(name: string): Promise<ContainerState | undefined>;
  /** The output as it comes, chunk by chunk; undefined when no container has the name. */
  logs(name: string, req: LogRequest): Promise<AsyncIterable<Buffer> | Iterable<Buffer> | undefined>;
}
