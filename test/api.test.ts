// The acquisition API's answers that never reach Temporal: auth, body and route errors, all in
// one error shape.
import { after, test } from 'node:test';
import assert from 'node:assert/strict';
import { Client } from '@temporalio/client';
import type { InjectOptions } from 'fastify';
import { buildApi } from '../src/client/api';
import { parseManifest } from '../src/domain/manifest';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';

const file = resolve(__dirname, '..', '..', 'examples', 'primary-node', 'serves.toml');
const parsed = parseManifest(readFileSync(file, 'utf8'), file);
assert.ok(parsed.ok);
// A lazy client: none of these requests may reach it.
const client = new Client();
const api = buildApi({ client, manifest: parsed.manifest, manifestFile: file, token: 's3cret' });
const auth = { authorization: 'Bearer s3cret' };
after(async () => {
  await api.close();
  await client.connection.close();
});

test('no token, a wrong token: 401, and the token is compared whole', async () => {
  for (const headers of [{}, { authorization: 'Bearer s3cre' }, { authorization: 'Bearer s3cret!' }, { authorization: 's3cret' }]) {
    const r = await api.inject({ method: 'POST', url: '/v1/acquisitions', headers, payload: { serve: 'comfyui-sim', evict: true } });
    assert.equal(r.statusCode, 401);
    assert.deepEqual(r.json(), { error: { type: 'unauthorized', message: 'missing or wrong bearer token' } });
  }
});

test('bad bodies, unknown serves and routes answer in the API error shape', async () => {
  const cases: [InjectOptions, number, string, RegExp][] = [
    [{ method: 'POST', url: '/v1/acquisitions', headers: auth, payload: { serve: 'comfyui-sim', evict: 'yes' } }, 400, 'bad_request', /^evict: /],
    [{ method: 'POST', url: '/v1/acquisitions', headers: auth, payload: { serve: 'comfyui-sim', drainTimeoutS: 3 } }, 400, 'bad_request', /Unrecognized key/],
    // Bounded as the CLI and the workflow bound it: refused before anything reaches Temporal.
    [{ method: 'POST', url: '/v1/acquisitions', headers: { ...auth, 'content-type': 'application/json' }, payload: '{"serve": "comfyui-sim", "evict": true, "drain_timeout_s": 1e300}' }, 400, 'bad_request', /^drain_timeout_s: must be a whole number of seconds in 1\.\.3600 \(got 1e\+300\)$/],
    [{ method: 'POST', url: '/v1/acquisitions', headers: auth, payload: { serve: 'comfyui-sim', drain_timeout_s: 0.5 } }, 400, 'bad_request', /^drain_timeout_s: must be a whole number of seconds in 1\.\.3600 \(got 0\.5\)$/],
    [{ method: 'POST', url: '/v1/acquisitions', headers: { ...auth, 'content-type': 'application/json' }, payload: '{"serve": ' }, 400, 'bad_request', /JSON/i],
    [{ method: 'POST', url: '/v1/acquisitions', headers: { ...auth, 'content-type': 'application/x-www-form-urlencoded' }, payload: 'serve=x' }, 415, 'bad_request', /Unsupported Media Type/i],
    [{ method: 'POST', url: '/v1/acquisitions', headers: auth, payload: { serve: 'comfyui' } }, 404, 'unknown_serve', /no serve named 'comfyui'/],
    [{ method: 'GET', url: '/v1/acquisitions/serves-up%2Fprimary-node%2Fvision', headers: auth }, 404, 'not_found', /is not an acquisition/],
    [{ method: 'GET', url: '/v1/nothing', headers: auth }, 404, 'not_found', /no route GET \/v1\/nothing/],
  ];
  for (const [req, status, type, message] of cases) {
    const r = await api.inject(req);
    assert.equal(r.statusCode, status, r.body);
    const body = r.json<{ error: { type: string; message: string } }>();
    assert.equal(body.error.type, type, r.body);
    assert.match(body.error.message, message);
  }
});
