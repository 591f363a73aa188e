// Router config model: TOML text -> validated RouterConfig, and the cross-check of a router config
// against the serve manifest (the load-time rule of seed T013, finding 2).
//
// PURE: no node built-ins, no I/O (workflow code imports this module). The caller reads the files
// and hands over their text. Problems come back as ManifestIssues (`file`, dotted `path`,
// `message`), printed with formatIssue, exactly like the manifest's.
//
// Shape:
//   mapping_version = "2026-07-13.primary-node-t013-vision"
//   [[tiers]]                       # a backend the router can route to, quiesce and readmit
//   name = "vision-local"
//   backend = "http://127.0.0.1:30008"
//   served_model_name = "qwen3-vl-4b-instruct"
//   model_identity = true           # default false
//   [[presets]]                     # what clients send as `model`
//   name = "vision"
//   tier = "vision-local"

import { z } from 'zod';
import type { PathSegment } from './config-issues';
import { bool, field, formatPath, Issues, isString, nonEmptyString, parseTomlTable, tableArray, tableEntries } from './config-issues';
import type { Manifest, ManifestIssue } from './types';
import { formatIssue } from './types';

export interface RouterTier {
  name: string;
  /** Base URL of the serve, without a trailing slash: `http://127.0.0.1:30008`. */
  backend: string;
  /** What the router sends as `model`, and the exact `/v1/models` id a guarded readmit requires. */
  servedModelName: string;
  /** Whether a guarded readmit may verify this tier's identity; without it readmit refuses. */
  modelIdentity: boolean;
}

export interface RouterPreset {
  /** The `model` clients send. */
  name: string;
  tier: string;
}

export interface RouterConfig {
  mappingVersion: string;
  tiers: RouterTier[];
  presets: RouterPreset[];
}

export type RouterConfigResult =
  | { ok: true; config: RouterConfig; warnings: ManifestIssue[] }
  | { ok: false; errors: ManifestIssue[]; warnings: ManifestIssue[] };

/** A cross-check finding: a ManifestIssue that also says whether it blocks loading. */
export interface RouterCheckIssue extends ManifestIssue {
  severity: 'error' | 'warning';
}

/** Tier names appear in admin URLs (`/admin/tiers/:tier`), so they stay URL-path safe. */
export const TIER_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;
/** Preset names are OpenAI model ids clients send; `/` and `:` are allowed (`anvil/ocr`). */
export const PRESET_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:/-]*$/;

// ---------------------------------------------------------------------------------------------
// Lookups

export function findTier(config: RouterConfig, name: string): RouterTier | undefined {
  return config.tiers.find((t) => t.name === name);
}

/** The tier a preset routes to, or undefined for an unknown preset. */
export function tierForPreset(config: RouterConfig, preset: string): RouterTier | undefined {
  const p = config.presets.find((x) => x.name === preset);
  return p ? findTier(config, p.tier) : undefined;
}

/** The router config of an ok result; throws an Error listing the formatted errors otherwise. */
export function routerConfigOrThrow(result: RouterConfigResult): RouterConfig {
  if (result.ok) return result.config;
  throw new Error(result.errors.map(formatIssue).join('\n'));
}

// ---------------------------------------------------------------------------------------------
// Backend URLs (parsed by hand: the workflow sandbox is not promised a WHATWG URL)

