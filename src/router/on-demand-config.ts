// What an on-demand tier needs of the router that runs it, checked at start and on reload, each
// tier named: the acquisition API to acquire through (GPURES_API_URL, GPURES_API_TOKEN), and a
// client token to require of the requests that can start an acquisition (GPURES_ROUTER_CLIENT_TOKEN).
import type { RouterConfig } from '../config/router-model';
import type { ManifestIssue } from '../domain/types';

export interface OnDemandMeans {
  /** The router has an acquisition API (startRouter's `acquisitions`). */
  acquisitionApi: boolean;
  /** A config with an on-demand tier is refused without one (main.js); otherwise such a tier is ordinary. */
  requireAcquisitionApi: boolean;
  /** The router has a client token (startRouter's `clientToken`). */
  clientToken: boolean;
}

/**
 * The issues of a config whose on-demand tiers this router cannot run. A tier needs the client
 * token wherever it can acquire, and under main.js always (it refuses a tier that cannot acquire):
 * no request may start an eviction untokened.
 */
export function onDemandUnmet(config: RouterConfig, file: string, means: OnDemandMeans): ManifestIssue[] {
  const needApi = means.requireAcquisitionApi && !means.acquisitionApi;
  const needClientToken = (means.acquisitionApi || means.requireAcquisitionApi) && !means.clientToken;
  return config.tiers.flatMap((t, index) => {
    if (!t.onDemand) return [];
    const path = `tiers[${index}].on_demand`;
    const issues: ManifestIssue[] = [];
    if (needApi) {
      issues.push({
        file,
        path,
        message:
          `tier '${t.name}' is on demand, but the router has no acquisition API to acquire serve '${t.onDemand.serve}' with: ` +
          'set GPURES_API_URL and GPURES_API_TOKEN in its environment',
      });
    }
    if (needClientToken) {
      issues.push({
        file,
        path,
        message:
          `tier '${t.name}' is on demand: a request to it can acquire serve '${t.onDemand.serve}', evicting others, and the router has ` +
          'no client token to require of it: set GPURES_ROUTER_CLIENT_TOKEN in its environment (clients send it as Authorization: Bearer, an OpenAI client as its api_key)',
      });
    }
    return issues;
  });
}
