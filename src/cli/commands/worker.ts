// gpures worker: this node's worker, until it is stopped.
import type { CommandContext, Rendered } from '../command';
import { CliError, EXIT } from '../exit-codes';
import { parseMetricsAddr } from '../../config/env';
import { loadManifest, manifestPath } from '../manifest';

export async function worker(input: { manifest?: string; gpus: 'auto' | 'on' | 'off'; metrics?: string }, ctx: CommandContext): Promise<Rendered> {
  const metrics = input.metrics === undefined ? undefined : parseMetricsAddr(input.metrics);
  if (typeof metrics === 'object' && 'problem' in metrics) throw new CliError(`--metrics: ${metrics.problem}`, EXIT.badInput);
  const file = manifestPath(input.manifest, ctx.env);
  const { manifest } = await loadManifest(ctx, file, undefined, 'always');
  // Loaded lazily: the worker pulls in webpack and the native bridge, which other commands never need.
  const { runWorker } = await import('../../worker/main');
  await runWorker({ manifestPath: file, node: manifest.node, gpus: input.gpus, ...(metrics !== undefined ? { metrics } : {}) });
  return { data: { stopped: true }, text: ['worker stopped'], exitCode: EXIT.ok };
}
