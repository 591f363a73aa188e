// `gpures worker`: connects with Temporal's environment configuration and runs until SIGINT or
// SIGTERM (the SDK installs those handlers and drains in-flight tasks first).
import Docker from 'dockerode';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { clientIdentity, temporalConfig } from '../client/connection';
import type { Env } from '../config/env';
import { workerEnv } from '../config/env';
import { DockerRuntime } from '../adapters/containers/docker';
import { NvidiaSmi } from '../adapters/gpu/nvidia-smi';
import type { ContainerRuntime } from '../adapters/containers/port';
import type { RouterAdmin } from '../adapters/router-admin/port';
import { HttpRouterAdmin } from '../adapters/router-admin/http';
import { taskQueueFor } from '../shared/messages';
import { createGpuresWorker, fileManifest } from './worker';

export interface WorkerRunOptions {
  manifestPath: string;
  node: string;
  gpus: 'auto' | 'on' | 'off';
  /** The simulated box's runtime instead of Docker (the demo). */
  runtime?: ContainerRuntime;
  env?: NodeJS.ProcessEnv;
}

/** Router and GPU probe from the environment: secrets stay in the worker, never in history. */
export function adaptersFromEnv(env: Env): { router?: RouterAdmin; gpu: NvidiaSmi; describe: string[] } {
  const e = workerEnv(env);
  const router = e.router ? new HttpRouterAdmin({ baseUrl: e.router.url, token: e.router.token }) : undefined;
  return {
    router,
    gpu: new NvidiaSmi({ binary: e.nvidiaSmi }),
    describe: [`router ${e.routerUrl ?? 'not configured (eviction of routed serves will fail)'}`, `nvidia-smi ${e.nvidiaSmi}`],
  };
}

export async function runWorker(opts: WorkerRunOptions): Promise<void> {
  const config = temporalConfig();
  const namespace = config.namespace ?? 'default';
  const adapters = adaptersFromEnv(opts.env ?? process.env);
  const nativeConnection = await NativeConnection.connect(config.connectionOptions);
  const connection = await Connection.connect(config.connectionOptions);
  try {
    const worker = await createGpuresWorker({
      connection: nativeConnection,
      client: new Client({ connection, namespace, identity: clientIdentity('worker') }),
      namespace,
      node: opts.node,
      manifest: fileManifest(opts.manifestPath),
      runtime: opts.runtime ?? new DockerRuntime(new Docker(), { gpus: opts.gpus }),
      router: adapters.router,
      gpu: adapters.gpu,
    });
    process.stderr.write(
      `worker for node '${opts.node}' on ${config.connectionOptions.address ?? '?'} namespace ${namespace}, task queue ${taskQueueFor(opts.node)}, ` +
        `manifest ${opts.manifestPath}; ${adapters.describe.join('; ')}\n`,
    );
    await worker.run();
  } finally {
    await connection.close();
    await nativeConnection.close();
  }
}
