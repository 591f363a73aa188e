// gpures serves up: admit, start, wait healthy, verify identity; with --evict, make room first.
import { boundProblem, wholeNumber } from '../../domain/inputs';
import type { CommandContext, Rendered } from '../command';
import { CliError, EXIT } from '../exit-codes';
import { serveOperation } from '../serve-operations';
import { leaseSeconds } from './serves-lease';
import type { ServeOpts } from '../serve-operations';

export function servesUp(input: { names: string[]; lease?: string } & ServeOpts, ctx: CommandContext): Promise<Rendered> {
  const { names, ...opts } = input;
  if (opts.force && !opts.evict) throw new CliError('--force applies only with --evict', EXIT.badInput);
  // It bounds the victims' drain: without an eviction there is none, and it would be ignored.
  if (opts.drainTimeout !== undefined && !opts.evict) throw new CliError('--drain-timeout applies only with --evict', EXIT.badInput);
  const drainProblem = opts.drainTimeout === undefined ? undefined : boundProblem('drainTimeoutS', wholeNumber(opts.drainTimeout));
  if (drainProblem) throw new CliError(`--drain-timeout: ${drainProblem} (got '${opts.drainTimeout}')`, EXIT.badInput);
  const leaseS = opts.lease === undefined ? undefined : leaseSeconds('--lease', opts.lease);
  return serveOperation(ctx, 'up', names, { ...opts, leaseS });
}
