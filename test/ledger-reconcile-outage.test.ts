// A ledger started afresh (its run terminated) while Docker is unreachable (dockerd restarting,
// its socket gone): its reconcile cannot read the box. It must wait for Docker, then take the
// serves that run and answer what it was asked meanwhile; before, the reconcile ran out of its
// five attempts in about 15 s, and the ledger failed with every Update it had accepted. Separate
// processes: `gpures worker` reaches dockerd through a socket of the test's, closed for longer
// than those five attempts, then opened again; the box is sampled: the containers that run, the
// ledger's reservations against their labels, the run's status.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ledgerWorkflow } from '../src/workflows/ledger';
import { LABEL } from '../src/domain/serve';
import { admitUpdate, snapshotQuery, taskQueueFor, workflowIds } from '../src/shared/messages';
import { docker } from './support/box';
import type { TestServe } from './support/box';
import { gpures, show } from './support/cli';
import { startProcessBox } from './support/process-box';
import type { ProcessBox } from './support/process-box';
import { SocketProxy } from './support/socket-proxy';
import { waitUntil } from './support/wait';

const GPU = { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 };
const SERVES: TestServe[] = [{ name: 'fast', vram_mib: 14336, router_tier: 'fast-local' }];

describe('a ledger started afresh while Docker is unreachable', () => {
  let box: ProcessBox;
  let proxy: SocketProxy;
  let dir: string;

  before(async () => {
    const dockerd = /^unix:\/\/(.+)$/.exec(process.env['DOCKER_HOST'] ?? '')?.[1];
    assert.ok(dockerd, `DOCKER_HOST is the test dockerd's Unix socket (scripts/lib.sh export_test_env), not '${process.env['DOCKER_HOST']}'`);
    dir = mkdtempSync(join(tmpdir(), 'gpures-ledger-outage-'));
    proxy = new SocketProxy(join(dir, 'docker.sock'), dockerd);
    await proxy.listen();
    box = await startProcessBox('ledout', GPU, SERVES, { workerEnv: { DOCKER_HOST: `unix://${proxy.path}` } });
  });
  after(async () => {
    await box?.close();
    await proxy?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test('its reconcile waits out the outage: the ledger takes the running serve and answers the admission asked meanwhile', async () => {
    const { node, env, manifestPath, temporal } = box;
    const gpu = box.manifest.gpus[0];
    assert.ok(gpu);
    const up = await gpures(['serves', 'up', 'fast', '--manifest', manifestPath], env);
    assert.equal(up.code, 0, show(up));
    const ledgerId = workflowIds.ledger(node, gpu.role);
    await temporal.client.workflow.getHandle(ledgerId).terminate('test: the ledger started afresh');

    await proxy.close();
    const closedAt = Date.now();
    const started = await temporal.client.workflow.start<typeof ledgerWorkflow>('ledgerWorkflow', {
      workflowId: ledgerId,
      taskQueue: taskQueueFor(node),
      args: [{ node, gpu }],
      workflowIdConflictPolicy: 'USE_EXISTING',
    });
    // This run, not whichever runs under the id later: its failure is what the Update would meet.
    const run = temporal.client.workflow.getHandle<typeof ledgerWorkflow>(ledgerId, started.firstExecutionRunId);
    const asked = run
      .executeUpdate(admitUpdate, { args: [{ serve: 'other', vramMib: 1000, class: 'resident', holder: 'outage-test', gpu }], updateId: 'outage-admit' })
      .then(
        (answer) => ({ ok: true as const, answer }),
        (err: unknown) => ({ ok: false as const, message: err instanceof Error ? `${err.message}: ${String(err.cause)}` : String(err) }),
      );
    const reconcile = async () => {
      const d = await run.describe();
      const pending = d.raw.pendingActivities?.find((a) => a.activityType?.name === 'reconcileLedger');
      return { status: d.status.name, attempt: pending?.attempt ?? 0, lastFailure: pending?.lastFailure?.message ?? '' };
    };
    // Past the five attempts the reconcile had (about 15 s of them), or the run over.
    let seen = await reconcile();
    await waitUntil(
      'the reconcile past its sixth attempt, or the ledger ended',
      async () => {
        seen = await reconcile();
        return seen.status !== 'RUNNING' || seen.attempt >= 7;
      },
      120_000,
      500,
    );
    console.log(`  after ${Date.now() - closedAt} ms of Docker unreachable: ledger ${seen.status}, reconcile attempt ${seen.attempt}: ${seen.lastFailure}`);
    await proxy.listen();
    const outcome = await asked;
    const status = (await run.describe()).status.name;
    // A failed run's reason, from its history's close.
    const why =
      status === 'FAILED'
        ? await run
            .result()
            .then(String, (err: unknown) => (err instanceof Error ? (err.cause instanceof Error ? err.cause.message : err.message) : String(err)))
        : '';
    const running = await docker().listContainers({ filters: { label: [`${LABEL.node}=${node}`], status: ['running'] } });
    const held = status === 'RUNNING' ? (await run.query(snapshotQuery)).reservations : [];
    console.log(
      `  Docker back after ${Date.now() - closedAt} ms: the admission ${outcome.ok ? outcome.answer.decision.decision : `failed: ${outcome.message}`}; ` +
        `ledger ${status}${why && ` (${why})`}: ${held.map((r) => `${r.serve} ${r.phase} ${r.vramMib} MiB`).join(', ')}; ` +
        `running on the box: ${running.map((c) => `${c.Labels[LABEL.serve]} ${c.Labels[LABEL.vramMib]} MiB`).join(', ')}`,
    );
    assert.equal(seen.status, 'RUNNING', 'the ledger ended while Docker was unreachable');
    assert.equal(status, 'RUNNING');
    assert.ok(outcome.ok, 'the admission asked during the outage was not answered');
    assert.equal(outcome.answer.decision.decision, 'admitted');
    // The ledger's word against the box's: every running serve reserved at its label's MiB.
    assert.deepEqual(
      running.map((c) => ({ serve: c.Labels[LABEL.serve], vramMib: Number(c.Labels[LABEL.vramMib]), phase: 'running' })),
      held.filter((r) => r.serve !== 'other').map((r) => ({ serve: r.serve, vramMib: r.vramMib, phase: r.phase })),
    );
    assert.equal(running.length, 1);
    assert.deepEqual(
      held.filter((r) => r.serve === 'other').map((r) => `${r.phase} ${r.vramMib}`),
      ['admitted 1000'],
    );
  });
});
