import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { stringify } from 'smol-toml';

import { tomlKeyPath } from '../src/config/issues';
import { ManifestError, manifestOrThrow, parseManifest } from '../src/config/manifest';
import { findGpuMemoryUtilization, findServe, gpuFor } from '../src/domain/manifest';
import type { ManifestIssue, ManifestResult } from '../src/domain/types';
import { formatIssue } from '../src/domain/types';

// dist/test/manifest.test.js -> repo root
const ROOT = join(__dirname, '..', '..');
const EXAMPLE = 'examples/primary-node/serves.toml';
const FILE = 'test/bad.toml';

type Table = Record<string, unknown>;

const GPU: Table = {
  role: 'dark-fast',
  uuid: 'GPU-00000000-1111-2222-3333-444444444444',
  capacity_mib: 32607,
  reserve_mib: 4608,
};

function serve(name: string, port: number, extra: Table = {}): Table {
  return {
    name,
    gpu_role: 'dark-fast',
    class: 'resident',
    vram_mib: 1024,
    image: 'vllm/vllm-openai:v0.11.0',
    model: `org/${name}`,
    served_model_name: name,
    port,
    // 0.03 x 32607 = 978 <= 1024, so the base serve is consistent with the utilization rule.
    args: ['--gpu-memory-utilization', '0.03'],
    ...extra,
  };
}

/**
 * Renders a manifest: the base is one GPU and two valid serves; `serves`/`gpus` replace the
 * lists, and a key set to undefined in an override is left out of the TOML.
 */
function render(over: { node?: Table | undefined; gpus?: Table[]; serves?: Table[]; top?: Table } = {}): string {
  const doc: Table = {
    node: 'node' in over ? over.node : { name: 'test-node' },
    gpus: over.gpus ?? [GPU],
    serves: over.serves ?? [serve('alpha', 31001), serve('beta', 31002)],
    ...over.top,
  };
  return stringify(JSON.parse(JSON.stringify(doc)) as Table);
}

function parse(text: string): ManifestResult {
  return parseManifest(text, FILE);
}

function errorsOf(result: ManifestResult): ManifestIssue[] {
  assert.equal(result.ok, false, 'expected the manifest to be rejected');
  return result.ok ? [] : result.errors;
}

/** Asserts exactly one error, at `path`, whose message contains every fragment. */
function assertOneError(result: ManifestResult, path: string, ...fragments: string[]): ManifestIssue {
  const errors = errorsOf(result);
  assert.equal(errors.length, 1, `expected one error, got:\n${errors.map(formatIssue).join('\n')}`);
  const [issue] = errors as [ManifestIssue];
  assert.equal(issue.file, FILE);
  assert.equal(issue.path, path);
  for (const f of fragments) assert.ok(issue.message.includes(f), `message ${JSON.stringify(issue.message)} lacks ${JSON.stringify(f)}`);
  const where = issue.subject ? `${issue.subject} (${path})` : path;
  assert.ok(formatIssue(issue).startsWith(`${FILE}: ${where ? `${where}: ` : ''}`));
  return issue;
}

function assertOk(result: ManifestResult) {
  if (!result.ok) assert.fail(`expected ok, got:\n${result.errors.map(formatIssue).join('\n')}`);
  return result;
}

describe('example manifest (examples/primary-node/serves.toml)', () => {
  const result = parseManifest(readFileSync(join(ROOT, EXAMPLE), 'utf8'), EXAMPLE);

  test('parses with no errors and no warnings', () => {
    const ok = assertOk(result);
    assert.deepEqual(ok.warnings, []);
    assert.equal(ok.manifest.node, 'primary-node');
    assert.deepEqual(
      ok.manifest.serves.map((s) => [s.name, s.class, s.vramMib, s.port]),
      [
        ['fast', 'resident', 14336, 30001],
        ['embeddings', 'resident', 3200, 30003],
        ['reranker', 'resident', 3456, 30004],
        ['ocr', 'resident', 5120, 30007],
        ['vision', 'evictable', 12288, 30008],
        ['chat-large', 'on-demand', 12288, 30010],
        ['comfyui-sim', 'on-demand', 8192, 30009],
      ],
    );
  });

  test("matches the seed box's ledger arithmetic", () => {
    const { manifest } = assertOk(result);
    const [gpu] = manifest.gpus;
    assert.ok(gpu);
    assert.equal(manifest.gpus.length, 1);
    assert.equal(gpu.role, 'dark-fast');
    assert.match(gpu.uuid, /^GPU-/);
    assert.equal(gpu.capacityMib, 32607);
    assert.equal(gpu.reserveMib, 4608);
    const budget = gpu.capacityMib - gpu.reserveMib;
    const residents = manifest.serves.filter((s) => s.class === 'resident').reduce((sum, s) => sum + s.vramMib, 0);
    assert.equal(budget, 27999);
    assert.equal(residents, 26112);
    assert.equal(budget - residents, 1887);
    const vision = findServe(manifest, 'vision');
    assert.ok(vision);
    assert.equal(vision.vramMib - (budget - residents), 10401);
  });

  test('serves are loopback-bound, tiered and consistent with their utilization', () => {
    const { manifest } = assertOk(result);
    for (const s of manifest.serves) {
      assert.equal(s.bind, '127.0.0.1', s.name);
      assert.equal(gpuFor(manifest, s).role, 'dark-fast');
      if (s.name === 'comfyui-sim') assert.equal(s.routerTier, undefined, s.name);
      else assert.equal(s.routerTier, `${s.name}-local`, s.name);
    }
    const fast = findServe(manifest, 'fast');
    assert.ok(fast);
    assert.equal(fast.model, 'leon-se/gemma-4-E4B-it-FP8-Dynamic');
    assert.equal(fast.servedModelName, 'gemma4-e4b-it');
    assert.deepEqual(
      findGpuMemoryUtilization(fast.args).map((f) => f.value),
      [0.4396],
    );
    const vision = findServe(manifest, 'vision');
    assert.ok(vision);
    assert.equal(vision.model, 'Qwen/Qwen3-VL-4B-Instruct');
    assert.equal(vision.servedModelName, 'qwen3-vl-4b-instruct');
    assert.equal(vision.routerTier, 'vision-local');
    const kv = vision.args.indexOf('--kv-cache-memory-bytes');
    assert.equal(vision.args[kv + 1], '1342177280');
    assert.equal(findServe(manifest, 'comfyui-sim')?.class, 'on-demand');
  });
});

