// POST /v1/acquisitions/{id}/abandon's answers when the run does not answer as asked: the API in
// this process over a client whose describe and Update answer as the test says (Temporal's own
// errors), so each mapping is shown without a worker to kill at the right moment.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import type { Client } from '@temporalio/client';
import { WorkflowNotFoundError, WorkflowUpdateFailedError, WorkflowUpdateRPCTimeoutOrCancelledError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { buildApi } from '../src/client/api';
import { parseManifest } from '../src/config/manifest';

const file = resolve(__dirname, '..', '..', 'examples', 'primary-node', 'serves.toml');
const parsed = parseManifest(readFileSync(file, 'utf8'), file);
if (!parsed.ok) throw new Error(`${file} does not load`);
const manifest = parsed.manifest;
const TOKEN = 'api-test-token-0123456789abcdef-0123456789';
const ID = `acquire/${manifest.node}/chat-large`;

/** A client whose run is described with `status` and whose abandon Update does `update`. */
function stubClient(status: string, update: () => Promise<unknown>): { client: Client; updates: () => number } {
  let updates = 0;
  const handle = {
    describe: () =>
      Promise.resolve({ status: { name: status }, runId: 'r1', ...(status === 'RUNNING' || status === 'PAUSED' ? {} : { closeTime: new Date() }) }),
    executeUpdate: () => {
      updates++;
      return update();
    },
  };
  const client = { workflow: { getHandle: () => handle }, withDeadline: (_d: number, fn: () => Promise<unknown>) => fn() };
  return { client: client as unknown as Client, updates: () => updates };
}

async function abandon(status: string, update: () => Promise<unknown>) {
  const { client, updates } = stubClient(status, update);
  const api = buildApi({ client, manifest, manifestFile: file, token: TOKEN });
  try {
    const r = await api.inject({ method: 'POST', url: `/v1/acquisitions/${encodeURIComponent(ID)}/abandon`, headers: { authorization: `Bearer ${TOKEN}` } });
    return { code: r.statusCode, retryAfter: r.headers['retry-after'], body: r.json<Record<string, unknown>>(), updates: updates() };
  } finally {
    await api.close();
  }
}

describe('the abandon route when the run does not answer', () => {
  test('described running, then not found: the run ended meanwhile, 200 abandoned false, not 404', async () => {
    const r = await abandon('RUNNING', () => Promise.reject(new WorkflowNotFoundError('workflow not found', ID, 'r1')));
    assert.equal(r.code, 200, JSON.stringify(r.body));
    assert.deepEqual(r.body, { workflow_id: ID, run_id: 'r1', abandoned: false, why: 'the acquisition ended while it was asked', reason: 'ending' });
  });

  test('the Update unanswered within its deadline: 504 with Retry-After, not 409', async () => {
    const r = await abandon('RUNNING', () => Promise.reject(new WorkflowUpdateRPCTimeoutOrCancelledError('Timeout or cancellation waiting for update')));
    assert.equal(r.code, 504, JSON.stringify(r.body));
    assert.equal(r.retryAfter, '1');
    assert.equal((r.body.error as { type: string }).type, 'abandon_unanswered');
  });

  test("a failed Update: 409 with the failure's message", async () => {
    const r = await abandon('RUNNING', () =>
      Promise.reject(new WorkflowUpdateFailedError('Workflow Update failed', ApplicationFailure.nonRetryable('the handler threw: no scope', 'Error'))),
    );
    assert.equal(r.code, 409, JSON.stringify(r.body));
    assert.match((r.body.error as { message: string }).message, /the handler threw: no scope/);
  });

  test('a paused run is asked, not answered as ended; a closed one is', async () => {
    const paused = await abandon('PAUSED', () => Promise.resolve({ abandoned: false, why: 'still admitting: ask again', reason: 'admitting', askAgain: true }));
    assert.equal(paused.updates, 1, JSON.stringify(paused.body));
    assert.deepEqual(paused.body, { workflow_id: ID, run_id: 'r1', abandoned: false, why: 'still admitting: ask again', reason: 'admitting', ask_again: true });
    const done = await abandon('COMPLETED', () => Promise.reject(new Error('not asked')));
    assert.equal(done.updates, 0);
    assert.deepEqual(done.body, { workflow_id: ID, run_id: 'r1', abandoned: false, why: 'the acquisition has already ended (completed)', reason: 'ending' });
  });
});
