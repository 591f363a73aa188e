// [tiers.on_demand] and retry_after_s in the router config, their cross-check against the manifest,
// and the router's acquisition API environment. No server: parse, check and read only.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { routerProcessEnv } from '../src/config/env';
import { parseManifest } from '../src/config/manifest';
import { checkRouterAgainstManifest, parseRouterConfig } from '../src/config/router-config';
import { ROUTER_BOUNDS } from '../src/config/router-model';
import { formatIssue } from '../src/domain/types';

const ROOT = join(__dirname, '..', '..');
const CFG = 'router.toml';

function tierWith(onDemand: string, extra = ''): string {
  return [
    'mapping_version = "m1"',
    extra,
    '[[tiers]]',
    'name = "big-local"',
    'backend = "http://127.0.0.1:30010"',
    'served_model_name = "qwen3-14b-awq"',
    'model_identity = true',
    '[tiers.on_demand]',
    onDemand,
    '[[presets]]',
    'name = "big"',
    'tier = "big-local"',
    '',
  ].join('\n');
}

const errors = (text: string) => {
  const r = parseRouterConfig(text, CFG);
  assert.equal(r.ok, false, 'expected the config to be rejected');
  return r.ok ? [] : r.errors.map(formatIssue);
};

describe('[tiers.on_demand]', () => {
  test('defaults: evict false, the bounds table defaults, retry_after_s 10', () => {
    const r = parseRouterConfig(tierWith('serve = "chat-large"'), CFG);
    assert.ok(r.ok);
    assert.equal(r.config.retryAfterS, ROUTER_BOUNDS.retryAfterS.default);
    assert.deepEqual(r.config.tiers[0]?.onDemand, {
      serve: 'chat-large',
      evict: false,
      queueSize: 512,
      waitTimeoutS: 300,
      keepaliveS: 15,
      abandonAfterS: 5,
    });
  });

  test('abandon_after_s: 0 (never) to 600 s, whole seconds; anything else names the file and field', () => {
    for (const v of [0, 1, 600]) {
      const r = parseRouterConfig(tierWith(`serve = "x"\nabandon_after_s = ${v}`), CFG);
      assert.ok(r.ok, `abandon_after_s = ${v}`);
      assert.equal(r.config.tiers[0]?.onDemand?.abandonAfterS, v);
    }
    assert.deepEqual(errors(tierWith('serve = "x"\nabandon_after_s = 601')), [
      "router.toml: tier 'big-local' (tiers[0].on_demand.abandon_after_s): must be a whole number of seconds in 0..600 (got 601)",
    ]);
    assert.deepEqual(errors(tierWith('serve = "x"\nabandon_after_s = -1')), [
      "router.toml: tier 'big-local' (tiers[0].on_demand.abandon_after_s): must be a whole number of seconds in 0..600 (got -1)",
    ]);
    assert.deepEqual(errors(tierWith('serve = "x"\nabandon_after_s = 2.5')), [
      "router.toml: tier 'big-local' (tiers[0].on_demand.abandon_after_s): must be a whole number of seconds in 0..600 (got 2.5)",
    ]);
  });

  test('every number is bounded, and the error names the file, the field and the bound', () => {
    assert.deepEqual(errors(tierWith('serve = "x"\nqueue_size = 0\nwait_timeout_s = 1e9\nkeepalive_s = 1.5', 'retry_after_s = 61')), [
      'router.toml: retry_after_s: must be a whole number of seconds in 1..60 (got 61)',
      "router.toml: tier 'big-local' (tiers[0].on_demand.queue_size): must be a whole number of requests in 1..4096 (got 0)",
      "router.toml: tier 'big-local' (tiers[0].on_demand.wait_timeout_s): must be a whole number of seconds in 1..3600 (got 1000000000)",
      "router.toml: tier 'big-local' (tiers[0].on_demand.keepalive_s): must be a whole number of seconds in 1..60 (got 1.5)",
    ]);
  });

  test('a missing serve, an unknown key (with a suggestion), and no model_identity are errors', () => {
    assert.deepEqual(errors(tierWith('evict = true\nqueue = 3')), [
      "router.toml: tier 'big-local' (tiers[0].on_demand.serve): is required (a non-empty string)",
      `router.toml: tier 'big-local' (tiers[0].on_demand.queue): unknown key "queue" (did you mean 'queue_size'?)`,
    ]);
    const noIdentity = tierWith('serve = "chat-large"').replace('model_identity = true\n', '');
    assert.match(errors(noIdentity).join('\n'), /^router\.toml: tiers\[0\]\.model_identity: tier 'big-local' is on demand and must set model_identity = true/);
  });

  test("a wait at or past OpenAI clients' 600 s default timeout is a warning", () => {
    const r = parseRouterConfig(tierWith('serve = "chat-large"\nwait_timeout_s = 600'), CFG);
    assert.ok(r.ok);
    assert.deepEqual(r.warnings.map(formatIssue), [
      "router.toml: tier 'big-local' (tiers[0].on_demand.wait_timeout_s): 600 s is not below OpenAI clients' default timeout of 600 s: " +
        'a client with the default gives up (and retries from scratch) before the router answers 503 with Retry-After',
    ]);
  });
});

