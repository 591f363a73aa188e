// The files temporal-server runs from: its static config (the shape of the Go module's
// config/development-postgres12.yaml, on our loopback ports, with the `temporal` role's password,
// hence 0600) and a dynamic-config file with the settings the dev server gets
// (config/toolchain.json devServer.dynamicConfig).
import toolchain from '../../config/toolchain.json';
import { PROD_TEMPORAL } from './toolchain';

/** Every port the cluster listens on, all on PROD_TEMPORAL.ip. */
export interface ProdTemporalPorts {
  frontend: number;
  frontendHttp: number;
  frontendMembership: number;
  history: number;
  historyMembership: number;
  matching: number;
  matchingMembership: number;
  worker: number;
  workerMembership: number;
  postgres: number;
}

export const SERVER_PORT_NAMES = [
  'frontend',
  'frontendHttp',
  'frontendMembership',
  'history',
  'historyMembership',
  'matching',
  'matchingMembership',
  'worker',
  'workerMembership',
] as const;

/** The command's layout: the frontend on `base`, the other eight server ports right after it. */
export function portsFrom(base: number, postgres: number): ProdTemporalPorts {
  const ports = { postgres } as ProdTemporalPorts;
  SERVER_PORT_NAMES.forEach((name, i) => (ports[name] = base + i));
  checkPorts(ports);
  return ports;
}

/** The highest port a membership port may be: cluster_membership keeps it in a PostgreSQL smallint. */
export const MAX_MEMBERSHIP_PORT = 32767;

/** The highest base port for portsFrom: its last membership port must stay within MAX_MEMBERSHIP_PORT. */
export const MAX_BASE_PORT = MAX_MEMBERSHIP_PORT - Math.max(...SERVER_PORT_NAMES.map((n, i) => (n.endsWith('Membership') ? i : 0)));

export function checkPorts(ports: ProdTemporalPorts): void {
  for (const name of [...SERVER_PORT_NAMES, 'postgres'] as const) {
    const p = ports[name];
    const max = name.endsWith('Membership') ? MAX_MEMBERSHIP_PORT : 65535;
    if (!Number.isInteger(p) || p < 1024 || p > max) throw new Error(`${name} port ${p}: not in 1024..${max}`);
  }
}

/** The env name temporal-server is started with (`--env`): it reads config/<env>.yaml. */
export const SERVER_ENV = 'production';

const q = (s: string) => JSON.stringify(s); // a JSON string is a YAML double-quoted scalar

function datastore(database: string, port: number, password: string, maxConns: number): string[] {
  return [
    `      sql:`,
    `        pluginName: ${q(PROD_TEMPORAL.sqlPlugin)}`,
    `        databaseName: ${q(database)}`,
    `        connectAddr: ${q(`${PROD_TEMPORAL.ip}:${port}`)}`,
    `        connectProtocol: "tcp"`,
    `        user: "temporal"`,
    `        password: ${q(password)}`,
    `        maxConns: ${maxConns}`,
    `        maxIdleConns: ${maxConns}`,
    `        maxConnLifetime: "1h"`,
  ];
}

function service(name: string, grpc: number, membership: number, http?: number): string[] {
  return [
    `  ${name}:`,
    `    rpc:`,
    `      grpcPort: ${grpc}`,
    `      membershipPort: ${membership}`,
    `      bindOnLocalHost: true`,
    ...(http ? [`      httpPort: ${http}`] : []),
  ];
}

/**
 * development-postgres12.yaml without archival, pprof and the Prometheus listener (nothing here
 * scrapes them, and each would be one more port open), every service bound to loopback.
 */
export function serverConfigYaml(ports: ProdTemporalPorts, password: string, dynamicConfigPath: string): string {
  return [
    `# Written by gpures (src/dev/prod-temporal-config.ts) at each start; holds a password: mode 0600.`,
    `log:`,
    `  stdout: true`,
    `  level: "warn"`,
    `persistence:`,
    `  defaultStore: postgres-default`,
    `  visibilityStore: postgres-visibility`,
    `  numHistoryShards: ${PROD_TEMPORAL.numHistoryShards}`,
    `  datastores:`,
    `    postgres-default:`,
    ...datastore('temporal', ports.postgres, password, 20),
    `    postgres-visibility:`,
    ...datastore('temporal_visibility', ports.postgres, password, 2),
    `global:`,
    `  membership:`,
    `    maxJoinDuration: 30s`,
    `    broadcastAddress: ${q(PROD_TEMPORAL.ip)}`,
    `services:`,
    ...service('frontend', ports.frontend, ports.frontendMembership, ports.frontendHttp),
    ...service('matching', ports.matching, ports.matchingMembership),
    ...service('history', ports.history, ports.historyMembership),
    ...service('worker', ports.worker, ports.workerMembership),
    `clusterMetadata:`,
    `  enableGlobalNamespace: false`,
    `  failoverVersionIncrement: 10`,
    `  masterClusterName: "active"`,
    `  currentClusterName: "active"`,
    `  clusterInformation:`,
    `    active:`,
    `      enabled: true`,
    `      initialFailoverVersion: 1`,
    `      rpcName: "frontend"`,
    `      rpcAddress: ${q(`${PROD_TEMPORAL.ip}:${ports.frontend}`)}`,
    `dcRedirectionPolicy:`,
    `  policy: "noop"`,
    `dynamicConfigClient:`,
    `  filepath: ${q(dynamicConfigPath)}`,
    `  pollInterval: "10s"`,
    '',
  ].join('\n');
}

/** A value as the dynamic-config file types it: booleans and numbers bare, anything else quoted. */
function yamlValue(value: string): string {
  return /^(true|false|-?[0-9]+(\.[0-9]+)?)$/.test(value) ? value : q(value);
}

export function dynamicConfigYaml(): string {
  const lines = ['# Written by gpures at each start: config/toolchain.json devServer.dynamicConfig, as the dev server gets it.'];
  for (const { name, value } of toolchain.devServer.dynamicConfig) lines.push(`${name}:`, `  - value: ${yamlValue(value)}`);
  return `${lines.join('\n')}\n`;
}
