// Where Temporal is, as Temporal's own environment configuration says (TEMPORAL_ADDRESS,
// TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TLS settings, TEMPORAL_PROFILE and the config file). Apart
// from the connection (./connection.ts) so that a command which only compares it, `gpures ledger`
// read from the local worker, does not load the SDK's client.
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { loadClientConnectConfig } from '@temporalio/envconfig';
import type { ClientConnectConfig } from '@temporalio/envconfig';
import { parse as parseToml, TomlError } from 'smol-toml';

export const DEFAULT_ADDRESS = '127.0.0.1:7233';

/** The environment configuration cannot be used: a bad input of the operator's, named by its file. */
export class TemporalConfigError extends Error {
  override readonly name = 'TemporalConfigError';
}

/** Where envconfig reads its file from: TEMPORAL_CONFIG_FILE, else the user's config dir. */
function configFile(env: NodeJS.ProcessEnv): string {
  return env['TEMPORAL_CONFIG_FILE'] ?? join(env['XDG_CONFIG_HOME'] ?? join(homedir(), '.config'), 'temporalio', 'temporal.toml');
}

/** Whether the file is TOML without any [profile.*] table (empty, say); false when it cannot be read or parsed. */
function profileless(file: string): boolean {
  try {
    return (parseToml(readFileSync(file, 'utf8')) as { profile?: unknown }).profile === undefined;
  } catch {
    return false;
  }
}

/**
 * What is wrong with the file, without its text: the TOML parser's message quotes the lines
 * around the error, and this file holds API keys.
 */
function configProblem(err: unknown): string {
  if (err instanceof TomlError) return `not TOML at line ${err.line}, column ${err.column}`;
  return err instanceof Error ? err.message : String(err);
}

export function temporalConfig(env: NodeJS.ProcessEnv = process.env): ClientConnectConfig {
  // The variables of `env`, not of the process: what the file is and what overrides it come from one place.
  const overrideEnvVars = env as Record<string, string>;
  let config: ClientConnectConfig;
  try {
    config = loadClientConnectConfig({ overrideEnvVars });
  } catch (err) {
    const file = configFile(env);
    const profile = env['TEMPORAL_PROFILE'];
    // envconfig fails with a TypeError on a file without any profile table. Such a file
    // configures nothing, as one without the profile asked for does, unless a profile was named.
    if (err instanceof TypeError && profileless(file)) {
      if (profile && profile !== 'default') {
        throw new TemporalConfigError(`${file}: no [profile.${profile}] (TEMPORAL_PROFILE): the file has no profile table at all`);
      }
      config = loadClientConnectConfig({ disableFile: true, overrideEnvVars });
    } else {
      // A profile named where there is no file at all: say so, not that the file's profile is missing.
      const absent =
        profile && !existsSync(file) ? ` (TEMPORAL_PROFILE=${profile}, and there is no such file: set TEMPORAL_CONFIG_FILE, or unset TEMPORAL_PROFILE)` : '';
      throw new TemporalConfigError(`${file}: Temporal's environment configuration cannot be used: ${configProblem(err)}${absent}`);
    }
  }
  config.connectionOptions.address ??= DEFAULT_ADDRESS;
  return config;
}

/** The address and namespace a configuration names: what a worker and a command must share to read the same ledgers. */
export function temporalTarget(config: ClientConnectConfig): { address: string; namespace: string } {
  return { address: config.connectionOptions.address ?? DEFAULT_ADDRESS, namespace: config.namespace ?? 'default' };
}
