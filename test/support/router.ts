// Fake-router deployments for the promotion tests: a gpures/fake-router:test container on the
// test dockerd with its live config in a host directory bind-mounted read-only at /config, a
// published port on loopback and a restart policy, as an operator would run the real router.
import { after, before } from 'node:test';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import assert from 'node:assert/strict';
import { chmodSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type Docker from 'dockerode';
import type { RouterTarget } from '../../src/adapters/router-deployment/port';
import { TEST_IMAGES } from '../../src/dev/toolchain';
import { docker, renderManifest, uniqueNode } from './box';
import { freePort, testTemporal, workflowBundle } from './temporal';
import type { TestTemporal } from './temporal';
import { startTestWorker } from './worker';
import type { TestWorker } from './worker';
import { waitUntil } from './wait';

export const ROUTER_IMAGE = process.env['GPURES_ROUTER_TEST_IMAGE'] ?? TEST_IMAGES.fakeRouter;
export const ROUTER_TOKEN = 'promote-test-token';
/** Every container and image the promotion tests make carries this label (value: the suite's run). */
export const TEST_LABEL = 'gpures.test.promote';

export interface DeployOptions {
  name: string;
  config: string;
  /** Suite run id, the TEST_LABEL value. */
  run: string;
  image?: string;
  restart?: 'on-failure' | 'unless-stopped';
}

export function routerConfig(mappingVersion: string, extra: string[] = []): string {
  return [
    `mapping_version = "${mappingVersion}"`,
    '',
    '[[tiers]]',
    'name = "chat-local"',
    'backend = "http://127.0.0.1:30001"',
    'served_model_name = "chat"',
    '',
    '[[presets]]',
    'name = "chat"',
    'tier = "chat-local"',
    ...extra,
    '',
  ].join('\n');
}

export async function healthz(url: string): Promise<{ status: number; mappingVersion?: string }> {
  try {
    const res = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(2000) });
    const body = (await res.json()) as { mapping_version?: string };
    return { status: res.status, mappingVersion: body.mapping_version };
  } catch {
    return { status: 0 };
  }
}

export async function waitHealthy(url: string, timeoutMs = 15_000): Promise<void> {
  await waitUntil(`router at ${url} healthy`, async () => (await healthz(url)).status === 200, timeoutMs, 100);
}

/** Deploys a router and returns its target as a worker would be configured with it. */
export async function deployTestRouter(docker: Docker, opts: DeployOptions): Promise<RouterTarget> {
  const dir = mkdtempSync(join(tmpdir(), `gpures-router-${opts.name}-`));
  chmodSync(dir, 0o755);
  const configPath = join(dir, 'router.toml');
  writeFileSync(configPath, opts.config);
  const port = await freePort();
  const container = `gpures-test-${opts.run}-${opts.name}`;
  const c = await docker.createContainer({
    name: container,
    Image: opts.image ?? ROUTER_IMAGE,
    Cmd: ['--config', '/config/router.toml', '--port', '8080'],
    Env: [`ROUTER_ADMIN_TOKEN=${ROUTER_TOKEN}`],
    Labels: { [TEST_LABEL]: opts.run, 'gpures.router': opts.name },
    ExposedPorts: { '8080/tcp': {} },
    HostConfig: {
      Binds: [`${dir}:/config:ro`],
      PortBindings: { '8080/tcp': [{ HostIp: '127.0.0.1', HostPort: String(port) }] },
      RestartPolicy: { Name: opts.restart ?? 'on-failure', MaximumRetryCount: 0 },
      Init: true,
    },
  });
  await c.start();
  const url = `http://127.0.0.1:${port}`;
  await waitHealthy(url);
  return {
    name: opts.name,
    container,
    configPath,
    containerConfigPath: '/config/router.toml',
    url,
    adminToken: ROUTER_TOKEN,
    verifyWindowS: 3,
    healthzStreak: 3,
    validateTimeoutS: 30,
    stopTimeoutS: 5,
  };
}

/** A second image with another id (a committed copy with an extra label), as a new release would be. */
export async function makeVariantImage(docker: Docker, run: string, tag: string): Promise<string> {
  // Not TEST_LABEL: a commit bakes the container's labels into the image, and a container label
  // equal to its image's is taken for the image's own when the router is recreated.
  const c = await docker.createContainer({ Image: ROUTER_IMAGE, Labels: { 'gpures.test.image': run } });
  try {
    await c.commit({ repo: 'gpures/fake-router', tag, changes: `LABEL gpures.test.variant=${tag}` });
  } finally {
    await c.remove({ force: true });
  }
  return `gpures/fake-router:${tag}`;
}