describe('valid manifests', () => {
  test('defaults are applied', () => {
    const text = render({
      serves: [
        {
          name: 'plain',
          gpu_role: 'dark-fast',
          class: 'evictable',
          vram_mib: 2048,
          image: 'example/server:1',
          model: 'org/plain',
          served_model_name: 'plain-model',
          port: 31000,
        },
      ],
    });
    const { manifest, warnings } = assertOk(parse(text));
    assert.deepEqual(warnings, []);
    assert.deepEqual(manifest.serves[0], {
      name: 'plain',
      gpuRole: 'dark-fast',
      class: 'evictable',
      api: 'openai',
      vramMib: 2048,
      image: 'example/server:1',
      model: 'org/plain',
      servedModelName: 'plain-model',
      port: 31000,
      containerPort: 8000,
      bind: '127.0.0.1',
      args: [],
      env: {},
      healthPath: '/health',
      startTimeoutS: 600,
      stopTimeoutS: 30,
      minResidencyS: 120,
    });
  });

  test('api "none" and "http" need no model: the name labels the serve, args are its command', () => {
    const job = serve('job', 31003, { api: 'none', class: 'on-demand', model: undefined, served_model_name: undefined, args: ['sleep', 'infinity'] });
    const comfy = serve('comfy', 31004, {
      api: 'http',
      class: 'on-demand',
      model: undefined,
      served_model_name: undefined,
      args: [],
      health_path: '/system_stats',
    });
    const { manifest } = assertOk(parse(render({ serves: [serve('alpha', 31001), job, comfy] })));
    const [, j, c] = manifest.serves;
    assert.deepEqual([j?.api, j?.model, j?.servedModelName, j?.args], ['none', 'job', 'job', ['sleep', 'infinity']]);
    assert.deepEqual([c?.api, c?.healthPath, c?.args], ['http', '/system_stats', []]);
  });

  test('explicit optional fields are normalized to camelCase', () => {
    const text = render({
      serves: [
        serve('full', 31000, {
          revision: 'abc123',
          container_port: 9000,
          bind: '127.0.0.2',
          router_tier: 'tier-x',
          env: { HF_HUB_OFFLINE: '1' },
          health_path: '/v1/models',
          start_timeout_s: 900,
          stop_timeout_s: 0,
        }),
      ],
    });
    const s = assertOk(parse(text)).manifest.serves[0];
    assert.ok(s);
    assert.equal(s.revision, 'abc123');
    assert.equal(s.containerPort, 9000);
    assert.equal(s.bind, '127.0.0.2');
    assert.equal(s.routerTier, 'tier-x');
    assert.deepEqual(s.env, { HF_HUB_OFFLINE: '1' });
    assert.equal(s.healthPath, '/v1/models');
    assert.equal(s.startTimeoutS, 900);
    assert.equal(s.stopTimeoutS, 0);
  });

  test('the result is JSON-safe (round-trips through JSON)', () => {
    const result = assertOk(parse(render()));
    assert.deepEqual(JSON.parse(JSON.stringify(result.manifest)), result.manifest);
  });

  test('reserve_mib = 0 is allowed', () => {
    assertOk(parse(render({ gpus: [{ ...GPU, reserve_mib: 0 }] })));
  });

  test('no serves is a valid (empty) manifest', () => {
    const { manifest } = assertOk(parse(render({ serves: [] })));
    assert.deepEqual(manifest.serves, []);
  });
});

