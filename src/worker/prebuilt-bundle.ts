// The workflow bundle built once, by `npm run build`, rather than by webpack in every worker and
// every replay at start: webpack takes seconds and leaves a worker some 100 MiB heavier.
//
// A bundle is used only while it is the bundle of the compiled code beside it: it carries a
// fingerprint of what webpack read (the compiled workflows, domain and shared modules, and the
// workflow SDK's version), checked before use. A bundle older than the code (a `tsc` without the
// bundle step) is not used; the caller bundles at start, as before, and says so.
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { bundleWorkflowCode } from '@temporalio/worker';
import type { BundleOptions, WorkflowBundleWithSourceMap } from '@temporalio/worker';
import { BUNDLE_DEVTOOL, workflowCodeOptions } from './workflow-code';

const DIST_SRC = join(__dirname, '..');
/** dist/workflow-bundle.js, beside the compiled tree it was built from. */
export const PREBUILT_BUNDLE = join(DIST_SRC, '..', 'workflow-bundle.js');
const FINGERPRINT_FILE = `${PREBUILT_BUNDLE}.fingerprint`;
/** What webpack bundles besides node_modules: workflow files import only these (see .dependency-cruiser.cjs). */
const BUNDLED_DIRS = ['workflows', 'domain', 'shared'];

function jsFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile() && e.name.endsWith('.js'))
    .map((e) => join(e.parentPath, e.name))
    .sort();
}

/** A hash of every compiled module the bundle is made of, of the workflow SDK's version and of how it is bundled. */
export function workflowCodeFingerprint(): string {
  const hash = createHash('sha256');
  const sdk = JSON.parse(readFileSync(require.resolve('@temporalio/workflow/package.json'), 'utf8')) as { version: string };
  hash.update(`@temporalio/workflow@${sdk.version}\ndevtool ${BUNDLE_DEVTOOL}\n`);
  for (const file of BUNDLED_DIRS.flatMap((d) => jsFiles(join(DIST_SRC, d)))) {
    hash.update(`${relative(DIST_SRC, file)}\n`);
    hash.update(readFileSync(file));
  }
  return hash.digest('hex');
}

/** The prebuilt bundle's path when it is the current code's; undefined when absent or stale. */
export function prebuiltBundle(): { codePath: string } | undefined {
  try {
    if (readFileSync(FINGERPRINT_FILE, 'utf8').trim() !== workflowCodeFingerprint()) return undefined;
  } catch {
    return undefined;
  }
  return existsSync(PREBUILT_BUNDLE) ? { codePath: PREBUILT_BUNDLE } : undefined;
}

/** Bundles the workflows and writes the bundle and its fingerprint (each whole, by rename). */
export async function writePrebuiltBundle(logger?: BundleOptions['logger']): Promise<{ path: string; bytes: number }> {
  const fingerprint = workflowCodeFingerprint();
  const { code } = await bundleWorkflowCode(workflowCodeOptions(logger));
  writeFileSync(`${PREBUILT_BUNDLE}.tmp`, code);
  renameSync(`${PREBUILT_BUNDLE}.tmp`, PREBUILT_BUNDLE);
  writeFileSync(`${FINGERPRINT_FILE}.tmp`, `${fingerprint}\n`);
  renameSync(`${FINGERPRINT_FILE}.tmp`, FINGERPRINT_FILE);
  return { path: PREBUILT_BUNDLE, bytes: Buffer.byteLength(code) };
}

/** The current workflow code's bundle: the prebuilt one where it is current, else bundled now. */
export async function loadWorkflowBundle(logger?: BundleOptions['logger']): Promise<WorkflowBundleWithSourceMap> {
  const prebuilt = prebuiltBundle();
  // Source maps are inline in the code; the SDK no longer reads this field.
  if (prebuilt) return { code: readFileSync(prebuilt.codePath, 'utf8'), sourceMap: '' };
  return bundleWorkflowCode(workflowCodeOptions(logger));
}
