// What of a serve may enter workflow history, and what a log tail may not echo.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { REDACTED, redactSecrets, redactServe } from '../src/domain/serve';
import type { ServeSpec } from '../src/domain/types';

const serve: ServeSpec = {
  name: 'gated', gpuRole: 'g', class: 'resident', vramMib: 1000, image: 'i', model: 'm', servedModelName: 's',
  port: 30001, containerPort: 8000, bind: '127.0.0.1', args: ['--api-key', 'sk-one', '--max-model-len', '4096', '--api-key=sk-two'],
  env: { HF_TOKEN: 'hf_secret_value', HF_HUB_OFFLINE: '1' }, healthPath: '/health', startTimeoutS: 60, stopTimeoutS: 5,
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
