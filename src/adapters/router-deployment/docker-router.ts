// RouterDeployment over dockerode and the local filesystem. The router's live config is a file in
// a host directory bind-mounted into the container, so this adapter must run on the Docker host
// (it does: the worker runs there). Every call converges when retried.
//
// The worker runs as root and what it reads may land in workflow history, so every file it
// touches must be a regular file directly in the router's config directory: that directory
// named by its real path, the final component opened with O_NOFOLLOW, one hard link, and the
// opened file's own path (/proc/self/fd) checked again, against a directory swapped meanwhile.
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import type { Stats } from 'node:fs';
import { chmod, link, lstat, mkdtemp, open, readdir, readlink, realpath, rename, rm, writeFile } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import { dirname, join, posix, resolve } from 'node:path';
import type Docker from 'dockerode';
import { Failure } from '../../shared/failures';
import { demuxLogs, statusCode } from '../containers/docker-util';
import { imageMissing, PermanentError } from '../errors';
import type { RouterContainer } from '../../shared/contracts';
import type { JournalEntry, RecreateResult, RouterDeployment, ValidateRunOutcome, ValidateRunSpec } from './port';
import { journalPath, tempFilePrefix } from './port';

/** Marks the container a recreate made, so a retried attempt recognizes its own work. */
export const PROMOTE_OP_LABEL = 'gpures.promote.op';

function errCode(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err ? String((err as { code?: unknown }).code) : undefined;
}

