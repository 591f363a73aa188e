// The router's /metrics (docs/metrics.md): per tier the requests it answered by status code, the
// 503s by reason, and, read at scrape time, the requests in flight, the on-demand queue's depth
// and whether the tier is quiesced; the abandons the router asked of its on-demand acquisitions,
// those taken, and those refused by reason.
import type { FastifyInstance, FastifyReply } from 'fastify';
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import type { BodyBudget } from './body-budget';
import type { OnDemand, Refusal } from './on-demand';
import type { TierTable } from './tier-table';

export class RouterMetrics {
  readonly registry = new Registry();

  private readonly requests = new Counter({
    name: 'gpures_router_requests_total',
    help: 'Proxied requests answered, by tier and HTTP status code (counted when the response ends)',
    labelNames: ['tier', 'code'],
    registers: [this.registry],
  });
  private readonly refusals = new Counter({
    name: 'gpures_router_unavailable_total',
    help: "Requests refused as unavailable (503, or an SSE error once a held stream began), by tier and reason (the error body's reason)",
    labelNames: ['tier', 'reason'],
    registers: [this.registry],
  });

  private readonly bodyBudgetRefusals = new Counter({
    name: 'gpures_router_body_budget_refused_total',
    help: 'Requests answered 503 body_budget: their body would have taken the request bodies the router holds past its budget',
    registers: [this.registry],
  });

  private readonly abandonAsks = new Counter({
    name: 'gpures_router_abandon_asks_total',
    help: "Abandons the router asked of an on-demand tier's acquisition once nobody was held for it (each ask, asked again ones included)",
    labelNames: ['tier'],
    registers: [this.registry],
  });
  private readonly abandonsTaken = new Counter({
    name: 'gpures_router_abandoned_total',
    help: 'Asks the acquisition answered abandoned: its victims left running, its serve not started',
    labelNames: ['tier'],
    registers: [this.registry],
  });
  private readonly abandonsRefused = new Counter({
    name: 'gpures_router_abandon_refused_total',
    help:
      'Asks not taken, by reason: committed (a stop or start begun), joined (an operator waits on it), not_for_router, ending; ' +
      'admitting, late, unanswered (asked again); unknown (an API older than the reason)',
    labelNames: ['tier', 'reason'],
    registers: [this.registry],
  });

  constructor(table: TierTable, demand: OnDemand, budget: BodyBudget, opts: { processMetrics?: boolean } = {}) {
    demand.onAbandon((tier, ask) => {
      if (ask.answer === 'asked') this.abandonAsks.inc({ tier });
      else if (ask.answer === 'abandoned') this.abandonsTaken.inc({ tier });
      else this.abandonsRefused.inc({ tier, reason: ask.reason ?? 'unknown' });
    });
    const tiers = () => table.config.tiers.map((t) => t.name);
    const perTier = (name: string, help: string, value: (tier: string) => number) =>
      new Gauge({
        name,
        help,
        labelNames: ['tier'],
        registers: [this.registry],
        collect() {
          this.reset();
          for (const tier of tiers()) this.set({ tier }, value(tier));
        },
      });
    perTier(
      'gpures_router_in_flight',
      'Requests forwarded to the tier whose response has not ended: what a drain waits for',
      (t) => table.runtimeOf(t).inFlight,
    );
    perTier('gpures_router_queue_depth', "Requests waiting in an on-demand tier's queue while its serve is acquired", (t) => demand.state(t).queued);
    perTier('gpures_router_tier_quiesced', '1 when the tier is quiesced (evicted or draining), 0 when active', (t) =>
      table.runtimeOf(t).mode === 'quiesced' ? 1 : 0,
    );
    new Gauge({
      name: 'gpures_router_body_bytes',
      help: 'Bytes of request bodies received or being received whose response has not ended, counted against the body budget',
      registers: [this.registry],
      collect() {
        this.set(budget.inFlightBytes);
      },
    });
    new Gauge({
      name: 'gpures_router_body_budget_bytes',
      help: 'The budget of gpures_router_body_bytes: past it a request is answered 503 body_budget',
      registers: [this.registry],
      collect() {
        this.set(budget.limitBytes);
      },
    });
    if (opts.processMetrics) collectDefaultMetrics({ register: this.registry });
  }

  /**
   * Counts the request by its status once its response has ended (finished, or the client went
   * away); 'aborted' when the client left before any status was sent (held in the on-demand queue,
   * the reply hijacked), where the raw response's statusCode is only its default 200.
   */
  requestFor(tier: string, reply: FastifyReply): void {
    reply.raw.once('close', () => this.requests.inc({ tier, code: reply.raw.headersSent ? String(reply.raw.statusCode) : 'aborted' }));
  }

  overBudget(): void {
    this.bodyBudgetRefusals.inc();
  }

  refused(r: Pick<Refusal, 'tier'> & { reason: string }): void {
    this.refusals.inc({ tier: r.tier, reason: r.reason });
  }

  /** GET /metrics on the app: no token, like /healthz (counts and states, nothing secret). */
  route(app: FastifyInstance): void {
    app.get('/metrics', async (_req, reply) => reply.type(this.registry.contentType).send(await this.registry.metrics()));
  }
}
