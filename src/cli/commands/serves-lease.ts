// gpures serves extend NAME DURATION and gpures serves release NAME: a running lease moved on, or
// expired now (its serve brought down and its victims restored, as `serves down --restore` does).
import type { Client } from '@temporalio/client';
import { BOUNDS } from '../../domain/bounds';
import { boundProblem } from '../../domain/inputs';
import { beyondReach, formatDuration, leaseText, parseDuration } from '../../domain/lease';
import type { LeaseExtension } from '../../domain/lease';
import { extendLease, NoLease, releaseLease } from '../../client/lease';
import type { LeasedServe } from '../../client/lease';
import type { CommandContext, Rendered } from '../command';
import { CliError, EXIT } from '../exit-codes';
import { checkServes, loadManifest, manifestPath } from '../manifest';
import { findServe } from '../../domain/manifest';
import type { ServeSpec } from '../../domain/types';
import { requireWorker, withClient } from '../temporal';
import { followFor } from '../progress-lines';

/** `90s`, `30m`, `2h`, `1h30m` (or plain seconds), within the lease bound; the option's name leads the error. */
export function leaseSeconds(flag: string, text: string): number {
  const s = parseDuration(text);
  const problem = s === undefined ? `a duration such as 90s, 30m, 2h or 1h30m` : boundProblem('leaseS', s);
  if (problem) throw new CliError(`${flag}: ${problem} (at most ${formatDuration(BOUNDS.leaseS.max * 1000)}; got '${text}')`, EXIT.badInput);
  return s as number;
}

/** An ISO 8601 time with its zone: `2026-12-01T18:00:00Z`, `2026-12-01T19:00+01:00` (Date.parse alone takes `3` as 2001-03-01). */
const ISO_TIME = /^(\d{4})-(\d{2})-(\d{2})T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:\d{2})$/;

/** --until as the new expiry, in epoch ms: a real time with its zone, after now, within the lease bound of now. */
export function untilEpochMs(text: string, nowMs: number): number {
  const m = ISO_TIME.exec(text);
  // Date.parse rolls 2026-02-30 over to March 2: the day must be the month's own.
  const real = m !== null && new Date(Date.UTC(Number(m[1]), Number(m[2]) - 1, Number(m[3]))).getUTCDate() === Number(m[3]);
  const to = real ? Date.parse(text) : NaN;
  if (Number.isNaN(to))
    throw new CliError(`--until: a time with its zone, such as 2026-12-01T18:00:00Z or 2026-12-01T19:00+01:00 (got '${text}')`, EXIT.badInput);
  if (to <= nowMs)
    throw new CliError(`--until: ${new Date(to).toISOString()} is not after now, ${new Date(nowMs).toISOString()} (got '${text}')`, EXIT.badInput);
  const maxMs = BOUNDS.leaseS.max * 1000;
  if (to - nowMs > maxMs) throw new CliError(`--until: ${beyondReach(to - nowMs, maxMs)} (got '${text}')`, EXIT.badInput);
  return to;
}

async function onLease<T>(ctx: CommandContext, file: string | undefined, serve: string, fn: (client: Client, leased: LeasedServe) => Promise<T>): Promise<T> {
  const path = manifestPath(file, ctx.env);
  const { manifest } = await loadManifest(ctx, path);
  checkServes(manifest, path, [serve]);
  // Known: checkServes refused any other name.
  const { gpuRole } = findServe(manifest, serve) as ServeSpec;
  return withClient(async (client) => {
    // The lease workflow runs on the node's worker: an update to it would wait for one in silence.
    await requireWorker(client, manifest, [gpuRole], (line) => ctx.note(line));
    try {
      return await fn(client, { node: manifest.node, serve, gpuRole });
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
    ext = { toEpochMs: untilEpochMs(input.until, Date.now()) };
  } else {
    if (input.duration === undefined) throw new CliError('give a DURATION (90s, 30m, 2h) or --until TIME', EXIT.badInput);
    if (negative)
      throw new CliError(`DURATION: an extension does not shorten a lease (\`serves release\` ends it now; got '${input.duration}')`, EXIT.badInput);
    ext = { byS: leaseSeconds('DURATION', input.duration) };
  }
  return onLease(ctx, input.manifest, input.name, async (client, leased) => {
    const view = await extendLease(client, leased, ext).catch((err: unknown) => {
      // The lease's own refusal of the time (before its current expiry) names its input field: here it is the flag.
      if (err instanceof NoLease && input.until !== undefined && err.message.startsWith('toEpochMs: '))
        throw new CliError(`--until: ${err.message.slice('toEpochMs: '.length)} (got '${input.until}')`, EXIT.badInput);
      throw err;
    });
    // An idle lease's expiry is a floor: a request near it keeps the serve up past it.
    const at = `${view.kind === 'idle' ? 'not before' : 'expires at'} ${new Date(view.expiresAtEpochMs).toISOString()}`;
    const line = `serves extend ${input.name}: ${leaseText(view, Date.now())}, ${at}`;
    return { data: view, text: [line], exitCode: EXIT.ok };
  });
}

/** What `serves release` says once the lease took it; `by`: the run that has the serve for now, if another has (inFluxBy). */
export function releaseNote(serve: string, by: string | undefined): string {
  const then = by
    ? `it waits for ${by}, which has ${serve} now, and brings ${serve} down and restores what it evicted only if that run gives ${serve} back`
    : `bringing ${serve} down and restoring what it evicted`;
  return `serves release ${serve}: the lease expires now; ${then}`;
}

export async function servesRelease(input: { name: string; manifest?: string }, ctx: CommandContext): Promise<Rendered> {
  return onLease(ctx, input.manifest, input.name, async (client, leased) => {
    const { result } = await releaseLease(client, leased, followFor(ctx), (by) => ctx.note(releaseNote(input.name, by)));
    return { data: result, text: [result.message], exitCode: result.bringDown && !result.bringDown.ok ? EXIT.failed : EXIT.ok };
  });
}