/** Backup file names next to a live config. */
export function backupsIn(configPath: string): string[] {
  const dir = join(configPath, '..');
  return readdirSync(dir)
    .filter((n) => /^router\.toml\.\d{8}T\d{9}Z\.[0-9a-f]{12}\.bak$/.test(n))
    .sort();
}

export async function removeTestArtifacts(docker: Docker, run: string, images: string[]): Promise<void> {
  const containers = await docker.listContainers({ all: true, filters: { label: [`${TEST_LABEL}=${run}`] } });
  for (const c of containers)
    await docker
      .getContainer(c.Id)
      .remove({ force: true })
      .catch(() => undefined);
  // Leftovers of a recreate or a validate run cut short carry the deployment's name.
  const named = await docker.listContainers({ all: true, filters: { name: [`gpures-test-${run}-`] } });
  for (const c of named)
    await docker
      .getContainer(c.Id)
      .remove({ force: true })
      .catch(() => undefined);
  for (const image of images)
    await docker
      .getImage(image)
      .remove({ force: true })
      .catch(() => undefined);
}

/** The promotion worker's manifest: the serve routerConfig()'s tier `chat-local` routes to. */
const PROMOTION_MANIFEST = (node: string): string =>
  renderManifest(
    node,
    [{ role: 'g', capacity_mib: 32607, reserve_mib: 0 }],
    [
      {
        name: 'chat',
        class: 'resident',
        vram_mib: 1024,
        port: 30001,
        router_tier: 'chat-local',
        served_model_name: 'chat',
        args: ['--gpu-memory-utilization', '0.03'],
      },
    ],
  );

/** A worker promoting `targets` on `node`, with PROMOTION_MANIFEST as its manifest. */
export function startPromotionWorker(temporal: TestTemporal, node: string, targets: Record<string, RouterTarget>): Promise<TestWorker> {
  return startTestWorker({
    temporal,
    node,
    // Resolve checks a candidate against the worker's manifest (the T013 rule): one serve behind
    // routerConfig()'s tier, resident, so only a candidate that breaks its tier is refused.
    manifest: { read: () => Promise.resolve({ text: PROMOTION_MANIFEST(node), file: 'serves.toml' }) },
    pollIntervalMs: 200,
    routerTargets: Object.values(targets),
  });
}

/** A promotion suite's teardown: its worker, the run's containers and `images`, its directories, the dev server. */
export async function tearDownPromotion(s: {
  worker: TestWorker | undefined;
  d: Docker;
  run: string;
  images: string[];
  tmpDirs: string[];
  temporal: TestTemporal | undefined;
}): Promise<void> {
  await s.worker?.stop();
  await removeTestArtifacts(s.d, s.run, s.images);
  for (const dir of s.tmpDirs) rmSync(dir, { recursive: true, force: true });
  await s.temporal?.close();
}

/** A promotion suite's box: its node and run, the routers deployed for it, and the dev server and worker promoting them. */
export interface PromotionBox {
  d: Docker;
  run: string;
  node: string;
  readonly temporal: TestTemporal;
  target(name: string): RouterTarget;
  /** Images a test made (makeVariantImage): removed with the rest after the suite. */
  images: string[];
}

/**
 * Registers, in the calling describe, the hooks of a promotion suite: before, a dev server, a
 * fake router per name (live config `<name>-v1`, a 4 s verify window) and a worker promoting them
 * (no manifest); after, all of it removed.
 */
export function promotionBox(prefix: string, names: string[]): PromotionBox {
  const d = docker();
  const run = `r${Date.now().toString(36)}`;
  const node = uniqueNode(prefix);
  const tmpDirs: string[] = [];
  const targets: Record<string, RouterTarget> = {};
  let temporal: TestTemporal | undefined;
  let worker: TestWorker | undefined;
  const images: string[] = [];
  before(async () => {
    temporal = await testTemporal();
    for (const name of names) {
      targets[name] = { ...(await deployTestRouter(d, { name, run, config: routerConfig(`${name}-v1`) })), verifyWindowS: 4 };
      tmpDirs.push(join(targets[name].configPath, '..'));
    }
    worker = await startPromotionWorker(temporal, node, targets);
  });
  after(() => tearDownPromotion({ worker, d, run, images, tmpDirs, temporal }));
  return {
    d,
    run,
    node,
    images,
    get temporal() {
      assert.ok(temporal, 'the dev server starts in before()');
      return temporal;
    },
    target(name) {
      const t = targets[name];
      assert.ok(t, name);
      return t;
    },
  };
}

