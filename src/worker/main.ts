// `gpures worker`: connects with Temporal's environment configuration and runs until SIGINT or
// SIGTERM (the SDK installs those handlers and drains in-flight tasks first).
import Docker from 'dockerode';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { temporalConfig } from '../client/connection';
import { DockerRuntime } from '../activities/docker';
import { taskQueueFor } from '../shared/messages';
import { createGpuresWorker, fileManifest } from './worker';

export async function runWorker(opts: { manifestPath: string; node: string; gpus: 'auto' | 'on' | 'off' }): Promise<void> {
  const config = temporalConfig();
  const namespace = config.namespace ?? 'default';
  const nativeConnection = await NativeConnection.connect(config.connectionOptions);
  const connection = await Connection.connect(config.connectionOptions);
  try {
    const worker = await createGpuresWorker({
      connection: nativeConnection,
      client: new Client({ connection, namespace }),
      namespace,
      node: opts.node,
      manifest: fileManifest(opts.manifestPath),
      runtime: new DockerRuntime(new Docker(), { gpus: opts.gpus }),
    });
    process.stderr.write(
      `worker for node '${opts.node}' on ${config.connectionOptions.address ?? '?'} namespace ${namespace}, task queue ${taskQueueFor(opts.node)}, manifest ${opts.manifestPath}\n`,
    );
    await worker.run();
  } finally {
    await connection.close();
    await nativeConnection.close();
  }
}