describe('rejected manifests: one rule each', () => {
  test('malformed TOML: one error with line and column', () => {
    const text = ['[node]', 'name = "n"', '', '[[gpus]]', 'role = "dark-fast"', 'uuid = "GPU-1"', 'capacity_mib = = 3', ''].join('\n');
    const issue = assertOneError(parse(text), 'gpus[0].capacity_mib', 'line 7, column 16: invalid TOML: ');
    assert.ok(formatIssue(issue).startsWith(`${FILE}: gpus[0].capacity_mib: line 7, column 16: invalid TOML: invalid value`));
  });

  test('malformed TOML: redefined key', () => {
    assertOneError(parse('[node]\nname = "a"\nname = "b"\n'), 'node.name', 'line 3, column 1: invalid TOML: ');
  });

  test('malformed TOML: an integer past what TOML keeps exactly is named by its key', () => {
    const text = render({ serves: [serve('alpha', 31001), serve('beta', 31002, { vram_mib: 424242 })] }).replace('424242', '99999999999999999999');
    assertOneError(parse(text), 'serves[1].vram_mib', 'invalid TOML: integer value cannot be represented losslessly');
  });

  test('malformed TOML: the key a line assigns, under its table, where the error is in its value or redefines it', () => {
    const inValue = (text: string, line: number) => tomlKeyPath(text, line, 99, 'invalid value');
    const router = ['[[tiers]]', 'name = "a"', '[[tiers]]', 'name = "b"', '[tiers.on_demand]', 'serve = '].join('\n');
    assert.deepEqual(inValue(router, 6), ['tiers', 1, 'on_demand', 'serve']);
    const nested = ['[[a]]', '[[a.b]]', '[[a.b]]', '[[a]]', '[[a.b]]', 'x.y = '].join('\n');
    assert.deepEqual(inValue(nested, 6), ['a', 1, 'b', 0, 'x', 'y']);
    assert.deepEqual(inValue('top = ', 1), ['top']);
    assert.deepEqual(tomlKeyPath('[node]\nname = "a"\nname = "b"', 3, 1, 'trying to redefine an already defined table or value'), ['node', 'name']);
    assert.equal(inValue('[[serves]\nname = "x"', 1), undefined, 'a header line assigns no key');
    assert.equal(inValue('s = """\n[x]\n"""\n[t]\nk = ', 5), undefined, 'a multi-line string may hide a header');
    assert.equal(inValue('[[serves]]\n["node"]\nvram = 1', 3), undefined, 'a quoted header is not followed');
    assert.equal(
      tomlKeyPath('a = 1\nenv = 3', 2, 1, 'expected comma or end of structure'),
      undefined,
      'at the line start: the statement before may be the open one',
    );
  });

  test('malformed TOML: an array left open is not blamed on the key after it', () => {
    const closed = render({ serves: [serve('alpha', 31001)] });
    const text = closed.replace(/args = \[[^\]\n]*\]/, 'args = [\n  "--gpu-memory-utilization",\n  "0.03"\nenv = { A = "1" }');
    assert.notEqual(text, closed);
    const issue = assertOneError(parse(text), '', 'invalid TOML: ');
    assert.doesNotMatch(formatIssue(issue), /env/);
  });

  test('unknown key in a serve, with a suggestion', () => {
    const text = render({ serves: [serve('alpha', 31001, { vram: 5 })] });
    assertOneError(parse(text), 'serves[0].vram', 'unknown key "vram"', "did you mean 'vram_mib'?");
  });

  test('unknown key in a gpu, at top level and in [node]', () => {
    const text = render({ gpus: [{ ...GPU, vendor: 'nvidia' }], top: { extra: 1 }, node: { name: 'n', zone: 'a' } });
    const errors = errorsOf(parse(text));
    assert.deepEqual(errors.map((e) => e.path).sort(), ['extra', 'gpus[0].vendor', 'node.zone']);
    for (const e of errors) assert.match(e.message, /^unknown key "/);
    assert.match(errors.find((e) => e.path === 'gpus[0].vendor')?.message ?? '', /allowed keys: role, uuid, capacity_mib, reserve_mib/);
  });

  test('unknown gpu_role lists the known roles', () => {
    const text = render({
      gpus: [GPU, { ...GPU, role: 'heavy', uuid: 'GPU-22222222-2222-2222-2222-222222222222' }],
      serves: [serve('alpha', 31001), serve('beta', 31002), serve('gamma', 31003, { gpu_role: 'dark-slow' })],
    });
    assertOneError(parse(text), 'serves[2].gpu_role', "unknown gpu_role 'dark-slow'", "known roles: 'dark-fast', 'heavy'");
  });

  test('unknown class lists the allowed classes', () => {
    const text = render({ serves: [serve('alpha', 31001, { class: 'batch' })] });
    assertOneError(parse(text), 'serves[0].class', 'unknown class "batch"', 'allowed: resident, evictable, on-demand');
  });

  test('unknown api lists the allowed ones', () => {
    const text = render({ serves: [serve('alpha', 31001, { api: 'grpc' })] });
    assertOneError(parse(text), 'serves[0].api', 'unknown api "grpc"', 'allowed: openai, http, none');
  });

  test('an openai serve (the default) without model or served_model_name', () => {
    assertOneError(parse(render({ serves: [serve('alpha', 31001, { model: undefined })] })), 'serves[0].model', 'is required for api = "openai" (the default)');
    assertOneError(
      parse(render({ serves: [serve('alpha', 31001, { served_model_name: undefined })] })),
      'serves[0].served_model_name',
      'the id /v1/models must report',
    );
  });

  test('a router tier in front of a serve that is not openai', () => {
    const text = render({ serves: [serve('alpha', 31001, { api: 'http', router_tier: 'alpha-local' })] });
    assertOneError(parse(text), 'serves[0].router_tier', 'a router tier needs api = "openai"', 'an api = "http" serve does not serve');
  });

  test('duplicate serve names: the second occurrence names the first index', () => {
    const text = render({ serves: [serve('alpha', 31001), serve('beta', 31002), serve('alpha', 31003)] });
    assertOneError(parse(text), 'serves[2].name', "duplicate serve name 'alpha'", 'first declared at serves[0]');
  });

  test('duplicate host ports on the same bind address', () => {
    const text = render({ serves: [serve('alpha', 31001), serve('beta', 31001)] });
    assertOneError(parse(text), 'serves[1].port', 'host port 31001 on 127.0.0.1 is already taken by serves[0]', "'alpha'");
  });

  test('same host port on different loopback addresses does not conflict', () => {
    const text = render({ serves: [serve('alpha', 31001), serve('beta', 31001, { bind: '127.0.0.2' })] });
    assertOk(parse(text));
  });

  test('0.0.0.0 conflicts with every address on the same port', () => {
    const text = render({
      serves: [serve('alpha', 31001, { bind: '127.0.0.2' }), serve('beta', 31001, { bind: '0.0.0.0', allow_non_loopback_bind: true })],
    });
    assertOneError(parse(text), 'serves[1].port', 'host port 31001 on 0.0.0.0', 'serves[0]', 'wildcard');
  });

  test('localhost conflicts with 127.0.0.1 on the same port', () => {
    const text = render({ serves: [serve('alpha', 31001, { bind: 'localhost' }), serve('beta', 31001)] });
    assertOneError(parse(text), 'serves[1].port', 'host port 31001', 'serves[0]');
  });

  test('duplicate gpu roles', () => {
    const text = render({ gpus: [GPU, { ...GPU, uuid: 'GPU-99999999-8888-7777-6666-555555555555' }] });
    assertOneError(parse(text), 'gpus[1].role', "duplicate gpu role 'dark-fast'", 'first declared at gpus[0]');
  });

  test('duplicate gpu uuids', () => {
    const text = render({ gpus: [GPU, { ...GPU, role: 'second' }] });
    assertOneError(parse(text), 'gpus[1].uuid', 'duplicate gpu uuid', 'first declared at gpus[0]');
  });

  test('vram_mib zero', () => {
    const text = render({ serves: [serve('a', 31001), serve('b', 31002), serve('c', 31003), serve('d', 31004, { vram_mib: 0 })] });
    const issue = assertOneError(parse(text), 'serves[3].vram_mib', 'must be a whole number of MiB in 1..1048576 (got 0)');
    assert.equal(formatIssue(issue), `${FILE}: serve 'd' (serves[3].vram_mib): must be a whole number of MiB in 1..1048576 (got 0)`);
  });

  test('vram_mib negative, fractional or a string', () => {
    for (const [bad, shown] of [
      [-5, '-5'],
      [1.5, '1.5'],
      ['1024', '"1024"'],
    ] as const) {
      const text = render({ serves: [serve('alpha', 31001, { vram_mib: bad })] });
      assertOneError(parse(text), 'serves[0].vram_mib', `must be a whole number of MiB in 1..1048576 (got ${shown})`);
    }
  });

  test('capacity_mib zero or negative', () => {
    for (const bad of [0, -1]) {
      const text = render({ gpus: [{ ...GPU, capacity_mib: bad }] });
      assertOneError(parse(text), 'gpus[0].capacity_mib', `must be a whole number of MiB in 1..1048576 (got ${bad})`);
    }
  });

  test('reserve_mib negative', () => {
    const text = render({ gpus: [{ ...GPU, reserve_mib: -1 }] });
    assertOneError(parse(text), 'gpus[0].reserve_mib', 'must be a whole number of MiB in 0..1048575 (got -1)');
  });

  test('reserve_mib >= capacity_mib', () => {
    for (const reserve of [32607, 40000]) {
      const text = render({ gpus: [{ ...GPU, reserve_mib: reserve }], serves: [] });
      assertOneError(parse(text), 'gpus[0].reserve_mib', `reserve ${reserve} MiB must be less than capacity_mib 32607 MiB`);
    }
  });

  test('a reservation larger than the GPU budget', () => {
    const serves = ['a', 'b', 'c', 'd', 'e'].map((n, i) => serve(n, 31001 + i));
    serves.push(serve('big', 31010, { vram_mib: 40000, args: [] }));
    const issue = assertOneError(parse(render({ serves })), 'serves[5].vram_mib');
    assert.equal(issue.message, "40000 MiB exceeds the budget of gpu_role 'dark-fast' (capacity 32607 − reserve 4608 = 27999 MiB)");
  });

  test('a reservation of exactly the budget is fine', () => {
    assertOk(parse(render({ serves: [serve('big', 31010, { vram_mib: 27999, args: [] })] })));
  });

  test('non-loopback bind without the allow flag', () => {
    for (const bind of ['0.0.0.0', '192.168.1.20', '::']) {
      const text = render({ serves: [serve('alpha', 31001, { bind })] });
      assertOneError(parse(text), 'serves[0].bind', `'${bind}' is not a loopback address`, 'allow_non_loopback_bind = true');
    }
  });

  test('non-loopback bind with allow_non_loopback_bind = true is a warning', () => {
    const text = render({ serves: [serve('alpha', 31001, { bind: '0.0.0.0', allow_non_loopback_bind: true })] });
    const result = assertOk(parse(text));
    assert.equal(result.warnings.length, 1);
    const [w] = result.warnings as [ManifestIssue];
    assert.equal(w.file, FILE);
    assert.equal(w.path, 'serves[0].bind');
    assert.match(w.message, /non-loopback address '0\.0\.0\.0' \(allowed by allow_non_loopback_bind = true\)/);
    assert.equal(result.manifest.serves[0]?.bind, '0.0.0.0');
  });

  test('loopback binds need no allow flag', () => {
    const binds = ['127.0.0.1', '127.1.2.3', '::1', '0:0:0:0:0:0:0:1', 'localhost'];
    const text = render({ serves: binds.map((bind, i) => serve(`s${i}`, 31001 + i, { bind })) });
    const result = assertOk(parse(text));
    assert.deepEqual(result.warnings, []);
  });

  test('bind must be an address', () => {
    const text = render({ serves: [serve('alpha', 31001, { bind: 'my-host.example' })] });
    assertOneError(parse(text), 'serves[0].bind', "must be an IPv4 or IPv6 address, or 'localhost'", '"my-host.example"');
  });

  test('--gpu-memory-utilization u: vram_mib below u x capacity is an error (both forms)', () => {
    for (const args of [
      ['--gpu-memory-utilization', '0.4396', '--max-model-len', '32768'],
      ['--max-model-len', '32768', '--gpu-memory-utilization=0.4396'],
    ]) {
      const text = render({ serves: [serve('fast', 31001, { vram_mib: 14333, args })] });
      assertOneError(parse(text), 'serves[0].vram_mib', '14333 MiB', '0.4396', '32607', '= 14334 MiB', 'at least 14334');
    }
  });

  test('--gpu-memory-utilization u: vram_mib at floor(u x capacity) passes', () => {
    for (const vram_mib of [14334, 14336]) {
      const text = render({ serves: [serve('fast', 31001, { vram_mib, args: ['--gpu-memory-utilization', '0.4396'] })] });
      assertOk(parse(text));
    }
  });

  test('--kv-cache-memory-bytes B: vram_mib below B in MiB is an error (a size written in GiB); at it, or a value vLLM reads otherwise, passes', () => {
    for (const args of [
      ['--kv-cache-memory-bytes', '1342177280', '--max-model-len', '16384'],
      ['--max-model-len', '16384', '--kv-cache-memory-bytes=1342177280'],
    ]) {
      const text = render({ serves: [serve('vision', 31001, { vram_mib: 12, args })] });
      assertOneError(parse(text), 'serves[0].vram_mib', '12 MiB is less than the KV cache alone', '1342177280 is 1280 MiB', '12 GiB would be 12288');
    }
    const kv = (vram_mib: number, value: string, extra: Table = {}) =>
      parse(render({ serves: [serve('vision', 31001, { vram_mib, args: ['--kv-cache-memory-bytes', value], ...extra })] }));
    assertOk(kv(1280, '1342177280'));
    assertOk(kv(12, '1G'));
    // Not vLLM: the flag is the image's own business.
    assertOk(kv(12, '1342177280', { api: 'http' }));
  });

  test('capacity_mib below 1 GiB: warned as a size in GiB; with a reserve above it, the error says so', () => {
    const small = parse(
      render({
        gpus: [{ ...GPU, capacity_mib: 32, reserve_mib: 4 }],
        serves: [serve('alpha', 31001, { vram_mib: 12, args: ['--gpu-memory-utilization', '0.3'] })],
      }),
    );
    assert.ok(small.ok, JSON.stringify(!small.ok && small.errors));
    assert.deepEqual(
      small.warnings.map((w) => `${w.path}: ${w.message}`),
      [
        "gpus[0].capacity_mib: 32 MiB is less than any GPU has: sizes in the manifest are MiB, as nvidia-smi's memory.total reports them (32 GiB would be 32768)",
      ],
    );
    assert.deepEqual(assertOk(parse(render({ gpus: [{ ...GPU, capacity_mib: 1024, reserve_mib: 0 }], serves: [] }))).warnings, []);
    assertOneError(
      parse(render({ gpus: [{ ...GPU, capacity_mib: 32 }], serves: [] })),
      'gpus[0].reserve_mib',
      'capacity_mib 32 MiB',
      '; capacity_mib is in MiB: 32 GiB would be 32768',
    );
  });

  test("no memory flag on a vLLM image: warned for an OpenAI serve, not for one that runs something else (api 'http' or 'none')", () => {
    const bare = (api?: string) => serve('alpha', 31001, { args: [], ...(api ? { api } : {}) });
    const warned = parse(render({ serves: [bare()] }));
    assert.ok(warned.ok);
    assert.deepEqual(
      warned.warnings.map((w) => `${w.path}: ${w.message.slice(0, 60)}`),
      ['serves[0].args: no --gpu-memory-utilization or --kv-cache-memory-bytes: vLLM'],
    );
    for (const api of ['http', 'none']) assert.deepEqual(assertOk(parse(render({ serves: [bare(api)] }))).warnings, [], `api ${api}`);
  });

  test('--gpu-memory-utilization outside (0, 1] or not a number', () => {
    for (const [args, index] of [
      [['--gpu-memory-utilization', '0'], 1],
      [['--gpu-memory-utilization', '1.5'], 1],
      [['--max-model-len', '1024', '--gpu-memory-utilization=abc'], 2],
      [['--gpu-memory-utilization=-0.2'], 0],
    ] as const) {
      const text = render({ serves: [serve('alpha', 31001, { args: [...args] })] });
      assertOneError(parse(text), `serves[0].args[${index}]`, '--gpu-memory-utilization must be a fraction in (0, 1]');
    }
  });

  test('--gpu-memory-utilization without a value', () => {
    const text = render({ serves: [serve('alpha', 31001, { args: ['--gpu-memory-utilization', '--enforce-eager'] })] });
    assertOneError(parse(text), 'serves[0].args[0]', '--gpu-memory-utilization needs a value');
  });

  test('--gpu-memory-utilization = 1 is allowed when the reservation covers the card', () => {
    const gpus = [{ ...GPU, reserve_mib: 0 }];
    assertOk(parse(render({ gpus, serves: [serve('all', 31001, { vram_mib: 32607, args: ['--gpu-memory-utilization=1'] })] })));
  });

  test("secrets in args: vLLM's --hf-token and --api-key move to env (both forms); the rest of args stays in order", () => {
    const args = [
      '--gpu-memory-utilization',
      '0.03',
      '--hf-token',
      'hf_abc123',
      '--max-model-len',
      '4096',
      '--api_key=sk-xyz',
      '--tokenizer',
      't/x',
      '--max-num-batched-tokens',
      '8192',
    ];
    const { manifest } = assertOk(parse(render({ serves: [serve('alpha', 31001, { args, env: { HF_HUB_OFFLINE: '0' } })] })));
    const alpha = findServe(manifest, 'alpha');
    assert.deepEqual(alpha?.args, ['--gpu-memory-utilization', '0.03', '--max-model-len', '4096', '--tokenizer', 't/x', '--max-num-batched-tokens', '8192']);
    assert.deepEqual(alpha?.env, { HF_HUB_OFFLINE: '0', HF_TOKEN: 'hf_abc123', VLLM_API_KEY: 'sk-xyz' });
    // A bare --hf-token (use the stored login) carries no secret and stays.
    const bare = findServe(assertOk(parse(render({ serves: [serve('alpha', 31001, { args: ['--hf-token', '--enforce-eager'] })] }))).manifest, 'alpha');
    assert.deepEqual(bare?.args, ['--hf-token', '--enforce-eager']);
  });

  test('secrets in args: any other secret flag, or one on a serve that is not vLLM, is an error naming the field', () => {
    for (const [extra, index, flag] of [
      [{ args: ['--gpu-memory-utilization', '0.03', '--db-password', 'p4ss'] }, 2, '--db-password'],
      [{ args: ['--client-secret=abc'] }, 0, '--client-secret'],
      [{ args: ['--token', 'abc'] }, 0, '--token'],
      [{ api: 'http', model: undefined, served_model_name: undefined, args: ['--api-key', 'abc'] }, 0, '--api-key'],
    ] as const) {
      const issue = assertOneError(
        parse(render({ serves: [serve('alpha', 31001, extra)] })),
        `serves[0].args[${index}]`,
        flag,
        'command line',
        '`ps`',
        'set it in env instead',
      );
      assert.equal(issue.message.includes('--hf-token → env.HF_TOKEN'), !('api' in extra), issue.message);
    }
  });

  test('secrets in args: a flag is a secret flag in any case, as the lower-case one is', () => {
    for (const [extra, flag] of [
      [{ args: ['--DB-PASSWORD', 'p4ss'] }, '--DB-PASSWORD'],
      [{ args: ['--Client_Secret=abc'] }, '--Client_Secret'],
      [{ api: 'http', model: undefined, served_model_name: undefined, args: ['--HF-TOKEN', 'y'] }, '--HF-TOKEN'],
    ] as const) {
      assertOneError(parse(render({ serves: [serve('alpha', 31001, extra)] })), 'serves[0].args[0]', flag, 'set it in env instead');
    }
    // vLLM's own, on a vLLM serve: moved to env as --hf-token is, never left on the command line.
    const { manifest } = assertOk(parse(render({ serves: [serve('alpha', 31001, { args: ['--HF-TOKEN', 'y', '--API_KEY=z'] })] })));
    const alpha = findServe(manifest, 'alpha');
    assert.deepEqual([alpha?.args, alpha?.env], [[], { HF_TOKEN: 'y', VLLM_API_KEY: 'z' }]);
  });

  test('secrets in args: a clash with env, a repeat and an empty value are errors', () => {
    const cases: [Table, number, string][] = [
      [{ args: ['--hf-token', 'a1b2'], env: { HF_TOKEN: 'c3d4' } }, 0, 'env.HF_TOKEN both set it'],
      [{ args: ['--api-key', 'a1b2', '--api-key=c3d4'] }, 2, 'more than once (first at args[0])'],
      [{ args: ['--api-key='] }, 0, 'needs a value'],
    ];
    for (const [extra, index, fragment] of cases)
      assertOneError(parse(render({ serves: [serve('alpha', 31001, extra)] })), `serves[0].args[${index}]`, fragment);
  });

  test("a routed serve with vLLM's API key is an error naming where the key is set; an unrouted one keeps it", () => {
    for (const [extra, at, fragment] of [
      [{ router_tier: 'alpha-local', args: ['--max-model-len', '4096', '--api-key', 'k1'] }, 'serves[0].args[2]', "--api-key sets vLLM's API key"],
      [{ router_tier: 'alpha-local', env: { VLLM_API_KEY: 'k1' } }, 'serves[0].env.VLLM_API_KEY', "sets vLLM's API key"],
    ] as const) {
      const issue = assertOneError(parse(render({ serves: [serve('alpha', 31001, extra)] })), at, fragment, "router_tier 'alpha-local'", 'readmit');
      assert.ok(!issue.message.includes('k1'), issue.message);
    }
    const { manifest } = assertOk(parse(render({ serves: [serve('alpha', 31001, { args: ['--api-key', 'k1'] })] })));
    assert.equal(findServe(manifest, 'alpha')?.env['VLLM_API_KEY'], 'k1');
  });

  test('port outside 1..65535', () => {
    for (const bad of [0, 70000, -1]) {
      const text = render({ serves: [serve('alpha', 31001, { port: bad })] });
      assertOneError(parse(text), 'serves[0].port', `must be an integer port in 1..65535 (got ${bad})`);
    }
    const text = render({ serves: [serve('alpha', 31001, { container_port: 65536 })] });
    assertOneError(parse(text), 'serves[0].container_port', 'must be an integer port in 1..65535 (got 65536)');
  });

  test('serve name must be a container/workflow-safe slug', () => {
    for (const bad of ['Fast', '-fast', 'fast-', 'fast_1', 'fast.1', '../x', 'a/b', 'bóx', 'x'.repeat(64), '']) {
      const text = render({ serves: [serve(bad, 31001, { served_model_name: 'm' })] });
      assertOneError(
        parse(text),
        'serves[0].name',
        "lowercase letters, digits and '-', 1..63 characters",
        'container name and a workflow id',
        `(got ${JSON.stringify(bad)})`,
      );
    }
    assertOk(parse(render({ serves: [serve('x'.repeat(63), 31001), serve('7b', 31002)] })));
  });

  test('node name: a DNS label, since it becomes container names, workflow ids and the task queue', () => {
    for (const bad of ['../x', 'box; rm -rf /', 'bóx', 'Box', 'box.local', 'box_1', '-box', 'box-', 'a'.repeat(64), "it's"]) {
      const issue = assertOneError(
        parse(render({ node: { name: bad } })),
        'node.name',
        "lowercase letters, digits and '-', 1..63 characters",
        'task queue',
        `(got ${JSON.stringify(bad)})`,
      );
      assert.equal(formatIssue(issue).split('\n').length, 1);
    }
    for (const good of ['primary-node', 'n', 'box2', 'a'.repeat(63)]) assertOk(parse(render({ node: { name: good } })));
  });

  test('gpu role: the same pattern, since it becomes the ledger workflow id', () => {
    for (const bad of ['g/x', '../g', 'Dark-Fast', 'g x', 'g.x', '']) {
      const text = render({ gpus: [{ ...GPU, role: bad }], serves: [] });
      assertOneError(parse(text), 'gpus[0].role', "lowercase letters, digits and '-'", "ledger's workflow id", `(got ${JSON.stringify(bad)})`);
    }
  });

  test('gpu uuid: GPU-<uuid> or MIG-<uuid>, as nvidia-smi -L prints it', () => {
    for (const bad of [
      'GPU-1',
      'GPU-x',
      '5a1f0c3e-8d2b-4c7a-9e6f-1b3d5c7e9a02',
      'GPU-5a1f0c3e-8d2b-4c7a-9e6f-1b3d5c7e9a0',
      'GPU-5a1f0c3e-8d2b-4c7a-9e6f-1b3d5c7e9a02 ',
      'gpu-5a1f0c3e-8d2b-4c7a-9e6f-1b3d5c7e9a02',
      'GPU-zz1f0c3e-8d2b-4c7a-9e6f-1b3d5c7e9a02',
      // The pre-R470 MIG form: its '/' would reach labels and device requests.
      'MIG-GPU-5a1f0c3e-8d2b-4c7a-9e6f-1b3d5c7e9a02/1/0',
      'GPU-5a1f0c3e-8d2b-4c7a-9e6f-1b3d5c7e9a02/../x',
    ]) {
      const text = render({ gpus: [{ ...GPU, uuid: bad }], serves: [] });
      assertOneError(parse(text), 'gpus[0].uuid', "'GPU-' or 'MIG-' and a UUID", `(got ${JSON.stringify(bad)})`);
    }
    for (const good of ['GPU-5a1f0c3e-8d2b-4c7a-9e6f-1b3d5c7e9a02', 'GPU-5A1F0C3E-8D2B-4C7A-9E6F-1B3D5C7E9A02', 'MIG-4b5e2b1c-3d4e-5f60-8a9b-0c1d2e3f4a5b']) {
      assertOk(parse(render({ gpus: [{ ...GPU, uuid: good }], serves: [] })));
    }
  });

  test('every duration and size has a bound, said in the message', () => {
    const cases: [Table, string, string][] = [
      [{ stop_timeout_s: 1e11 }, 'serves[0].stop_timeout_s', 'must be a whole number of seconds in 0..3600 (got 100000000000)'],
      [{ stop_timeout_s: 3601 }, 'serves[0].stop_timeout_s', 'in 0..3600 (got 3601)'],
      [{ stop_timeout_s: 2.5 }, 'serves[0].stop_timeout_s', 'in 0..3600 (got 2.5)'],
      [{ start_timeout_s: 86_401 }, 'serves[0].start_timeout_s', 'must be a whole number of seconds in 1..86400 (got 86401)'],
      [{ start_timeout_s: 0 }, 'serves[0].start_timeout_s', 'in 1..86400 (got 0)'],
      [{ vram_mib: 1_048_577 }, 'serves[0].vram_mib', 'must be a whole number of MiB in 1..1048576 (got 1048577)'],
    ];
    for (const [extra, path, fragment] of cases) assertOneError(parse(render({ serves: [serve('alpha', 31001, extra)] })), path, fragment);
    assertOneError(
      parse(render({ gpus: [{ ...GPU, capacity_mib: 2 ** 40 }], serves: [] })),
      'gpus[0].capacity_mib',
      'must be a whole number of MiB in 1..1048576 (got 1099511627776)',
    );
    assertOneError(parse(render({ gpus: [{ ...GPU, reserve_mib: 1e11 }], serves: [] })), 'gpus[0].reserve_mib', 'in 0..1048575 (got 100000000000)');
    // The bounds themselves are allowed.
    assertOk(
      parse(
        render({
          serves: [serve('alpha', 31001, { stop_timeout_s: 0, start_timeout_s: 86_400 }), serve('beta', 31002, { stop_timeout_s: 3600, start_timeout_s: 1 })],
        }),
      ),
    );
  });

  test('env keys must be POSIX environment variable names', () => {
    for (const [bad, path] of [
      ['A=B', 'serves[0].env["A=B"]'],
      ['1A', 'serves[0].env.1A'],
      ['A B', 'serves[0].env["A B"]'],
      ['A-B', 'serves[0].env.A-B'],
      ['Ä', 'serves[0].env["Ä"]'],
      ['', 'serves[0].env[""]'],
    ] as const) {
      const text = render({ serves: [serve('alpha', 31001, { env: { [bad]: 'x' } })] });
      assertOneError(parse(text), path, `${JSON.stringify(bad)} is not an environment variable name`);
    }
    assertOk(parse(render({ serves: [serve('alpha', 31001, { env: { HF_TOKEN: 'x', _private: 'y', a1: 'z' } })] })));
  });

  test('served_model_name must be non-empty', () => {
    const text = render({ serves: [serve('alpha', 31001, { served_model_name: '' })] });
    assertOneError(parse(text), 'serves[0].served_model_name', 'must be a non-empty string (got "")');
  });

  test("image must be a Docker image reference: a '..' path, a space, an upper-case name or a flag after the tag is refused naming the field", () => {
    for (const image of ['  ', '../containers/revop-router', 'a b', 'X:UPPER', 'gpures/fake-router:test --privileged', `${'a'.repeat(256)}:1`]) {
      const text = render({ serves: [serve('alpha', 31001, { image })] });
      assertOneError(parse(text), 'serves[0].image', 'must be a Docker image reference', `(got ${JSON.stringify(image)})`);
    }
    const digest = `sha256:${'0123456789abcdef'.repeat(4)}`;
    for (const image of [
      'vllm/vllm-openai:v0.11.0',
      'gpures/fake-vllm:test',
      'localhost:5000/a/b:c',
      `vllm/vllm-openai@${digest}`,
      `ubuntu:24.04@${digest}`,
      'x:UPPER',
    ]) {
      assertOk(parse(render({ serves: [serve('alpha', 31001, { image })] })));
    }
  });

  test('a required serve field that is missing', () => {
    const text = render({ serves: [serve('alpha', 31001, { model: undefined })] });
    assertOneError(parse(text), 'serves[0].model', 'is required');
  });

  test('at least one gpu', () => {
    assertOneError(parse(render({ gpus: [], serves: [] })), 'gpus', 'at least one GPU is required', '[[gpus]]');
    assertOneError(parse('[node]\nname = "n"\n'), 'gpus', 'at least one GPU is required');
  });

  test('node.name is required', () => {
    assertOneError(parse(render({ node: undefined })), 'node.name', 'is required');
    assertOneError(parse(render({ node: {} })), 'node.name', 'is required');
    assertOneError(parse(render({ node: { name: '' } })), 'node.name', 'must be a name of');
  });

  /** The one error, which must not carry `secret`: manifest errors reach API answers, workflow history and logs. */
  function assertOneErrorWithout(secret: string, extra: Table, path: string, message: string) {
    const issue = assertOneError(parse(render({ serves: [serve('alpha', 31001, extra)] })), path, message);
    assert.ok(!formatIssue(issue).includes(secret), formatIssue(issue));
  }

  test('env values must be strings; the error says what kind of value is there, never the value (env holds secrets)', () => {
    assertOneErrorWithout('55512345678', { env: { HF_TOKEN: 55512345678 } }, 'serves[0].env.HF_TOKEN', 'must be a string; quote it, e.g. "1" (got a number)');
    assertOneErrorWithout('hf_abc123', { env: 'HF_TOKEN=hf_abc123' }, 'serves[0].env', 'must be a table of string values (got a string)');
  });

  test('args must be strings; as env, the error never shows the value (it may follow --hf-token)', () => {
    assertOneErrorWithout('55512345678', { args: ['--hf-token', 55512345678] }, 'serves[0].args[1]', 'must be a string (got a number)');
    assertOneErrorWithout('hf_abc123', { args: '--hf-token hf_abc123' }, 'serves[0].args', 'must be an array of strings (got a string)');
  });

  test('health_path must start with /', () => {
    const text = render({ serves: [serve('alpha', 31001, { health_path: 'health' })] });
    assertOneError(parse(text), 'serves[0].health_path', "starting with '/'");
  });

  test('wrongly shaped tables never throw', () => {
    const errors = errorsOf(parse('node = 1\ngpus = "x"\nserves = 3\n'));
    assert.deepEqual(
      errors.map((e) => [e.path, e.message]),
      [
        ['node', 'must be a table (got 1)'],
        ['gpus', 'must be an array of tables, written [[gpus]] (got "x")'],
        ['serves', 'must be an array of tables, written [[serves]] (got 3)'],
      ],
    );
    const inline = errorsOf(parse('gpus = [1]\n[node]\nname = "n"\n'));
    assert.deepEqual(
      inline.map((e) => [e.path, e.message]),
      [['gpus[0]', 'must be a table (got 1)']],
    );
  });
});

