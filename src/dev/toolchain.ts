// The constants the shell set-up and the TypeScript commands share, read from
// config/toolchain.json (scripts/lib.sh reads the same file through node): one place to bump the
// Temporal CLI tag, a dev-server flag, the test dockerd's socket or a test image name.
import { join } from 'node:path';
import toolchain from '../../config/toolchain.json';
import { devServerEnv } from '../config/env';

export const TEMPORAL_CLI_TAG = toolchain.temporalCli.tag;

export const DEV_SERVER = {
  ip: toolchain.devServer.ip,
  port: toolchain.devServer.port,
  namespace: toolchain.devServer.namespace,
  logLevel: toolchain.devServer.logLevel,
  /** `--dynamic-config-value` settings, as `name=value`. */
  dynamicConfig: toolchain.devServer.dynamicConfig.map((d) => `${d.name}=${d.value}`),
};

/** The production-shaped Temporal (src/dev/prod-temporal.ts): temporal-server on PostgreSQL, its defaults. */
export const PROD_TEMPORAL = {
  ...toolchain.prodTemporal,
  serverTag: toolchain.temporalServer.tag,
  sqlPlugin: toolchain.temporalServer.sqlPlugin,
  postgresBin: toolchain.postgres.bin,
};

export const TEST_DOCKERD = toolchain.testDockerd;

/** The test images' default names; GPURES_TEST_IMAGE and GPURES_ROUTER_TEST_IMAGE override them. */
export const TEST_IMAGES = toolchain.testImages;

/** Debian's Chromium, for the ledger page's test (test/support/chromium.ts). */
export const TEST_BROWSER = { aptPackage: toolchain.testBrowser.aptPackage, executable: toolchain.testBrowser.executable };

/** Where the set-up keeps what it builds outside the checkout: $GPURES_CACHE, else under $HOME. */
export function cacheDir(env: NodeJS.ProcessEnv = process.env): string {
  return devServerEnv(env).cacheDir;
}

/** The Temporal CLI that scripts/setup.sh builds with `go install` when none is on PATH. */
export function cachedTemporalCli(env: NodeJS.ProcessEnv = process.env): string {
  return join(cacheDir(env), `temporal-cli-${TEMPORAL_CLI_TAG}`, 'temporal');
}

/** temporal-server, temporal-sql-tool and schema/, as scripts/lib.sh's temporal_server_bins caches them. */
export function cachedTemporalServerDir(env: NodeJS.ProcessEnv = process.env): string {
  return join(cacheDir(env), `temporal-server-${toolchain.temporalServer.tag}`);
}
