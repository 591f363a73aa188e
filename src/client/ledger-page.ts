// The ledger page: GET /ledger (the document) and GET /v1/ledger (what it polls), read-only, on
// the acquisition API's port. The figures are `gpures ledger --json`'s (src/client/ledger-view.ts);
// beside them the serve operations running now, with links into the Temporal UI, and the ledgers'
// last decisions.
//
// Who may read: with the API bound to loopback only, a request whose Host is a loopback name
// reads without the token (a Host of another name is a DNS-rebinding page in some browser, and
// needs the token like everyone else); bound beyond loopback, /v1/ledger needs the API's bearer
// token. The document itself carries no data, so it is served to anyone who reaches the port: its
// script asks for the token, keeps it in the tab's sessionStorage and sends it as a bearer header,
// so it never lands in a URL, a log or the browser's history.
import { createHash } from 'node:crypto';
import type { Client } from '@temporalio/client';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { DEFAULT_TEMPORAL_UI_URL } from '../config/env';
import { isLoopback } from '../domain/manifest';
import type { Manifest } from '../domain/types';
import { LedgerDecisions } from './ledger-decisions';
import type { LedgerDecision } from './ledger-decisions';
import { ledgerRowJson, readLocalLedger } from './ledger-view';
import { NodeUnanswered, readNodeLedgers } from './node-ledgers';
import { serveOperationsRunning } from './operations';
import type { RunningOperation } from './operations';
import { PAGE_SCRIPT, PAGE_STYLE, pageHtml } from './ledger-page-html';

/** How many decisions, over all the node's ledgers, the page shows. */
export const DECISIONS_SHOWN = 15;

export interface LedgerPageOptions {
  client: Client;
  manifest: Manifest;
  /** nvidia-smi's binary, as `gpures ledger` runs it (GPURES_NVIDIA_SMI; default nvidia-smi). */
  nvidiaSmi?: string;
  /** The Temporal UI the page links operations into (GPURES_TEMPORAL_UI_URL), without a trailing slash. */
  temporalUiUrl?: string;
  /** The API listens on loopback addresses only: a loopback Host reads without the token. By default the token is needed. */
  loopbackOnly?: boolean;
  /** Whether the request carries the API's token. */
  authorized: (req: FastifyRequest) => boolean;
}

/** Routes that check their own reader (the API's token hook lets them through to do so). */
const OWN_READER = { ownReader: true };

export function checksOwnReader(req: FastifyRequest): boolean {
  return (req.routeOptions.config as { ownReader?: unknown }).ownReader === true;
}

/** A workflow run in the Temporal UI. */
export function temporalUiLink(ui: string, namespace: string, workflowId: string, runId: string): string {
  return `${ui}/namespaces/${encodeURIComponent(namespace)}/workflows/${encodeURIComponent(workflowId)}/${encodeURIComponent(runId)}`;
}

/** A holder is `<workflow id>/<run id>`; the workflow id has slashes of its own, the run id none. */
function splitHolder(holder: string): { workflowId: string; runId: string } | undefined {
  const i = holder.lastIndexOf('/');
  return i > 0 && i < holder.length - 1 ? { workflowId: holder.slice(0, i), runId: holder.slice(i + 1) } : undefined;
}

/** Whether a Host header names this host by a loopback name: `127.0.0.1:8090`, `[::1]:8090`, `localhost`. */
export function loopbackHost(host: string | undefined): boolean {
  if (!host) return false;
  const name = host.startsWith('[') ? host.slice(1, host.indexOf(']')) : host.replace(/:\d+$/, '');
  return isLoopback(name);
}

const sha256 = (text: string) => `'sha256-${createHash('sha256').update(text).digest('base64')}'`;

/** Nothing but the inline style and script, and fetches to this origin. */
const CSP = [
  "default-src 'none'",
  `style-src ${sha256(PAGE_STYLE)}`,
  `script-src ${sha256(PAGE_SCRIPT)}`,
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

function noStore(reply: FastifyReply): FastifyReply {
  return reply.header('cache-control', 'no-store').header('x-content-type-options', 'nosniff').header('referrer-policy', 'no-referrer');
}

export function registerLedgerPage(app: FastifyInstance, opts: LedgerPageOptions): void {
  const { client, manifest } = opts;
  const nvidiaSmi = opts.nvidiaSmi ?? 'nvidia-smi';
  const ui = opts.temporalUiUrl ?? DEFAULT_TEMPORAL_UI_URL;
  const decisions = new LedgerDecisions(client);
  const html = pageHtml();

  const mayRead = (req: FastifyRequest) => (opts.loopbackOnly === true && loopbackHost(req.headers.host)) || opts.authorized(req);

  async function snapshot() {
    const node = manifest.node;
    const [local, operations] = await Promise.all([readLocalLedger(client, manifest, nvidiaSmi, readNodeLedgers), serveOperationsRunning(client, node)]);
    const ledgers = local.rows.map(ledgerRowJson);
    // Decisions are history, read beside the figures: one ledger's refused read leaves the others'.
    const decided = await Promise.all(ledgers.map((l) => decisions.latest(node, l.gpuRole).catch((): LedgerDecision[] => [])));
    const namespace = client.options.namespace;
    const link = (workflowId: string, runId: string) => temporalUiLink(ui, namespace, workflowId, runId);
    const links: Record<string, string> = {};
    for (const l of ledgers) {
      for (const r of l.reservations) {
        for (const holder of [r.holder, r.evictedBy]) {
          const run = holder ? splitHolder(holder) : undefined;
          if (holder && run) links[holder] = link(run.workflowId, run.runId);
        }
      }
    }
    return {
      node,
      readAt: new Date().toISOString(),
      namespace,
      temporalUi: ui,
      ledgers,
      ...(local.nvidiaSmiError ? { nvidiaSmiError: local.nvidiaSmiError } : {}),
      serves: manifest.serves.map((s) => ({ name: s.name, gpuRole: s.gpuRole, class: s.class, vramMib: s.vramMib, routerTier: s.routerTier ?? null })),
      operations: operations.map((o: RunningOperation) => ({ ...o, url: link(o.workflowId, o.runId) })),
      decisions: decided
        .flat()
        .sort((a, b) => (b.at ?? '').localeCompare(a.at ?? ''))
        .slice(0, DECISIONS_SHOWN),
      links,
    };
  }

  // Readers polling at once share one read: one set of queries and one nvidia-smi per moment.
  let reading: ReturnType<typeof snapshot> | undefined;
  const read = () =>
    (reading ??= snapshot().finally(() => {
      reading = undefined;
    }));

  app.get('/ledger', { config: OWN_READER }, async (_req, reply) =>
    noStore(reply).header('content-security-policy', CSP).header('x-frame-options', 'DENY').type('text/html; charset=utf-8').send(html),
  );

  app.get('/v1/ledger', { config: OWN_READER }, async (req, reply) => {
    noStore(reply);
    if (!mayRead(req)) return reply.code(401).send({ error: { type: 'unauthorized', message: 'missing or wrong bearer token' } });
    try {
      return await read();
    } catch (err) {
      // No worker, or no Temporal: the page says it is stale and keeps its last figures.
      const message = err instanceof NodeUnanswered ? err.message : `the ledger could not be read: ${(err as Error).message}`;
      return reply.code(503).send({ error: { type: 'unavailable', message } });
    }
  });
}
