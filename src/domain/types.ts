// The manifest model every layer shares: the CLI validates it, the worker resolves serves from
// it, workflows carry pieces of it in their inputs and results (so it must stay JSON-safe).

export type ServeClass = 'resident' | 'evictable' | 'on-demand';
export const SERVE_CLASSES: readonly ServeClass[] = ['resident', 'evictable', 'on-demand'];

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
  args: string[];
  env: Record<string, string>;
  healthPath: string;
  startTimeoutS: number;
  stopTimeoutS: number;
}

export interface Manifest {
  node: string;
  gpus: GpuSpec[];
  serves: ServeSpec[];
}

/** One problem found in a manifest, printed as `file: path: message`. */
export interface ManifestIssue {
  file: string;
  /** Dotted path of the offending field, e.g. `serves[3].vram_mib`; empty for the whole file. */
  path: string;
  message: string;
}

export type ManifestResult =
  | { ok: true; manifest: Manifest; warnings: ManifestIssue[] }
  | { ok: false; errors: ManifestIssue[]; warnings: ManifestIssue[] };

export function formatIssue(issue: ManifestIssue): string {
  return issue.path ? `${issue.file}: ${issue.path}: ${issue.message}` : `${issue.file}: ${issue.message}`;
}
