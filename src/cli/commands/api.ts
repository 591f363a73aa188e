// gpures api: serve the acquisition API the router calls, until SIGINT or SIGTERM.
import { isLoopback } from '../../domain/manifest';
import { wholeNumber } from '../../domain/inputs';
import type { CommandContext, Rendered } from '../command';
import { CliError, EXIT } from '../exit-codes';
import { loadManifest, manifestPath } from '../manifest';
import { connectOrExit } from '../temporal';

/** How long requests in flight at SIGTERM may finish before their connections are cut. */
const STOP_GRACE_MS = 2000;

export async function api(input: { manifest?: string; host: string; port: string; allowNonLoopback?: boolean }, ctx: CommandContext): Promise<Rendered> {
  if (!isLoopback(input.host) && !input.allowNonLoopback) {
    throw new CliError(
      `--host ${input.host} is not a loopback address: the API can evict serves; add --allow-non-loopback to expose it beyond this host`,
      EXIT.badInput,
    );
  }
  const port = wholeNumber(input.port);
  if (!(port <= 65535)) throw new CliError(`--port: an integer in 0..65535 (got '${input.port}')`, EXIT.badInput);
  const file = manifestPath(input.manifest, ctx.env);
  const { manifest } = await loadManifest(ctx, file, undefined, 'always');
  const { apiTokenProblem, boundAddresses, buildApi } = await import('../../client/api');
  const token = ctx.env.apiToken;
  const problem = apiTokenProblem(token);
  if (problem) throw new CliError(problem, EXIT.badInput);
  const conn = await connectOrExit('api');
  const loopbackOnly = isLoopback(input.host);
  const ledgerPage = { nvidiaSmi: ctx.env.nvidiaSmi, temporalUiUrl: ctx.env.temporalUiUrl };
  const app = buildApi({ client: conn.client, manifest, manifestFile: file, token, loopbackOnly, ledgerPage, processMetrics: true });
  try {
    await app.listen({ host: input.host, port });
  } catch (err) {
    // In use, or not ours to bind: the operator's flags, one line.
    const why = (err as NodeJS.ErrnoException).code === 'EADDRINUSE' ? 'another process listens there' : (err as Error).message;
    throw new CliError(`--port: cannot listen on ${input.host}:${port}: ${why}`, EXIT.badInput);
  }
  ctx.note(`acquisition API for node '${manifest.node}' listening on ${boundAddresses(app).join(', ')}`);
  ctx.note(`ledger page: ${boundAddresses(app)[0]?.split(' ')[0] ?? ''}/ledger${loopbackOnly ? '' : ' (its figures need the API token)'}`);
  await ctx.stopped();
  // A browser's spare connection that never sent a request is not idle to Node: it would hold
  // the close for its 60 s headers timeout (measured: 59.6 s after SIGTERM with the ledger page
  // open in Chromium). Whatever is still open after STOP_GRACE_MS is cut.
  const cut = setTimeout(() => app.server.closeAllConnections(), STOP_GRACE_MS);
  await app.close();
  clearTimeout(cut);
  await conn.connection.close();
  return { data: { stopped: true }, text: ['api stopped'], exitCode: EXIT.ok };
}
