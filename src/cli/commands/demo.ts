// gpures demo: the field report's T013 sequence on a simulated box, through the real workflows.
import { temporalConfig } from '../../client/temporal-config';
import type { CommandContext, Rendered } from '../command';
import { CliError, EXIT } from '../exit-codes';
import { temporalOrExit } from '../temporal';

export interface DemoOpts {
  keep?: boolean;
  ui: boolean;
  sleep?: boolean;
  manifest?: string;
  routerConfig?: string;
  temporalAddress?: string;
}

export async function demo(input: DemoOpts, _ctx: CommandContext): Promise<Rendered> {
  // Loaded lazily: the demo brings its own dev server, worker and router.
  const { DemoInputError, runDemo, quietRuntime } = await import('../../demo/demo');
  quietRuntime();
  const result = await temporalOrExit(
    () =>
      runDemo({
        // Inside: the environment's Temporal configuration is read for TLS and namespace, and a bad one is one line too.
        temporal: input.temporalAddress ? existingServer(input.temporalAddress) : undefined,
        keep: input.keep,
        ui: input.ui,
        sleep: input.sleep,
        manifestPath: input.manifest,
        routerConfigPath: input.routerConfig,
      }).catch((err: unknown) => {
        throw err instanceof DemoInputError ? new CliError(err.message, EXIT.badInput) : err;
      }),
    'check --temporal-address',
  );
  return { data: result, text: [], exitCode: result.ok ? EXIT.ok : EXIT.failed };
}

/** HOST:PORT, with a port: what a gRPC address is; anything else would fail later and less clearly. */
const ADDRESS = /^(?:\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/;

/** The address given; TLS, API key and namespace as Temporal's environment configuration says. */
function existingServer(address: string) {
  const port = ADDRESS.exec(address)?.[1];
  if (!port || Number(port) < 1 || Number(port) > 65535) {
    throw new CliError(`--temporal-address: must be HOST:PORT, e.g. 127.0.0.1:7233 (got ${JSON.stringify(address)})`, EXIT.badInput);
  }
  const config = temporalConfig();
  return { connectionOptions: { ...config.connectionOptions, address }, namespace: config.namespace ?? 'default' };
}
