// The test images: the fake vLLM server and the fake router are each a static busybox plus one
// entrypoint.sh, assembled into a root fs and loaded with an image import (no registry, no
// Dockerfile build). An image whose label gpures.inputs holds the hash of its inputs (the
// entrypoint, the busybox binary, the recipe below and this builder's own code) is left alone, so
// a second set-up rebuilds nothing.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type Docker from 'dockerode';
import { TEST_IMAGES } from './toolchain';
import { log } from './log';

const run = promisify(execFile);

/** Shipped by busybox-static (dpkg -L busybox-static). */
const BUSYBOX = '/bin/busybox';
/** The checkout, from dist/src/dev/. */
const ROOT = join(__dirname, '..', '..', '..');

export interface BusyboxImage {
  /** The image name, tag included. */
  image: string;
  /** Holds entrypoint.sh. */
  inputDir: string;
  port: number;
  /** Directories created in the root fs besides /bin and /tmp. */
  dirs: string[];
  /** Busybox applets linked into /bin. */
  applets: string[];
}

export const TEST_IMAGE_RECIPES = {
  // What entrypoint.sh uses, plus a few for `docker exec` debugging.
  'fake-vllm': (env: NodeJS.ProcessEnv = process.env): BusyboxImage => ({
    image: env['GPURES_TEST_IMAGE'] || TEST_IMAGES.fakeVllm,
    inputDir: join(ROOT, 'test', 'images', 'fake-vllm'),
    port: 8000,
    dirs: ['www/v1'],
    applets: [
      'sh',
      'ash',
      'httpd',
      'sleep',
      'cat',
      'mkdir',
      'mv',
      'rm',
      'rmdir',
      'sed',
      'kill',
      'printf',
      'echo',
      'test',
      '[',
      'ls',
      'ps',
      'env',
      'wget',
      'nc',
      'head',
      'chmod',
    ],
  }),
  // What the promotion tests' router entrypoint uses, plus a few for `docker exec` debugging.
  'fake-router': (env: NodeJS.ProcessEnv = process.env): BusyboxImage => ({
    image: env['GPURES_ROUTER_TEST_IMAGE'] || TEST_IMAGES.fakeRouter,
    inputDir: join(ROOT, 'test', 'images', 'fake-router'),
    port: 8080,
    dirs: ['config'],
    applets: ['sh', 'ash', 'nc', 'sed', 'grep', 'head', 'cut', 'cat', 'mkdir', 'rm', 'kill', 'printf', 'echo', 'test', '[', 'sleep', 'ls', 'ps', 'env'],
  }),
};

export type TestImageName = keyof typeof TEST_IMAGE_RECIPES;

const sha256 = (data: string | Buffer): string => createHash('sha256').update(data).digest('hex');

/** Every input, and the recipe itself: changing how the image is assembled also triggers a rebuild. */
export function inputsHash(spec: BusyboxImage, busybox = BUSYBOX): string {
  return sha256(
    JSON.stringify({
      entrypoint: sha256(readFileSync(join(spec.inputDir, 'entrypoint.sh'))),
      busybox: sha256(readFileSync(busybox)),
      image: spec.image,
      port: spec.port,
      dirs: spec.dirs,
      applets: spec.applets,
      builder: sha256(readFileSync(__filename)),
    }),
  );
}

async function requireStaticBusybox(busybox: string): Promise<void> {
  let ldd = '';
  if (existsSync(busybox)) {
    // ldd exits non-zero on a static binary: what it says is the answer.
    const out = await run('ldd', [busybox], { env: { ...process.env, LC_ALL: 'C' } }).catch((err: { stdout?: string; stderr?: string }) => err);
    ldd = `${out.stdout ?? ''}${out.stderr ?? ''}`;
  }
  if (!ldd.includes('not a dynamic executable')) throw new Error(`${busybox} is missing or not statically linked (apt-get install busybox-static)`);
}

export function assembleRootfs(root: string, spec: BusyboxImage, busybox = BUSYBOX): void {
  for (const dir of ['', 'bin', 'tmp', ...spec.dirs]) {
    mkdirSync(join(root, dir), { recursive: true });
    chmodSync(join(root, dir), 0o755);
  }
  chmodSync(join(root, 'tmp'), 0o1777);
  copyFileSync(busybox, join(root, 'bin', 'busybox'));
  for (const applet of spec.applets) symlinkSync('busybox', join(root, 'bin', applet));
  copyFileSync(join(spec.inputDir, 'entrypoint.sh'), join(root, 'entrypoint.sh'));
  chmodSync(join(root, 'entrypoint.sh'), 0o755);
  chmodSync(join(root, 'bin', 'busybox'), 0o755);
}

async function importTar(docker: Docker, tarPath: string, spec: BusyboxImage, hash: string): Promise<void> {
  const colon = spec.image.lastIndexOf(':');
  const [repo, tag] = colon > spec.image.lastIndexOf('/') ? [spec.image.slice(0, colon), spec.image.slice(colon + 1)] : [spec.image, 'latest'];
  const changes = ['ENTRYPOINT ["/entrypoint.sh"]', 'ENV PATH=/bin', `EXPOSE ${spec.port}`, `LABEL gpures.inputs=${hash}`];
  const progress = await docker.importImage(tarPath, { repo, tag, changes });
  // The daemon reports a failed import inside the stream, after a 200.
  await new Promise<void>((resolve, reject) => docker.modem.followProgress(progress, (err: Error | null) => (err ? reject(err) : resolve())));
}

async function imageField(docker: Docker, image: string, read: (info: Docker.ImageInspectInfo) => string | undefined): Promise<string | undefined> {
  try {
    return read(await docker.getImage(image).inspect());
  } catch {
    return undefined;
  }
}

/** Builds the image unless one built from the same inputs exists; says which on stderr. */
export async function buildBusyboxImage(docker: Docker, spec: BusyboxImage, busybox = BUSYBOX): Promise<'built' | 'up to date'> {
  if (!existsSync(join(spec.inputDir, 'entrypoint.sh'))) throw new Error(`${spec.inputDir}/entrypoint.sh is missing`);
  await requireStaticBusybox(busybox);
  const hash = inputsHash(spec, busybox);
  if ((await imageField(docker, spec.image, (i) => i.Config.Labels?.['gpures.inputs'])) === hash) {
    log(`test image ${spec.image} up to date`);
    return 'up to date';
  }
  const oldId = await imageField(docker, spec.image, (i) => i.Id);

  log(`building test image ${spec.image}`);
  const tmp = mkdtempSync(join(tmpdir(), 'gpures-image-'));
  try {
    const root = join(tmp, 'rootfs');
    assembleRootfs(root, spec, busybox);
    await run('tar', ['--numeric-owner', '--owner=0', '--group=0', '-C', root, '-cf', join(tmp, 'rootfs.tar'), '.']);
    await importTar(docker, join(tmp, 'rootfs.tar'), spec, hash);
  } catch (err) {
    throw new Error(`building ${spec.image} failed: ${err instanceof Error ? err.message : String(err)}`);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  // Drop the image this one replaces (fails harmlessly if a container still uses it).
  if (oldId)
    await docker
      .getImage(oldId)
      .remove()
      .catch(() => undefined);
  log(`built ${spec.image}`);
  return 'built';
}
