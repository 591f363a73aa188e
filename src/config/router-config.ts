// Loading the router config: TOML text -> raw table (smol-toml) -> schema (zod, per entry) ->
// normalized RouterConfig -> the named rules of router-rules.ts; and the cross-check of a router
// config against the serve manifest. No I/O: the caller reads the files and hands over their
// text. Problems come back as ManifestIssues (`file`, dotted `path`, `message`), printed with
// formatIssue, exactly like the manifest's.
//
// Shape:
//   mapping_version = "2026-07-13.primary-node-t013-vision"
//   retry_after_s = 10              # Retry-After of a 503 with no better figure
//   [[tiers]]                       # a backend the router can route to, quiesce and readmit
//   name = "vision-local"
//   backend = "http://127.0.0.1:30008"
//   served_model_name = "qwen3-vl-4b-instruct"
//   model_identity = true           # default false
//   [tiers.on_demand]               # optional: a request finding the serve down acquires it
//   serve = "vision"                # the manifest serve behind the tier
//   evict = false                   # and queue_size, wait_timeout_s, keepalive_s, abandon_after_s (router-model.ts)
//   [[presets]]                     # what clients send as `model`
//   name = "vision"
//   tier = "vision-local"

import { z } from 'zod';
import { bool, field, Issues, isString, nonEmptyString, parseEach, parsed, parseTomlTable, tableArray, tableEntries } from './issues';
import type { RouterCheckIssue, RouterConfig, RouterConfigResult, RouterPreset, RouterTier } from './router-model';
import { parseBackendUrl, PRESET_NAME_PATTERN, ROUTER_BOUNDS, TIER_NAME_PATTERN } from './router-model';
import { configRules, crossRules, documentRules, onDemandServeChecks, presetRules, routerContext, tierIdentityRules, tierOfServe } from './router-rules';
import type { Manifest } from '../domain/types';
import { formatIssue } from '../domain/types';

/** The router config of an ok result; throws an Error listing the formatted errors otherwise. */
export function routerConfigOrThrow(result: RouterConfigResult): RouterConfig {
  if (result.ok) return result.config;
  throw new Error(result.errors.map(formatIssue).join('\n'));
}

// ---------------------------------------------------------------------------------------------
// Schema (the shared fields, and the "must be …" message style, are in issues.ts)

const tierName = field<string>((v) => isString(v) && TIER_NAME_PATTERN.test(v), `a tier name matching ${String(TIER_NAME_PATTERN)} (it appears in admin URLs)`);
const presetName = field<string>(
  (v) => isString(v) && PRESET_NAME_PATTERN.test(v),
  `a preset name matching ${String(PRESET_NAME_PATTERN)} (clients send it as \`model\`)`,
);
const backendUrl = field<string>(
  (v) => isString(v) && parseBackendUrl(v) !== undefined,
  'an http(s) base URL such as "http://127.0.0.1:30008" (no query, fragment or credentials)',
);

type RouterBound = (typeof ROUTER_BOUNDS)[keyof typeof ROUTER_BOUNDS];
const bounded = (b: RouterBound) =>
  field<number>((v) => typeof v === 'number' && Number.isSafeInteger(v) && v >= b.min && v <= b.max, `a whole number of ${b.unit} in ${b.min}..${b.max}`);

const onDemandShape = {
  serve: nonEmptyString,
  evict: bool.optional(),
  queue_size: bounded(ROUTER_BOUNDS.queueSize).optional(),
  wait_timeout_s: bounded(ROUTER_BOUNDS.waitTimeoutS).optional(),
  keepalive_s: bounded(ROUTER_BOUNDS.keepaliveS).optional(),
  abandon_after_s: bounded(ROUTER_BOUNDS.abandonAfterS).optional(),
};

const tierShape = {
  name: tierName,
  backend: backendUrl,
  served_model_name: nonEmptyString,
  model_identity: bool.optional(),
  on_demand: z.strictObject(onDemandShape).optional(),
};

const presetShape = {
  name: presetName,
  tier: nonEmptyString,
};

const topShape = {
  mapping_version: nonEmptyString,
  retry_after_s: bounded(ROUTER_BOUNDS.retryAfterS).optional(),
  tiers: tableArray('tiers').optional(),
  presets: tableArray('presets').optional(),
};

const TopSchema = z.strictObject(topShape);
const TierSchema = z.strictObject(tierShape);
const PresetSchema = z.strictObject(presetShape);

// ---------------------------------------------------------------------------------------------
// parseRouterConfig

