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
import { basename, dirname, resolve } from 'node:path';
import type { RouterTarget } from '../activities/router-deployment';
import type { Env } from '../config/env';
import { EnvError, promotionEnv } from '../config/env';
import { DEFAULT_ROUTER } from '../shared/promotion';

/** Promotion refuses every file of a directory reached through a symbolic link (docs/promotion.md): say so at start. */
function refuseSymlinkedDirectory(configPath: string): void {
  const dir = resolve(dirname(configPath));
  let real: string | undefined;
  try {
    real = realpathSync(dir);
  } catch {
    real = undefined; // absent for now: each promotion step says so
  }
  if (real !== undefined && real !== dir) {
    throw new EnvError(
      'GPURES_ROUTER_CONFIG',
      `GPURES_ROUTER_CONFIG: the directory ${dir} resolves to ${real} through a symbolic link, and promotion refuses such paths; ` +
        `name the real directory (${real}/${basename(configPath)})`,
    );
  }
}

/** The configured router, or none when GPURES_ROUTER_CONFIG is unset. Throws on an incomplete configuration. */
export function routerTargetsFromEnv(env: Env): RouterTarget[] {
  const e = promotionEnv(env, refuseSymlinkedDirectory);
  if (!e) return [];
  const target: RouterTarget = {
    name: e.name ?? DEFAULT_ROUTER,
    container: e.container,
    configPath: e.configPath,
    containerConfigPath: e.containerConfigPath ?? `/config/${basename(e.configPath)}`,
    url: e.url,
    adminToken: e.adminToken,
  };
  if (e.validateArgs) target.validateArgs = e.validateArgs;
  if (e.verifyWindowS !== undefined) target.verifyWindowS = e.verifyWindowS;
  if (e.healthzStreak !== undefined) target.healthzStreak = e.healthzStreak;
  if (e.backupsKept !== undefined) target.backupsKept = e.backupsKept;
  return [target];
}
