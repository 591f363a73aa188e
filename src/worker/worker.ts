// Worker bootstrap: one task queue per node, activities wired to the Docker host and the
// manifest this box runs from.
import { readBounded } from '../config/bounded-read';
import { MAX_MANIFEST_BYTES } from '../domain/manifest';
import Docker from 'dockerode';
import type { Client } from '@temporalio/client';
import type { NativeConnection, WorkerOptions } from '@temporalio/worker';
import { Worker } from '@temporalio/worker';
import { createActivities } from '../activities';
import { HEARTBEAT_THROTTLE } from '../activities/heartbeat';
import { DockerRuntime } from '../adapters/containers/docker';
import { DockerRouterDeployment } from '../adapters/router-deployment/docker-router';
import type { RouterDeployment, RouterTarget } from '../adapters/router-deployment/port';
import type { ContainerRuntime } from '../adapters/containers/port';
import type { FailedStartLogs } from '../adapters/failed-starts/port';
import type { GpuProbe } from '../adapters/gpu/port';
import type { ManifestSource } from '../adapters/manifest/port';
import type { RouterAdmin } from '../adapters/router-admin/port';
import { httpRouterAdminFor } from '../adapters/router-admin/http';
import type { ServeProbe } from '../adapters/serve-probe/port';
import { HttpServeProbe } from '../adapters/serve-probe/http';
import type { ServeSleep } from '../adapters/serve-sleep/port';
import { HttpServeSleep } from '../adapters/serve-sleep/http';
import { LedgerClient } from '../adapters/ledger/ledger-client';
import type { LedgerPort } from '../adapters/ledger/port';
import { TemporalOperations } from '../adapters/operations/temporal';
import { TemporalLeases } from '../adapters/leases/temporal';
import { TemporalSearchAttributes } from '../adapters/search-attributes/temporal';
import { STICKY_SCHEDULE_TO_START_MS, taskQueueFor } from '../shared/messages';
import { routerTargetsFromEnv } from './router-targets';
import { WorkerMetrics } from './metrics';
import { UNHELD_UPDATE_ANSWERS, WORKFLOW_INTERCEPTOR_MODULES, WORKFLOWS_PATH, withLeanSourceMap } from './workflow-code';
import { prebuiltBundle } from './prebuilt-bundle';
import { withLazyStackTraces } from './workflow-threads';
import type { ThreadReport } from './workflow-threads';
import type { LocalSteps } from './stop';

export function fileManifest(path: string): ManifestSource {
  return { read: async () => ({ text: await readBounded(path, 'manifest', MAX_MANIFEST_BYTES), file: path }) };
}

export interface GpuresWorkerOptions {
  connection: NativeConnection;
  client: Client;
  namespace: string;
  node: string;
  manifest: ManifestSource;
  runtime?: ContainerRuntime;
  probe?: ServeProbe;
  /** vLLM's sleep-mode endpoints (default: over HTTP). */
  sleep?: ServeSleep;
  router?: RouterAdmin;
  gpu?: GpuProbe;
  pollIntervalMs?: number;
  /** Routers this worker may promote (default: from GPURES_ROUTER_CONFIG and friends, see docs/promotion.md). */
  routerTargets?: RouterTarget[];
  routerDeployment?: RouterDeployment;
  /** Where the worker counts operations and reads the ledgers for /metrics (docs/metrics.md); one of its own when not given. */
  metrics?: WorkerMetrics;
  /** The ledgers as the activities reach them (default: through this client); tests wrap it to hold a step at a chosen moment. */
  ledger?: LedgerPort;
  /** Where a failed start's last lines are kept past its container (none kept without it). */
  failedStarts?: FailedStartLogs;
  /** A prebuilt bundle (tests build one per suite); otherwise the workflows are bundled at start. */
  workflowBundle?: WorkerOptions['workflowBundle'];
  /** Hears each workflow thread say whether its stack traces are lazy (default: a warning when not). */
  onThreadReport?: (report: ThreadReport) => void;
  /** Keeps track of the local steps running, for what a stop cut short says (src/worker/stop.ts). */
  localSteps?: LocalSteps;
}

export async function createGpuresWorker(opts: GpuresWorkerOptions): Promise<Worker> {
  const ledger = new LedgerClient(opts.client);
  // Always there, scraped or not: the workflows' sink calls need a sink to land in.
  const metrics = opts.metrics ?? new WorkerMetrics();
  metrics.observeLedgers({ node: opts.node, manifest: opts.manifest, ledger, ...(opts.gpu ? { gpu: opts.gpu } : {}) });
  const activities = createActivities({
    runtime: opts.runtime ?? new DockerRuntime(new Docker()),
    probe: opts.probe ?? new HttpServeProbe(),
    sleep: opts.sleep ?? new HttpServeSleep(),
    manifest: opts.manifest,
    ledger: opts.ledger ?? ledger,
    operations: new TemporalOperations(opts.client),
    leases: new TemporalLeases(opts.client),
    router: opts.router,
    gpu: opts.gpu,
    pollIntervalMs: opts.pollIntervalMs,
    routerDeployment: opts.routerDeployment ?? new DockerRouterDeployment(new Docker()),
    routerTargets: opts.routerTargets ?? routerTargetsFromEnv(process.env),
    routerAdminFor: httpRouterAdminFor,
    metrics: metrics.activities,
    searchAttributes: new TemporalSearchAttributes(opts.client, opts.namespace),
    ...(opts.failedStarts ? { failedStarts: opts.failedStarts } : {}),
  });
  const create = () =>
    Worker.create({
      connection: opts.connection,
      namespace: opts.namespace,
      taskQueue: taskQueueFor(opts.node),
      activities,
      sinks: { ...metrics.sinks(), ...UNHELD_UPDATE_ANSWERS },
      maxHeartbeatThrottleInterval: HEARTBEAT_THROTTLE,
      // The CLI's bound on a node's answer (NODE_ANSWER_MS) is set past it.
      stickyQueueScheduleToStartTimeout: STICKY_SCHEDULE_TO_START_MS,
      ...workflowCode(opts.workflowBundle, opts.localSteps),
    });
  return withLazyStackTraces(create, opts.onThreadReport ?? warnIfEager);
}

/** A workflow thread left with the SDK's own hook still runs every workflow; it is only slower. */
function warnIfEager(report: ThreadReport): void {
  if (!report.installed) process.stderr.write(`worker: warning: workflow stack traces are formatted as each promise is made (slower): ${report.why}\n`);
}

/** The bundle given, else the build's (prebuilt-bundle.ts), else the workflows bundled at start; local steps tracked where asked. */
function workflowCode(
  given: WorkerOptions['workflowBundle'],
  localSteps: LocalSteps | undefined,
): Pick<WorkerOptions, 'workflowBundle' | 'workflowsPath' | 'interceptors' | 'bundlerOptions'> {
  const bundle = given ?? prebuiltBundle();
  const activity = localSteps ? { activity: [localSteps.interceptor] } : {};
  return bundle
    ? { workflowBundle: bundle, interceptors: activity }
    : {
        workflowsPath: WORKFLOWS_PATH,
        interceptors: { workflowModules: WORKFLOW_INTERCEPTOR_MODULES, ...activity },
        bundlerOptions: { webpackConfigHook: withLeanSourceMap },
      };
}
