// What of a serve may enter workflow history, and what a log tail may not echo.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { findSecretArgs, isSecretFlag, REDACTED, redactSecrets, redactServe, secretArgsToEnv } from '../src/domain/serve';
import type { ServeSpec } from '../src/domain/types';

const serve: ServeSpec = {
  name: 'gated',
  gpuRole: 'g',
  class: 'resident',
  vramMib: 1000,
  image: 'i',
  model: 'm',
  servedModelName: 's',
  port: 30001,
  containerPort: 8000,
  bind: '127.0.0.1',
  args: ['--api-key', 'sk-one', '--max-model-len', '4096', '--api-key=sk-two'],
  env: { HF_TOKEN: 'hf_secret_value', HF_HUB_OFFLINE: '1' },
  healthPath: '/health',
  startTimeoutS: 60,
  stopTimeoutS: 5,
};

test('redactServe keeps env names and ordinary args, hides env values and --api-key values', () => {
  const r = redactServe(serve);
  assert.deepEqual(r.env, { HF_TOKEN: REDACTED, HF_HUB_OFFLINE: REDACTED });
  assert.deepEqual(r.args, ['--api-key', REDACTED, '--max-model-len', '4096', `--api-key=${REDACTED}`]);
  assert.ok(!JSON.stringify(r).includes('sk-one') && !JSON.stringify(r).includes('hf_secret_value'));
  assert.equal(serve.env['HF_TOKEN'], 'hf_secret_value', 'the original is not modified');
});

test('redactSecrets removes every secret value from a log tail', () => {
  const tail = "args: Namespace(api_key='sk-one', model='m') | token hf_secret_value | key sk-two | offline 1";
  assert.equal(redactSecrets(tail, serve), `args: Namespace(api_key='${REDACTED}', model='m') | token ${REDACTED} | key ${REDACTED} | offline 1`);
});

test('a secret flag is one with a word token, key, secret, password, passwd or credential(s)', () => {
  for (const f of [
    '--hf-token',
    '--api-key',
    '--api_key',
    '--token',
    '--password',
    '--db-passwd',
    '--client-secret',
    '--aws-credentials',
    '--openai-apikey',
    '--KEY',
  ])
    assert.ok(isSecretFlag(f), f);
  for (const f of ['--tokenizer', '--max-num-batched-tokens', '--ssl-keyfile', '--skip-tokenizer-init', '--keyring-path', 'token', '-k'])
    assert.ok(!isSecretFlag(f), f);
});

test('findSecretArgs: both forms; a bare flag carries no value', () => {
  assert.deepEqual(
    findSecretArgs(['--hf-token', 'hf_x', '--hf-token', '--api-key=sk', '--x-token']).map((s) => [s.canonical, s.index, s.valueIndex, s.value]),
    [
      ['--hf-token', 0, 1, 'hf_x'],
      ['--api-key', 3, 3, 'sk'],
    ],
  );
});

test('secretArgsToEnv: vLLM flags with an env equivalent leave the command line', () => {
  const moved = secretArgsToEnv({ ...serve, args: ['--hf-token', 'hf_x', '--max-model-len', '4096', '--api-key=sk-two'], env: {} });
  assert.deepEqual(moved.args, ['--max-model-len', '4096']);
  assert.deepEqual(moved.env, { HF_TOKEN: 'hf_x', VLLM_API_KEY: 'sk-two' });
});
