// Bad input that reached a workflow, against a real dev server and the test dockerd: each run
// ends Failed with InvalidInput before it schedules a single activity (so nothing was quiesced,
// admitted or started), with no workflow-task failure loop; and an identity probe whose container
// vanished is a named, non-retried failure rather than `TypeError: fetch failed`.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import type { temporal as proto } from '@temporalio/proto';
import type { ServeProbe } from '../src/adapters/serve-probe/port';
import { PermanentError, ServeUnreachable } from '../src/adapters/errors';
import { startModelServer } from '../src/sim/model-server';
import { HttpServeProbe } from '../src/adapters/serve-probe/http';
import { ledgerSnapshots, serveUp } from '../src/client/operations';
import { parseManifest } from '../src/config/manifest';
import { containerName } from '../src/domain/serve';
import type { Manifest } from '../src/domain/types';
import { taskQueueFor, workflowIds } from '../src/shared/messages';
import { docker, nodeContainers, removeNodeContainers, renderManifest, uniqueNode } from './support/box';
import { scheduledActivities } from './support/history-scan';
import { freePort, testTemporal } from './support/temporal';
import type { TestTemporal } from './support/temporal';
import { startTestWorker } from './support/worker';
import type { TestWorker } from './support/worker';

const GPU = { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 };

/** A simulated vLLM answering at once. */
const SIM_VLLM = { model: 'org/probe', servedModelName: 'probe-model', host: '127.0.0.1', port: 0, startDelayMs: 0, responseDelayMs: 0, drainTimeoutMs: 1000 };

