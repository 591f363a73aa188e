// `gpures worker`: connects with Temporal's environment configuration and runs until SIGINT or
// SIGTERM (its local steps end first, then the SDK drains; bounded: src/worker/stop.ts).
import Docker from 'dockerode';
import { Client, Connection } from '@temporalio/client';
import { IllegalStateError } from '@temporalio/common';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { clientIdentity, reachTemporal, temporalInterceptors } from '../client/connection';
import { GRPC_UNIMPLEMENTED, notTemporalFrontend } from '../client/not-frontend';
import { temporalConfig, temporalTarget } from '../client/temporal-config';
import type { Env, MetricsAddr } from '../config/env';
import { DEFAULT_METRICS_ADDR, EnvError, workerEnv } from '../config/env';
import { freePort } from '../dev/dev-server';
import { isLoopback } from '../domain/manifest';
import { httpUrl } from '../domain/serve';
import { DockerRuntime } from '../adapters/containers/docker';
import { FailedStartFiles } from '../adapters/failed-starts/files';
import type { FailedStartLogs } from '../adapters/failed-starts/port';
import { dockerHost, reachDocker } from '../adapters/containers/docker-reach';
// The CLI's worker command tells this failure by its class.
export { DockerUnreachable } from '../adapters/containers/docker-reach';
import { NvidiaSmiStream } from '../adapters/gpu/nvidia-smi-stream';
import type { GpuProbe } from '../adapters/gpu/port';
import { NvidiaSmi } from '../adapters/gpu/nvidia-smi';
import type { ContainerRuntime } from '../adapters/containers/port';
import type { LedgerPort } from '../adapters/ledger/port';
import type { RouterAdmin } from '../adapters/router-admin/port';
import { HttpRouterAdmin } from '../adapters/router-admin/http';
import { taskQueueFor } from '../shared/messages';
import { createGpuresWorker, fileManifest } from './worker';
import { checkGpusAtStart } from './gpu-check';
import { checkRouterAtStart } from './router-check';
import type { Manifest } from '../domain/types';
import { denialsAsInfo } from './log';
import { refuseSecondWorker } from './second-worker';
import { WorkerMetrics } from './metrics';
import { startMetricsServer } from './metrics-server';
import type { MetricsServer } from './metrics-server';
import { workerLedgerRead } from './ledger-endpoint';
import type { LedgerRead } from './ledger-endpoint';
import { LocalSteps, stopWithin, WorkerStopCut } from './stop';
// The CLI's worker command tells this ending by its class.
export { WorkerStopCut } from './stop';

export interface WorkerRunOptions {
  manifestPath: string;
  node: string;
  gpus: 'auto' | 'on' | 'off';
  /** The simulated box's runtime instead of Docker (the demo). */
  runtime?: ContainerRuntime;
  env?: NodeJS.ProcessEnv;
  /** --metrics: overrides GPURES_METRICS_ADDR. */
  metrics?: MetricsAddr | 'off';
  /** The ledgers as the activities reach them, around the worker's client (default: that client's); a test's worker wraps it to hold a step. */
  ledger?: (client: Client) => LedgerPort;
  /** The manifest as loaded: its GPUs checked against one nvidia-smi reading, its routed tiers against the router, once the worker is up (warnings only). */
  declared?: Pick<Manifest, 'gpus' | 'serves'>;
  /** --allow-second-worker: start beside another worker polling the node's task queue. */
  allowSecondWorker?: boolean;
}

/** Router and GPU probe from the environment: secrets stay in the worker, never in history. */
export function adaptersFromEnv(env: Env): { router?: RouterAdmin; gpu: GpuProbe; failedStarts: FailedStartLogs; describe: string[] } {
  const e = workerEnv(env);
  const router = e.router ? new HttpRouterAdmin({ baseUrl: e.router.url, token: e.router.token }) : undefined;
  const loop = e.nvidiaSmiLoopMs;
  return {
    router,
    failedStarts: new FailedStartFiles(e.failedStartsDir),
    gpu: loop === 'off' ? new NvidiaSmi({ binary: e.nvidiaSmi }) : new NvidiaSmiStream({ binary: e.nvidiaSmi, intervalMs: loop }),
    describe: [
      `router ${e.routerUrl ?? 'not configured (eviction of routed serves will fail)'}`,
      `nvidia-smi ${e.nvidiaSmi} (${loop === 'off' ? 'a process per reading' : `one stream, -lms ${loop}`})`,
    ],
  };
}