describe('collecting issues', () => {
  test('all errors are collected, across gpus and serves', () => {
    const text = render({
      gpus: [
        { ...GPU, reserve_mib: -1 },
        { ...GPU, role: 'other', uuid: 'GPU-22222222-2222-2222-2222-222222222222', capacity_mib: 0 },
      ],
      serves: [
        serve('alpha', 31001, { vram_mib: 0 }),
        serve('Beta', 31002),
        serve('gamma', 70000, { class: 'sometimes' }),
        serve('delta', 31004, { gpu_role: 'nope' }),
        serve('delta', 31005),
      ],
    });
    const errors = errorsOf(parse(text));
    assert.deepEqual(
      errors.map((e) => e.path),
      [
        'gpus[0].reserve_mib',
        'gpus[1].capacity_mib',
        'serves[0].vram_mib',
        'serves[1].name',
        'serves[2].class',
        'serves[2].port',
        'serves[3].gpu_role',
        'serves[4].name',
      ],
    );
    for (const e of errors) assert.equal(e.file, FILE);
  });

  test('cross-field rules are skipped for a serve whose own fields failed', () => {
    // serves[1] has a bad vram_mib AND an unknown role, a duplicate name and a duplicate port:
    // only its own field error is reported.
    const text = render({ serves: [serve('alpha', 31001), serve('alpha', 31001, { vram_mib: -1, gpu_role: 'nope' })] });
    assertOneError(parse(text), 'serves[1].vram_mib', 'must be a whole number of MiB in 1..1048576 (got -1)');
  });

  test('serves on an invalid gpu are not also reported against it', () => {
    const text = render({ gpus: [{ ...GPU, reserve_mib: 40000 }], serves: [serve('alpha', 31001, { vram_mib: 30000, args: [] })] });
    assertOneError(parse(text), 'gpus[0].reserve_mib', 'must be less than capacity_mib');
  });
});

