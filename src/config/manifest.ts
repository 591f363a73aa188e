// Loading the serve manifest: TOML text -> raw table (smol-toml) -> schema (zod, per entry) ->
// normalized GpuSpec/ServeSpec -> the named rules of manifest-rules.ts -> { manifest, warnings }
// or { errors, warnings }.
//
// Every problem is a ManifestIssue naming the file, the dotted TOML path (snake_case, with array
// indices: `serves[2].gpu_role`) and what is wrong. All issues are collected; a [[gpus]] or
// [[serves]] entry is checked one by one so that a bad entry does not hide the good ones from the
// cross-field rules. No I/O: the caller reads the file and hands over its text.

import { Issues, parseEach, parseTomlTable, tableEntries } from './issues';
import { GpuSchema, gpuShape, ServeSchema, serveShape, toGpu, toServe, TopSchema, topAllowedKeys } from './manifest-schema';
import type { Indexed } from './manifest-rules';
import { crossServeRules, documentRules, gpuIdentities, gpuIdentityRules, gpuRules, manifestContext, manifestRules, serveRules } from './manifest-rules';
import type { GpuSpec, Manifest, ManifestIssue, ManifestResult, ServeSpec } from '../domain/types';
import { formatIssue } from '../domain/types';
import { secretArgsToEnv, withSleepMode } from '../domain/serve';
import { SERVE_DEFAULTS } from '../domain/manifest';

/** Thrown by manifestOrThrow; the message is one formatted issue per line. */
export class ManifestError extends Error {
  readonly issues: ManifestIssue[];

  constructor(issues: ManifestIssue[]) {
    super(issues.map(formatIssue).join('\n'));
    this.name = 'ManifestError';
    this.issues = issues;
  }
}

/** The manifest of an ok result; throws ManifestError carrying the errors otherwise. */
export function manifestOrThrow(result: ManifestResult): Manifest {
  if (result.ok) return result.manifest;
  throw new ManifestError(result.errors);
}

/** The GPUs whose own fields and own rules pass. */
function loadGpus(rawGpus: readonly unknown[], issues: Issues): Indexed<GpuSpec>[] {
  const gpus: Indexed<GpuSpec>[] = [];
  for (const e of parseEach(rawGpus, GpuSchema)) {
    if (e.issues) {
      issues.fromZod(e.issues, ['gpus', e.index], Object.keys(gpuShape));
      continue;
    }
    const gpu = { index: e.index, spec: toGpu(e.spec) };
    if (issues.check(gpuRules, gpu, undefined)) gpus.push(gpu);
  }
  return gpus;
}

/** The serves whose own fields and own rules pass, their secret flags moved into env, sleep mode's flag and variable added where they sleep. */
function loadServes(rawServes: readonly unknown[], issues: Issues, nodeMinResidencyS: number): Indexed<ServeSpec>[] {
  const serves: Indexed<ServeSpec>[] = [];
  for (const e of parseEach(rawServes, ServeSchema)) {
    if (e.issues) {
      issues.fromZod(e.issues, ['serves', e.index], Object.keys(serveShape));
      continue;
    }
    const serve = { index: e.index, raw: e.spec, spec: toServe(e.spec, nodeMinResidencyS) };
    if (issues.check(serveRules, serve, undefined)) serves.push({ index: e.index, spec: withSleepMode(secretArgsToEnv(serve.spec)) });
  }
  return serves;
}

/**
 * Parses and validates manifest TOML. `file` is only used to label issues. Never throws for bad
 * input: every problem comes back as an issue.
 */
export function parseManifest(text: string, file: string): ManifestResult {
  const issues = new Issues(file);
  const fail = (): ManifestResult => ({ ok: false, errors: issues.errors, warnings: issues.warnings });

  const doc = parseTomlTable(text, issues);
  if (doc === undefined) return fail();

  issues.nameEntries('serves', 'serve', tableEntries(doc, 'serves'));
  issues.nameEntries(
    'gpus',
    'gpu',
    tableEntries(doc, 'gpus').map((g) => ({ name: (g as { role?: unknown } | null)?.role })),
  );
  const top = TopSchema.safeParse(doc, { reportInput: true });
  if (!top.success) issues.fromZod(top.error.issues, [], topAllowedKeys);
  issues.check(documentRules, doc, undefined);

  const rawGpus = tableEntries(doc, 'gpus');
  const gpus = loadGpus(rawGpus, issues);
  // A duplicate role or uuid is reported over every entry, valid or not, and keeps its GPU out of
  // the budget rules.
  const identities = gpuIdentities(rawGpus);
  const duplicated = new Set<number>();
  rawGpus.forEach((spec, index) => {
    if (!issues.check(gpuIdentityRules, { index, spec }, identities)) duplicated.add(index);
  });
  const gpuByRole = new Map(gpus.filter((g) => !duplicated.has(g.index)).map((g) => [g.spec.role, g] as const));

  const minResidencyS = (top.success ? top.data.node.min_residency_s : undefined) ?? SERVE_DEFAULTS.minResidencyS;
  const serves = loadServes(tableEntries(doc, 'serves'), issues, minResidencyS);
  const hostRamBudgetMib = top.success ? top.data.node.host_ram_budget_mib : undefined;
  const ctx = manifestContext(identities, gpuByRole, serves, hostRamBudgetMib);
  for (const serve of serves) issues.check(crossServeRules, serve, ctx);
  issues.check(manifestRules, undefined, ctx);

  if (issues.errors.length > 0 || !top.success) return fail();
  return {
    ok: true,
    manifest: {
      node: top.data.node.name,
      minResidencyS,
      ...(hostRamBudgetMib !== undefined ? { hostRamBudgetMib } : {}),
      gpus: gpus.map((g) => g.spec),
      serves: serves.map((s) => s.spec),
    },
    warnings: issues.warnings,
  };
}
