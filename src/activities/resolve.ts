// A serve as the manifest on the worker's disk declares it now: read at each use, so an edited
// manifest takes effect without restarting the worker.
import { parseManifest } from '../config/manifest';
import { findServe, gpuFor } from '../domain/manifest';
import { formatIssue } from '../domain/types';
import type { Manifest } from '../domain/types';
import { Failure } from '../shared/failures';
import { nonRetryable } from './failure';
import type { ManifestSource } from '../adapters/manifest/port';
import type { ResolvedServe } from '../shared/contracts';

/** The manifest, read and parsed once; `resolve` looks serves up in it. */
export async function loadManifest(source: ManifestSource): Promise<{ manifest: Manifest; file: string; resolve(name: string): ResolvedServe }> {
  const { text, file } = await source.read();
  const result = parseManifest(text, file);
  if (!result.ok) {
    throw nonRetryable(Failure.ManifestInvalid, result.errors.map(formatIssue).join('\n'));
  }
  const manifest = result.manifest;
  return {
    manifest,
    file,
    resolve(name) {
      const serve = findServe(manifest, name);
      if (!serve) {
        const known = manifest.serves.map((s) => s.name).join(', ');
        throw nonRetryable(Failure.UnknownServe, `${file}: no serve named '${name}' (serves: ${known})`);
      }
      return { node: manifest.node, serve, gpu: gpuFor(manifest, serve) };
    },
  };
}

export async function loadServe(source: ManifestSource, name: string): Promise<ResolvedServe> {
  return (await loadManifest(source)).resolve(name);
}