/**
 * The process's one Runtime, before any connection: the worker's logger (a denial is one info
 * line), and the SDK core's Prometheus exporter on a loopback port of its own, whose text the
 * worker's /metrics appends. Undefined when a Runtime exists already (a process that made one
 * first): then its logger stays, and /metrics has the domain metrics only.
 */
async function installRuntime(exportCore: boolean): Promise<string | undefined> {
  // Without the SDK's signal handlers: the stop is the worker's own (stop.ts), its local steps ending before the SDK's shutdown begins.
  const base = { logger: denialsAsInfo(new DefaultLogger('INFO')), shutdownSignals: [] };
  try {
    if (!exportCore) {
      Runtime.install(base);
      return undefined;
    }
    const corePort = await freePort();
    const prometheus = { bindAddress: `127.0.0.1:${corePort}`, countersTotalSuffix: true, unitSuffix: true, useSecondsForDurations: true };
    try {
      Runtime.install({ ...base, telemetryOptions: { metrics: { prometheus } } });
      return `${httpUrl('127.0.0.1', corePort)}/metrics`;
    } catch (err) {
      if (err instanceof IllegalStateError) throw err;
      // The core's exporter could not start (its port taken between the pick and the bind): the worker runs, with the domain metrics.
      process.stderr.write(
        `worker: warning: the Temporal SDK's metrics exporter did not start (${(err as Error).message}); /metrics has the worker's own only\n`,
      );
      Runtime.install(base);
      return undefined;
    }
  } catch (err) {
    if (!(err instanceof IllegalStateError)) throw err;
    return undefined;
  }
}

/**
 * /metrics where asked (--metrics, GPURES_METRICS_ADDR), else at the default address. A busy
 * default port is a warning, the worker runs without it; an address asked for that cannot be
 * bound fails the start.
 */
async function serveMetrics(
  asked: MetricsAddr | undefined,
  metrics: WorkerMetrics,
  coreUrl: string | undefined,
  ledger: LedgerRead,
): Promise<MetricsServer | undefined> {
  const addr = asked ?? DEFAULT_METRICS_ADDR;
  try {
    return await startMetricsServer({ host: addr.host, port: addr.port, metrics, ledger, ...(coreUrl ? { coreUrl } : {}) });
  } catch (err) {
    const why = `cannot listen for /metrics on ${httpUrl(addr.host, addr.port)}: ${(err as Error).message}`;
    if (asked) throw new EnvError('GPURES_METRICS_ADDR', `${why} (--metrics or GPURES_METRICS_ADDR)`);
    process.stderr.write(`worker: warning: ${why}; running without /metrics (set --metrics or GPURES_METRICS_ADDR, or 'off')\n`);
    return undefined;
  }
}

/** How long the worker's start waits for getSystemInfo: the CLI's connect bound (src/client/connection.ts). */
const SYSTEM_INFO_MS = 10_000;

