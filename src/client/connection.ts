// The Temporal connection follows Temporal's own environment configuration (TEMPORAL_ADDRESS,
// TEMPORAL_NAMESPACE, TEMPORAL_API_KEY, TLS settings, TEMPORAL_PROFILE and the config file), so
// a user's existing `temporal` CLI setup works unchanged. Default: the local dev server.
import { Client, Connection } from '@temporalio/client';
import { loadClientConnectConfig } from '@temporalio/envconfig';
import type { ClientConnectConfig } from '@temporalio/envconfig';

export function temporalConfig(): ClientConnectConfig {
  const config = loadClientConnectConfig();
  config.connectionOptions.address ??= '127.0.0.1:7233';
  return config;
}

export async function connectClient(): Promise<{ client: Client; connection: Connection; address: string; namespace: string }> {
  const config = temporalConfig();
  const address = config.connectionOptions.address ?? '127.0.0.1:7233';
  const namespace = config.namespace ?? 'default';
  const connection = await Connection.connect({ ...config.connectionOptions, connectTimeout: '5s' });
  return { client: new Client({ connection, namespace }), connection, address, namespace };
}
