// RouterDeployment over dockerode and the local filesystem. The router's live config is a file in
// a host directory bind-mounted into the container, so this adapter must run on the Docker host
// (it does: the worker runs there). Every call converges when retried.
import { randomBytes } from 'node:crypto';
import { chmod, mkdtemp, open, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { basename, dirname, join, posix } from 'node:path';
import type Docker from 'dockerode';
import { Failure } from '../shared/failures';
import { demuxLogs, statusCode } from './docker-util';
import { imageMissing, PermanentError } from './ports';
import type { JournalEntry, RecreateResult, RouterContainer, RouterDeployment, ValidateRunOutcome, ValidateRunSpec } from './router-deployment';
import { journalPath } from './router-deployment';

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
    const cfg = source.Config as typeof source.Config & { Entrypoint?: string[] | string | null; User?: string; WorkingDir?: string; ExposedPorts?: Record<string, object> };
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

  async readFile(path: string): Promise<Buffer | undefined> {
    try {
      return await readFile(path);
    } catch (err) {
      if (errCode(err) === 'ENOENT') return undefined;
      throw err;
    }
  }

  async fileMode(path: string): Promise<number | undefined> {
    try {
      return (await stat(path)).mode & 0o7777;
    } catch (err) {
      if (errCode(err) === 'ENOENT') return undefined;
      throw err;
    }
  }

  async writeFileAtomic(path: string, data: Buffer | string, mode = 0o644): Promise<void> {
    const dir = dirname(path);
    const tmp = join(dir, `.${basename(path)}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`);
    const fh = await open(tmp, 'wx', mode);
    try {
      await fh.writeFile(data);
      await fh.chmod(mode); // open()'s mode is filtered by the umask
      await fh.sync();
    } finally {
      await fh.close();
    }
    try {
      await rename(tmp, path);
    } catch (err) {
      await rm(tmp, { force: true });
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
    return readdir(dir);
  }

  async removeFile(path: string): Promise<void> {
    await rm(path, { force: true });
  }

  async appendJournal(livePath: string, entry: JournalEntry): Promise<void> {
    const fh = await open(journalPath(livePath), 'a', 0o644);
    try {
      await fh.appendFile(`${JSON.stringify(entry)}\n`);
      await fh.sync();
    } finally {
      await fh.close();
    }
  }

  async readJournal(livePath: string): Promise<JournalEntry[]> {
    const text = await this.readFile(journalPath(livePath));
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
