// The ledger page: GET /ledger (the document) and GET /v1/ledger (what it polls), read-only, on
// the acquisition API's port. The figures are `gpures ledger --json`'s (src/client/ledger-view.ts);
// beside them the serve operations running now, with links into the Temporal UI, and the ledgers'
// last decisions.
//
// Who may read: with the API bound to loopback only, a request whose Host is a loopback name
// reads without the token, and any other Host (a DNS-rebinding page in some browser) is answered
// 421 by the API before it gets here (src/client/loopback-host.ts); bound beyond loopback,
// /v1/ledger needs the API's bearer token. The document itself carries no data, so it is served to anyone who reaches the port: its
// script asks for the token, keeps it in the tab's sessionStorage and sends it as a bearer header,
// so it never lands in a URL, a log or the browser's history.
//
// The read starts nothing: a GPU whose ledger does not run is shown as such (`gpures ledger`
// would start it), and the whole read gives up before the browser does.
import { createHash } from 'node:crypto';
import type { Client } from '@temporalio/client';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { DEFAULT_TEMPORAL_UI_URL } from '../config/env';
import { parseHolder } from '../domain/fence';
import { ledgerFreeText } from '../domain/ledger';
import type { Manifest } from '../domain/types';
import { runningLeases } from './lease';
import { LedgerDecisions } from './ledger-decisions';
import type { LedgerDecision } from './ledger-decisions';
import { ledgerRowJson, localLedger, readDevices } from './ledger-view';
import { loopbackHost } from '../adapters/loopback-host';
import { NodeUnanswered, readRunningLedgers } from './node-ledgers';
import { serveOperationsRunning } from './operations';
import type { RunningOperation } from './operations';
import { PAGE_SCRIPT, PAGE_STYLE, pageHtml } from './ledger-page-html';

/** How many decisions, over all the node's ledgers, the page shows. */
export const DECISIONS_SHOWN = 15;

/** The page's script gives up a poll after 15 s: the server's read gives up well before, and says what did not answer. */
export const DEFAULT_READ_DEADLINE_MS = 8000;
export const MAX_READ_DEADLINE_MS = 14_000;
/** The gRPC calls of a read given up are cancelled this long after its deadline (the deadline's own message wins). */
const RPC_GRACE_MS = 1000;

/** A read that did not finish by its deadline: the message names the parts that had not answered. */
export class ReadPastDeadline extends Error {}

export interface LedgerPageOptions {
  client: Client;
  manifest: Manifest;
  /** nvidia-smi's binary, as `gpures ledger` runs it (GPURES_NVIDIA_SMI; default nvidia-smi). */
  nvidiaSmi?: string;
  /** The Temporal UI the page links operations into (GPURES_TEMPORAL_UI_URL), without a trailing slash. */
  temporalUiUrl?: string;
  /** The API listens on loopback addresses only: a loopback Host reads without the token. By default the token is needed. */
  loopbackOnly?: boolean;
  /** How long one read of the page's JSON may take before it answers 503 (default 8 s, at most 14 s). */
  readDeadlineMs?: number;
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

  const deadlineMs = opts.readDeadlineMs ?? DEFAULT_READ_DEADLINE_MS;
  if (!Number.isInteger(deadlineMs) || deadlineMs < 1 || deadlineMs > MAX_READ_DEADLINE_MS) {
    throw new RangeError(`ledger page: readDeadlineMs must be an integer from 1 to ${MAX_READ_DEADLINE_MS} ms, got ${deadlineMs}`);
  }

  /**
   * Reads not finished yet, given up or not: the API's close waits for them (about a second past
   * their deadline at most), so the Temporal connection closed after it is no longer in use.
   */
  const unfinished = new Set<Promise<void>>();
  app.addHook('onClose', async () => {
    await Promise.all(unfinished);
  });
  /** Each part of a read, not only the read: one part failing ends the read while the others' calls are still out. */
  const track = (p: Promise<unknown>) => {
    const settled = p.then(
      () => undefined,
      () => undefined,
    );
    unfinished.add(settled);
    void settled.then(() => unfinished.delete(settled));
  };

  /** One read, each part named while it is under way, so a read past its deadline says which did not answer. */
  async function snapshot() {
    const deadline = Date.now() + deadlineMs;
    const pending = new Set<string>();
    const part = <T>(name: string, p: Promise<T>): Promise<T> => {
      pending.add(name);
      track(p);
      return p.finally(() => pending.delete(name));
    };
    // Temporal's calls end soon after the deadline (the read's parts are not left running); anything else (nvidia-smi) is raced.
    const work = client.withDeadline(deadline + RPC_GRACE_MS, () => readParts(deadline, part));
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const parts = [...pending].join(', ') || 'the read';
        reject(new ReadPastDeadline(`the ledger could not be read within ${deadlineMs / 1000} s: ${parts} did not answer`));
      }, deadlineMs);
    });
    // A read given up may still fail later: nobody waits for it but the API's close.
    track(work);
    try {
      return await Promise.race([work, late]);
    } finally {
      clearTimeout(timer);
    }
  }

  async function readParts(deadline: number, part: <T>(name: string, p: Promise<T>) => Promise<T>) {
    const node = manifest.node;
    const left = () => Math.max(1, deadline - Date.now());
    const [ledgerStates, leases, readings, operations] = await Promise.all([
      part(`the ledgers of node '${node}'`, readRunningLedgers(client, manifest, left())),
      part('the leases', runningLeases(client, node)),
      part('nvidia-smi', readDevices(nvidiaSmi, left())),
      part('the operations running (visibility)', serveOperationsRunning(client, node)),
    ]);
    const local = localLedger(ledgerStates, leases, readings, Date.now());
    const ledgers = local.rows.map((r) => ({ ...ledgerRowJson(r), freeText: ledgerFreeText(r.ledger) }));
    const noLedger = manifest.gpus.filter((g) => !ledgerStates.some((l) => l.gpuRole === g.role)).map((g) => ({ gpuRole: g.role, gpuUuid: g.uuid }));
    // Decisions are history, read beside the figures: one ledger's refused read leaves the others'.
    const decided = await part(
      "the ledgers' decisions (history)",
      Promise.all(ledgers.map((l) => decisions.latest(node, l.gpuRole).catch((): LedgerDecision[] => []))),
    );
    const namespace = client.options.namespace;
    const link = (workflowId: string, runId: string) => temporalUiLink(ui, namespace, workflowId, runId);
    const links: Record<string, string> = {};
    for (const l of ledgers) {
      for (const r of l.reservations) {
        for (const holder of [r.holder, r.evictedBy]) {
          const run = holder ? parseHolder(holder) : undefined;
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
      noLedger,
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
      const message =
        err instanceof NodeUnanswered || err instanceof ReadPastDeadline ? err.message : `the ledger could not be read: ${(err as Error).message}`;
      return reply.code(503).send({ error: { type: 'unavailable', message } });
    }
  });
}
