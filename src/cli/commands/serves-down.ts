// gpures serves down: stop gracefully, release the reservation; with --restore, readmit what it evicted.
import type { CommandContext, Rendered } from '../command';
import { serveOperation } from '../serve-operations';
import type { ServeOpts } from '../serve-operations';

export function servesDown(input: { names: string[] } & ServeOpts, ctx: CommandContext): Promise<Rendered> {
  const { names, ...opts } = input;
  return serveOperation(ctx, 'down', names, opts);
}
