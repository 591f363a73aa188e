// The worker's environment as promotion and eviction read it: every size and duration bounded,
// every refusal naming its variable, before the worker starts (and before a promotion writes a
// config it could then not verify).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { promotionEnv, workerEnv } from '../src/config/env';

const BASE = { GPURES_ROUTER_CONFIG: '/etc/router/router.toml', GPURES_ROUTER_URL: 'http://127.0.0.1:8080', GPURES_ROUTER_TOKEN: 't'.repeat(32) };

describe('worker environment: promotion and the router', () => {
  test('the verify window, the healthz streak and the backups kept are bounded, and a refusal names its variable', () => {
    const refused: [string, string, RegExp][] = [
      ['GPURES_ROUTER_VERIFY_WINDOW_S', 'Infinity', /^Error: GPURES_ROUTER_VERIFY_WINDOW_S: a number of seconds above 0 and at most 3600 \(got 'Infinity'\)$/],
      ['GPURES_ROUTER_VERIFY_WINDOW_S', '1e8', /^Error: GPURES_ROUTER_VERIFY_WINDOW_S: .*at most 3600/],
      ['GPURES_ROUTER_VERIFY_WINDOW_S', '0', /^Error: GPURES_ROUTER_VERIFY_WINDOW_S: .*above 0/],
      ['GPURES_ROUTER_HEALTHZ_STREAK', '1e21', /^Error: GPURES_ROUTER_HEALTHZ_STREAK: an integer from 1 to 100 \(got '1e21'\)$/],
      ['GPURES_ROUTER_HEALTHZ_STREAK', '2.5', /^Error: GPURES_ROUTER_HEALTHZ_STREAK: an integer/],
      ['GPURES_ROUTER_BACKUPS_KEPT', '1e9', /^Error: GPURES_ROUTER_BACKUPS_KEPT: an integer from 1 to 1000 \(got '1e9'\)$/],
      ['GPURES_ROUTER_BACKUPS_KEPT', ' ', /^Error: GPURES_ROUTER_BACKUPS_KEPT: an integer/],
    ];
    for (const [name, value, message] of refused) assert.throws(() => promotionEnv({ ...BASE, [name]: value }), message, `${name}=${value}`);
    const kept = promotionEnv({ ...BASE, GPURES_ROUTER_VERIFY_WINDOW_S: '3600', GPURES_ROUTER_HEALTHZ_STREAK: '100', GPURES_ROUTER_BACKUPS_KEPT: '1000' });
    assert.deepEqual([kept?.verifyWindowS, kept?.healthzStreak, kept?.backupsKept], [3600, 100, 1000]);
    assert.equal(promotionEnv({ ...BASE, GPURES_ROUTER_VERIFY_WINDOW_S: '0.5' })?.verifyWindowS, 0.5);
  });

  test("the router's name is one a promotion can name, its container-side config path absolute, and an empty GPURES_NVIDIA_SMI is the default", () => {
    assert.throws(
      () => promotionEnv({ ...BASE, GPURES_ROUTER_NAME: 'bad name/..' }),
      /^Error: GPURES_ROUTER_NAME: a name of letters, digits, '\.', '_' and '-', starting with a letter or digit, such as router \(got 'bad name\/\.\.'\)$/,
    );
    assert.equal(promotionEnv({ ...BASE, GPURES_ROUTER_NAME: 'edge-1.router' })?.name, 'edge-1.router');
    assert.throws(
      () => promotionEnv({ ...BASE, GPURES_ROUTER_CONTAINER_CONFIG: 'relative/x.toml' }),
      /^Error: GPURES_ROUTER_CONTAINER_CONFIG: an absolute path inside the router's container, such as \/config\/router\.toml \(got 'relative\/x\.toml'\)$/,
    );
    assert.equal(promotionEnv({ ...BASE, GPURES_ROUTER_CONTAINER_CONFIG: '/srv/router.toml' })?.containerConfigPath, '/srv/router.toml');
    assert.equal(workerEnv({ GPURES_NVIDIA_SMI: '' }).nvidiaSmi, 'nvidia-smi');
    assert.equal(workerEnv({ GPURES_NVIDIA_SMI: '/opt/bin/nvidia-smi' }).nvidiaSmi, '/opt/bin/nvidia-smi');
  });

  test('GPURES_ROUTER_VALIDATE_ARGS that is not JSON is refused by name, with what it should be', () => {
    assert.throws(
      () => promotionEnv({ ...BASE, GPURES_ROUTER_VALIDATE_ARGS: "['--validate-only']" }),
      /^Error: GPURES_ROUTER_VALIDATE_ARGS: a JSON array of strings such as \["--validate-only"\] \(got '\['--validate-only'\]': /,
    );
    assert.throws(() => promotionEnv({ ...BASE, GPURES_ROUTER_VALIDATE_ARGS: '{"a":1}' }), /^Error: GPURES_ROUTER_VALIDATE_ARGS: a JSON array of strings$/);
    assert.deepEqual(promotionEnv({ ...BASE, GPURES_ROUTER_VALIDATE_ARGS: '["--check","{config}"]' })?.validateArgs, ['--check', '{config}']);
  });

  test('GPURES_ROUTER_URL is an http(s) base URL without credentials, for eviction and promotion alike', () => {
    for (const read of [(e: Record<string, string>) => workerEnv(e), (e: Record<string, string>) => promotionEnv(e)]) {
      assert.throws(() => read({ ...BASE, GPURES_ROUTER_URL: 'htp:/oops' }), /^Error: GPURES_ROUTER_URL: an http\(s\) base URL/);
      // The password never reaches the message (nor the worker's start line, nor history).
      assert.throws(
        () => read({ ...BASE, GPURES_ROUTER_URL: 'http://admin:hunter2@127.0.0.1:8080' }),
        (err: Error) =>
          /^GPURES_ROUTER_URL: .*without credentials \(got 'http:\/\/\*\*\*@127\.0\.0\.1:8080'\)$/.test(err.message) && !err.message.includes('hunter2'),
      );
    }
    assert.equal(workerEnv({ ...BASE, GPURES_ROUTER_URL: 'http://127.0.0.1:8080/' }).router?.url, 'http://127.0.0.1:8080');
    assert.equal(promotionEnv(BASE)?.url, 'http://127.0.0.1:8080');
  });
});
