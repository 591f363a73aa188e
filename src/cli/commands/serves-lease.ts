// gpures serves extend NAME DURATION and gpures serves release NAME: a running lease moved on, or
// expired now (its serve brought down and its victims restored, as `serves down --restore` does).
import type { Client } from '@temporalio/client';
import { BOUNDS } from '../../domain/bounds';
import { boundProblem } from '../../domain/inputs';
import { formatDuration, leaseText, parseDuration } from '../../domain/lease';
import type { LeaseExtension } from '../../domain/lease';
import { extendLease, NoLease, releaseLease } from '../../client/lease';
import type { CommandContext, Rendered } from '../command';
import { CliError, EXIT } from '../exit-codes';
import { checkServes, gpuRolesOf, loadManifest, manifestPath } from '../manifest';
import { requireWorker, withClient } from '../temporal';
import { followFor } from '../progress-lines';

/** `90s`, `30m`, `2h`, `1h30m` (or plain seconds), within the lease bound; the option's name leads the error. */
export function leaseSeconds(flag: string, text: string): number {
  const s = parseDuration(text);
  const problem = s === undefined ? `a duration such as 90s, 30m, 2h or 1h30m` : boundProblem('leaseS', s);
  if (problem) throw new CliError(`${flag}: ${problem} (at most ${formatDuration(BOUNDS.leaseS.max * 1000)}; got '${text}')`, EXIT.badInput);
  return s as number;
}

async function onLease<T>(ctx: CommandContext, file: string | undefined, serve: string, fn: (client: Client, node: string) => Promise<T>): Promise<T> {
  const path = manifestPath(file, ctx.env);
  const { manifest } = await loadManifest(ctx, path);
  checkServes(manifest, path, [serve]);
  return withClient(async (client) => {
    // The lease workflow runs on the node's worker: an update to it would wait for one in silence.
    await requireWorker(client, manifest, gpuRolesOf(manifest, [serve]), (line) => ctx.note(line));
    try {
      return await fn(client, manifest.node);
    } catch (err) {
      if (err instanceof NoLease) throw new CliError(err.message, EXIT.denied);
      throw err;
    }
  });
}

export async function servesExtend(input: { name: string; duration?: string; until?: string; manifest?: string }, ctx: CommandContext): Promise<Rendered> {
  let ext: LeaseExtension;
  // Commander lets a dashed DURATION through for -5m; any other is an option it does not know.
  const negative = input.duration !== undefined && /^-\d/.test(input.duration);
  if (input.duration?.startsWith('-') && !negative) throw new CliError(`error: unknown option '${input.duration}'`, EXIT.badInput);
  if (input.until !== undefined) {
    if (input.duration !== undefined) throw new CliError('give a DURATION or --until, not both', EXIT.badInput);
    const to = Date.parse(input.until);
    if (Number.isNaN(to)) throw new CliError(`--until: a time such as 2026-12-01T18:00:00Z (got '${input.until}')`, EXIT.badInput);
    ext = { toEpochMs: to };
  } else {
    if (input.duration === undefined) throw new CliError('give a DURATION (90s, 30m, 2h) or --until TIME', EXIT.badInput);
    if (negative)
      throw new CliError(`DURATION: an extension does not shorten a lease (\`serves release\` ends it now; got '${input.duration}')`, EXIT.badInput);
    ext = { byS: leaseSeconds('DURATION', input.duration) };
  }
  return onLease(ctx, input.manifest, input.name, async (client, node) => {
    const view = await extendLease(client, node, input.name, ext);
    const line = `serves extend ${input.name}: ${leaseText(view, Date.now())}, expires at ${new Date(view.expiresAtEpochMs).toISOString()}`;
    return { data: view, text: [line], exitCode: EXIT.ok };
  });
}

export async function servesRelease(input: { name: string; manifest?: string }, ctx: CommandContext): Promise<Rendered> {
  return onLease(ctx, input.manifest, input.name, async (client, node) => {
    const { result } = await releaseLease(client, node, input.name, followFor(ctx), () =>
      ctx.note(`serves release ${input.name}: the lease expires now; bringing ${input.name} down and restoring what it evicted`),
    );
    return { data: result, text: [result.message], exitCode: result.bringDown && !result.bringDown.ok ? EXIT.failed : EXIT.ok };
  });
}
