// The router config model: tiers (backends the router can route to, quiesce and readmit) and
// presets (what clients send as `model`), its lookups and the backend URLs. Loading it from TOML is
// router-config.ts.

import type { ManifestIssue } from '../domain/types';

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
  { ok: true; config: RouterConfig; warnings: ManifestIssue[] } | { ok: false; errors: ManifestIssue[]; warnings: ManifestIssue[] };

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

// ---------------------------------------------------------------------------------------------
// Backend URLs (parsed by hand, with no WHATWG URL, so the parse is the same wherever it runs)

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
