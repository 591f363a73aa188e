// The router admin API (docs/router-admin-api.md): tier state with the in-flight count, quiesce,
// guarded readmit and reload, all behind a bearer token. Changes run one at a time, so a readmit's
// probes cannot interleave with a quiesce or a reload.
import type { FastifyInstance, FastifyReply } from 'fastify';
import { findTier } from '../config/router-model';
import type { RouterTier } from '../config/router-model';
import { formatIssue } from '../domain/types';
import type { LoadedConfig } from './config-file';
import { ConfigLoadError, loadConfig } from './config-file';
import { errorBody } from './errors';
import { guardedReadmit } from './readmit';
import type { ReadmitOutcome } from '../shared/contracts';
import type { Mutex } from './mutex';
import type { OnDemand } from './on-demand';
import { onDemandUnmet } from './on-demand-config';
import type { OnDemandMeans } from './on-demand-config';
import { quiesceWhy } from './tier-table';
import type { TierTable } from './tier-table';
import { bearerMatches, tokenDigest } from '../adapters/bearer';

export interface AdminOptions {
  configPath: string;
  adminToken: string;
  probeTimeoutMs: number;
  /** What the router has for on-demand tiers: a reloaded config whose tiers need more is refused (on-demand-config.ts). */
  onDemandMeans: OnDemandMeans;
}

/** The refusal of a readmit whose quiesce mark has moved: the tier stays as it is. */
function quiescedSince(tier: string, sent: string, now: string): ReadmitOutcome {
  return {
    ok: false,
    tier,
    reason: 'quiesced_since',
    message:
      `tier '${tier}' was quiesced again since quiesce mark ${sent} (now ${now}: an eviction or a bring-down of its serve, ` +
      'or an operator, relies on it; or the router restarted without its state file): this readmit does not lift it',
  };
}

export async function registerAdminRoutes(app: FastifyInstance, table: TierTable, demand: OnDemand, admin: Mutex, opts: AdminOptions): Promise<void> {
  const adminDigest = tokenDigest(opts.adminToken);
  // The contract's TierState, and what an on-demand tier's queue holds (docs/router-admin-api.md).
  const stateOf = (tier: RouterTier) => ({ ...table.state(tier), ...demand.state(tier.name) });

  await app.register((scope, _o, done) => {
    scope.addHook('onRequest', (req, reply, next) => {
      if (bearerMatches(req.headers.authorization, adminDigest)) return next();
      void reply
        .code(401)
        .header('www-authenticate', 'Bearer realm="gpures-router-admin"')
        .send(errorBody('admin API requires Authorization: Bearer <token>; missing or wrong token', 'unauthorized', { code: 'unauthorized' }));
    });

    const unknownTier = (reply: FastifyReply, name: string) =>
      reply.code(404).send(
        errorBody(`unknown tier '${name}' (known tiers: ${table.config.tiers.map((t) => t.name).join(', ')})`, 'unknown_tier', {
          code: 'unknown_tier',
          tier: name,
        }),
      );

    scope.get('/admin/tiers', () => ({ mapping_version: table.config.mappingVersion, tiers: table.config.tiers.map(stateOf) }));

    scope.get<{ Params: { tier: string } }>('/admin/tiers/:tier', (req, reply) => {
      const tier = findTier(table.config, req.params.tier);
      return tier ? reply.send(stateOf(tier)) : unknownTier(reply, req.params.tier);
    });

    // ?reason= says why (contracts.ts QUIESCE_REASONS), &serve= the serve behind the tier; a caller
    // that sends none (an older worker) keeps the old meaning, evicted or draining.
    scope.post<{ Params: { tier: string }; Querystring: { reason?: string; serve?: string } }>('/admin/tiers/:tier/quiesce', (req, reply) =>
      admin.run(() => {
        const tier = findTier(table.config, req.params.tier);
        if (!tier) return Promise.resolve(unknownTier(reply, req.params.tier));
        const asked = quiesceWhy(req.query.reason, req.query.serve);
        if ('problem' in asked) {
          return Promise.resolve(
            reply.code(400).send(
              errorBody(`quiesce of tier '${tier.name}' refused, nothing changed: ${asked.problem}`, 'invalid_request', {
                code: 'invalid_quiesce',
                tier: tier.name,
              }),
            ),
          );
        }
        return table.setMode(tier.name, 'quiesced', asked.why).then(() => reply.send(stateOf(tier)));
      }),
    );

    scope.post<{ Params: { tier: string }; Querystring: { quiesce_mark?: string } }>('/admin/tiers/:tier/readmit', (req, reply) =>
      admin.run(async () => {
        const tier = findTier(table.config, req.params.tier);
        if (!tier) return unknownTier(reply, req.params.tier);
        // Sent back by a readmit that lifts only the quiesce it saw: one made since is an eviction's
        // or a bring-down's, decided after it, which drains and stops the serve behind it.
        const mark = req.query.quiesce_mark;
        if (mark !== undefined && mark !== table.quiesceMark(tier.name))
          return reply.code(409).send(quiescedSince(tier.name, mark, table.quiesceMark(tier.name)));
        const outcome = await guardedReadmit(tier, opts.probeTimeoutMs);
        if (!outcome.ok) return reply.code(409).send(outcome);
        await table.readmitted(tier.name);
        return reply.send(outcome);
      }),
    );

    scope.post('/admin/reload', (_req, reply) =>
      admin.run(async () => {
        let loaded: LoadedConfig;
        try {
          loaded = await loadConfig(opts.configPath);
        } catch (err) {
          if (!(err instanceof ConfigLoadError)) throw err;
          const running = table.config.mappingVersion;
          return reply.code(400).send(
            errorBody(`config ${opts.configPath} is invalid; the running mapping '${running}' stays`, 'invalid_config', {
              code: 'invalid_config',
              errors: err.issues.map(formatIssue),
              issues: err.issues,
              mapping_version: running,
            }),
          );
        }
        const missing = onDemandUnmet(loaded.config, opts.configPath, opts.onDemandMeans);
        if (missing.length > 0) {
          const running = table.config.mappingVersion;
          return reply.code(400).send(
            errorBody(
              `config ${opts.configPath} has on-demand tiers this router cannot run (no acquisition API or no client token); the running mapping '${running}' stays`,
              'invalid_config',
              {
                code: 'invalid_config',
                errors: missing.map(formatIssue),
                issues: missing,
                mapping_version: running,
              },
            ),
          );
        }
        await table.replace(loaded.config);
        return reply.send({ mapping_version: table.config.mappingVersion, warnings: loaded.warnings.map(formatIssue) });
      }),
    );
    done();
  });
}
