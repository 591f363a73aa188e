// The router config's rules, each a named check that returns what it found, in the order of the
// lists below; and the cross-check of a router config against the serve manifest (the load-time
// rule of seed T013, finding 2).

import type { Finding, Rule } from './issues';
import { error, formatPath, isString, warning } from './issues';
import type { RouterCheckIssue, RouterConfig, RouterPreset, RouterTier } from './router-model';
import { OPENAI_CLIENT_TIMEOUT_S, parseBackendUrl } from './router-model';
import type { ServeSpec } from '../domain/types';

interface Indexed<T> {
  index: number;
  spec: T;
}

/** First index of each usable tier name (over every [[tiers]] entry) and preset name (valid ones). */
export interface RouterContext {
  tierFirst: Map<string, number>;
  presetFirst: Map<string, number>;
}

export function routerContext(rawTiers: readonly unknown[], presets: readonly Indexed<RouterPreset>[]): RouterContext {
  const tierFirst = new Map<string, number>();
  rawTiers.forEach((raw, index) => {
    const name = typeof raw === 'object' && raw !== null ? (raw as Record<string, unknown>).name : undefined;
    if (isString(name) && name.trim() !== '' && !tierFirst.has(name)) tierFirst.set(name, index);
  });
  const presetFirst = new Map<string, number>();
  for (const { index, spec } of presets) if (!presetFirst.has(spec.name)) presetFirst.set(spec.name, index);
  return { tierFirst, presetFirst };
}

// ---------------------------------------------------------------------------------------------
// The file

const tiersDeclared: Rule<Record<string, unknown>, void> = (table) =>
  table.tiers === undefined || (Array.isArray(table.tiers) && table.tiers.length === 0)
    ? [error('tiers', 'at least one tier is required: add a [[tiers]] table with name, backend and served_model_name')]
    : [];

export const documentRules: Rule<Record<string, unknown>, void>[] = [tiersDeclared];

// ---------------------------------------------------------------------------------------------
// Tiers and presets

const uniqueTierName: Rule<Indexed<unknown>, RouterContext> = ({ index, spec }, { tierFirst }) => {
  const name = typeof spec === 'object' && spec !== null ? (spec as Record<string, unknown>).name : undefined;
  const first = isString(name) ? tierFirst.get(name) : undefined;
  return first !== undefined && first !== index
    ? [error(['tiers', index, 'name'], `duplicate tier name '${String(name)}' (first declared at tiers[${first}])`)]
    : [];
};

/** Over every [[tiers]] entry, valid or not. */
export const tierIdentityRules: Rule<Indexed<unknown>, RouterContext>[] = [uniqueTierName];

const isDuplicatePreset = ({ index, spec }: Indexed<RouterPreset>, { presetFirst }: RouterContext): boolean => presetFirst.get(spec.name) !== index;

const uniquePresetName: Rule<Indexed<RouterPreset>, RouterContext> = (preset, ctx) =>
  isDuplicatePreset(preset, ctx)
    ? [
        error(
          ['presets', preset.index, 'name'],
          `duplicate preset name '${preset.spec.name}' (first declared at presets[${ctx.presetFirst.get(preset.spec.name) ?? 0}])`,
        ),
      ]
    : [];

const presetTierKnown: Rule<Indexed<RouterPreset>, RouterContext> = (preset, ctx) => {
  const { name, tier } = preset.spec;
  if (isDuplicatePreset(preset, ctx) || ctx.tierFirst.has(tier)) return [];
  const knownTiers = [...ctx.tierFirst.keys()];
  const known = knownTiers.length ? knownTiers.map((t) => `'${t}'`).join(', ') : 'none declared';
  return [error(['presets', preset.index, 'tier'], `preset '${name}' names unknown tier '${tier}' (known tiers: ${known})`)];
};

/** Over the presets whose own fields passed. */
export const presetRules: Rule<Indexed<RouterPreset>, RouterContext>[] = [uniquePresetName, presetTierKnown];

const everyTierHasPreset: Rule<{ tiers: RouterTier[]; presets: RouterPreset[] }, RouterContext> = ({ tiers, presets }, { tierFirst }) => {
  if (presets.length === 0) return [];
  const used = new Set(presets.map((p) => p.tier));
  return tiers
    .filter((t) => !used.has(t.name))
    .map((t) => warning(['tiers', tierFirst.get(t.name) ?? 0], `tier '${t.name}' has no preset: clients cannot reach it (admin endpoints still can)`));
};

type TiersAndPresets = { tiers: RouterTier[]; presets: RouterPreset[] };

