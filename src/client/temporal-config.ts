// Where Temporal is, as Temporal's own environment configuration says (TEMPORAL_ADDRESS,
// TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TLS settings, TEMPORAL_PROFILE and the config file). Apart
// from the connection (./connection.ts) so that a command which only compares it, `gpures ledger`
// read from the local worker, does not load the SDK's client.
import { existsSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { loadClientConnectConfig } from '@temporalio/envconfig';
import type { ClientConnectConfig } from '@temporalio/envconfig';
import { parse as parseToml, TomlError } from 'smol-toml';
import { BoundedReadError, readBoundedSync } from '../config/bounded-read';

export const DEFAULT_ADDRESS = '127.0.0.1:7233';

/** A few profiles with inline certificates are kilobytes: one past this is some other file (or /dev/zero). */
export const MAX_TEMPORAL_CONFIG_BYTES = 1024 * 1024;

/** The environment configuration cannot be used: a bad input of the operator's, named by its file. */
export class TemporalConfigError extends Error {
  override readonly name = 'TemporalConfigError';
}

/**
 * The file envconfig would read when TEMPORAL_CONFIG_FILE names none, by its own rule
 * (envconfig-toml.js getUserConfigDir), so that reading it here reads the same file; undefined
 * where that rule finds no directory.
 */
export function defaultConfigFile(env: NodeJS.ProcessEnv, platform: NodeJS.Platform = process.platform): string | undefined {
  const file = (dir: string | undefined) => (dir ? join(dir, 'temporalio', 'temporal.toml') : undefined);
  if (platform === 'win32') return file(env['APPDATA']);
  if (platform === 'darwin') return file(env['HOME'] && join(env['HOME'], 'Library', 'Application Support'));
  const xdg = env['XDG_CONFIG_HOME'];
  if (xdg) return isAbsolute(xdg) ? file(xdg) : undefined;
  return file(env['HOME'] && join(env['HOME'], '.config'));
}

/**
 * The config file's name and text, read up to its bound, or undefined when there is none to read:
 * the default file may be absent (nothing is configured), the one TEMPORAL_CONFIG_FILE names may
 * not (a typo there would otherwise connect with no API key, to the default address).
 */
function readConfigFile(env: NodeJS.ProcessEnv): { file: string; text: string } | undefined {
  // Empty is unset, as a shell's `TEMPORAL_CONFIG_FILE= gpures …` means it.
  const named = env['TEMPORAL_CONFIG_FILE'] || undefined;
  const file = named ?? defaultConfigFile(env);
  if (file === undefined || (named === undefined && !existsSync(file))) return undefined;
  try {
    return { file, text: readBoundedSync(file, "Temporal's config file", MAX_TEMPORAL_CONFIG_BYTES) };
  } catch (err) {
    if (err instanceof BoundedReadError) throw new TemporalConfigError(`${err.message}${named === undefined ? '' : ' (TEMPORAL_CONFIG_FILE)'}`);
    throw err;
  }
}

/** Whether the text is TOML without any [profile.*] table (empty, say); false when it cannot be parsed. */
function profileless(text: string): boolean {
  try {
    return (parseToml(text) as { profile?: unknown }).profile === undefined;
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
  const profile = env['TEMPORAL_PROFILE'];
  const read = readConfigFile(env);
  const file = read?.file ?? defaultConfigFile(env) ?? 'temporal.toml';
  if (read === undefined && profile) {
    throw new TemporalConfigError(
      `${file}: no [profile.${profile}] (TEMPORAL_PROFILE=${profile}), and there is no such file: set TEMPORAL_CONFIG_FILE, or unset TEMPORAL_PROFILE`,
    );
  }
  let config: ClientConnectConfig;
  try {
    // The text read here, within its bound: envconfig itself would read any file whole.
    config = loadClientConnectConfig(read ? { configSource: { data: read.text }, overrideEnvVars } : { disableFile: true, overrideEnvVars });
  } catch (err) {
    // envconfig fails with a TypeError on a file without any profile table. Such a file
    // configures nothing, as one without the profile asked for does, unless a profile was named.
    if (err instanceof TypeError && read && profileless(read.text)) {
      if (profile && profile !== 'default') {
        throw new TemporalConfigError(`${file}: no [profile.${profile}] (TEMPORAL_PROFILE): the file has no profile table at all`);
      }
      config = loadClientConnectConfig({ disableFile: true, overrideEnvVars });
    } else {
      throw new TemporalConfigError(`${file}: Temporal's environment configuration cannot be used: ${configProblem(err)}`);
    }
  }
  config.connectionOptions.address ??= DEFAULT_ADDRESS;
  return config;
}

/** The address and namespace a configuration names: what a worker and a command must share to read the same ledgers. */
export function temporalTarget(config: ClientConnectConfig): { address: string; namespace: string } {
  return { address: config.connectionOptions.address ?? DEFAULT_ADDRESS, namespace: config.namespace ?? 'default' };
}
