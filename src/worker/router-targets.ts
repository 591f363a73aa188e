// The router deployment a worker may promote, from its environment (docs/promotion.md). The
// admin token stays here, in the worker: promotion inputs, results and history never carry it.
//
//   GPURES_ROUTER_CONFIG            live config on this host, in a directory bind-mounted into the
//                                   router container (required to enable promotion)
//   GPURES_ROUTER_URL               router base URL (/healthz, /admin/reload); shared with eviction
//   GPURES_ROUTER_TOKEN             bearer token of /admin/reload; shared with eviction
//   GPURES_ROUTER_NAME              deployment name (default "router"): `--router`, the workflow id
//   GPURES_ROUTER_CONTAINER         container name (default "gpures-router")
//   GPURES_ROUTER_CONTAINER_CONFIG  the file as the container sees it (default /config/<file name>)
//   GPURES_ROUTER_VALIDATE_ARGS     JSON array; {config} is replaced (default --validate-only --config {config})
//   GPURES_ROUTER_VERIFY_WINDOW_S   crash-loop window (default 30)
//   GPURES_ROUTER_HEALTHZ_STREAK    healthz answers in a row (default 3)
//   GPURES_ROUTER_BACKUPS_KEPT      backups kept next to the live file (default 5)
import { realpathSync } from 'node:fs';
import { basename, dirname, isAbsolute, resolve } from 'node:path';
import type { RouterTarget } from '../adapters/router-deployment/port';
import { DEFAULT_ROUTER } from '../shared/promotion';

function positive(env: NodeJS.ProcessEnv, name: string, integer: boolean): number | undefined {
  const raw = env[name];
  if (raw === undefined || raw === '') return undefined;
  const n = Number(raw);
  if (!(n > 0) || (integer && !Number.isInteger(n))) throw new Error(`${name}: a positive ${integer ? 'integer' : 'number'} (got '${raw}')`);
  return n;
}

/** The configured router, or none when GPURES_ROUTER_CONFIG is unset. Throws on an incomplete configuration. */
export function routerTargetsFromEnv(env: NodeJS.ProcessEnv): RouterTarget[] {
  const configPath = env['GPURES_ROUTER_CONFIG'];
  if (!configPath) return [];
  if (!isAbsolute(configPath)) throw new Error(`GPURES_ROUTER_CONFIG: an absolute path on this host (got '${configPath}')`);
  // Promotion refuses every file of a directory reached through a symbolic link (docs/promotion.md): say so at start.
  const dir = resolve(dirname(configPath));
  let real: string | undefined;
  try {
    real = realpathSync(dir);
  } catch {
    real = undefined; // absent for now: each promotion step says so
  }
  if (real !== undefined && real !== dir) {
    throw new Error(`GPURES_ROUTER_CONFIG: the directory ${dir} resolves to ${real} through a symbolic link, and promotion refuses such paths; name the real directory (${real}/${basename(configPath)})`);
  }
  const url = env['GPURES_ROUTER_URL'];
  const token = env['GPURES_ROUTER_TOKEN'];
  if (!url || !token) throw new Error('GPURES_ROUTER_CONFIG is set: router promotion also needs GPURES_ROUTER_URL and GPURES_ROUTER_TOKEN');
  let validateArgs: string[] | undefined;
  const rawArgs = env['GPURES_ROUTER_VALIDATE_ARGS'];
  if (rawArgs) {
    const parsed: unknown = JSON.parse(rawArgs);
    if (!Array.isArray(parsed) || !parsed.every((a) => typeof a === 'string')) throw new Error('GPURES_ROUTER_VALIDATE_ARGS: a JSON array of strings');
    validateArgs = parsed;
  }
  const target: RouterTarget = {
    name: env['GPURES_ROUTER_NAME'] || DEFAULT_ROUTER,
    container: env['GPURES_ROUTER_CONTAINER'] || 'gpures-router',
    configPath,
    containerConfigPath: env['GPURES_ROUTER_CONTAINER_CONFIG'] || `/config/${basename(configPath)}`,
    url,
    adminToken: token,
  };
  if (validateArgs) target.validateArgs = validateArgs;
  const windowS = positive(env, 'GPURES_ROUTER_VERIFY_WINDOW_S', false);
  if (windowS !== undefined) target.verifyWindowS = windowS;
  const streak = positive(env, 'GPURES_ROUTER_HEALTHZ_STREAK', true);
  if (streak !== undefined) target.healthzStreak = streak;
  const kept = positive(env, 'GPURES_ROUTER_BACKUPS_KEPT', true);
  if (kept !== undefined) target.backupsKept = kept;
  return [target];
}