function sameList(a: readonly string[] | null | undefined, b: readonly string[] | null | undefined): boolean {
  const x = a ?? [];
  const y = b ?? [];
  return x.length === y.length && x.every((v, i) => v === y[i]);
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

function unsafe(message: string): PermanentError {
  return new PermanentError(Failure.UnsafeConfigPath, message);
}

/** `dir` must be its own real path: a symbolic link on the way would lead every file of it elsewhere. */
async function realConfigDir(dir: string, path = dir): Promise<void> {
  let real: string;
  try {
    real = await realpath(dir);
  } catch (err) {
    if (errCode(err) === 'ENOENT') throw unsafe(`${path}: the router's config directory ${dir} does not exist`);
    throw err;
  }
  if (real !== dir) {
    throw unsafe(
      `${path}: the router's config directory ${dir} resolves to ${real}, so a symbolic link on the way leads outside it; ` +
        `refused (configure the directory by its real path)`,
    );
  }
}

/** The absolute path, once it is known to name an entry directly in the real `dir`. */
async function inConfigDir(dir: string, path: string): Promise<string> {
  const abs = resolve(path);
  if (dirname(abs) !== dir) throw unsafe(`${abs} is not a file of the router's config directory ${dir}; refused`);
  await realConfigDir(dir, abs);
  return abs;
}

/** Refuses anything but a regular file with one name (a hard link's other name may lie outside). */
async function mustBeRegular(abs: string, dir: string, st: Stats): Promise<void> {
  if (st.isSymbolicLink()) {
    const to = await readlink(abs).catch(() => '?');
    throw unsafe(
      `${abs} is a symbolic link (to ${to}): promotion reads and writes the router's config directory ${dir} only through regular files in it; refused`,
    );
  }
  if (!st.isFile()) throw unsafe(`${abs} is not a regular file (in the router's config directory ${dir}); refused`);
  if (st.nlink > 1) throw unsafe(`${abs} has ${st.nlink} hard links, and another name of it may lie outside the router's config directory ${dir}; refused`);
}

/** lstat of a file in the config directory: undefined when absent, refused when not a regular file. */
async function lstatInConfigDir(dir: string, path: string): Promise<Stats | undefined> {
  const abs = await inConfigDir(dir, path);
  let st: Stats;
  try {
    st = await lstat(abs);
  } catch (err) {
    if (errCode(err) === 'ENOENT') return undefined;
    throw err;
  }
  await mustBeRegular(abs, dir, st);
  return st;
}

/** Opens a file of the config directory without following a link; undefined when absent (and not created). */
async function openInConfigDir(dir: string, path: string, flags: number, mode?: number): Promise<FileHandle | undefined> {
  const abs = await inConfigDir(dir, path);
  let fh: FileHandle;
  try {
    // O_NONBLOCK: a FIFO planted there must not hang the open; it is refused below.
    fh = await open(abs, flags | constants.O_NOFOLLOW | constants.O_NONBLOCK, mode);
  } catch (err) {
    if (errCode(err) === 'ENOENT') return undefined;
    if (errCode(err) === 'ELOOP') await mustBeRegular(abs, dir, await lstat(abs));
    throw err;
  }
  try {
    await mustBeRegular(abs, dir, await fh.stat());
    const opened = await readlink(`/proc/self/fd/${fh.fd}`).catch(() => undefined);
    if (opened !== undefined && dirname(opened) !== dir)
      throw unsafe(`${abs} opened as ${opened}, outside the router's config directory ${dir} (a directory on the way changed meanwhile); refused`);
    return fh;
  } catch (err) {
    await fh.close();
    throw err;
  }
}

interface ImageConfig {
  Env?: string[] | null;
  Cmd?: string[] | null;
  Entrypoint?: string[] | string | null;
  Labels?: Record<string, string> | null;
  User?: string;
  WorkingDir?: string;
}

export class DockerRouterDeployment implements RouterDeployment {
  constructor(private readonly docker: Docker) {}

  private async rawInspect(name: string): Promise<Docker.ContainerInspectInfo | undefined> {
    try {
      return await this.docker.getContainer(name).inspect();
    } catch (err) {
      if (statusCode(err) === 404) return undefined;
      throw err;
    }
  }

  private async removeQuiet(name: string): Promise<void> {
    try {
      await this.docker.getContainer(name).remove({ force: true });
    } catch (err) {
      if (statusCode(err) !== 404 && statusCode(err) !== 409) throw err;
    }
  }

  async inspect(container: string): Promise<RouterContainer | undefined> {
    const info = await this.rawInspect(container);
    if (!info) return undefined;
    return {
      id: info.Id,
      name: info.Name.replace(/^\//, ''),
      image: info.Config.Image,
      imageId: info.Image,
      running: info.State.Running && !info.State.Restarting,
      restarting: info.State.Restarting,
      status: info.State.Status,
      exitCode: info.State.ExitCode,
      restartCount: info.RestartCount,
      labels: info.Config.Labels ?? {},
    };
  }

  async lastExitCode(container: string, sinceMs: number): Promise<number | undefined> {
    // With `until` set to now the daemon sends the events so far and ends the stream at once.
    const stream = await this.docker.getEvents({
      since: sinceMs / 1000,
      until: Date.now() / 1000,
      filters: { container: [container], event: ['die'] },
    });
    let text = '';
    for await (const chunk of stream) text += chunk.toString();
    let code: number | undefined;
    for (const line of text.split('\n')) {
      if (!line.trim()) continue;
      const exit = Number((JSON.parse(line) as { Actor?: { Attributes?: Record<string, string> } }).Actor?.Attributes?.exitCode);
      if (Number.isInteger(exit)) code = exit;
    }
    return code;
  }

  async imageId(image: string): Promise<string | undefined> {
    try {
      return ((await this.docker.getImage(image).inspect()) as { Id: string }).Id;
    } catch (err) {
      if (statusCode(err) === 404) return undefined;
      throw err;
    }
  }

  async validate(spec: ValidateRunSpec, progress: (detail: unknown) => void): Promise<ValidateRunOutcome> {
    if (!(await this.imageId(spec.image))) {
      throw imageMissing(spec.image);
    }
    await realConfigDir(spec.stageDir);
    const stage = await mkdtemp(join(spec.stageDir, '.gpures-validate-'));
    try {
      await chmod(stage, 0o755);
      await writeFile(join(stage, posix.basename(spec.containerPath)), spec.candidate, { mode: 0o644 });
      await this.removeQuiet(spec.name); // a leftover of an attempt that died mid-way
      const container = await this.docker.createContainer({
        name: spec.name,
        Image: spec.image,
        Cmd: spec.args,
        Labels: { 'gpures.role': 'router-validate' },
        HostConfig: { Binds: [`${stage}:${posix.dirname(spec.containerPath)}:ro`], NetworkMode: 'none' },
      });
      const started = Date.now();
      await container.start();
      let timedOut = false;
      for (;;) {
        const s = await container.inspect();
        if (!s.State.Running) break;
        if (Date.now() - started > spec.timeoutMs) {
          timedOut = true;
          await container.kill().catch(() => undefined);
          break;
        }
        progress({ waitedMs: Date.now() - started });
        await sleep(200);
      }
      const info = await container.inspect();
      const output = demuxLogs(await container.logs({ stdout: true, stderr: true, follow: false })).trim();
      return { exitCode: timedOut ? null : info.State.ExitCode, output, timedOut, durationMs: Date.now() - started };
    } finally {
      await this.removeQuiet(spec.name);
      await rm(stage, { recursive: true, force: true });
    }
  }

  async recreate(name: string, image: { ref: string; id?: string }, opts: { opKey: string; stopTimeoutS: number }): Promise<RecreateResult> {
    // The old container is parked under `prev` while the new one is created as `next`, so a
    // recreate cut short at any point is finished by the next attempt from what it finds.
    const next = `${name}-gpures-next`;
    const prev = `${name}-gpures-prev`;
    const current = await this.rawInspect(name);
    if (current && current.Config.Labels?.[PROMOTE_OP_LABEL] === opts.opKey) {
      if (!current.State.Running) await this.start(current.Id);
      await this.removeQuiet(prev);
      await this.removeQuiet(next);
      return { id: current.Id, recreated: false, image: current.Config.Image };
    }
    const source = current ?? (await this.rawInspect(prev));
    if (!source) throw new PermanentError(Failure.RouterNotDeployed, `no container '${name}' to recreate (nor '${prev}' from an interrupted recreate)`);
    const ref = await this.resolveImage(image);
    const settings = await this.settingsOf(source);

    await this.removeQuiet(next);
    const created = await this.docker.createContainer({
      ...settings,
      name: next,
      Image: ref,
      Labels: { ...settings.Labels, [PROMOTE_OP_LABEL]: opts.opKey },
    });
    if (current) {
      try {
        await this.docker.getContainer(current.Id).stop({ t: opts.stopTimeoutS });
      } catch (err) {
        if (statusCode(err) !== 304 && statusCode(err) !== 404) throw err;
      }
      await this.removeQuiet(prev);
      await this.docker.getContainer(current.Id).rename({ name: prev });
    }
    await this.docker.getContainer(created.id).rename({ name });
    await this.start(created.id);
    await this.removeQuiet(prev);
    return { id: created.id, recreated: true, image: ref };
  }

  private async start(id: string): Promise<void> {
    try {
      await this.docker.getContainer(id).start();
    } catch (err) {
      if (statusCode(err) !== 304) throw err;
    }
  }

  /** The reference when it still names the wanted image, else the image id itself. */
  private async resolveImage(image: { ref: string; id?: string }): Promise<string> {
    const refId = await this.imageId(image.ref);
    if (refId && (image.id === undefined || refId === image.id)) return image.ref;
    if (image.id && (await this.imageId(image.id))) return image.id;
    throw new PermanentError(Failure.ImageMissing, `image '${image.ref}'${image.id ? ` (${image.id})` : ''} is not on this Docker host; pull or load it first`);
  }

  /**
   * Create options that reproduce `source` on another image: the whole HostConfig (mounts, ports,
   * restart policy, init, resources, network mode) and the container's own env, labels, command
   * and entrypoint: the ones its image supplied are left for the new image to supply.
   */
  private async settingsOf(source: Docker.ContainerInspectInfo): Promise<Docker.ContainerCreateOptions & { Labels: Record<string, string> }> {
    let img: ImageConfig | undefined;
    try {
      img = ((await this.docker.getImage(source.Image).inspect()) as { Config?: ImageConfig }).Config;
    } catch (err) {
      if (statusCode(err) !== 404) throw err;
    }
    const cfg = source.Config as typeof source.Config & {
      Entrypoint?: string[] | string | null;
      User?: string;
      WorkingDir?: string;
      ExposedPorts?: Record<string, object>;
    };
    const imageEnv = new Set(img?.Env ?? []);
    const imageLabels = img?.Labels ?? {};
    const entrypoint = typeof cfg.Entrypoint === 'string' ? [cfg.Entrypoint] : cfg.Entrypoint;
    const imageEntrypoint = typeof img?.Entrypoint === 'string' ? [img.Entrypoint] : img?.Entrypoint;
    return {
      Env: (cfg.Env ?? []).filter((e) => !imageEnv.has(e)),
      Labels: Object.fromEntries(Object.entries(cfg.Labels ?? {}).filter(([k, v]) => k !== PROMOTE_OP_LABEL && imageLabels[k] !== v)),
      ...(img && sameList(cfg.Cmd, img.Cmd) ? {} : { Cmd: cfg.Cmd ?? undefined }),
      ...(img && sameList(entrypoint, imageEntrypoint) ? {} : entrypoint ? { Entrypoint: entrypoint } : {}),
      ...(cfg.User && cfg.User !== img?.User ? { User: cfg.User } : {}),
      ...(cfg.WorkingDir && cfg.WorkingDir !== img?.WorkingDir ? { WorkingDir: cfg.WorkingDir } : {}),
      ExposedPorts: cfg.ExposedPorts ?? {},
      HostConfig: source.HostConfig,
    };
  }

  async logsTail(container: string, lines: number): Promise<string> {
    try {
      return demuxLogs(await this.docker.getContainer(container).logs({ stdout: true, stderr: true, tail: lines, follow: false })).trim();
    } catch (err) {
      if (statusCode(err) === 404) return '';
      throw err;
    }
  }

  async readFile(dir: string, path: string): Promise<Buffer | undefined> {
    const fh = await openInConfigDir(dir, path, constants.O_RDONLY);
    if (!fh) return undefined;
    try {
      return await fh.readFile();
    } finally {
      await fh.close();
    }
  }

  async fileMode(dir: string, path: string): Promise<number | undefined> {
    const st = await lstatInConfigDir(dir, path);
    return st ? st.mode & 0o7777 : undefined;
  }

  async writeFileAtomic(dir: string, path: string, data: Buffer | string, mode = 0o644, beforeRename?: () => Promise<void>): Promise<void> {
    const target = await inConfigDir(dir, path);
    await lstatInConfigDir(dir, target); // what the rename replaces must be a regular file too
    const tmp = join(dir, `${tempFilePrefix(target)}${process.pid}-${randomBytes(4).toString('hex')}`);
    const fh = await openInConfigDir(dir, tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, mode);
    if (!fh) throw new Error(`${tmp}: not created`);
    try {
      await fh.writeFile(data);
      await fh.chmod(mode); // open()'s mode is filtered by the umask
      await fh.sync();
    } finally {
      await fh.close();
    }
    try {
      await beforeRename?.();
      // Fails (ENOENT) once a later writer has removed the temp file: its rename is the one that counts.
      await rename(tmp, target);
    } catch (err) {
      await rm(tmp, { force: true });
      // A bare "ENOENT … rename" in a frozen worker's log reads as a broken config directory.
      if (beforeRename && errCode(err) === 'ENOENT') {
        throw new Error(`${target}: not changed: this write's temp file ${tmp} was removed by a later writer of it (this attempt is stale)`, { cause: err });
      }
      throw err;
    }
    const dh = await open(dir, 'r');
    try {
      await dh.sync(); // the rename itself is durable only once the directory is
    } finally {
      await dh.close();
    }
  }

  async listDir(dir: string): Promise<string[]> {
    await realConfigDir(dir);
    return readdir(dir);
  }

  async removeFile(dir: string, path: string): Promise<void> {
    const abs = await inConfigDir(dir, path);
    // Unlinking a symbolic link removes the link, not its target: only a directory is refused.
    let st: Stats | undefined;
    try {
      st = await lstat(abs);
    } catch (err) {
      if (errCode(err) !== 'ENOENT') throw err;
    }
    if (st?.isDirectory()) throw unsafe(`${abs} is a directory (in the router's config directory ${dir}); refused`);
    await rm(abs, { force: true });
  }

  async removeFileFenced(dir: string, path: string, beforeRemove: () => Promise<void>): Promise<void> {
    const target = await inConfigDir(dir, path);
    await lstatInConfigDir(dir, target); // a regular file only: a link is refused, as for a write
    const aside = join(dir, `${tempFilePrefix(target)}${process.pid}-${randomBytes(4).toString('hex')}`);
    // Whatever is live now is moved, not unlinked: an attempt frozen just before this line moves a
    // later writer's file, and the check after it, which then fails, puts that file back.
    try {
      await rename(target, aside);
    } catch (err) {
      if (errCode(err) === 'ENOENT') return;
      throw err;
    }
    try {
      await beforeRemove();
    } catch (err) {
      // link, not rename: it never replaces a live file written since (EEXIST), which is newer still.
      await link(aside, target).catch(() => undefined);
      await rm(aside, { force: true });
      throw err;
    }
    await rm(aside, { force: true });
    const dh = await open(dir, 'r');
    try {
      await dh.sync();
    } finally {
      await dh.close();
    }
  }

  async appendJournal(dir: string, livePath: string, entry: JournalEntry): Promise<void> {
    const fh = await openInConfigDir(dir, journalPath(livePath), constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT, 0o644);
    if (!fh) throw new Error(`${journalPath(livePath)}: not created`);
    try {
      await fh.appendFile(`${JSON.stringify(entry)}\n`);
      await fh.sync();
    } finally {
      await fh.close();
    }
  }

  async readJournal(dir: string, livePath: string): Promise<JournalEntry[]> {
    const text = await this.readFile(dir, journalPath(livePath));
    if (!text) return [];
    // A line cut short by a crash mid-append is no entry.
    return text
      .toString('utf8')
      .split('\n')
      .flatMap((line) => {
        try {
          return line ? [JSON.parse(line) as JournalEntry] : [];
        } catch {
          return [];
        }
      });
  }
}
