// Runnable reference router:
//   GPURES_ROUTER_TOKEN=<secret> node dist/src/router/main.js --config FILE [--host H [--allow-non-loopback]] [--port P] [--state FILE]
//     [--body-limit-mib N] [--body-budget-mib N] [--held-mib N] [--request-timeout-s N] [--max-connections N] (http-flags.ts)
//   node dist/src/router/main.js --validate-only --config FILE: the file's own rules, exit 0 or 1 (a promotion's validate step)
// On-demand tiers also need GPURES_API_URL and GPURES_API_TOKEN (the acquisition API) and
// GPURES_ROUTER_CLIENT_TOKEN, the token their requests must carry (Authorization: Bearer).
// Binds 127.0.0.1:8000 unless told otherwise, GET /metrics on the same port (docs/metrics.md);
// SIGTERM/SIGINT close it (in-flight requests finish).
import { parseArgs } from 'node:util';
import { routerProcessEnv } from '../config/env';
import { isLoopback } from '../domain/manifest';
import { wholeNumber } from '../domain/inputs';
import { describeHttpBounds, httpFlagsUsage, ROUTER_HTTP_FLAGS, routerHttpBounds } from './http-flags';
import type { RouterHttpFlag } from './http-flags';
import { startRouter } from './server';
import { ConfigLoadError, loadConfig } from './config-file';
import { formatIssue } from '../domain/types';

const USAGE =
  'usage: GPURES_ROUTER_TOKEN=<secret> node dist/src/router/main.js --config FILE ' +
  '[--host 127.0.0.1 [--allow-non-loopback]] [--port 8000] [--state FILE (quiesced tiers and the last acquisition time of each on-demand tier, kept across restarts)]\n' +
  'what a client may make the router hold (docs/router-admin-api.md; fixed until a restart, /admin/reload leaves them):\n' +
  `${httpFlagsUsage()}\n` +
  'environment:\n' +
  "  GPURES_ROUTER_TOKEN         the admin API's bearer token (at least 32 characters); required\n" +
  '  GPURES_API_URL              the acquisition API on-demand tiers acquire their serves through\n' +
  '  GPURES_API_TOKEN            its bearer token\n' +
  '  GPURES_ROUTER_CLIENT_TOKEN  the token a request to an on-demand preset must carry, as Authorization: Bearer\n' +
  "                              (an OpenAI client's api_key; at least 32 characters, neither of the tokens above)\n" +
  'A config with an on-demand tier needs the last three; tokens are read from the environment only.\n' +
  "--validate-only --config FILE: check the file against the config's own rules and exit, 0 when valid, 1 with each problem\n" +
  '                              (what `gpures router promote` runs in the target image; the environment is checked at start)';

function fail(message: string): never {
  process.stderr.write(`gpures-router: ${message}\n`);
  process.exit(2);
}

/**
 * The verdict a promotion's validate step reads (docs/promotion.md): the file's own rules, as a
 * start or /admin/reload would judge them, on stdout; no token, no network (the step runs it with
 * none). The environment an on-demand tier needs is the running router's, checked at its start.
 */
async function validateOnly(configPath: string): Promise<void> {
  try {
    const { config, warnings } = await loadConfig(configPath);
    for (const w of warnings) process.stdout.write(`warning: ${formatIssue(w)}\n`);
    process.stdout.write(`${configPath}: valid (mapping_version '${config.mappingVersion}')\n`);
  } catch (err) {
    if (!(err instanceof ConfigLoadError)) throw err;
    process.stdout.write(`${err.message}\n`);
    process.exitCode = 1;
  }
}

async function main(): Promise<void> {
  let values: {
    config?: string;
    host?: string;
    port?: string;
    state?: string;
    help?: boolean;
    'allow-non-loopback'?: boolean;
    'validate-only'?: boolean;
  } & Partial<Record<RouterHttpFlag, string>>;
  try {
    ({ values } = parseArgs({
      options: {
        config: { type: 'string', short: 'c' },
        host: { type: 'string', default: '127.0.0.1' },
        port: { type: 'string', short: 'p', default: '8000' },
        state: { type: 'string' },
        'allow-non-loopback': { type: 'boolean' },
        'validate-only': { type: 'boolean' },
        ...Object.fromEntries(Object.keys(ROUTER_HTTP_FLAGS).map((name) => [name, { type: 'string' as const }])),
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
    }));
  } catch (err) {
    fail(`${err instanceof Error ? err.message : String(err)}\n${USAGE}`);
  }
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  if (!values.config) fail(`--config is required\n${USAGE}`);
  if (values['validate-only']) return validateOnly(values.config);
  const http = routerHttpBounds(values);
  if (!http.ok) fail(http.problems.join('\ngpures-router: '));
  let env: ReturnType<typeof routerProcessEnv>;
  try {
    env = routerProcessEnv(process.env);
  } catch (err) {
    fail(err instanceof Error ? err.message : String(err));
  }
  // Digits only: Number('') is 0 (a random port), Number('0x1f41') 8001.
  const port = wholeNumber(values.port ?? '');
  if (!(port <= 65535)) fail(`--port must be an integer in 0..65535 (got '${values.port}')`);
  const host = values.host ?? '127.0.0.1';
  // A request to an on-demand tier acquires its serve, evicting others, with the router's own API
  // token: the client token guards that, and the admin API is there too. Beyond this host only
  // when asked, as `gpures api`.
  if (!isLoopback(host) && !values['allow-non-loopback']) {
    fail(`--host ${host} is not a loopback address: a request to an on-demand tier can evict serves; add --allow-non-loopback to serve beyond this host`);
  }

  let router: Awaited<ReturnType<typeof startRouter>>;
  try {
    router = await startRouter({
      configPath: values.config,
      host,
      port,
      adminToken: env.adminToken,
      requireAcquisitionApi: true,
      processMetrics: true,
      log: (line) => process.stderr.write(`gpures-router: ${line}\n`),
      ...http.bounds,
      ...(env.acquisitions ? { acquisitions: env.acquisitions } : {}),
      ...(env.clientToken ? { clientToken: env.clientToken } : {}),
      ...(values.state ? { stateFile: values.state } : {}),
    });
  } catch (err) {
    fail(`cannot start:\n${err instanceof Error ? err.message : String(err)}`);
  }
  const { mappingVersion } = router.state();
  process.stderr.write(`router listening on ${router.url} (mapping_version ${mappingVersion})\n`);
  process.stderr.write(`gpures-router: ${describeHttpBounds(http.bounds)}\n`);
  if (!isLoopback(new URL(router.url).hostname.replace(/^\[|\]$/g, ''))) {
    process.stderr.write(`gpures-router: warning: bound to ${host}, so the router and its admin API are reachable beyond this host\n`);
  }

  let closing = false;
  const shutdown = (signal: string) => {
    if (closing) return;
    closing = true;
    process.stderr.write(`gpures-router: ${signal}, closing\n`);
    router.close().then(
      () => process.exit(0),
      (err: unknown) => {
        process.stderr.write(`gpures-router: close failed: ${err instanceof Error ? err.message : String(err)}\n`);
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  process.once('SIGINT', () => shutdown('SIGINT'));
}

main().catch((err: unknown) => fail(err instanceof Error ? (err.stack ?? err.message) : String(err)));
