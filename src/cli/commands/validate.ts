// gpures validate: a manifest checked offline, and a router config against it.
import { resolve } from 'node:path';
import type { CommandContext, Rendered } from '../command';
import { CliError, EXIT } from '../exit-codes';
import { loadManifest, manifestPath } from '../manifest';

export async function validate(input: { file?: string; manifest?: string; router?: string }, ctx: CommandContext): Promise<Rendered> {
  if (input.file !== undefined && input.manifest !== undefined && resolve(input.file) !== resolve(input.manifest)) {
    throw new CliError(`give the manifest once: as the argument (${input.file}) or as --manifest (${input.manifest}), not both`, EXIT.badInput);
  }
  const path = manifestPath(input.file ?? input.manifest, ctx.env);
  const { manifest, warnings } = await loadManifest(ctx, path, input.router ?? ctx.env.routerConfig, 'always');
  return {
    data: { file: path, ok: true, node: manifest.node, gpus: manifest.gpus.length, serves: manifest.serves.length, warnings },
    text: [`${path}: ok (node ${manifest.node}, ${manifest.gpus.length} gpu, ${manifest.serves.length} serves)`],
    exitCode: EXIT.ok,
  };
}
