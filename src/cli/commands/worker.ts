// gpures worker: this node's worker, until it is stopped.
import type { CommandContext, Rendered } from '../command';
import { CliError, EXIT } from '../exit-codes';
import { EnvError, parseMetricsAddr } from '../../config/env';
import { loadManifest, manifestPath } from '../manifest';
import { temporalOrExit } from '../temporal';

export async function worker(
  input: { manifest?: string; gpus: 'auto' | 'on' | 'off'; metrics?: string; allowSecondWorker?: boolean },
  ctx: CommandContext,
): Promise<Rendered> {
  const metrics = input.metrics === undefined ? undefined : parseMetricsAddr(input.metrics);
  if (typeof metrics === 'object' && 'problem' in metrics) throw new CliError(`--metrics: ${metrics.problem}`, EXIT.badInput);
  const file = manifestPath(input.manifest, ctx.env);
  const { manifest } = await loadManifest(ctx, file, undefined, 'always');
  // Loaded lazily: the worker pulls in webpack and the native bridge, which other commands never need.
  const [{ DockerUnreachable, runWorker, WorkerStopCut }, { SecondWorker }] = await Promise.all([
    import('../../worker/main'),
    import('../../worker/second-worker'),
  ]);
  await temporalOrExit(() =>
    runWorker({
      manifestPath: file,
      node: manifest.node,
      gpus: input.gpus,
      declared: manifest,
      allowSecondWorker: input.allowSecondWorker === true,
      ...(metrics !== undefined ? { metrics } : {}),
    }).catch((err: unknown) => {
      // The worker's own variables (GPURES_ROUTER_URL, GPURES_NVIDIA_SMI_LOOP_MS, …): one line naming the variable, as any bad input.
      if (err instanceof EnvError) throw new CliError(err.message, EXIT.badInput);
      // A dockerd that is down or restarting is waited for and retried, as an unreachable Temporal is; nothing to correct in the input.
      if (err instanceof DockerUnreachable) throw new CliError(err.message, EXIT.unreachable);
      // The node is busy with another worker, as a serve is busy with another operation: nothing was started.
      if (err instanceof SecondWorker) throw new CliError(err.message, EXIT.denied);
      // Stopped past its bound, naming what it left: exit 1, so a supervisor sees the stop was not clean.
      if (err instanceof WorkerStopCut) throw new CliError(err.message, EXIT.failed);
      throw err;
    }),
  );
  return { data: { stopped: true }, text: ['worker stopped'], exitCode: EXIT.ok };
}
