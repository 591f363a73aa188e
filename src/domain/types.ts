// The manifest model every layer shares: the CLI validates it, the worker resolves serves from
// it, workflows carry pieces of it in their inputs and results (so it must stay JSON-safe).

export type ServeClass = 'resident' | 'evictable' | 'on-demand';
export const SERVE_CLASSES: readonly ServeClass[] = ['resident', 'evictable', 'on-demand'];

/**
 * What a serve answers, and so how its bring-up knows it is ready:
 * - openai: a vLLM (OpenAI-compatible) server: the command is built from model and
 *   served_model_name, ready when health_path answers 200 and /v1/models reports exactly
 *   served_model_name. The only kind a router tier can front (its readmit checks that identity).
 * - http: any HTTP service (ComfyUI, say) run with the image's own command or `args`: ready when
 *   health_path answers 200; no model identity.
 * - none: a job with no HTTP at all: ready once its container has stayed running for a moment.
 */
export type ServeApi = 'openai' | 'http' | 'none';
export const SERVE_APIS: readonly ServeApi[] = ['openai', 'http', 'none'];

export type EvictionMode = 'stop' | 'sleep';
export const EVICTION_MODES: readonly EvictionMode[] = ['stop', 'sleep'];

/**
 * How an evictable serve gives its GPU back: stopped (its container ends; a restore is a cold
 * start), or put to sleep by vLLM's sleep mode (its process stays; a restore is a wake):
 * - level 1 offloads the weights to host RAM and discards the KV cache: the fastest wake, but
 *   it takes host RAM about the size of the weights (hostRamMib);
 * - level 2 discards the weights too: they are reloaded from disk at the wake.
 * Either way the process keeps some MiB on the GPU (residualMib, the CUDA context and buffers),
 * which stay committed in the ledger while it sleeps.
 */
export interface SleepEviction {
  level: 1 | 2;
  /** What a sleeping serve still holds on its GPU, as declared; the rest is handed to the acquirer. */
  residualMib: number;
  /** Level 1: the host RAM its offloaded weights take. */
  hostRamMib?: number;
}

export interface GpuSpec {
  role: string;
  uuid: string;
  capacityMib: number;
  reserveMib: number;
}

export interface ServeSpec {
  name: string;
  gpuRole: string;
  class: ServeClass;
  /** Absent in histories recorded before the field existed: openai. */
  api?: ServeApi;
  vramMib: number;
  image: string;
  model: string;
  revision?: string;
  servedModelName: string;
  /** Host port the serve is published on. */
  port: number;
  /** Port the server listens on inside the container. */
  containerPort: number;
  /** Host address the port is bound to; loopback unless the manifest explicitly allows more. */
  bind: string;
  routerTier?: string;
  /** openai: vLLM's arguments after the built ones; http and none: the image's CMD (an ENTRYPOINT gets them as arguments; empty: the image's own). */
  args: string[];
  env: Record<string, string>;
  healthPath: string;
  startTimeoutS: number;
  stopTimeoutS: number;
  /**
   * How long it stays safe from eviction once an acquisition or a restore brought it up: its own
   * min_residency_s, else the node's. Absent in histories recorded before the setting existed.
   */
  minResidencyS?: number;
  /**
   * An idle lease's time to live: a router-triggered acquisition of the serve gives its VRAM
   * back once its tier has had no routed request for this long (only with a router tier).
   */
  idleTtlS?: number;
  /** Evicted by sleeping rather than stopping (an evictable openai serve only); absent: stopped. */
  sleep?: SleepEviction;
}

export interface Manifest {
  node: string;
  /** [node] min_residency_s, or its default: what a serve without its own setting gets. */
  minResidencyS: number;
  /** [node] host_ram_budget_mib: what level-1 sleeps may take of host RAM together; absent: not bounded by the manifest. */
  hostRamBudgetMib?: number;
  gpus: GpuSpec[];
  serves: ServeSpec[];
}

/** One problem found in a manifest, printed as `file: path: message`. */
export interface ManifestIssue {
  file: string;
  /** Dotted path of the offending field, e.g. `serves[3].vram_mib`; empty for the whole file. */
  path: string;
  /** The entry the path lies in, by its name, when it has one: `serve 'vision'` for `serves[7]…`. */
  subject?: string;
  message: string;
}

export type ManifestResult = { ok: true; manifest: Manifest; warnings: ManifestIssue[] } | { ok: false; errors: ManifestIssue[]; warnings: ManifestIssue[] };

export function formatIssue(issue: ManifestIssue): string {
  // A message that opens with its subject ("tier 'x' has no preset") needs it only once.
  const where = issue.subject && !issue.message.startsWith(issue.subject) ? `${issue.subject} (${issue.path})` : issue.path;
  return where ? `${issue.file}: ${where}: ${issue.message}` : `${issue.file}: ${issue.message}`;
}
