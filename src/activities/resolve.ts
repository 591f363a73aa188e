// A serve as the manifest on the worker's disk declares it now: read at each use, so an edited
// manifest takes effect without restarting the worker.
import { findServe, gpuFor, parseManifest } from '../domain/manifest';
import type { GpuSpec, ServeSpec } from '../domain/types';
import { formatIssue } from '../domain/types';
import { Failure } from '../shared/failures';
import { nonRetryable } from './failure';
import type { ManifestSource } from './ports';

export interface ResolvedServe {
  node: string;
  serve: ServeSpec;
  gpu: GpuSpec;
}

export async function loadServe(manifest: ManifestSource, name: string): Promise<ResolvedServe> {
  const { text, file } = await manifest.read();
  const result = parseManifest(text, file);
  if (!result.ok) {
    throw nonRetryable(Failure.ManifestInvalid, result.errors.map(formatIssue).join('\n'));
  }
  const serve = findServe(result.manifest, name);
  if (!serve) {
    const known = result.manifest.serves.map((s) => s.name).join(', ');
    throw nonRetryable(Failure.UnknownServe, `${file}: no serve named '${name}' (serves: ${known})`);
  }
  return { node: result.manifest.node, serve, gpu: gpuFor(result.manifest, serve) };
}
