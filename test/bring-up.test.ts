// Bring-up and bring-down end to end: real dev server, real dockerd, fake-vLLM containers.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { formatLedger, totals } from '../src/domain/ledger';
import type { LedgerState } from '../src/domain/ledger';
import { ledgerSnapshots, serveDown, serveUp } from '../src/client/operations';
import { parseManifest } from '../src/config/manifest';
import type { Manifest } from '../src/domain/types';
import { docker, renderManifest, startTestBox, uniqueNode } from './support/box';
import { containerName } from '../src/domain/serve';
import type { TestBox, TestServe } from './support/box';
import { waitFor, waitUntil } from './support/wait';
import { activitiesInOrder, ledgerTotalsAfterEachUpdate, scheduledActivities, waitForPendingActivity } from './support/history-scan';
import { WorkflowNotFoundError } from '@temporalio/client';
import { workflowIds } from '../src/shared/messages';

// A port another process holds while the test runs.
const SQUATTED_PORT = 29500 + Math.floor(Math.random() * 400);

const SEED_SERVES: TestServe[] = [
  { name: 'fast', vram_mib: 14336 },
  { name: 'embeddings', vram_mib: 3200 },
  { name: 'reranker', vram_mib: 3456 },
  { name: 'ocr', vram_mib: 5120 },
  { name: 'vision', vram_mib: 12288, class: 'evictable', served_model_name: 'qwen3-vl-4b-instruct', router_tier: 'vision-local' },
  { name: 'sick', vram_mib: 1000, env: { FAKE_START_DELAY_S: 'never' }, start_timeout_s: 3 },
  { name: 'stuck', vram_mib: 1000, env: { FAKE_START_DELAY_S: 'never' }, start_timeout_s: 120 },
  { name: 'impostor', vram_mib: 1000, served_model_name: 'expected-model', env: { FAKE_MODEL_ID: 'some-other-model' } },
  { name: 'no-image', vram_mib: 1000, image: 'gpures/not-built:none' },
  { name: 'squatted', vram_mib: 1000, port: SQUATTED_PORT },
  // Not vLLM: an HTTP service that reports some other model, and a job with no HTTP at all.
  { name: 'http-service', vram_mib: 1000, class: 'on-demand', api: 'http', env: { FAKE_MODEL_ID: 'not-a-model' } },
  { name: 'job', vram_mib: 8192, class: 'on-demand', api: 'none', args: ['sleep', '3600'] },
  { name: 'job-crash', vram_mib: 1000, class: 'on-demand', api: 'none', args: ['sh', '-c', 'echo job failed; exit 4'] },
];
const CONCURRENT: TestServe[] = Array.from({ length: 20 }, (_, i) => ({ name: `c${i}`, gpu_role: 'contended', vram_mib: 2500 }));