/** The acquisition readmits the tier through the guard, which refuses without model_identity. */
const onDemandTierHasIdentity: Rule<TiersAndPresets, RouterContext> = ({ tiers }, { tierFirst }) =>
  tiers
    .filter((t) => t.onDemand && !t.modelIdentity)
    .map((t) =>
      error(
        ['tiers', tierFirst.get(t.name) ?? 0, 'model_identity'],
        `tier '${t.name}' is on demand and must set model_identity = true: the acquisition it triggers readmits it through the guarded readmit, ` +
          'which refuses with identity_not_configured without it, so every held request would wait for nothing',
      ),
    );

/** Two tiers acquiring one serve would each queue for a readmit only one of them gets. */
const onDemandServeOnce: Rule<TiersAndPresets, RouterContext> = ({ tiers }, { tierFirst }) => {
  const first = new Map<string, string>();
  return tiers.flatMap((t) => {
    if (!t.onDemand) return [];
    const other = first.get(t.onDemand.serve);
    if (other === undefined) first.set(t.onDemand.serve, t.name);
    return other === undefined
      ? []
      : [error(['tiers', tierFirst.get(t.name) ?? 0, 'on_demand', 'serve'], `serve '${t.onDemand.serve}' already backs on-demand tier '${other}'`)];
  });
};

/** A non-streaming client gives up at its own timeout and never sees the 503 + Retry-After. */
const onDemandWaitWithinClientTimeout: Rule<TiersAndPresets, RouterContext> = ({ tiers }, { tierFirst }) =>
  tiers
    .filter((t) => t.onDemand && t.onDemand.waitTimeoutS >= OPENAI_CLIENT_TIMEOUT_S)
    .map((t) =>
      warning(
        ['tiers', tierFirst.get(t.name) ?? 0, 'on_demand', 'wait_timeout_s'],
        `${t.onDemand?.waitTimeoutS ?? 0} s is not below OpenAI clients' default timeout of ${OPENAI_CLIENT_TIMEOUT_S} s: ` +
          'a client with the default gives up (and retries from scratch) before the router answers 503 with Retry-After',
      ),
    );

/** Over the valid tiers and presets. */
export const configRules: Rule<TiersAndPresets, RouterContext>[] = [
  everyTierHasPreset,
  onDemandTierHasIdentity,
  onDemandServeOnce,
  onDemandWaitWithinClientTimeout,
];

// ---------------------------------------------------------------------------------------------
// Against the manifest: one rule per finding, over each serve that names a router tier

export interface CrossCheck {
  config: RouterConfig;
  routerFile: string;
  manifestFile: string;
}

/** A serve with a router_tier, and that tier (absent when the router config lacks it). */
interface TierOfServe {
  serve: Indexed<ServeSpec>;
  tier: Indexed<RouterTier> | undefined;
}

type CrossRule = (subject: TierOfServe, ctx: CrossCheck) => RouterCheckIssue[];

const found = (severity: RouterCheckIssue['severity'], file: string, path: Finding['path'], message: string): RouterCheckIssue[] => [
  { severity, file, path: typeof path === 'string' ? path : formatPath(path), message },
];

const serveTierDeclared: CrossRule = ({ serve: { index, spec: serve }, tier }, { routerFile, manifestFile }) =>
  tier
    ? []
    : // An error, not a warning: every serves down of the serve fails at its quiesce (the router
      // answers 404 unknown tier), its eviction at the preflight, and nothing routes to it.
      found(
        'error',
        manifestFile,
        ['serves', index, 'router_tier'],
        `serve '${serve.name}' declares router_tier '${serve.routerTier ?? ''}', which is not a tier in ${routerFile}: ` +
          `the router cannot route to it, quiesce it or readmit it, so serves down ${serve.name} would fail at its quiesce` +
          (serve.class === 'evictable' ? ' and an eviction of it at its preflight' : '') +
          `; fix the name, add the tier to ${routerFile}, or remove router_tier`,
      );

/**
 * After an eviction the tier is quiesced, and the guarded readmit refuses with
 * identity_not_configured without model_identity, so the tier could never re-enter rotation.
 */
const evictableTierHasIdentity: CrossRule = ({ serve: { spec: serve }, tier }, { routerFile, manifestFile }) =>
  tier && serve.class === 'evictable' && !tier.spec.modelIdentity
    ? found(
        'error',
        routerFile,
        ['tiers', tier.index, 'model_identity'],
        `tier '${tier.spec.name}' is backed by evictable serve '${serve.name}' (${manifestFile}) and must set model_identity = true, ` +
          'or its guarded readmit will refuse with identity_not_configured and the tier can never re-enter rotation after an eviction',
      )
    : [];

