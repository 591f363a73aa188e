// ContainerRuntime over dockerode. Every call is idempotent so a retried activity converges.
import type Docker from 'dockerode';
import type { ContainerLogs, ContainerRuntime, ContainerSpec, ContainerState, LogRequest } from './port';
import { demuxLogs, LogFrames, statusCode } from './docker-util';
import { imageMissing, PermanentError } from '../errors';
import { Failure } from '../../shared/failures';

export interface DockerRuntimeOptions {
  /** 'auto' asks the daemon whether it has the nvidia runtime. */
  gpus: 'auto' | 'on' | 'off';
}

/**
 * What `docker run` would send: the port on the manifest's bind address, an init for graceful
 * stops, and, where GPUs are pinned, the device request of `--gpus device=<uuid>`.
 */
export function createOptions(spec: ContainerSpec, gpuPinned: boolean): Docker.ContainerCreateOptions {
  const portKey = `${spec.containerPort}/tcp`;
  return {
    name: spec.name,
    Image: spec.image,
    // Empty: the image's own command.
    Cmd: spec.cmd.length ? spec.cmd : undefined,
    Env: Object.entries(spec.env).map(([k, v]) => `${k}=${v}`),
    Labels: spec.labels,
    ExposedPorts: { [portKey]: {} },
    HostConfig: {
      PortBindings: { [portKey]: [{ HostIp: spec.bind, HostPort: String(spec.hostPort) }] },
      // An init reaps and forwards SIGTERM, so graceful stop works whatever the image's PID 1 is.
      Init: true,
      ...(gpuPinned && spec.gpuUuid ? { DeviceRequests: [{ Driver: 'nvidia', DeviceIDs: [spec.gpuUuid], Capabilities: [['gpu']] }] } : {}),
    },
  };
}

/** The PID column of `docker top`'s answer (ps -ef's, whatever its column order). */
export function pidsOfTop(top: { Titles?: string[]; Processes?: string[][] }): number[] {
  const column = (top.Titles ?? []).indexOf('PID');
  if (column < 0) return [];
  return (top.Processes ?? []).map((row) => Number(row[column])).filter((pid) => Number.isInteger(pid) && pid > 0);
}

export class DockerRuntime implements ContainerRuntime, ContainerLogs {
  private gpuSupport: Promise<boolean> | undefined;

  constructor(
    private readonly docker: Docker,
    private readonly options: DockerRuntimeOptions = { gpus: 'auto' },
  ) {}

  private hasGpus(): Promise<boolean> {
    if (this.options.gpus !== 'auto') return Promise.resolve(this.options.gpus === 'on');
    this.gpuSupport ??= this.docker.info().then((info: { Runtimes?: Record<string, unknown> }) => Boolean(info.Runtimes?.['nvidia']));
    return this.gpuSupport;
  }

  async hasImage(image: string): Promise<boolean> {
    try {
      await this.docker.getImage(image).inspect();
      return true;
    } catch (err) {
      if (statusCode(err) === 404) return false;
      throw err;
    }
  }

  async ensureRunning(spec: ContainerSpec): Promise<{ id: string; created: boolean; gpuPinned: boolean }> {
    const gpuPinned = spec.gpuUuid !== undefined && (await this.hasGpus());
    const existing = await this.inspect(spec.name);
    if (existing?.running) return { id: existing.id, created: false, gpuPinned };
    // A stopped leftover may carry an older manifest's settings: start from a clean container.
    if (existing) await this.remove(spec.name);
    if (!(await this.hasImage(spec.image))) throw imageMissing(spec.image);
    const container = await this.docker.createContainer(createOptions(spec, gpuPinned));
    try {
      await container.start();
    } catch (err) {
      // 304: already started by a concurrent attempt.
      if (statusCode(err) === 304) return { id: container.id, created: true, gpuPinned };
      // Pinning was asked for (--gpus on) on a daemon without the NVIDIA Container Toolkit.
      if (/could not select device driver/i.test(String((err as Error).message))) {
        await this.remove(spec.name);
        throw new PermanentError(
          Failure.GpuRuntimeMissing,
          `Docker cannot give ${spec.name} GPU ${spec.gpuUuid ?? '?'}: ${(err as Error).message.replace(/^\(HTTP code \d+\)[^-]*- /, '').trim()}; ` +
            `install the NVIDIA Container Toolkit${this.options.gpus === 'on' ? ', or run the worker with --gpus auto' : ''}`,
        );
      }
      // Another process holds the port: retrying will not free it, and the operator must know which.
      if (/address already in use|port is already allocated/i.test(String((err as Error).message))) {
        await this.remove(spec.name);
        throw new PermanentError(
          Failure.PortInUse,
          `port ${spec.hostPort} on ${spec.bind} is already in use by another process; free it or change serves.port`,
        );
      }
      throw err;
    }
    return { id: container.id, created: true, gpuPinned };
  }

