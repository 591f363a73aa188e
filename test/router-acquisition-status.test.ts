// The router reads whether a running acquisition starts its serve from the API's found_running,
// not from the words of its last step: a reworded step sentence must not change what it does.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { AcquisitionApi } from '../src/router/acquisitions';
import { admission, foundRunning } from '../src/shared/wording';

describe("the router's reading of a running acquisition", () => {
  let answer: unknown;
  let server: http.Server;
  let api: AcquisitionApi;
  before(async () => {
    server = http.createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer)));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    api = new AcquisitionApi({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, token: 'x'.repeat(32) });
  });
  after(() => new Promise<void>((r) => server.close(() => r())));

  const running = async (body: object) => {
    answer = { workflow_id: 'acquire/n/s', run_id: 'r', status: 'running', ...body };
    const st = await api.status('acquire/n/s');
    assert.equal(st.status, 'running');
    return st.status === 'running' ? st.startsAfresh === true : undefined;
  };

  test('found_running decides, whatever the step says', async () => {
    // A joined run whose admit sentence was reworded, then its lease step: not starting the serve.
    assert.equal(await running({ step: { step: 'admit', outcome: 'found it up already' }, found_running: true }), false);
    assert.equal(await running({ step: { step: 'lease', outcome: 'lease of 1m' }, found_running: true }), false);
    // A fresh run past its admit (the lease step of a fresh start included): it starts the serve.
    assert.equal(await running({ step: { step: 'admit', outcome: 'admitted 512 MiB, free after 0 MiB' }, found_running: false }), true);
    assert.equal(await running({ step: { step: 'lease', outcome: 'lease of 1m' }, found_running: false }), true);
    // No step completed yet: nothing said.
    assert.equal(await running({ steps_completed: 0, found_running: false }), false);
  });

  test('an older API, without found_running: the last step read as before', async () => {
    assert.equal(await running({ step: { step: 'admit', outcome: admission.alreadyRunning } }), false);
    assert.equal(await running({ step: { step: 'lease', outcome: 'lease of 1m' } }), false);
    assert.equal(await running({ step: { step: 'quiesce vision', outcome: 'quiesced' } }), true);
  });

  test("the API's found_running: an admit that found the serve running, at any step since", () => {
    assert.equal(foundRunning([]), false);
    assert.equal(
      foundRunning([
        { step: 'admit', outcome: admission.alreadyRunning },
        { step: 'lease', outcome: 'lease of 1m' },
      ]),
      true,
    );
    assert.equal(
      foundRunning([
        { step: 'quiesce vision', outcome: 'quiesced' },
        { step: 'admit', outcome: 'admitted 512 MiB, free after 0 MiB' },
      ]),
      false,
    );
  });
});