/** `serves down` quiesces the tier too, and the next `serves up` readmits it through the guard. */
const tierIdentityForReadmit: CrossRule = ({ serve: { spec: serve }, tier }, { routerFile, manifestFile }) =>
  tier && serve.class !== 'evictable' && !tier.spec.modelIdentity
    ? found(
        'warning',
        routerFile,
        ['tiers', tier.index, 'model_identity'],
        `tier '${tier.spec.name}' is backed by ${serve.class} serve '${serve.name}' (${manifestFile}) without model_identity = true: ` +
          `after \`serves down ${serve.name}\` the tier stays quiesced ` +
          'and the guarded readmit of the next `serves up` will refuse with identity_not_configured',
      )
    : [];

/** The router sends the tier's name as `model`, and readmit requires it in /v1/models. */
const tierSendsServesModel: CrossRule = ({ serve: { spec: serve }, tier }, { routerFile, manifestFile }) =>
  tier && tier.spec.servedModelName !== serve.servedModelName
    ? found(
        'error',
        routerFile,
        ['tiers', tier.index, 'served_model_name'],
        `tier '${tier.spec.name}' sends model '${tier.spec.servedModelName}', ` +
          `but its serve '${serve.name}' (${manifestFile}) serves '${serve.servedModelName}': ` +
          'routed requests would be rejected by the backend and a guarded readmit would refuse with identity_mismatch',
      )
    : [];

const tierBackendOnServePort: CrossRule = ({ serve: { spec: serve }, tier }, { routerFile, manifestFile }) => {
  const url = tier ? parseBackendUrl(tier.spec.backend) : undefined;
  return tier && url && url.port !== serve.port
    ? found(
        'warning',
        routerFile,
        ['tiers', tier.index, 'backend'],
        `tier '${tier.spec.name}' backend ${tier.spec.backend} uses port ${url.port}, ` +
          `but its serve '${serve.name}' (${manifestFile}) is published on port ${serve.port}`,
      )
    : [];
};

/** Only the router's acquisition of an on-demand tier takes an idle lease: anywhere else idle_ttl_s gives nothing back. */
const idleTtlOnDemandTier: CrossRule = ({ serve: { index, spec: serve }, tier }, { routerFile, manifestFile }) =>
  tier && serve.idleTtlS !== undefined && tier.spec.onDemand?.serve !== serve.name
    ? found(
        'warning',
        manifestFile,
        ['serves', index, 'idle_ttl_s'],
        `serve '${serve.name}' declares idle_ttl_s, but its tier '${tier.spec.name}' is not on demand for it in ${routerFile}: ` +
          "only the router's acquisition of an on-demand tier takes an idle lease, so nothing would bring it down when idle; " +
          'move idle_ttl_s to the serve the tier acquires, or add [tiers.on_demand] serve = "' +
          serve.name +
          '"',
      )
    : [];

export const crossRules: CrossRule[] = [
  serveTierDeclared,
  evictableTierHasIdentity,
  tierIdentityForReadmit,
  tierSendsServesModel,
  tierBackendOnServePort,
  idleTtlOnDemandTier,
];

/**
 * An on-demand tier's serve: it must be in the manifest and name this tier as its router_tier
 * (the acquisition readmits that tier and no other).
 */
export function onDemandServeChecks(config: RouterConfig, ctx: CrossCheck, serves: readonly ServeSpec[]): RouterCheckIssue[] {
  return config.tiers.flatMap((tier, index) => {
    const policy = tier.onDemand;
    if (!policy) return [];
    const path = ['tiers', index, 'on_demand', 'serve'];
    const serve = serves.find((s) => s.name === policy.serve);
    if (!serve) {
      const known = serves.filter((s) => s.routerTier === tier.name).map((s) => `'${s.name}'`);
      return found(
        'error',
        ctx.routerFile,
        path,
        `tier '${tier.name}' is on demand for serve '${policy.serve}', which is not a serve in ${ctx.manifestFile}` +
          (known.length ? ` (serves with router_tier '${tier.name}': ${known.join(', ')})` : ''),
      );
    }
    if (serve.routerTier !== tier.name) {
      return found(
        'error',
        ctx.routerFile,
        path,
        `tier '${tier.name}' is on demand for serve '${serve.name}', whose router_tier is ` +
          `${serve.routerTier ? `'${serve.routerTier}'` : 'not set'} in ${ctx.manifestFile}: its acquisition would readmit another tier, ` +
          `and requests held here would never be let through; set router_tier = "${tier.name}" on the serve`,
      );
    }
    return [];
  });
}

export function tierOfServe(config: RouterConfig, serve: Indexed<ServeSpec>): TierOfServe {
  const index = config.tiers.findIndex((t) => t.name === serve.spec.routerTier);
  const tier = config.tiers[index];
  return { serve, tier: tier ? { index, spec: tier } : undefined };
}
