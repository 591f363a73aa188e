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
  /** Set when a request may bring the tier's serve up (`[tiers.on_demand]`). */
  onDemand?: OnDemandPolicy;
}

/**
 * A tier whose serve the router acquires when a request finds it down: the request waits in a
 * bounded FIFO queue until the acquisition's guarded readmit lets the tier back, then goes on.
 */
export interface OnDemandPolicy {
  /** The manifest serve that backs the tier (its router_tier is this tier). */
  serve: string;
  /** Whether the acquisition may evict evictable serves to make room. */
  evict: boolean;
  /** Requests held while the serve comes up; the next one gets 503 + Retry-After. */
  queueSize: number;
  /** How long a held request waits before 503 + Retry-After. */
  waitTimeoutS: number;
  /** Seconds between SSE comment lines sent to a held streaming request. */
  keepaliveS: number;
  /**
   * How long the router's acquisition may run with nobody held for it before the router asks the
   * API to abandon it (the run decides: only before any victim is stopped); 0: never.
   */
  abandonAfterS: number;
}

export interface RouterPreset {
  /** The `model` clients send. */
  name: string;
  tier: string;
}

export interface RouterConfig {
  mappingVersion: string;
  /** Retry-After of a 503 that has no better figure (a quiesced tier, a full queue, a timed-out wait). */
  retryAfterS: number;
  tiers: RouterTier[];
  presets: RouterPreset[];
}

export type RouterConfigResult =
  | { ok: true; config: RouterConfig; warnings: ManifestIssue[] }
  /** `partial`: the tiers and presets that parsed, when the document itself did, so the checks against the manifest still run and every problem is told at once. */
  | { ok: false; errors: ManifestIssue[]; warnings: ManifestIssue[]; partial?: RouterConfig };

/** A cross-check finding: a ManifestIssue that also says whether it blocks loading. */
export interface RouterCheckIssue extends ManifestIssue {
  severity: 'error' | 'warning';
}

/** Tier names appear in admin URLs (`/admin/tiers/:tier`), so they stay URL-path safe. */
export const TIER_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;
/** Preset names are OpenAI model ids clients send; `/` and `:` are allowed (`anvil/ocr`). */
export const PRESET_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._:/-]*$/;

/**
 * Bounds and defaults of the router's numbers (docs/router-admin-api.md says why each):
 * - retry_after_s 10 (1..60): openai-node retries a 503 twice by default, sleeping Retry-After
 *   when given (else 0.5..8 s of its own backoff; its older releases ignored a Retry-After of 60 s
 *   or more), so 10 s gives a client's own retries 20 s for an eviction to finish, where 503s
 *   without it gave up within 1.2 s.
 * - queue_size 512 (1..4096): Ollama's OLLAMA_MAX_QUEUE, what users of local boxes know; each held
 *   request keeps its body, so the bound keeps the memory a stuck acquisition can take in check.
 * - wait_timeout_s 300 (1..3600): OpenAI clients give up after 600 s by default; 300 s leaves the
 *   other half for the answer itself, and a client with a longer timeout may raise it.
 * - keepalive_s 15 (1..60): below the 60 s idle timeouts of common proxies (nginx, ELB).
 * - abandon_after_s 5 (0..600, 0 never): a client that disconnected and retries (openai-node's
 *   own retries, a user pressing again) is back within a few seconds and finds the acquisition
 *   still under way; past that, nobody is coming, and every second of drain spent for nobody
 *   brings the victim's stop (its prompt cache lost) closer. 600: a tier's longest sensible wait.
 */
export const ROUTER_BOUNDS = {
  retryAfterS: { min: 1, max: 60, default: 10, unit: 'seconds' },
  queueSize: { min: 1, max: 4096, default: 512, unit: 'requests' },
  waitTimeoutS: { min: 1, max: 3600, default: 300, unit: 'seconds' },
  keepaliveS: { min: 1, max: 60, default: 15, unit: 'seconds' },
  abandonAfterS: { min: 0, max: 600, default: 5, unit: 'seconds' },
} as const;

/** What OpenAI clients wait for an answer by default (openai-node, openai-python: 10 minutes). */
export const OPENAI_CLIENT_TIMEOUT_S = 600;

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