/**
 * A promotion worker in a process of its own (test/support/promote-worker.ts, configured by `cfg`),
 * kept in `children` for the suite to stop; resolves once it polls, rejects if it exits first.
 */
export function spawnPromoteWorker(cfg: Record<string, unknown>, children: ChildProcess[]): Promise<ChildProcess> {
  const child = spawn(process.execPath, [join(__dirname, 'promote-worker.js'), JSON.stringify(cfg)], { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  return new Promise((resolve, reject) => {
    child.stdout?.on('data', (b: Buffer) => {
      if (b.toString().includes('ready')) resolve(child);
    });
    child.once('exit', (code) => reject(new Error(`promote-worker exited with ${code}`)));
  });
}

/** A promotion suite's box whose workers are processes of their own, each started by a test. */
export interface ChildPromotionBox {
  d: Docker;
  run: string;
  node: string;
  readonly temporal: TestTemporal;
  /** The suite's directory: the workflow bundle the workers load, the markers they write. */
  readonly dir: string;
  target(name: string): RouterTarget;
  /** A worker promoting every target (spawnPromoteWorker), configured by `extra` besides; stopped after the suite. */
  startChild: (extra: Record<string, unknown>) => Promise<ChildProcess>;
  /** Kills a worker, a frozen one too (SIGCONT, then SIGKILL). */
  stop: (c: ChildProcess) => Promise<void>;
  /** The temp files beside a live config. */
  tempFiles: (t: RouterTarget) => string[];
}

/**
 * Registers, in the calling describe, the hooks of a promotion suite whose workers are child
 * processes: before, a dev server, a fake router per name (live config `<name>-v1`, a 3 s verify
 * window) and the bundle the children load; after, the children killed and all of it removed.
 */
export function childPromotionBox(prefix: string, names: string[]): ChildPromotionBox {
  const d = docker();
  const run = `r${Date.now().toString(36)}`;
  const node = uniqueNode(prefix);
  const targets: Record<string, RouterTarget> = {};
  const children: ChildProcess[] = [];
  let temporal: TestTemporal | undefined;
  let dir: string | undefined;
  const stop = async (c: ChildProcess): Promise<void> => {
    if (c.exitCode !== null || c.signalCode !== null) return;
    c.kill('SIGCONT');
    c.kill('SIGKILL');
    await new Promise((r) => c.once('exit', r));
  };
  before(async () => {
    temporal = await testTemporal();
    for (const name of names) targets[name] = { ...(await deployTestRouter(d, { name, run, config: routerConfig(`${name}-v1`) })), verifyWindowS: 3 };
    dir = mkdtempSync(join(tmpdir(), `gpures-${prefix}-`));
    writeFileSync(join(dir, 'bundle.js'), (await workflowBundle()).code);
  });
  after(async () => {
    for (const c of children) await stop(c);
    await removeTestArtifacts(d, run, []);
    for (const t of Object.values(targets)) rmSync(join(t.configPath, '..'), { recursive: true, force: true });
    if (dir) rmSync(dir, { recursive: true, force: true });
    await temporal?.close();
  });
  const box: ChildPromotionBox = {
    d,
    run,
    node,
    get temporal() {
      assert.ok(temporal, 'the dev server starts in before()');
      return temporal;
    },
    get dir() {
      assert.ok(dir, 'made in before()');
      return dir;
    },
    target(name) {
      const t = targets[name];
      assert.ok(t, name);
      return t;
    },
    startChild: (extra) =>
      spawnPromoteWorker(
        { address: box.temporal.address, node, bundlePath: join(box.dir, 'bundle.js'), targets: Object.values(targets), pollIntervalMs: 200, ...extra },
        children,
      ),
    stop,
    tempFiles: (t) => readdirSync(join(t.configPath, '..')).filter((n) => n.startsWith('.router.toml.tmp-')),
  };
  return box;
}