const BACKEND_URL = /^(https?):\/\/(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?)(?::(\d{1,5}))?(\/[^\s?#]*)?$/;

export interface BackendUrl {
  scheme: 'http' | 'https';
  host: string;
  /** The explicit port, or the scheme's default (80/443). */
  port: number;
  /** Path prefix without a trailing slash ('' for none). */
  path: string;
}

/** Parses an http(s) base URL; undefined when it is not one (or carries a query, fragment or credentials). */
export function parseBackendUrl(text: string): BackendUrl | undefined {
  const m = BACKEND_URL.exec(text);
  if (!m) return undefined;
  const scheme = m[1] === 'https' ? 'https' : 'http';
  const port = m[3] === undefined ? (scheme === 'https' ? 443 : 80) : Number(m[3]);
  if (!(port >= 1 && port <= 65535)) return undefined;
  return { scheme, host: m[2] ?? '', port, path: (m[4] ?? '').replace(/\/+$/, '') };
}

function normalizeBackend(text: string): string {
  return text.replace(/\/+$/, '');
}

// ---------------------------------------------------------------------------------------------
// Field schemas (the shared ones, and the "must be …" message style, are in config-issues.ts)

const tierName = field<string>(
  (v) => isString(v) && TIER_NAME_PATTERN.test(v),
  `a tier name matching ${String(TIER_NAME_PATTERN)} (it appears in admin URLs)`,
);
const presetName = field<string>(
  (v) => isString(v) && PRESET_NAME_PATTERN.test(v),
  `a preset name matching ${String(PRESET_NAME_PATTERN)} (clients send it as \`model\`)`,
);
const backendUrl = field<string>(
  (v) => isString(v) && parseBackendUrl(v) !== undefined,
  'an http(s) base URL such as "http://127.0.0.1:30008" (no query, fragment or credentials)',
);

const tierShape = {
  name: tierName,
  backend: backendUrl,
  served_model_name: nonEmptyString,
  model_identity: bool.optional(),
};

const presetShape = {
  name: presetName,
  tier: nonEmptyString,
};

const topShape = {
  mapping_version: nonEmptyString,
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

  const top = TopSchema.safeParse(table, { reportInput: true });
  if (!top.success) issues.fromZod(top.error.issues, [], Object.keys(topShape));
  const rawTiers = tableEntries(table, 'tiers');
  const rawPresets = tableEntries(table, 'presets');
  if (table.tiers === undefined || (Array.isArray(table.tiers) && table.tiers.length === 0)) {
    issues.error('tiers', 'at least one tier is required: add a [[tiers]] table with name, backend and served_model_name');
  }

  // Tiers: own fields, then duplicates (over every entry with a usable name, valid or not).
  const tiers: RouterTier[] = [];
  rawTiers.forEach((raw, index) => {
    const r = TierSchema.safeParse(raw, { reportInput: true });
    if (!r.success) {
      issues.fromZod(r.error.issues, ['tiers', index], Object.keys(tierShape));
      return;
    }
    tiers.push({
      name: r.data.name,
      backend: normalizeBackend(r.data.backend),
      servedModelName: r.data.served_model_name,
      modelIdentity: r.data.model_identity ?? false,
    });
  });
  const tierFirst = new Map<string, number>();
  rawTiers.forEach((raw, index) => {
    const name = typeof raw === 'object' && raw !== null ? (raw as Record<string, unknown>).name : undefined;
    if (!isString(name) || name.trim() === '') return;
    const first = tierFirst.get(name);
    if (first !== undefined) issues.error(['tiers', index, 'name'], `duplicate tier name '${name}' (first declared at tiers[${first}])`);
    else tierFirst.set(name, index);
  });

  // Presets: own fields, duplicates, and the tier they name.
  const presets: RouterPreset[] = [];
  const presetFirst = new Map<string, number>();
  const knownTiers = [...tierFirst.keys()];
  const usedTiers = new Set<string>();
  rawPresets.forEach((raw, index) => {
    const r = PresetSchema.safeParse(raw, { reportInput: true });
    if (!r.success) {
      issues.fromZod(r.error.issues, ['presets', index], Object.keys(presetShape));
      return;
    }
    const { name, tier } = r.data;
    const first = presetFirst.get(name);
    if (first !== undefined) {
      issues.error(['presets', index, 'name'], `duplicate preset name '${name}' (first declared at presets[${first}])`);
      return;
    }
    presetFirst.set(name, index);
    if (!tierFirst.has(tier)) {
      const known = knownTiers.length ? knownTiers.map((t) => `'${t}'`).join(', ') : 'none declared';
      issues.error(['presets', index, 'tier'], `preset '${name}' names unknown tier '${tier}' (known tiers: ${known})`);
      return;
    }
    usedTiers.add(tier);
    presets.push({ name, tier });
  });

  tiers.forEach((t) => {
    if (!usedTiers.has(t.name) && presets.length > 0) {
      issues.warn(['tiers', tierFirst.get(t.name) ?? 0], `tier '${t.name}' has no preset: clients cannot reach it (admin endpoints still can)`);
    }
  });

  if (issues.errors.length > 0 || !top.success) return fail();
  return { ok: true, config: { mappingVersion: top.data.mapping_version, tiers, presets }, warnings: issues.warnings };
}

// ---------------------------------------------------------------------------------------------
// checkRouterAgainstManifest

/**
 * Cross-checks a router config against the serve manifest. Errors (severity 'error'):
 *  - a tier that is the router_tier of an evictable serve must set model_identity = true: after an
 *    eviction the tier is quiesced, and the guarded readmit refuses with identity_not_configured
 *    without it, so the tier could never re-enter rotation (seed T013, finding 2);
 *  - a tier's served_model_name must equal its serve's served_model_name (the router sends it as
 *    `model`, and readmit requires it in /v1/models).
 * Warnings: a serve's router_tier missing from the router config; any other serve's tier without
 * model_identity (`serves down` quiesces it, and the next bring-up readmits through the guard); a tier backend whose port is not its serve's port.
 * Router-side findings are labelled with routerFile, manifest-side ones with manifestFile.
 */
export function checkRouterAgainstManifest(
  config: RouterConfig,
  routerFile: string,
  manifest: Manifest,
  manifestFile: string,
): RouterCheckIssue[] {
  const out: RouterCheckIssue[] = [];
  const push = (severity: RouterCheckIssue['severity'], file: string, path: PathSegment[], message: string) =>
    out.push({ severity, file, path: formatPath(path), message });

  manifest.serves.forEach((serve, serveIndex) => {
    if (serve.routerTier === undefined) return;
    const tierIndex = config.tiers.findIndex((t) => t.name === serve.routerTier);
    const tier = config.tiers[tierIndex];
    if (!tier) {
      push(
        'warning',
        manifestFile,
        ['serves', serveIndex, 'router_tier'],
        `serve '${serve.name}' declares router_tier '${serve.routerTier}', which is not a tier in ${routerFile}: the router cannot route to it, quiesce it or readmit it` +
          (serve.class === 'evictable' ? ' (an eviction of this serve would fail at the quiesce step)' : ''),
      );
      return;
    }
    if (serve.class === 'evictable' && !tier.modelIdentity) {
      push(
        'error',
        routerFile,
        ['tiers', tierIndex, 'model_identity'],
        `tier '${tier.name}' is backed by evictable serve '${serve.name}' (${manifestFile}) and must set model_identity = true, or its guarded readmit will refuse with identity_not_configured and the tier can never re-enter rotation after an eviction`,
      );
    } else if (!tier.modelIdentity) {
      // `serves down` quiesces the tier too, and the next `serves up` readmits it through the guard.
      push(
        'warning',
        routerFile,
        ['tiers', tierIndex, 'model_identity'],
        `tier '${tier.name}' is backed by ${serve.class} serve '${serve.name}' (${manifestFile}) without model_identity = true: after \`serves down ${serve.name}\` the tier stays quiesced and the guarded readmit of the next \`serves up\` will refuse with identity_not_configured`,
      );
    }
    if (tier.servedModelName !== serve.servedModelName) {
      push(
        'error',
        routerFile,
        ['tiers', tierIndex, 'served_model_name'],
        `tier '${tier.name}' sends model '${tier.servedModelName}', but its serve '${serve.name}' (${manifestFile}) serves '${serve.servedModelName}': routed requests would be rejected by the backend and a guarded readmit would refuse with identity_mismatch`,
      );
    }
    const url = parseBackendUrl(tier.backend);
    if (url && url.port !== serve.port) {
      push(
        'warning',
        routerFile,
        ['tiers', tierIndex, 'backend'],
        `tier '${tier.name}' backend ${tier.backend} uses port ${url.port}, but its serve '${serve.name}' (${manifestFile}) is published on port ${serve.port}`,
      );
    }
  });
  return out;
}

/** The errors among cross-check findings. */
export function routerCheckErrors(issues: readonly RouterCheckIssue[]): RouterCheckIssue[] {
  return issues.filter((i) => i.severity === 'error');
}
