// A promotion worker in a process of its own, so a test can SIGKILL it mid-promotion and start a
// replacement (dist/test/support/promote-worker.js). One argument, JSON:
//   { address, node, bundlePath, targets: RouterTarget[], pollIntervalMs?, hangAfter?, hangAt?, markerPath? }
// With `hangAfter: "<activity>"` that activity does its work, then writes its result to
// markerPath and never returns: the effect happened but the server never hears of it, the
// precise point where a real worker dying would leave it. The test kills the process there.
// With `hangAt: "recreate-rename"` a recreate stops the old router, then writes markerPath and
// hangs at the first rename: the router is down, mid-recreate, when the test kills the process.
// Prints "ready" on stdout once polling; exits when SIGTERM/SIGINT shut the worker down.
import { writeFileSync } from 'node:fs';
import Docker from 'dockerode';
import { DefaultLogger, NativeConnection, Runtime, Worker } from '@temporalio/worker';
import { DockerRouterDeployment } from '../../src/adapters/router-deployment/docker-router';
import { HEARTBEAT_THROTTLE } from '../../src/activities/heartbeat';
import { createPromotionActivities } from '../../src/activities/promotion';
import { httpRouterAdminFor } from '../../src/adapters/router-admin/http';
import type { RouterTarget } from '../../src/adapters/router-deployment/port';
import { taskQueueFor } from '../../src/shared/messages';
import { UNCOUNTED_SINKS } from '../../src/worker/workflow-code';

interface ChildConfig {
  address: string;
  node: string;
  bundlePath: string;
  targets: RouterTarget[];
  pollIntervalMs?: number;
  hangAfter?: string;
  hangAt?: 'recreate-rename';
  markerPath?: string;
}

/** Docker whose container renames never return (after writing the marker). */
function hangingAtRename(docker: Docker, markerPath: string | undefined): Docker {
  const getContainer = docker.getContainer.bind(docker);
  docker.getContainer = (id: string) => {
    const c = getContainer(id);
    c.rename = () => {
      if (markerPath) writeFileSync(markerPath, JSON.stringify({ renaming: id, at: Date.now() }));
      return new Promise<never>(() => undefined);
    };
    return c;
  };
  return docker;
}

async function main(): Promise<void> {
  const cfg = JSON.parse(process.argv[2] ?? '{}') as ChildConfig;
  Runtime.install({ logger: new DefaultLogger('ERROR') });
  const connection = await NativeConnection.connect({ address: cfg.address });
  try {
    const activities: Record<string, (input: never) => Promise<unknown>> = createPromotionActivities({
      routerDeployment: new DockerRouterDeployment(cfg.hangAt === 'recreate-rename' ? hangingAtRename(new Docker(), cfg.markerPath) : new Docker()),
      routerTargets: cfg.targets,
      pollIntervalMs: cfg.pollIntervalMs,
      routerAdminFor: httpRouterAdminFor,
    });
    const name = cfg.hangAfter;
    const original = name ? activities[name] : undefined;
    if (name && original) {
      activities[name] = async (input: never) => {
        const result = await original(input);
        if (cfg.markerPath) writeFileSync(cfg.markerPath, JSON.stringify(result));
        return new Promise<never>(() => undefined);
      };
    }
    const worker = await Worker.create({
      connection,
      taskQueue: taskQueueFor(cfg.node),
      activities,
      maxHeartbeatThrottleInterval: HEARTBEAT_THROTTLE,
      // The workflows' operation-metrics sink must exist (nothing scrapes this worker).
      sinks: UNCOUNTED_SINKS,
      workflowBundle: { codePath: cfg.bundlePath },
    });
    const running = worker.run();
    process.stdout.write('ready\n');
    await running;
  } finally {
    await connection.close();
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`promote-worker: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
