// Reading the router config file: at start (a bad file fails the start) and on /admin/reload (a
// bad file leaves the running mapping in place).
import { BoundedReadError, readBounded } from '../config/bounded-read';
import { parseRouterConfig } from '../config/router-config';
import { MAX_CONFIG_BYTES } from '../domain/promotion';
import type { RouterConfig } from '../config/router-model';
import type { ManifestIssue } from '../domain/types';
import { formatIssue } from '../domain/types';

export class ConfigLoadError extends Error {
  constructor(readonly issues: ManifestIssue[]) {
    super(issues.map(formatIssue).join('\n'));
    this.name = 'ConfigLoadError';
  }
}

export interface LoadedConfig {
  config: RouterConfig;
  warnings: ManifestIssue[];
}

/** The validated config of the file; throws ConfigLoadError with every issue otherwise. */
export async function loadConfig(configPath: string): Promise<LoadedConfig> {
  let text: string;
  try {
    text = await readBounded(configPath, 'router config', MAX_CONFIG_BYTES);
  } catch (err) {
    const reason = err instanceof BoundedReadError ? err.reason : `cannot read: ${err instanceof Error ? err.message : String(err)}`;
    throw new ConfigLoadError([{ file: configPath, path: '', message: reason }]);
  }
  const result = parseRouterConfig(text, configPath);
  if (!result.ok) throw new ConfigLoadError(result.errors);
  return { config: result.config, warnings: result.warnings };
}