describe('bring-up and bring-down', () => {
  let box: TestBox;
  let manifest: Manifest;

  before(async () => {
    const node = uniqueNode('up');
    const text = renderManifest(
      node,
      [
        { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 },
        { role: 'contended', capacity_mib: 30000, reserve_mib: 3000 },
      ],
      [...SEED_SERVES, ...CONCURRENT],
    );
    const parsed = parseManifest(text, 'test-serves.toml');
    assert.ok(parsed.ok, JSON.stringify(!parsed.ok && parsed.errors));
    manifest = parsed.manifest;
    box = await startTestBox(node, text);
  });

  after(async () => {
    await box?.close();
  });

  async function ledgerOf(role: string): Promise<LedgerState> {
    const all = await ledgerSnapshots(box.temporal.client, manifest);
    const l = all.find((s) => s.gpuRole === role);
    assert.ok(l);
    return l;
  }

  test('seed arithmetic: full resident set commits 26112, vision denied by 10401 MiB and not started', async () => {
    for (const name of ['fast', 'embeddings', 'reranker', 'ocr']) {
      const out = await serveUp(box.temporal.client, box.node, name);
      assert.ok(out.ok, `${name}: ${!out.ok ? out.message : ''}`);
      assert.equal(out.result.outcome, 'started');
      assert.deepEqual(out.result.observedModels, [name]);
      // The ledger before it, without what it took: its reservation, and the start slot its admission took.
      assert.ok(!out.result.ledgerBefore.some((l) => /start slot/.test(l)), out.result.ledgerBefore.join('\n'));
    }
    assert.deepEqual(formatLedger(await ledgerOf('dark-fast')), [
      "gpu_role 'dark-fast': capacity 32607 MiB, reserve 4608 MiB, committed 26112 MiB, free 1887 MiB",
      '  fast 14336 MiB (resident, running)',
      '  embeddings 3200 MiB (resident, running)',
      '  reranker 3456 MiB (resident, running)',
      '  ocr 5120 MiB (resident, running)',
    ]);

    const denied = await serveUp(box.temporal.client, box.node, 'vision');
    assert.equal(denied.ok, false);
    assert.ok(!denied.ok);
    assert.equal(denied.failureType, 'AdmissionDenied');
    assert.equal(denied.message, 'serves up vision denied: over budget by 10401 MiB, nothing started');
    // The bundle's source map maps lines only (src/worker/workflow-code.ts): the failure's stack
    // in history still names the workflow's TypeScript file and line.
    const history = await box.temporal.client.workflow.getHandle(denied.workflowId, denied.runId).fetchHistory();
    const failed = history.events?.find((e) => e.workflowExecutionFailedEventAttributes)?.workflowExecutionFailedEventAttributes;
    assert.match(failed?.failure?.stackTrace ?? '', /\n\s+at bringUpWorkflow \(\S*src\/workflows\/bring-up\.ts:\d+:\d+\)/);
    const containers = await box.containers();
    assert.equal(containers.filter((c) => c.serve === 'vision').length, 0);
    assert.equal(totals(await ledgerOf('dark-fast')).committedMib, 26112);

    // The UI can filter operations by serve and node (search attributes the dev server registers).
    const query = `GpuresServe = 'fast' AND GpuresNode = '${box.node}' AND GpuresOperation = 'serves up'`;
    const ids = await waitFor('the bring-up listed by its search attributes', async () => {
      const listed: string[] = [];
      for await (const wf of box.temporal.client.workflow.list({ query })) listed.push(wf.workflowId);
      return listed.length ? listed : undefined;
    });
    assert.deepEqual(ids, [`serves-up/${box.node}/fast`]);
  });

  test("a bring-up asks the ledger twice: its admission takes the start slot, its `running` gives it back (none of the slot's own Updates)", async () => {
    // ocr came up above with no router tier: nothing to readmit between its measure and `running`.
    const steps = await activitiesInOrder(box.temporal.client, workflowIds.bringUp(box.node, 'ocr'));
    assert.deepEqual(
      steps.filter((s) => s.startsWith('ledger')),
      ['ledgerAdmit', 'ledgerSetPhase'],
      steps.join(', '),
    );
    assert.equal((await ledgerOf('dark-fast')).startSlot, undefined);
  });

  test('a ledger workflow terminated and started afresh reconciles from the running containers', async () => {
    const ledgerId = `ledger/${box.node}/dark-fast`;
    await box.temporal.client.workflow.getHandle(ledgerId).terminate('test: lose the ledger');
    const denied = await serveUp(box.temporal.client, box.node, 'vision');
    assert.ok(!denied.ok);
    assert.equal(denied.message, 'serves up vision denied: over budget by 10401 MiB, nothing started');
    assert.deepEqual(formatLedger(await ledgerOf('dark-fast')), [
      "gpu_role 'dark-fast': capacity 32607 MiB, reserve 4608 MiB, committed 26112 MiB, free 1887 MiB",
      '  embeddings 3200 MiB (resident, running)',
      '  fast 14336 MiB (resident, running)',
      '  ocr 5120 MiB (resident, running)',
      '  reranker 3456 MiB (resident, running)',
    ]);
  });

  test('a ledger whose workflow is gone altogether (a dev server that lost its state) reads as what runs, not empty', async () => {
    const ledgerId = `ledger/${box.node}/dark-fast`;
    const before = formatLedger(await ledgerOf('dark-fast'));
    await box.temporal.client.workflowService.deleteWorkflowExecution({ namespace: 'default', workflowExecution: { workflowId: ledgerId } });
    await waitUntil(
      'the ledger workflow deleted',
      async () => {
        try {
          await box.temporal.client.workflow.getHandle(ledgerId).describe();
          return false;
        } catch (err) {
          return err instanceof WorkflowNotFoundError;
        }
      },
      10_000,
      100,
    );
    // A read, before any operation: it starts the ledger, which reconciles first.
    const after = await ledgerOf('dark-fast');
    assert.equal(after.reconciling, undefined);
    assert.deepEqual(formatLedger(after), before);
  });

  test('up of a running serve changes nothing; down is idempotent and releases', async () => {
    const again = await serveUp(box.temporal.client, box.node, 'fast');
    assert.ok(again.ok);
    assert.equal(again.result.outcome, 'already-running');
    assert.equal(again.result.message, 'serves up fast: already running, nothing changed');

    for (const name of ['ocr', 'reranker', 'embeddings']) {
      const down = await serveDown(box.temporal.client, box.node, name);
      assert.ok(down.ok);
      assert.equal(down.result.outcome, 'stopped');
    }
    const twice = await serveDown(box.temporal.client, box.node, 'ocr');
    assert.ok(twice.ok);
    assert.equal(twice.result.outcome, 'already-stopped');
    assert.equal(twice.result.message, 'serves down ocr: already stopped, nothing changed');

    // Seed step 2: vision now fits, 26624 committed, 1375 free.
    const vision = await serveUp(box.temporal.client, box.node, 'vision');
    assert.ok(vision.ok, !vision.ok ? vision.message : '');
    assert.deepEqual(vision.result.observedModels, ['qwen3-vl-4b-instruct']);
    const l = await ledgerOf('dark-fast');
    assert.deepEqual(totals(l), { budgetMib: 27999, committedMib: 26624, heldMib: 0, freeMib: 1375 });
    assert.deepEqual(
      (await box.containers())
        .filter((c) => c.running)
        .map((c) => c.serve)
        .sort(),
      ['fast', 'vision'],
    );
    for (const name of ['fast', 'vision']) assert.ok((await serveDown(box.temporal.client, box.node, name)).ok);
    assert.equal(totals(await ledgerOf('dark-fast')).committedMib, 0);
  });

  test('a serve that never turns healthy: HealthTimeout, reservation released, no container left', async () => {
    const out = await serveUp(box.temporal.client, box.node, 'sick');
    assert.ok(!out.ok);
    assert.equal(out.failureType, 'HealthTimeout');
    assert.match(out.message, /^serves up sick failed at health: no 200 from http:\/\/127\.0\.0\.1:\d+\/health within 3 s/);
    assert.match(out.message, /compensated: remove container, release reservation$/);
    assert.equal((await ledgerOf('dark-fast')).reservations.length, 0);
    assert.equal((await box.containers()).filter((c) => c.serve === 'sick').length, 0);
  });

  test('cancelled (as from the UI) while it waits for health: compensated, and the run ends Cancelled', async () => {
    const pending = serveUp(box.temporal.client, box.node, 'stuck');
    await waitUntil('the stuck container running', async () => (await box.containers()).some((c) => c.serve === 'stuck' && c.running), 20_000, 100);
    const handle = box.temporal.client.workflow.getHandle(workflowIds.bringUp(box.node, 'stuck'));
    await handle.cancel();
    const out = await pending;
    assert.ok(!out.ok);
    assert.equal(out.failureType, 'CancelledFailure');
    // The caller is told what its cancelled operation gave back, from the operation's own last
    // step, and who cancelled it, from its history: here this test's client.
    assert.equal(
      out.message,
      `serves up stuck cancelled at health; compensated: remove container, release reservation (cancelled by ${box.temporal.client.workflow.options.identity})`,
    );
    assert.equal((await handle.describe()).status.name, 'CANCELLED');
    assert.equal((await box.containers()).filter((c) => c.serve === 'stuck').length, 0);
    assert.equal((await ledgerOf('dark-fast')).reservations.filter((r) => r.serve === 'stuck').length, 0);
    // What was undone is in the history: the compensations ran as activities after the cancel
    // request, the release once the box showed the container gone, then the run's give of its
    // start slot (the saga's done-step since stop-takes-slot; the release has given it already).
    const events = (await handle.fetchHistory()).events ?? [];
    const cancelAt = events.findIndex((e) => e.workflowExecutionCancelRequestedEventAttributes);
    const after = scheduledActivities(events.slice(cancelAt));
    assert.deepEqual(after, ['stopServeContainer', 'inspectServe', 'ledgerRelease', 'ledgerStartSlot']);
  });

  test('cancelled by a serves down of it: named so, not by the identity of the worker whose bring-down sent the cancel', async () => {
    const pending = serveUp(box.temporal.client, box.node, 'stuck');
    const handle = box.temporal.client.workflow.getHandle(workflowIds.bringUp(box.node, 'stuck'));
    await waitForPendingActivity(handle, 'waitHealthy');
    const down = await serveDown(box.temporal.client, box.node, 'stuck');
    assert.ok(down.ok, !down.ok ? down.message : '');
    const out = await pending;
    assert.ok(!out.ok);
    assert.equal(out.failureType, 'CancelledFailure');
    assert.equal(out.message, 'serves up stuck cancelled at health; compensated: remove container, release reservation (cancelled by serves down stuck)');
    assert.equal((await box.containers()).filter((c) => c.serve === 'stuck').length, 0);
  });

  test('a serve reporting another model id: IdentityMismatch, nothing left running', async () => {
    const out = await serveUp(box.temporal.client, box.node, 'impostor');
    assert.ok(!out.ok);
    assert.equal(out.failureType, 'IdentityMismatch');
    assert.match(out.message, /failed at identity: .*\/v1\/models reports 'some-other-model', expected 'expected-model'/);
    assert.equal((await ledgerOf('dark-fast')).reservations.length, 0);
    assert.equal((await box.containers()).filter((c) => c.serve === 'impostor').length, 0);
  });

  test('api http: ready on health alone, no identity asked; api none: ready once it stays running', async () => {
    const http = await serveUp(box.temporal.client, box.node, 'http-service');
    assert.ok(http.ok, !http.ok ? http.message : '');
    const step = (o: typeof http, name: string) => (o.ok ? o.result.steps.find((s) => s.step === name)?.outcome : undefined);
    assert.match(step(http, 'health') ?? '', /^200 from http:\/\/127\.0\.0\.1:\d+\/health after \d+ probes$/);
    assert.equal(step(http, 'identity'), 'not checked: an api http serve reports no model');

    const job = await serveUp(box.temporal.client, box.node, 'job');
    assert.ok(job.ok, !job.ok ? job.message : '');
    assert.match(step(job, 'health') ?? '', /^container gpures-.*-job stayed running \(api none: no HTTP to probe\)$/);
    const running = (await box.containers())
      .filter((c) => c.running)
      .map((c) => c.serve)
      .sort();
    assert.deepEqual(
      running.filter((s) => s === 'job' || s === 'http-service'),
      ['http-service', 'job'],
    );
    // The job runs its own command, not vLLM's arguments.
    const inspected = await docker().getContainer(containerName(box.node, 'job')).inspect();
    assert.deepEqual(inspected.Config.Cmd, ['sleep', '3600']);
    assert.equal(totals(await ledgerOf('dark-fast')).committedMib, 9192);

    for (const s of ['job', 'http-service']) assert.ok((await serveDown(box.temporal.client, box.node, s)).ok);
    assert.equal(totals(await ledgerOf('dark-fast')).committedMib, 0);
  });

  test('api none whose command exits: ContainerExited with its code and output, reservation released', async () => {
    const out = await serveUp(box.temporal.client, box.node, 'job-crash');
    assert.ok(!out.ok);
    assert.equal(out.failureType, 'ContainerExited');
    assert.match(out.message, /failed at health: container gpures-.*-job-crash exited with exit code 4; last output: job failed/);
    assert.equal((await ledgerOf('dark-fast')).reservations.length, 0);
    assert.equal((await box.containers()).filter((c) => c.serve === 'job-crash').length, 0);
  });

  test('a missing image: ImageMissing at start, reservation released', async () => {
    const out = await serveUp(box.temporal.client, box.node, 'no-image');
    assert.ok(!out.ok);
    assert.equal(out.failureType, 'ImageMissing');
    assert.match(out.message, /failed at start: image 'gpures\/not-built:none' is not on this Docker host/);
    assert.equal((await ledgerOf('dark-fast')).reservations.length, 0);
  });

  test('a port held by another process: PortInUse at start, named, not retried, reservation released', async () => {
    const squatter = createServer();
    await new Promise<void>((r) => squatter.listen(SQUATTED_PORT, '127.0.0.1', r));
    try {
      const out = await serveUp(box.temporal.client, box.node, 'squatted');
      assert.ok(!out.ok);
      assert.equal(out.failureType, 'PortInUse');
      assert.match(out.message, new RegExp(`failed at start: port ${SQUATTED_PORT} on 127\\.0\\.0\\.1 is already in use by another process`));
      // A port in use is permanent: every activity of the bring-up ran exactly once.
      const history = await box.temporal.client.workflow.getHandle(workflowIds.bringUp(box.node, 'squatted')).fetchHistory();
      const attempts = (history.events ?? []).flatMap((e) => (e.activityTaskStartedEventAttributes ? [e.activityTaskStartedEventAttributes.attempt ?? 1] : []));
      assert.ok(attempts.length > 0);
      assert.deepEqual(
        attempts.filter((n) => n > 1),
        [],
        'a port in use must not be retried',
      );
      assert.equal((await ledgerOf('dark-fast')).reservations.length, 0);
      assert.equal((await box.containers()).filter((c) => c.serve === 'squatted').length, 0);
    } finally {
      await new Promise((r) => squatter.close(r));
    }
  });

  test('20 concurrent bring-ups over budget: never over-committed, admitted set equals running containers', async () => {
    const outs = await Promise.all(CONCURRENT.map((s) => serveUp(box.temporal.client, box.node, s.name)));
    const admitted = outs
      .filter((o) => o.ok)
      .map((o) => o.serve)
      .sort();
    const denied = outs.filter((o) => !o.ok);
    const l = await ledgerOf('contended');
    const t = totals(l);
    assert.ok(t.committedMib <= t.budgetMib, `committed ${t.committedMib} > budget ${t.budgetMib}`);
    const unexpected = outs.filter((o) => !o.ok && o.failureType !== 'AdmissionDenied');
    assert.deepEqual(
      unexpected.map((o) => (o.ok ? '' : `${o.serve}: ${o.failureType}: ${o.message}`)),
      [],
    );
    // 27000 MiB budget / 2500 MiB each: exactly 10 fit.
    assert.equal(admitted.length, 10);
    assert.equal(t.committedMib, 25000);
    assert.deepEqual(l.reservations.map((r) => r.serve).sort(), admitted);
    const running = (await box.containers())
      .filter((c) => c.running && c.serve.startsWith('c'))
      .map((c) => c.serve)
      .sort();
    assert.deepEqual(running, admitted);
    for (const d of denied) {
      assert.ok(!d.ok);
      assert.equal(d.failureType, 'AdmissionDenied');
      assert.equal(d.message, `serves up ${d.serve} denied: over budget by 500 MiB, nothing started`);
    }

    // Never, not only at the end: the ledger's state after each of its update decisions, read
    // from its history (every run of it, should it have continued as new).
    const after = await ledgerTotalsAfterEachUpdate(box.temporal.client, workflowIds.ledger(box.node, 'contended'));
    assert.ok(after.length >= 20, `${after.length} update results`);
    const over = after.filter((x) => x.committedMib + x.heldMib > x.budgetMib);
    assert.deepEqual(
      over.map((x) => x.committedMib),
      [],
    );
    assert.equal(Math.max(...after.map((x) => x.committedMib)), 25000);
  });
});
