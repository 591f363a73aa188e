// The guarded readmit: a tier re-enters rotation only when its backend is healthy and /v1/models
// reports exactly the tier's served_model_name (docs/router-admin-api.md).
import type { ReadmitOutcome, ReadmitRefusal } from '../activities/ports';
import type { RouterTier } from '../config/router-model';
import { errText } from './errors';

/** Health, then exact identity; never changes the tier's mode itself. */
export async function guardedReadmit(tier: RouterTier, probeTimeoutMs: number): Promise<ReadmitOutcome> {
  const refuse = (reason: ReadmitRefusal, message: string): ReadmitOutcome => ({ ok: false, tier: tier.name, reason, message });
  if (!tier.modelIdentity) {
    return refuse(
      'identity_not_configured',
      `tier '${tier.name}' does not set model_identity = true, so its backend's identity cannot be verified and a guarded readmit refuses; ` +
        "set model_identity = true (with served_model_name = the serve's served model name) and reload",
    );
  }
  const healthUrl = `${tier.backend}/health`;
  try {
    const res = await fetch(healthUrl, { signal: AbortSignal.timeout(probeTimeoutMs) });
    await res.arrayBuffer();
    if (res.status !== 200) return refuse('unhealthy', `GET ${healthUrl} answered ${res.status}, not 200`);
  } catch (err) {
    return refuse('unhealthy', `GET ${healthUrl} failed: ${errText(err)}`);
  }
  const modelsUrl = `${tier.backend}/v1/models`;
  let ids: string[];
  try {
    const res = await fetch(modelsUrl, { signal: AbortSignal.timeout(probeTimeoutMs) });
    const text = await res.text();
    if (res.status !== 200) return refuse('unhealthy', `GET ${modelsUrl} answered ${res.status}, not 200`);
    const parsed = JSON.parse(text) as { data?: unknown };
    if (!Array.isArray(parsed.data)) return refuse('unhealthy', `GET ${modelsUrl} did not return an OpenAI model list`);
    ids = (parsed.data as unknown[]).map((m) =>
      typeof m === 'object' && m !== null && typeof (m as { id?: unknown }).id === 'string' ? (m as { id: string }).id : String(m),
    );
  } catch (err) {
    return refuse('unhealthy', `GET ${modelsUrl} failed: ${errText(err)}`);
  }
  if (!ids.includes(tier.servedModelName)) {
    const observed = ids.length ? ids.map((i) => `'${i}'`).join(', ') : 'no models';
    return refuse(
      'identity_mismatch',
      `backend ${tier.backend} serves ${observed}, not '${tier.servedModelName}' (exact match required); observed ids: [${ids.join(', ')}]`,
    );
  }
  return { ok: true, tier: tier.name, observedModel: tier.servedModelName };
}
