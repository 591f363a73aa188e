// A promotion worker in a process of its own, so a test can SIGKILL it mid-promotion and start a
// replacement (dist/test/support/promote-worker.js). One argument, JSON:
//   { address, node, bundlePath, targets: RouterTarget[], pollIntervalMs?, hangAfter?, hangAt?, freezeAt?, holdAt?, markerPath? }
// With `hangAfter: "<activity>"` that activity does its work, then writes its result to
// markerPath and never returns: the effect happened but the server never hears of it, the
// precise point where a real worker dying would leave it. The test kills the process there.
// With `hangAt: "recreate-rename"` a recreate stops the old router, then writes markerPath and
// hangs at the first rename: the router is down, mid-recreate, when the test kills the process.
// With `freezeAt: "write-start"` the first promoteWrite, and with `"write-rename"` the first rename
// of a temp file over the live config, writes markerPath and SIGSTOPs the whole process there (no
// heartbeat, no poll): a worker frozen mid-write, which the test SIGCONTs when it chooses; each of
// its writes' ends is appended to markerPath + ".outcome" ({ ok, result } or { ok, message }).
// With `freezeAt: "restore-remove"` it freezes so at the first removal of a live config (its unlink,
// or its rename to a temp name) by a restore, whose ends are appended likewise.
// With `holdAt: "write-check"` the first write of a live config, its temp file written and synced,
// writes markerPath and waits (heartbeating, the worker alive) until markerPath + ".release"
// exists, then makes the check before its rename; with `"write-rename"` it waits after that check,
// just before the rename. A slow disk's sync, in the window a cancel can arrive in. Its writes'
// ends are appended to markerPath + ".outcome" as above.
// Prints "ready" on stdout once polling; exits when SIGTERM/SIGINT shut the worker down.
import { appendFileSync, existsSync, writeFileSync } from 'node:fs';
import { basename } from 'node:path';
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
  freezeAt?: 'write-start' | 'write-rename' | 'restore-remove';
  holdAt?: 'write-check' | 'write-rename';
  markerPath?: string;
}

/** Once: the marker, then SIGSTOP; the code after it runs when the test sends SIGCONT. */
function freezer(markerPath: string | undefined): (what: string) => void {
  let frozen = false;
  return (what) => {
    if (frozen) return;
    frozen = true;
    if (markerPath) writeFileSync(markerPath, JSON.stringify({ frozen: what, pid: process.pid, at: Date.now() }));
    process.kill(process.pid, 'SIGSTOP');
  };
}

/**
 * fs/promises' rename, as the adapter calls it (a property of the module object at call time),
 * frozen at the first temp file renamed over one of the live configs.
 */
function freezingAtLiveRename(targets: RouterTarget[], freeze: (what: string) => void): void {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const fsp = require('node:fs/promises') as { rename: (from: string, to: string) => Promise<void> };
  const rename = fsp.rename.bind(fsp);
  const live = new Set(targets.map((t) => t.configPath));
  fsp.rename = async (from, to) => {
    if (live.has(to) && basename(from).includes('.tmp-')) freeze(`rename ${basename(from)} over ${to}`);
    return rename(from, to);
  };
}

/**
 * fs/promises' rm and rename, as the adapter calls them, frozen at the first removal of one of the
 * live configs: its unlink, or its rename away to another name.
 */
function freezingAtLiveRemove(targets: RouterTarget[], freeze: (what: string) => void): void {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const fsp = require('node:fs/promises') as { rename: (from: string, to: string) => Promise<void>; rm: (path: string, o?: object) => Promise<void> };
  const rename = fsp.rename.bind(fsp);
  const rm = fsp.rm.bind(fsp);
  const live = new Set(targets.map((t) => t.configPath));
  fsp.rename = async (from, to) => {
    if (live.has(from)) freeze(`rename ${from} to ${basename(to)}`);
    return rename(from, to);
  };
  fsp.rm = async (path, o) => {
    if (live.has(path)) freeze(`unlink ${path}`);
    return rm(path, o);
  };
}

/**
 * The deployment's first write of a live config held, on `holdAt`'s side of the check its rename
 * waits for, from the marker until the test creates markerPath + ".release".
 */
function holdingLiveWrite(d: DockerRouterDeployment, targets: RouterTarget[], holdAt: 'write-check' | 'write-rename', markerPath: string): void {
  const write = d.writeFileAtomic.bind(d);
  const live = new Set(targets.map((t) => t.configPath));
  let held = false;
  const hold = async () => {
    writeFileSync(markerPath, JSON.stringify({ held: holdAt, pid: process.pid, at: Date.now() }));
    while (!existsSync(`${markerPath}.release`)) await new Promise((r) => setTimeout(r, 50));
  };
  d.writeFileAtomic = (dir, path, data, mode, beforeRename) => {
    if (held || !live.has(path)) return write(dir, path, data, mode, beforeRename);
    held = true;
    return write(dir, path, data, mode, async () => {
      if (holdAt === 'write-check') await hold();
      await beforeRename?.();
      if (holdAt === 'write-rename') await hold();
    });
  };
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
    const deployment = new DockerRouterDeployment(cfg.hangAt === 'recreate-rename' ? hangingAtRename(new Docker(), cfg.markerPath) : new Docker());
    if (cfg.holdAt && cfg.markerPath) holdingLiveWrite(deployment, cfg.targets, cfg.holdAt, cfg.markerPath);
    const activities: Record<string, (input: never) => Promise<unknown>> = createPromotionActivities({
      routerDeployment: deployment,
      routerTargets: cfg.targets,
      pollIntervalMs: cfg.pollIntervalMs,
      routerAdminFor: httpRouterAdminFor,
    });
    const freeze = freezer(cfg.markerPath);
    if (cfg.freezeAt === 'write-rename') freezingAtLiveRename(cfg.targets, freeze);
    if (cfg.freezeAt === 'restore-remove') freezingAtLiveRemove(cfg.targets, freeze);
    const frozenStep = cfg.freezeAt === 'restore-remove' ? 'promoteRestore' : 'promoteWrite';
    const write = activities[frozenStep];
    if ((cfg.freezeAt || cfg.holdAt) && write) {
      const freezeAt = cfg.freezeAt;
      // What each attempt of the frozen step on this worker ended with, one JSON line each, so the
      // test waits for the frozen attempt's end after SIGCONT instead of hoping a few seconds were enough.
      const outcome = (line: object) => cfg.markerPath && appendFileSync(`${cfg.markerPath}.outcome`, `${JSON.stringify(line)}\n`);
      activities[frozenStep] = async (input: never) => {
        if (freezeAt === 'write-start') freeze('promoteWrite before it reads the live file');
        try {
          const r = await write(input);
          outcome({ ok: true, result: r });
          return r;
        } catch (err) {
          outcome({ ok: false, message: err instanceof Error ? err.message : String(err) });
          throw err;
        }
      };
    }
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
      // Frozen, its pollers still waiting at the server would each take a task and time out:
      // with one activity slot, the write it freezes in holds it and none is left polling.
      ...(cfg.freezeAt ? { maxConcurrentActivityTaskExecutions: 1 } : {}),
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