export async function runWorker(opts: WorkerRunOptions): Promise<void> {
  const config = temporalConfig();
  const temporal = temporalTarget(config);
  const { namespace } = temporal;
  const env = opts.env ?? process.env;
  const adapters = adaptersFromEnv(env);
  const asked = opts.metrics ?? workerEnv(env).metrics;
  const coreUrl = await installRuntime(asked !== 'off');
  const metrics = new WorkerMetrics({ processMetrics: true });
  // Everything opened is closed however the start fails: an address that cannot be bound must not leave the connections open.
  let metricsServer: MetricsServer | undefined;
  let nativeConnection: NativeConnection | undefined;
  let connection: Connection | undefined;
  // A worker cut short still holds its native connection: closing it would throw, the process exits anyway.
  let cut = false;
  try {
    // One probe for both: each is kept as it opens, so the finally closes whichever did.
    const opened = await reachTemporal(temporal.address, namespace, config.connectionOptions.tls, async () => {
      nativeConnection = await NativeConnection.connect(config.connectionOptions);
      const asked = await Connection.connect({ ...config.connectionOptions, interceptors: temporalInterceptors() });
      connection = asked;
      // Neither connect fails at one of the server's internal gRPC ports (measured: the worker went
      // on, and every poll would be refused after). A frontend too old for the call answers
      // UNIMPLEMENTED for the method alone, which the SDK's own check lets through too.
      // Within the connect's own bound: a server that answers the connect and not this must not hang the start.
      await asked
        .withDeadline(Date.now() + SYSTEM_INFO_MS, () => asked.workflowService.getSystemInfo({}))
        .catch((err: unknown) => {
          if (notTemporalFrontend(err) || (err as { code?: unknown }).code !== GRPC_UNIMPLEMENTED) throw err;
        });
      return { native: nativeConnection, client: asked };
    });
    const client = new Client({ connection: opened.client, namespace, identity: clientIdentity('worker') });
    // Before anything else is opened (the /metrics port): a refused second worker changes nothing.
    if (!opts.allowSecondWorker) await refuseSecondWorker(client, opts.node);
    const manifest = fileManifest(opts.manifestPath);
    const ledger = workerLedgerRead({ client, temporal, node: opts.node, manifest, gpu: adapters.gpu });
    metricsServer = asked === 'off' ? undefined : await serveMetrics(asked, metrics, coreUrl, ledger);
    const docker = opts.runtime ? undefined : new Docker();
    if (docker) await reachDocker(docker);
    const localSteps = new LocalSteps();
    const worker = await createGpuresWorker({
      connection: opened.native,
      client,
      namespace,
      node: opts.node,
      manifest,
      runtime: opts.runtime ?? new DockerRuntime(docker ?? new Docker(), { gpus: opts.gpus }),
      router: adapters.router,
      gpu: adapters.gpu,
      failedStarts: adapters.failedStarts,
      metrics,
      localSteps,
      ...(opts.ledger ? { ledger: opts.ledger(client) } : {}),
    });
    // Said once the stop signals are the worker's: a supervisor (or a test) that stops it on this line is heard.
    const announce = () => {
      process.stderr.write(
        `worker for node '${opts.node}' on ${temporal.address} namespace ${namespace}, task queue ${taskQueueFor(opts.node)}, ` +
          `manifest ${opts.manifestPath}; ${docker ? `docker ${dockerHost()}; ` : ''}${adapters.describe.join('; ')}; ${metricsLine(metricsServer, asked)}\n`,
      );
      // Beside the start, not before it: a slow nvidia-smi or router does not hold the worker back.
      if (opts.declared) {
        const { nvidiaSmi, routerUrl } = workerEnv(env);
        const checks = [checkGpusAtStart(adapters.gpu, opts.declared.gpus, nvidiaSmi)];
        if (adapters.router && routerUrl) checks.push(checkRouterAtStart(adapters.router, routerUrl, opts.declared.serves));
        for (const check of checks) {
          void check.then((problems) => {
            for (const p of problems) process.stderr.write(`worker: warning: ${p}\n`);
          });
        }
      }
    };
    try {
      await stopWithin(worker, localSteps, announce);
    } catch (err) {
      cut = err instanceof WorkerStopCut;
      throw err;
    }
  } finally {
    adapters.gpu.close?.();
    await metricsServer?.close();
    if (!cut) {
      await connection?.close();
      await nativeConnection?.close();
    }
  }
}

function metricsLine(server: MetricsServer | undefined, asked: MetricsAddr | 'off' | undefined): string {
  if (!server) return asked === 'off' ? 'metrics off' : 'metrics not served';
  const host = new URL(server.url).hostname.replace(/^\[|\]$/g, '');
  return `metrics ${server.url}${isLoopback(host) ? '' : ' (reachable beyond this host)'}`;
}
