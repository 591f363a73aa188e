// The manifest as every command loads it: the file from -m or $GPURES_MANIFEST, parsed, and with
// a router config checked against it, before anything reaches the box.
import { parseManifest } from '../config/manifest';
import { DEFAULT_MANIFEST, findServe, MAX_MANIFEST_BYTES } from '../domain/manifest';
import { BoundedReadError, readBounded } from '../config/bounded-read';
import { MAX_CONFIG_BYTES } from '../domain/promotion';
import type { RouterConfigResult } from '../config/router-model';
import type { Manifest, ManifestIssue } from '../domain/types';
import { formatIssue } from '../domain/types';
import type { CommandContext } from './command';
import type { CliEnv } from '../config/env';
import { CliError, EXIT } from './exit-codes';

export { DEFAULT_MANIFEST };

export function manifestPath(opt: string | undefined, env: CliEnv): string {
  return opt ?? env.manifest ?? DEFAULT_MANIFEST;
}

/** A file's text; one larger than `maxBytes` is refused before it is read past that. */
export async function readText(file: string, what: string, maxBytes: number): Promise<string> {
  try {
    return await readBounded(file, what, maxBytes);
  } catch (err) {
    throw new CliError((err as Error).message, EXIT.badInput);
  }
}

/** A default manifest that is not there: say where the manifest is taken from. */
function withManifestHint(err: unknown, file: string): never {
  if (err instanceof CliError && file === DEFAULT_MANIFEST) {
    throw new CliError(
      `${err.message} (no --manifest given and GPURES_MANIFEST unset: the manifest defaults to ${DEFAULT_MANIFEST} in the current directory)`,
      err.exitCode,
    );
  }
  throw err;
}

/**
 * The manifest, and with a router config ($GPURES_ROUTER_CONFIG or --router) the load-time rule
 * of field report T013: a tier backed by an evictable serve must declare model_identity, or it
 * could never be readmitted after an eviction. Checked before anything reaches the box.
 */
export async function loadManifest(
  ctx: CommandContext,
  file: string,
  routerFile = ctx.env.routerConfig,
  /** 'once': warnings shown before for the same text are not repeated (warned-once.ts). */
  show: 'always' | 'once' = 'once',
): Promise<{ manifest: Manifest; warnings: ManifestIssue[] }> {
  const result = parseManifest(await readText(file, 'manifest', MAX_MANIFEST_BYTES).catch((err: unknown) => withManifestHint(err, file)), file);
  // Both files' errors in one run: the router config's own are found without a valid manifest,
  // only the check against the manifest needs one.
  // The router config's schemas and rules are loaded only when there is one to read: most
  // commands on a node without $GPURES_ROUTER_CONFIG (`gpures ledger`, issue 15) have none.
  const rc = routerFile ? await import('../config/router-config') : undefined;
  const router = routerFile && rc ? await readRouterConfig(routerFile, rc.parseRouterConfig) : undefined;
  // A router config with errors of its own is still checked against a valid manifest, as far as it parsed.
  const partialCross =
    result.ok && rc && router && !router.ok && router.partial && routerFile
      ? rc.routerCheckErrors(rc.checkRouterAgainstManifest(router.partial, routerFile, result.manifest, file))
      : [];
  const errors = [...(result.ok ? [] : result.errors), ...(router && !router.ok ? router.errors : []), ...partialCross];
  if (!result.ok || (router && !router.ok)) throw new CliError(errors.map(formatIssue).join('\n'), EXIT.badInput, { errors });
  const warnings = [...result.warnings];
  if (rc && router?.ok && routerFile) {
    const issues = rc.checkRouterAgainstManifest(router.config, routerFile, result.manifest, file);
    const crossErrors = rc.routerCheckErrors(issues);
    if (crossErrors.length) throw new CliError(crossErrors.map(formatIssue).join('\n'), EXIT.badInput, { errors: crossErrors });
    warnings.push(...router.warnings, ...issues.filter((i) => i.severity !== 'error'));
  }
  const lines = warnings.map((w) => `warning: ${formatIssue(w)}`);
  // warned-once (and node:crypto, for its stamp's hash) is loaded only when there is a warning to stamp.
  const shown = show === 'always' || !lines.length ? lines : (await import('./warned-once')).notShownBefore(lines);
  for (const line of shown) ctx.note(line);
  if (show === 'once' && shown.length) ctx.note('warning: (shown once while the manifest warns the same; `gpures validate` shows them every time)');
  return { manifest: result.manifest, warnings };
}

/** The router config parsed, or its read failure as one more issue beside the manifest's. */
async function readRouterConfig(file: string, parseRouterConfig: (text: string, file: string) => RouterConfigResult): Promise<RouterConfigResult> {
  try {
    return parseRouterConfig(await readBounded(file, 'router config', MAX_CONFIG_BYTES), file);
  } catch (err) {
    const message = err instanceof BoundedReadError ? err.reason : `cannot read router config: ${(err as Error).message}`;
    return { ok: false, errors: [{ file, path: '', message }], warnings: [] };
  }
}

export function checkServes(manifest: Manifest, file: string, names: string[]): void {
  const unknown = names.filter((n) => !findServe(manifest, n));
  if (unknown.length) {
    const known = manifest.serves.map((s) => s.name).join(', ');
    throw new CliError(unknown.map((n) => `${file}: no serve named '${n}' (serves: ${known})`).join('\n'), EXIT.badInput);
  }
}

/** The GPUs the named (checked) serves run on: the ledgers an operation on them asks. */
export function gpuRolesOf(manifest: Manifest, names: readonly string[]): string[] {
  return [...new Set(names.flatMap((n) => findServe(manifest, n)?.gpuRole ?? []))];
}
