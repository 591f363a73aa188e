// gpures router promote (docs/promotion.md): one promotion at a time per router; a second is refused.
import { readFile } from 'node:fs/promises';
import { parse as parseToml } from 'smol-toml';
import { resolve as resolvePath } from 'node:path';
import { checkRouterAgainstManifest, parseRouterConfig, routerCheckErrors } from '../../config/router-config';
import { IMAGE_REFERENCE_RULE, isImageReference } from '../../domain/bounds';
import { MAX_CONFIG_BYTES } from '../../domain/promotion';
import { formatIssue } from '../../domain/types';
import type { CommandContext, Rendered } from '../command';
import { CliError, EXIT, promotionExit } from '../exit-codes';
import { loadManifest, manifestPath, readText } from '../manifest';
import { withClient } from '../temporal';
import { followFor } from '../progress-lines';

export interface PromoteOpts {
  config: string;
  image: string;
  profile?: string;
  validateOnly?: boolean;
  router: string;
  manifest?: string;
}

/** Whether TOML text has a serve manifest's tables (text that is not TOML is not one). */
function isServeManifest(text: string): boolean {
  try {
    const doc = parseToml(text);
    return ['node', 'gpus', 'serves'].some((k) => k in doc);
  } catch {
    return false;
  }
}

export async function routerPromote(input: PromoteOpts, ctx: CommandContext): Promise<Rendered> {
  // The workflow refuses it too, but only once started, as a failed promotion rather than bad input.
  if (!isImageReference(input.image)) throw new CliError(`--image: must be ${IMAGE_REFERENCE_RULE} (got ${JSON.stringify(input.image)})`, EXIT.badInput);
  const { manifest } = await loadManifest(ctx, manifestPath(input.manifest, ctx.env));
  // Bounded before it is read: the candidate travels through workflow history.
  const content = await readText(input.config, 'router config', MAX_CONFIG_BYTES);
  // What the worker requires at resolve, refused here before anything is sent: a router config its
  // start would read (docs/promotion.md, Input), keeping the T013 rule against the manifest, so a
  // promotion cannot strand an evictable tier nor leave a config the node's worker refuses.
  const candidate = parseRouterConfig(content, input.config);
  // A serve manifest holds its serves' env and args: said as what it is, never quoted.
  if (!candidate.ok && isServeManifest(content)) {
    throw new CliError(`${input.config}: a serve manifest (it has [node], [[gpus]] or [[serves]]), not a router config; nothing was sent`, EXIT.badInput);
  }
  const errors = candidate.ok
    ? routerCheckErrors(checkRouterAgainstManifest(candidate.config, input.config, manifest, manifestPath(input.manifest, ctx.env)))
    : candidate.errors;
  if (errors.length) throw new CliError(errors.map(formatIssue).join('\n'), EXIT.badInput, { errors });
  const profile = input.profile === undefined ? undefined : resolvePath(input.profile);
  if (profile)
    await readFile(profile).catch((err: Error) => {
      throw new CliError(`${profile}: cannot read promotion profile: ${err.message}`, EXIT.badInput);
    });
  const { followPromotion, PromotionRefused, startPromotion } = await import('../../client/promote');
  const promotion = {
    router: input.router,
    config: { content },
    image: input.image,
    ...(profile ? { profile } : {}),
    ...(input.validateOnly ? { validateOnly: true } : {}),
  };
  return withClient(async (client) => {
    const handle = await startPromotion(client, manifest.node, promotion).catch((err: unknown) => {
      if (err instanceof PromotionRefused) {
        throw new CliError(err.message, EXIT.denied, { workflowId: err.workflowId, runId: err.runningRunId, step: err.runningStep });
      }
      throw err;
    });
    ctx.note(`router promote ${input.router}: workflow ${handle.workflowId} (run ${handle.firstExecutionRunId})`);
    const outcome = await followPromotion(handle, followFor(ctx));
    const text = outcome.ok ? [outcome.result.message] : [`${outcome.message} [${outcome.failureType}; workflow ${outcome.workflowId}]`];
    return { data: outcome, text, exitCode: promotionExit(outcome) };
  });
}
