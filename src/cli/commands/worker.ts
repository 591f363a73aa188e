// gpures worker: this node's worker, until it is stopped.
import type { CommandContext, Rendered } from '../command';
import { EXIT } from '../exit-codes';
import { loadManifest, manifestPath } from '../manifest';

export async function worker(input: { manifest?: string; gpus: 'auto' | 'on' | 'off' }, ctx: CommandContext): Promise<Rendered> {
  const file = manifestPath(input.manifest, ctx.env);
  const { manifest } = await loadManifest(ctx, file);
  // Loaded lazily: the worker pulls in webpack and the native bridge, which other commands never need.
  const { runWorker } = await import('../../worker/main');
  await runWorker({ manifestPath: file, node: manifest.node, gpus: input.gpus });
  return { data: { stopped: true }, text: ['worker stopped'], exitCode: EXIT.ok };
}
