// gpures demo: the field report's T013 sequence on a simulated box, through the real workflows.
import type { CommandContext, Rendered } from '../command';
import { EXIT } from '../exit-codes';

export async function demo(input: { keep?: boolean; ui: boolean; manifest?: string; routerConfig?: string }, _ctx: CommandContext): Promise<Rendered> {
  // Loaded lazily: the demo brings its own dev server, worker and router.
  const { runDemo, quietRuntime } = await import('../../demo/demo');
  quietRuntime();
  const result = await runDemo({ keep: input.keep, ui: input.ui, manifestPath: input.manifest, routerConfigPath: input.routerConfig });
  return { data: result, text: [], exitCode: result.ok ? EXIT.ok : EXIT.failed };
}