describe('warnings', () => {
  test('resident serves that cannot all fit warn on the gpu', () => {
    const image = 'example/server:1'; // not vLLM: no utilization flag needed
    const serves = [serve('a', 31001, { vram_mib: 20000, image, args: [] }), serve('b', 31002, { vram_mib: 10000, image, args: [] })];
    const result = assertOk(parse(render({ serves })));
    assert.equal(result.warnings.length, 1);
    assert.equal(result.warnings[0]?.path, 'gpus[0]');
    assert.match(result.warnings[0]?.message ?? '', /declare 30000 MiB, over its budget of 27999 MiB by 2001 MiB/);
  });

  test('a vLLM serve with no memory flag warns about the 0.9 default', () => {
    const result = assertOk(parse(render({ serves: [serve('alpha', 31001, { args: ['--max-model-len', '4096'] })] })));
    assert.equal(result.warnings.length, 1);
    assert.equal(result.warnings[0]?.path, 'serves[0].args');
    assert.match(result.warnings[0]?.message ?? '', /0\.9 × capacity 32607 MiB = 29346 MiB/);
  });
});

describe('helpers', () => {
  test('manifestOrThrow returns the manifest or throws ManifestError with one issue per line', () => {
    const good = parse(render());
    assert.equal(manifestOrThrow(good).node, 'test-node');

    const bad = parse(render({ serves: [serve('alpha', 31001, { vram_mib: 0 }), serve('beta', 0)] }));
    assert.throws(
      () => manifestOrThrow(bad),
      (err: unknown) => {
        assert.ok(err instanceof ManifestError);
        assert.ok(err instanceof Error);
        assert.equal(err.issues.length, 2);
        assert.equal(
          err.message,
          [
            `${FILE}: serve 'alpha' (serves[0].vram_mib): must be a whole number of MiB in 1..1048576 (got 0)`,
            `${FILE}: serve 'beta' (serves[1].port): must be an integer port in 1..65535 (got 0)`,
          ].join('\n'),
        );
        return true;
      },
    );
  });

  test('findServe and gpuFor', () => {
    const { manifest } = assertOk(parse(render()));
    const beta = findServe(manifest, 'beta');
    assert.equal(beta?.port, 31002);
    assert.equal(findServe(manifest, 'nope'), undefined);
    assert.ok(beta);
    assert.equal(gpuFor(manifest, beta).capacityMib, 32607);
    assert.throws(() => gpuFor(manifest, { ...beta, gpuRole: 'missing' }), /gpu_role 'missing'/);
  });

  test('findGpuMemoryUtilization reads both forms and the underscore spelling', () => {
    assert.deepEqual(findGpuMemoryUtilization(['--gpu-memory-utilization', '0.5']), [{ value: 0.5, raw: '0.5', index: 1 }]);
    assert.deepEqual(findGpuMemoryUtilization(['--x', '--gpu-memory-utilization=0.25']), [{ value: 0.25, raw: '0.25', index: 1 }]);
    assert.deepEqual(findGpuMemoryUtilization(['--gpu_memory_utilization', '.3']), [{ value: 0.3, raw: '.3', index: 1 }]);
    assert.deepEqual(findGpuMemoryUtilization(['--max-model-len', '4096']), []);
  });
});

