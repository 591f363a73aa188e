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

test("both files' errors in one run, each entry named by its name: a bad manifest does not hide the router config's own", async () => {
  const dir = mkdtempSync(join(tmpdir(), 'gpures-validate-'));
  const manifest = join(dir, 'serves.toml');
  const router = join(dir, 'router.toml');
  const visionVram = /(name = "vision"[^[]*?)vram_mib = 12288/;
  assert.match(readFileSync(MANIFEST, 'utf8'), visionVram);
  writeFileSync(manifest, readFileSync(MANIFEST, 'utf8').replace(visionVram, '$1vram_mib = -5'));
  const fastIdentity = /(name = "fast-local"[^[]*?)model_identity = true/;
  assert.match(readFileSync(ROUTER, 'utf8'), fastIdentity);
  writeFileSync(router, readFileSync(ROUTER, 'utf8').replace(fastIdentity, '$1model_identity = "yes"'));

  const r = await gpures(['validate', manifest, '--router', router]);
  assert.equal(r.code, 2, r.stderr);
  const lines = r.stderr.trim().split('\n');
  assert.deepEqual(lines, [
    `${manifest}: serve 'vision' (serves[4].vram_mib): must be a whole number of MiB in 1..1048576 (got -5)`,
    `${router}: tier 'fast-local' (tiers[0].model_identity): must be true or false (got "yes")`,
  ]);
  const json = await gpures(['validate', manifest, '--router', router, '--json']);
  assert.equal(json.code, 2, json.stderr);
  const data = JSON.parse(json.stdout) as { error: { details: { errors: { file: string; path: string; subject?: string }[] } } };
  assert.deepEqual(
    data.error.details.errors.map((e) => [e.file, e.path, e.subject]),
    [
      [manifest, 'serves[4].vram_mib', "serve 'vision'"],
      [router, 'tiers[0].model_identity', "tier 'fast-local'"],
    ],
  );
});

test("every problem at once: a router config with errors of its own is still checked against the manifest (an on-demand tier's and an evictable serve's tier both without model_identity)", async () => {
  const dir = mkdtempSync(join(tmpdir(), 'gpures-validate-all-'));
  const bad = join(dir, 'router.toml');
  writeFileSync(bad, readFileSync(ROUTER, 'utf8').replace(/model_identity = true/g, 'model_identity = false'));
  const r = await gpures(['validate', MANIFEST, '--router', bad]);
  assert.equal(r.code, 2);
  const lines = r.stderr.trim().split('\n');
  assert.ok(
    lines.some((l) => /tiers\[\d+\]\.model_identity: tier 'chat-large-local' is on demand and must set model_identity = true/.test(l)),
    r.stderr,
  );
  assert.ok(
    lines.some((l) => /tiers\[\d+\]\.model_identity: tier 'vision-local' is backed by evictable serve 'vision'/.test(l)),
    r.stderr,
  );
});

test('router promote: a candidate config larger than a promotion carries is refused by file before it is read, and nothing is started', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'gpures-promote-big-'));
  const big = join(dir, 'router.toml');
  // 1 MiB of text in 2-byte characters and one byte more: counted in bytes, as it is written.
  writeFileSync(big, `# ${'é'.repeat(512 * 1024 - 1)}\n`);
  const r = await runGpures(['router', 'promote', '--config', big, '--image', 'router:v2', '-m', MANIFEST], {
    GPURES_ROUTER_CONFIG: '',
    // Nothing listens here: a command that got as far as Temporal would say it cannot reach it.
    TEMPORAL_ADDRESS: '127.0.0.1:1',
  });
  assert.equal(r.code, 2, r.stderr);
  assert.equal(r.stderr.trim(), `${big}: router config is 1048577 bytes, larger than the 1048576 bytes it may be`);
});

test("an image that is not a Docker reference is bad input before anything is started: the manifest's serves[].image and router promote's --image", async () => {
  const dir = mkdtempSync(join(tmpdir(), 'gpures-validate-image-'));
  const manifest = join(dir, 'serves.toml');
  const text = readFileSync(MANIFEST, 'utf8');
  assert.match(text, /image = "vllm\/vllm-openai:v0.11.0"/);
  writeFileSync(manifest, text.replace('image = "vllm/vllm-openai:v0.11.0"', 'image = "../containers/revop-router"'));
  const v = await gpures(['validate', manifest]);
  assert.equal(v.code, 2, v.stderr);
  assert.match(
    v.stderr.trim(),
    new RegExp(
      `^${manifest.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}: serve '[a-z-]+' \\(serves\\[0\\]\\.image\\): must be a Docker image reference .*\\(got "\\.\\./containers/revop-router"\\)$`,
    ),
  );

  const r = await runGpures(['router', 'promote', '--config', ROUTER, '--image', 'gpures/fake-router:test --privileged', '-m', MANIFEST], {
    GPURES_ROUTER_CONFIG: '',
    // Nothing listens here: a command that got as far as Temporal would say it cannot reach it.
    TEMPORAL_ADDRESS: '127.0.0.1:1',
  });
  assert.equal(r.code, 2, r.stderr);
  assert.match(r.stderr.trim(), /^--image: must be a Docker image reference .*\(got "gpures\/fake-router:test --privileged"\)$/);
});