  async inspect(name: string): Promise<ContainerState | undefined> {
    try {
      const info = await this.docker.getContainer(name).inspect();
      return {
        id: info.Id,
        name: info.Name.replace(/^\//, ''),
        running: info.State.Running,
        status: info.State.Status,
        exitCode: info.State.ExitCode,
        restartCount: info.RestartCount,
        labels: info.Config.Labels ?? {},
      };
    } catch (err) {
      if (statusCode(err) === 404) return undefined;
      throw err;
    }
  }

  async stop(name: string, timeoutS: number, onlyId?: string): Promise<'stopped' | 'already-stopped' | 'absent'> {
    try {
      // By its id, as remove: the stop reaches that container and no other that took the name since.
      await this.docker.getContainer(onlyId ?? name).stop({ t: timeoutS });
      return 'stopped';
    } catch (err) {
      if (statusCode(err) === 304) return 'already-stopped';
      if (statusCode(err) === 404) return 'absent';
      throw err;
    }
  }

  async remove(name: string, onlyId?: string): Promise<'removed' | 'absent'> {
    try {
      // By its id, dockerd removes that container and no other, whatever holds the name now.
      await this.docker.getContainer(onlyId ?? name).remove({ force: true });
      return 'removed';
    } catch (err) {
      // 409: removal already in progress, which converges to the same end.
      if (statusCode(err) === 404 || statusCode(err) === 409) return 'absent';
      throw err;
    }
  }

  async list(labels: Record<string, string>): Promise<ContainerState[]> {
    const containers = await this.docker.listContainers({
      all: true,
      filters: { label: Object.entries(labels).map(([k, v]) => `${k}=${v}`) },
    });
    return containers.map((c) => ({
      id: c.Id,
      name: (c.Names[0] ?? '').replace(/^\//, ''),
      running: c.State === 'running',
      status: c.State,
      exitCode: 0,
      restartCount: 0,
      labels: c.Labels,
    }));
  }

  /** `docker top`: dockerd lists the container's processes with their host pids, whatever namespace this process runs in. */
  async processes(name: string): Promise<number[]> {
    try {
      const top = (await this.docker.getContainer(name).top()) as { Titles?: string[]; Processes?: string[][] };
      return pidsOfTop(top);
    } catch (err) {
      // 404: no such container; 409: it is not running. Either way it has no process.
      if (statusCode(err) === 404 || statusCode(err) === 409) return [];
      throw err;
    }
  }

  async logsTail(name: string, lines: number): Promise<string> {
    try {
      const buf = await this.docker.getContainer(name).logs({ stdout: true, stderr: true, tail: lines, follow: false });
      return demuxLogs(buf);
    } catch (err) {
      if (statusCode(err) === 404) return '';
      throw err;
    }
  }

  async logs(name: string, req: LogRequest): Promise<AsyncIterable<Buffer> | Iterable<Buffer> | undefined> {
    const opts = {
      stdout: true,
      stderr: true,
      tail: req.tail,
      // Docker's since is whole seconds: a line of the second the window opens in is kept.
      ...(req.sinceEpochMs !== undefined ? { since: Math.floor(req.sinceEpochMs / 1000) } : {}),
      abortSignal: req.signal,
    };
    const container = this.docker.getContainer(name);
    try {
      if (!req.follow) return [Buffer.from(demuxLogs(await container.logs({ ...opts, follow: false })))];
      const stream = (await container.logs({ ...opts, follow: true })) as NodeJS.ReadableStream & { destroy?(): void };
      return demuxed(stream, req.signal);
    } catch (err) {
      if (statusCode(err) === 404) return undefined;
      throw err;
    }
  }
}

/** A followed log stream's payloads; it ends when dockerd ends it (the container stopped) or `signal` aborts. */
async function* demuxed(stream: NodeJS.ReadableStream & { destroy?(): void }, signal: AbortSignal): AsyncIterable<Buffer> {
  const frames = new LogFrames();
  const stop = () => stream.destroy?.();
  signal.addEventListener('abort', stop, { once: true });
  if (signal.aborted) stop();
  try {
    for await (const chunk of stream as AsyncIterable<Buffer>) yield* frames.push(chunk);
  } catch (err) {
    if (!signal.aborted) throw err;
  } finally {
    signal.removeEventListener('abort', stop);
    stop();
  }
}