describe('eviction by sleeping (vLLM sleep mode)', () => {
  // 0.37 x 32607 = 12064 <= 12288.
  const UTIL = ['--gpu-memory-utilization', '0.37'];
  const sleeper = (extra: Table = {}) =>
    serve('vision', 31003, {
      class: 'evictable',
      vram_mib: 12288,
      args: UTIL,
      eviction: 'sleep',
      sleep_level: 1,
      sleep_residual_mib: 600,
      sleep_host_ram_mib: 9000,
      ...extra,
    });

  test('a level-1 sleeper: the flag and the endpoints variable added, the settings carried; a stopped serve has none', () => {
    const { manifest } = assertOk(parse(render({ node: { name: 'n', host_ram_budget_mib: 65536 }, serves: [sleeper(), serve('alpha', 31001)] })));
    assert.equal(manifest.hostRamBudgetMib, 65536);
    const vision = findServe(manifest, 'vision');
    assert.deepEqual(vision?.sleep, { level: 1, residualMib: 600, hostRamMib: 9000 });
    assert.deepEqual(vision?.args, [...UTIL, '--enable-sleep-mode']);
    assert.equal(vision?.env['VLLM_SERVER_DEV_MODE'], '1');
    const alpha = findServe(manifest, 'alpha');
    assert.equal(alpha?.sleep, undefined);
    assert.equal(alpha?.env['VLLM_SERVER_DEV_MODE'], undefined);
    assert.ok(!alpha?.args.includes('--enable-sleep-mode'));
  });

  test('level 2 needs no host RAM; sleep_level defaults to 1; the flag given already is not repeated', () => {
    const two = assertOk(parse(render({ serves: [sleeper({ sleep_level: 2, sleep_host_ram_mib: undefined, args: ['--enable-sleep-mode', ...UTIL] })] })));
    const vision = findServe(two.manifest, 'vision');
    assert.deepEqual(vision?.sleep, { level: 2, residualMib: 600 });
    assert.deepEqual(vision?.args, ['--enable-sleep-mode', ...UTIL]);
    const one = assertOk(parse(render({ serves: [sleeper({ sleep_level: undefined })] })));
    assert.equal(findServe(one.manifest, 'vision')?.sleep?.level, 1);
  });

  test('each missing or contradictory setting is named by its field', () => {
    assertOneError(
      parse(render({ serves: [sleeper({ sleep_residual_mib: undefined })] })),
      'serves[0].sleep_residual_mib',
      'is required',
      'ledger keeps it committed',
    );
    assertOneError(parse(render({ serves: [sleeper({ sleep_residual_mib: 12288 })] })), 'serves[0].sleep_residual_mib', 'would free nothing');
    assertOneError(parse(render({ serves: [sleeper({ sleep_host_ram_mib: undefined })] })), 'serves[0].sleep_host_ram_mib', 'required with sleep_level 1');
    assertOneError(parse(render({ serves: [sleeper({ sleep_level: 3 })] })), 'serves[0].sleep_level', '1 (weights offloaded to host RAM) or 2');
    assertOneError(parse(render({ serves: [sleeper({ eviction: 'hibernate' })] })), 'serves[0].eviction', 'unknown eviction "hibernate"', 'stop, sleep');
    assertOneError(parse(render({ serves: [sleeper({ class: 'on-demand' })] })), 'serves[0].eviction', 'only evictable serves are evicted');
    assertOneError(parse(render({ serves: [sleeper({ api: 'http', model: undefined })] })), 'serves[0].eviction', 'needs a vLLM serve');
    const devMode = assertOneError(
      parse(render({ serves: [sleeper({ env: { VLLM_SERVER_DEV_MODE: 'yes-abc123' } })] })),
      'serves[0].env.VLLM_SERVER_DEV_MODE',
      'is set, and not to 1',
      'only with VLLM_SERVER_DEV_MODE=1',
    );
    assert.ok(!formatIssue(devMode).includes('abc123'), 'an env value is not shown');
    assert.deepEqual(
      errorsOf(parse(render({ serves: [sleeper({ eviction: undefined })] }))).map((e) => [e.path, e.message]),
      ['sleep_level', 'sleep_residual_mib', 'sleep_host_ram_mib'].map((f) => [
        `serves[0].${f}`,
        'applies only with eviction = "sleep" (this serve is stopped, the default when evicted)',
      ]),
    );
    assertOneError(
      parse(render({ serves: [sleeper({ eviction: 'stop', sleep_level: undefined, sleep_host_ram_mib: undefined })] })),
      'serves[0].sleep_residual_mib',
      'only with eviction',
    );
    assertOneError(parse(render({ serves: [sleeper({ sleep_host_ram_mib: 0 })] })), 'serves[0].sleep_host_ram_mib', '1..16777216');
  });

  test('warnings: host RAM unused at level 2, a level-1 sleep over the node budget, sleep endpoints beyond loopback, eviction on a resident', () => {
    const messages = (r: ManifestResult) => assertOk(r).warnings.map(formatIssue);
    assert.deepEqual(messages(parse(render({ serves: [sleeper({ sleep_level: 2 })] }))), [
      `${FILE}: serve 'vision' (serves[0].sleep_host_ram_mib): has no effect at sleep_level 2, which discards the weights instead of keeping them in host RAM`,
    ]);
    const over = messages(parse(render({ node: { name: 'n', host_ram_budget_mib: 8192 }, serves: [sleeper()] })));
    assert.equal(over.length, 1);
    assert.match(over[0] ?? '', /serves\[0\]\.sleep_host_ram_mib\): 9000 MiB is over the node's host_ram_budget_mib 8192: .* falls back to level 2$/);
    const wide = messages(parse(render({ serves: [sleeper({ bind: '0.0.0.0', allow_non_loopback_bind: true })] })));
    assert.ok(
      wide.some((w) => /serves\[0\]\.eviction\): "sleep" turns on vLLM's development endpoints .* on '0\.0\.0\.0'/.test(w)),
      wide.join('\n'),
    );
    const resident = messages(parse(render({ serves: [serve('alpha', 31001, { eviction: 'stop' })] })));
    assert.deepEqual(resident, [`${FILE}: serve 'alpha' (serves[0].eviction): has no effect: only evictable serves are evicted, and this one is resident`]);
  });

  test('[node] host_ram_budget_mib is bounded and named', () => {
    assertOneError(parse(render({ node: { name: 'n', host_ram_budget_mib: -1 } })), 'node.host_ram_budget_mib', '1..16777216');
  });
});
