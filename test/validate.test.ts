// `gpures validate --router`: the load-time rule of field report T013, offline.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { gpures as runGpures } from './support/cli';

const ROOT = resolve(__dirname, '..', '..');
const MANIFEST = join(ROOT, 'examples', 'primary-node', 'serves.toml');
const ROUTER = join(ROOT, 'examples', 'primary-node', 'router.toml');

// The router config comes from --router only, never from the environment running the tests.
const gpures = (args: string[]) => runGpures(args, { GPURES_ROUTER_CONFIG: '' });

test('the example manifest and router config pass together', async () => {
  const r = await gpures(['validate', MANIFEST, '--router', ROUTER]);
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stdout, /ok \(node primary-node, 1 gpu, 7 serves\)/);
});

test("an evictable serve's tier without model_identity is a load error naming the tier and the file", async () => {
  const dir = mkdtempSync(join(tmpdir(), 'gpures-validate-'));
  const bad = join(dir, 'router.toml');
  const text = readFileSync(ROUTER, 'utf8');
  const visionTier = /(name = "vision-local"[^[]*?)model_identity = true/;
  assert.match(text, visionTier);
  writeFileSync(bad, text.replace(visionTier, '$1model_identity = false'));
  const r = await gpures(['validate', MANIFEST, '--router', bad]);
  assert.equal(r.code, 2);
  assert.equal(r.stdout, '');
  assert.match(
    r.stderr,
    new RegExp(
      `^${bad.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}: tiers\\[\\d+\\]\\.model_identity: tier 'vision-local' is backed by evictable serve 'vision' \\(.*serves\\.toml\\) and must set model_identity = true`,
    ),
  );
});