/**
 * Parses and validates router config TOML. `file` only labels issues. Never throws for bad input:
 * every problem comes back as an issue, all of them collected.
 */
export function parseRouterConfig(text: string, file: string): RouterConfigResult {
  const issues = new Issues(file);
  const fail = (): RouterConfigResult => ({ ok: false, errors: issues.errors, warnings: issues.warnings });

  const table = parseTomlTable(text, issues);
  if (table === undefined) return fail();

  issues.nameEntries('tiers', 'tier', tableEntries(table, 'tiers'));
  issues.nameEntries('presets', 'preset', tableEntries(table, 'presets'));
  const top = TopSchema.safeParse(table, { reportInput: true });
  if (!top.success) issues.fromZod(top.error.issues, [], Object.keys(topShape));
  issues.check(documentRules, table, undefined);

  const rawTiers = tableEntries(table, 'tiers');
  const tierEntries = parseEach(rawTiers, TierSchema);
  const tierKeys = (rel: readonly unknown[]) => Object.keys(rel[0] === 'on_demand' ? onDemandShape : tierShape);
  for (const e of tierEntries) if (e.issues) issues.fromZod(e.issues, ['tiers', e.index], tierKeys);
  const tiers: RouterTier[] = parsed(tierEntries).map(({ spec: t }) => ({
    name: t.name,
    backend: t.backend.replace(/\/+$/, ''),
    servedModelName: t.served_model_name,
    modelIdentity: t.model_identity ?? false,
    ...(t.on_demand
      ? {
          onDemand: {
            serve: t.on_demand.serve,
            evict: t.on_demand.evict ?? false,
            queueSize: t.on_demand.queue_size ?? ROUTER_BOUNDS.queueSize.default,
            waitTimeoutS: t.on_demand.wait_timeout_s ?? ROUTER_BOUNDS.waitTimeoutS.default,
            keepaliveS: t.on_demand.keepalive_s ?? ROUTER_BOUNDS.keepaliveS.default,
            abandonAfterS: t.on_demand.abandon_after_s ?? ROUTER_BOUNDS.abandonAfterS.default,
          },
        }
      : {}),
  }));

  // Each preset's own fields, then its rules, before the next preset's.
  const presetEntries = parseEach(tableEntries(table, 'presets'), PresetSchema);
  const ctx = routerContext(rawTiers, parsed(presetEntries));
  rawTiers.forEach((spec, index) => issues.check(tierIdentityRules, { index, spec }, ctx));
  const presets: RouterPreset[] = [];
  for (const e of presetEntries) {
    if (e.issues) issues.fromZod(e.issues, ['presets', e.index], Object.keys(presetShape));
    else if (issues.check(presetRules, { index: e.index, spec: e.spec }, ctx)) presets.push(e.spec);
  }
  issues.check(configRules, { tiers, presets }, ctx);

  if (!top.success) return fail();
  const retryAfterS = top.data.retry_after_s ?? ROUTER_BOUNDS.retryAfterS.default;
  const config = { mappingVersion: top.data.mapping_version, retryAfterS, tiers, presets };
  if (issues.errors.length > 0) return { ok: false, errors: issues.errors, warnings: issues.warnings, partial: config };
  return { ok: true, config, warnings: issues.warnings };
}

// ---------------------------------------------------------------------------------------------
// checkRouterAgainstManifest

/**
 * Cross-checks a router config against the serve manifest, with the rules of router-rules.ts over
 * every serve that names a router tier. Errors block loading: an evictable serve's tier without
 * model_identity (it could never be readmitted after an eviction), a tier whose served_model_name
 * is not its serve's. Warnings: a serve's router_tier missing from the router config; any other
 * serve's tier without model_identity; a tier backend whose port is not its serve's port.
 * Router-side findings are labelled with routerFile, manifest-side ones with manifestFile.
 */
export function checkRouterAgainstManifest(config: RouterConfig, routerFile: string, manifest: Manifest, manifestFile: string): RouterCheckIssue[] {
  const ctx = { config, routerFile, manifestFile };
  return [
    ...manifest.serves
      .map((spec, index) => ({ index, spec }))
      .filter(({ spec }) => spec.routerTier !== undefined)
      .flatMap((serve) => crossRules.flatMap((rule) => rule(tierOfServe(config, serve), ctx))),
    ...onDemandServeChecks(config, ctx, manifest.serves),
  ];
}

/** The errors among cross-check findings. */
export function routerCheckErrors(issues: readonly RouterCheckIssue[]): RouterCheckIssue[] {
  return issues.filter((i) => i.severity === 'error');
}