describe('on-demand tiers against the manifest', () => {
  const manifestText = readFileSync(join(ROOT, 'examples', 'primary-node', 'serves.toml'), 'utf8');
  const m = parseManifest(manifestText, 'serves.toml');
  assert.ok(m.ok);
  const routerText = readFileSync(join(ROOT, 'examples', 'primary-node', 'router.toml'), 'utf8');
  const check = (text: string) => {
    const r = parseRouterConfig(text, CFG);
    assert.ok(r.ok, r.ok ? '' : r.errors.map(formatIssue).join('\n'));
    return checkRouterAgainstManifest(r.config, CFG, m.manifest, 'serves.toml').map((i) => `${i.severity}: ${formatIssue(i)}`);
  };

  test('the example passes; a serve not in the manifest, or whose router_tier is another tier, is an error', () => {
    assert.deepEqual(check(routerText), []);
    // The tier no longer acquires chat-large, so its idle_ttl_s would give nothing back: warned as well.
    const onHuge = check(routerText.replace('serve = "chat-large"', 'serve = "chat-huge"'));
    assert.match(
      onHuge[0] ?? '',
      /^warning: serves\.toml: serves\[5\]\.idle_ttl_s: serve 'chat-large' declares idle_ttl_s, but its tier 'chat-large-local' is not on demand for it/,
    );
    const errors = (text: string) => check(text).filter((line) => line.startsWith('error: '));
    assert.deepEqual(errors(routerText.replace('serve = "chat-large"', 'serve = "chat-huge"')), [
      "error: router.toml: tiers[5].on_demand.serve: tier 'chat-large-local' is on demand for serve 'chat-huge', which is not a serve in serves.toml " +
        "(serves with router_tier 'chat-large-local': 'chat-large')",
    ]);
    assert.deepEqual(errors(routerText.replace('serve = "chat-large"', 'serve = "vision"')), [
      "error: router.toml: tiers[5].on_demand.serve: tier 'chat-large-local' is on demand for serve 'vision', whose router_tier is 'vision-local' " +
        'in serves.toml: its acquisition would readmit another tier, and requests held here would never be let through; ' +
        'set router_tier = "chat-large-local" on the serve',
    ]);
  });
});

describe("the router's acquisition API and client token environment", () => {
  const base = { GPURES_ROUTER_TOKEN: 'router-admin-token-0123456789abcdef' };
  test('optional together, required together, a URL without credentials; the token is never in a message', () => {
    assert.equal(routerProcessEnv(base).acquisitions, undefined);
    assert.deepEqual(routerProcessEnv({ ...base, GPURES_API_URL: 'http://127.0.0.1:8090/', GPURES_API_TOKEN: 's3cret-token' }).acquisitions, {
      url: 'http://127.0.0.1:8090',
      token: 's3cret-token',
    });
    assert.throws(() => routerProcessEnv({ ...base, GPURES_API_URL: 'http://127.0.0.1:8090' }), /^Error: GPURES_API_URL is set but GPURES_API_TOKEN is not/);
    assert.throws(
      () => routerProcessEnv({ ...base, GPURES_API_TOKEN: 's3cret-token' }),
      (err: Error) => {
        assert.match(err.message, /GPURES_API_TOKEN is set but GPURES_API_URL is not/);
        assert.ok(!err.message.includes('s3cret-token'));
        return true;
      },
    );
    assert.throws(
      () => routerProcessEnv({ ...base, GPURES_API_URL: 'http://user:pw@host', GPURES_API_TOKEN: 't' }),
      /^Error: GPURES_API_URL: an http\(s\) base URL/,
    );
  });

  test('the client token: optional, at least 32 characters, none of the other two tokens; never in a message', () => {
    const api = { GPURES_API_URL: 'http://127.0.0.1:8090', GPURES_API_TOKEN: 'api-token-0123456789abcdef-0123456789' };
    const client = 'client-token-0123456789abcdef-0123456789';
    assert.equal(routerProcessEnv({ ...base, ...api }).clientToken, undefined);
    assert.equal(routerProcessEnv({ ...base, ...api, GPURES_ROUTER_CLIENT_TOKEN: '' }).clientToken, undefined, 'empty is unset');
    assert.equal(routerProcessEnv({ ...base, ...api, GPURES_ROUTER_CLIENT_TOKEN: client }).clientToken, client);
    const refused = (value: string, message: RegExp) =>
      assert.throws(
        () => routerProcessEnv({ ...base, ...api, GPURES_ROUTER_CLIENT_TOKEN: value }),
        (err: Error & { variable?: string }) => {
          assert.match(err.message, message);
          assert.equal(err.variable, 'GPURES_ROUTER_CLIENT_TOKEN');
          assert.ok(!err.message.includes(value), `the value is not quoted: ${err.message}`);
          return true;
        },
      );
    refused('s3cret-client', /^GPURES_ROUTER_CLIENT_TOKEN is 13 characters, too short to be secret: at least 32 are required/);
    refused(base.GPURES_ROUTER_TOKEN, /^GPURES_ROUTER_CLIENT_TOKEN is the same as GPURES_ROUTER_TOKEN: /);
    refused(api.GPURES_API_TOKEN, /^GPURES_ROUTER_CLIENT_TOKEN is the same as GPURES_API_TOKEN: /);
  });
});
