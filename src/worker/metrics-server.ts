// The worker's HTTP endpoint (loopback unless told otherwise). GET /v1/ledger answers `gpures
// ledger` on this box only (./ledger-endpoint.ts). GET /metrics: its domain metrics (metrics.ts) followed by the Temporal SDK's own
// (task slots, poll and schedule-to-start latencies, sticky cache...), which the SDK's core
// exports on an internal loopback port of its own; scrapes fetch that text and append it, one
// fetch at a time and its text kept for the domain reading's cacheMs: /metrics needs no token, so
// a flood of scrapes must not become a flood of fetches. The two never share a name: the core's
// all start with temporal_.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { httpUrl } from '../domain/serve';
import { singleFlight } from '../shared/single-flight';
import type { WorkerMetrics } from './metrics';
import { ledgerHandler } from './ledger-endpoint';
import type { LedgerRead } from './ledger-endpoint';
import { WORKER_LEDGER_PATH } from '../client/worker-ledger';

export interface MetricsServerOptions {
  host: string;
  /** 0 picks a free port. */
  port: number;
  metrics: WorkerMetrics;
  /** The SDK core's Prometheus endpoint (http://127.0.0.1:PORT/metrics), when Runtime.install set one up. */
  coreUrl?: string;
  /** Bound on the core's answer. Default 2000 ms. */
  coreTimeoutMs?: number;
  /** The node's ledger read, served at /v1/ledger; without it only /metrics. */
  ledger?: LedgerRead;
}

export interface MetricsServer {
  url: string;
  close(): Promise<void>;
}

/** The core's exposition text, or a comment saying why there is none: the domain metrics are served either way. */
async function coreText(url: string | undefined, timeoutMs: number): Promise<string> {
  if (!url) return '# Temporal SDK metrics: not exported by this process (its Runtime was installed before the worker)\n';
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    if (!res.ok) return `# Temporal SDK metrics: ${url} answered ${res.status}\n`;
    const text = await res.text();
    return text.endsWith('\n') || text === '' ? text : `${text}\n`;
  } catch (err) {
    return `# Temporal SDK metrics: ${url} did not answer: ${(err as Error).message.replace(/\n/g, ' ')}\n`;
  }
}

export async function startMetricsServer(opts: MetricsServerOptions): Promise<MetricsServer> {
  const timeoutMs = opts.coreTimeoutMs ?? 2000;
  const core = singleFlight(() => coreText(opts.coreUrl, timeoutMs), opts.metrics.cacheMs);
  const ledger = opts.ledger ? ledgerHandler(opts.ledger, (outcome) => opts.metrics.ledgerRead(outcome)) : undefined;
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (req.method === 'GET' && path === WORKER_LEDGER_PATH && ledger) return ledger(req, res);
    if (req.method !== 'GET' || path !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain; charset=utf-8' }).end(`only GET /metrics${ledger ? ` and GET ${WORKER_LEDGER_PATH}` : ''} here\n`);
      return;
    }
    Promise.all([opts.metrics.text(), core()]).then(
      ([own, core]) => res.writeHead(200, { 'content-type': opts.metrics.contentType }).end(own + core),
      (err: unknown) => res.writeHead(500, { 'content-type': 'text/plain; charset=utf-8' }).end(`metrics failed: ${(err as Error).message}\n`),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address() as AddressInfo;
  return {
    url: `${httpUrl(address.address, address.port)}/metrics`,
    // The worker is stopping: a scrape or a half-sent request does not hold its exit.
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