describe('bad workflow input and a vanished container', () => {
  let temporal: TestTemporal;
  let worker: TestWorker;
  let node: string;
  let manifest: Manifest;
  /** Base URLs whose container the probe removes just before it asks for /v1/models. */
  const vanishAt = new Map<string, string>();
  /** Base URLs the probe asks at another address instead: a running container that does not answer. */
  const deafAt = new Map<string, string>();

  before(async () => {
    node = uniqueNode('bad-input');
    const text = renderManifest(
      node,
      [GPU],
      [
        { name: 'vision', vram_mib: 12288, class: 'evictable' },
        { name: 'fast', vram_mib: 14336 },
        { name: 'gone', vram_mib: 1000 },
        { name: 'deaf', vram_mib: 1000 },
      ],
    );
    const parsed = parseManifest(text, 'serves.toml');
    assert.ok(parsed.ok, JSON.stringify(!parsed.ok && parsed.errors));
    manifest = parsed.manifest;
    const file = join(mkdtempSync(join(tmpdir(), 'gpures-bad-input-')), 'serves.toml');
    writeFileSync(file, text);
    temporal = await testTemporal();
    // The real HTTP probe; only the moment the container disappears is the test's.
    const http = new HttpServeProbe();
    const probe: ServeProbe = {
      health: (url, ms) => http.health(url, ms),
      requestsRunning: (url, ms) => http.requestsRunning(url, ms),
      async modelIds(baseUrl, ms) {
        const name = vanishAt.get(baseUrl);
        if (name) await docker().getContainer(name).remove({ force: true });
        return http.modelIds(deafAt.get(baseUrl) ?? baseUrl, ms);
      },
    };
    worker = await startTestWorker({ temporal, node, manifest: file, pollIntervalMs: 200, probe });
  });

  after(async () => {
    await worker?.stop();
    if (node) await removeNodeContainers(node);
    await temporal?.close();
  });

  /** Starts `type` with `input`, expects it Failed with InvalidInput, and returns its message and history. */
  async function expectInvalid(type: string, workflowId: string, input: unknown) {
    const handle = await temporal.client.workflow.start(type, { workflowId, taskQueue: taskQueueFor(node), args: [input] });
    const err = await handle.result().then(
      () => assert.fail(`${type} ${JSON.stringify(input)} completed`),
      (e: unknown) => e,
    );
    assert.ok(err instanceof WorkflowFailedError, String(err));
    assert.ok(err.cause instanceof ApplicationFailure, String(err.cause));
    assert.equal(err.cause.type, 'InvalidInput');
    assert.equal(err.cause.nonRetryable, true);
    assert.equal((await handle.describe()).status.name, 'FAILED');
    const events = (await handle.fetchHistory()).events ?? [];
    // Rejected on its first workflow task: no activity (no quiesce, admit, reconcile, start) and no retry loop.
    assert.deepEqual(scheduledActivities(events), [], `${type} scheduled activities`);
    assert.equal(events.filter((e) => e.workflowTaskFailedEventAttributes).length, 0, `${type} workflow task failures`);
    return err.cause.message;
  }

  /** The attempt verifyIdentity ended on (its started event records the last one). */
  function identityAttempts(events: proto.api.history.v1.IHistoryEvent[]): number | undefined {
    const scheduled = events.find((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'verifyIdentity');
    const started = events.find(
      (e) => e.activityTaskStartedEventAttributes && String(e.activityTaskStartedEventAttributes.scheduledEventId) === String(scheduled?.eventId),
    );
    return started?.activityTaskStartedEventAttributes?.attempt ?? undefined;
  }

  /** The compensation ran: no reservation left on the ledger, no container on the node. */
  async function assertGivenBack(): Promise<void> {
    const [ledger] = await ledgerSnapshots(temporal.client, manifest);
    assert.deepEqual(
      ledger?.reservations.map((r) => r.serve),
      [],
    );
    assert.deepEqual(await nodeContainers(node), []);
  }

  test('acquire with drainTimeoutS 1e300: Failed InvalidInput naming the field and its bound, nothing touched', async () => {
    const message = await expectInvalid('acquireWorkflow', workflowIds.acquire(node, 'vision'), { serve: 'vision', evict: true, drainTimeoutS: 1e300 });
    assert.equal(message, 'invalid input: drainTimeoutS: must be a whole number of seconds in 1..3600 (got 1e+300)');
    const release = await expectInvalid('acquireWorkflow', `${workflowIds.acquire(node, 'vision')}-release`, {
      serve: 'vision',
      evict: true,
      releaseTimeoutS: 1e11,
    });
    assert.match(release, /releaseTimeoutS: must be a whole number of seconds in 1\.\.600 \(got 100000000000\)/);
    assert.deepEqual(await nodeContainers(node), []);
  });

  test('bring-down with drainTimeoutS 1e300: Failed InvalidInput before any quiesce', async () => {
    const message = await expectInvalid('bringDownWorkflow', workflowIds.bringDown(node, 'vision'), { serve: 'vision', drainTimeoutS: 1e300 });
    assert.equal(message, 'invalid input: drainTimeoutS: must be a whole number of seconds in 1..3600 (got 1e+300)');
  });

  test('ledgerWorkflow started with {} or a partial gpu: Failed InvalidInput, no reconcile, no task-failure loop', async () => {
    const empty = await expectInvalid('ledgerWorkflow', `ledger/${node}/empty`, {});
    assert.match(empty, /^invalid input: node: a name of .* \(got nothing\); gpu: \{ "role", "uuid", "capacityMib", "reserveMib" \}/);
    const partial = await expectInvalid('ledgerWorkflow', workflowIds.ledger(node, 'dark-fast'), { node, gpu: { role: 'dark-fast' } });
    assert.equal(
      partial,
      "invalid input: gpu.uuid: the GPU's uuid, a non-empty string (got nothing); gpu.capacityMib: a whole number of MiB in 1..1048576 (got nothing); gpu.reserveMib: a whole number of MiB in 0..1048575 (got nothing)",
    );
  });

  test('the ledger a real caller starts still runs after those refusals', async () => {
    // The failed partial run above had the ledger's own id: the next caller starts a good one.
    const [ledger] = await ledgerSnapshots(temporal.client, manifest);
    assert.equal(ledger?.gpuRole, 'dark-fast');
    assert.deepEqual(ledger?.reservations, []);
  });

  test('identity probe of a container that vanished: ContainerExited with the URL and ECONNREFUSED, not retried, MiB given back', async () => {
    const gone = manifest.serves.find((s) => s.name === 'gone');
    assert.ok(gone);
    const baseUrl = `http://127.0.0.1:${gone.port}`;
    vanishAt.set(baseUrl, containerName(node, 'gone'));
    const out = await serveUp(temporal.client, node, 'gone');
    assert.equal(out.ok, false);
    assert.ok(!out.ok);
    assert.equal(out.failureType, 'ContainerExited', out.message);
    assert.match(out.message, new RegExp(`identity probe ${baseUrl}/v1/models: ECONNREFUSED .*container ${containerName(node, 'gone')} is gone`));
    assert.doesNotMatch(out.message, /fetch failed/);

    const events = (await temporal.client.workflow.getHandle(out.workflowId).fetchHistory()).events ?? [];
    const verify = scheduledActivities(events).filter((a) => a === 'verifyIdentity');
    assert.equal(verify.length, 1);
    const failed = events.flatMap((e) => (e.activityTaskFailedEventAttributes ? [e.activityTaskFailedEventAttributes] : []));
    assert.equal(failed.length, 1);
    assert.equal(failed[0]?.failure?.applicationFailureInfo?.type, 'ContainerExited');
    assert.equal(failed[0]?.failure?.applicationFailureInfo?.nonRetryable, true);
    // One attempt: a container that is gone does not come back on a retry.
    assert.equal(identityAttempts(events), 1);
    await assertGivenBack();
  });

  test('identity probe refused while the container runs: IdentityUnreachable, retried by the policy, then compensated', async () => {
    const deaf = manifest.serves.find((s) => s.name === 'deaf');
    assert.ok(deaf);
    const elsewhere = `http://127.0.0.1:${await freePort()}`;
    deafAt.set(`http://127.0.0.1:${deaf.port}`, elsewhere);
    const out = await serveUp(temporal.client, node, 'deaf');
    assert.ok(!out.ok);
    assert.equal(out.failureType, 'IdentityUnreachable', out.message);
    assert.match(out.message, new RegExp(`identity probe ${elsewhere}/v1/models: ECONNREFUSED .*while container ${containerName(node, 'deaf')} is running`));
    const events = (await temporal.client.workflow.getHandle(out.workflowId).fetchHistory()).events ?? [];
    // The options' five attempts: a serve that runs may answer on the next one.
    assert.equal(identityAttempts(events), 5);
    await assertGivenBack();
  });

  test("the HTTP probe sends a serve's API key as vLLM checks it, and names a 401 for what it is", async () => {
    const server = await startModelServer({ ...SIM_VLLM, apiKey: 'sk-probe' });
    try {
      const url = `http://127.0.0.1:${server.port}`;
      assert.deepEqual(await new HttpServeProbe().modelIds(url, 2000, 'sk-probe'), ['probe-model']);
      for (const [key, says] of [
        [undefined, /answered 401: the serve wants an API key, and its manifest entry sets no VLLM_API_KEY/],
        ['sk-other', /answered 401 to the serve's own VLLM_API_KEY: the server was started with another key/],
      ] as const) {
        await assert.rejects(new HttpServeProbe().modelIds(url, 2000, key), (err: unknown) => {
          assert.ok(err instanceof PermanentError, String(err));
          assert.equal(err.type, 'ServeUnauthorized');
          assert.match(err.message, says);
          assert.ok(!err.message.includes('sk-'), err.message);
          return true;
        });
      }
    } finally {
      await server.shutdown(100);
    }
  });

  test('the HTTP probe names what it met: ECONNREFUSED on a port nobody listens on', async () => {
    const url = `http://127.0.0.1:${await freePort()}`;
    await assert.rejects(new HttpServeProbe().modelIds(url, 2000), (err: unknown) => {
      assert.ok(err instanceof ServeUnreachable, String(err));
      assert.equal(err.url, `${url}/v1/models`);
      assert.equal(err.code, 'ECONNREFUSED');
      return true;
    });
  });
});
