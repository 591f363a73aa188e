// The CLI's own environment, read once when the program starts. (The worker and the router read
// theirs in src/config/; Temporal's connection settings are envconfig's, in src/client/connection.ts.)

export interface CliEnv {
  /** GPURES_MANIFEST: the manifest when -m is not given. */
  manifest: string | undefined;
  /** GPURES_ROUTER_CONFIG: the router's live config, checked against the manifest on every load. */
  routerConfig: string | undefined;
  /** GPURES_NVIDIA_SMI: the binary `gpures ledger` reads the devices with. */
  nvidiaSmi: string;
  /** GPURES_API_TOKEN: the bearer token the acquisition API requires ('' when unset, which it refuses). */
  apiToken: string;
}

export function readCliEnv(env: NodeJS.ProcessEnv = process.env): CliEnv {
  return {
    manifest: env['GPURES_MANIFEST'],
    routerConfig: env['GPURES_ROUTER_CONFIG'],
    nvidiaSmi: env['GPURES_NVIDIA_SMI'] ?? 'nvidia-smi',
    apiToken: env['GPURES_API_TOKEN'] ?? '',
  };
}
