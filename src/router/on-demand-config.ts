// An on-demand tier needs the acquisition API: a router started without GPURES_API_URL and
// GPURES_API_TOKEN refuses such a config at start and on reload, naming each tier.
import type { RouterConfig } from '../config/router-model';
import type { ManifestIssue } from '../domain/types';

export function onDemandWithoutApi(config: RouterConfig, file: string): ManifestIssue[] {
  return config.tiers.flatMap((t, index) =>
    t.onDemand
      ? [
          {
            file,
            path: `tiers[${index}].on_demand`,
            message:
              `tier '${t.name}' is on demand, but the router has no acquisition API to acquire serve '${t.onDemand.serve}' with: ` +
              'set GPURES_API_URL and GPURES_API_TOKEN in its environment',
          },
        ]
      : [],
  );
}
