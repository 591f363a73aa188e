// A ledger started afresh (its run terminated) while Docker is unreachable (dockerd restarting,
// its socket gone): its reconcile cannot read the box. It must wait for Docker, then take the
// serves that run; what it is asked meanwhile it refuses (retryable, LedgerReconciling), since an
// Update it held would be applied whenever Docker answered, after its caller may have ended (a
// bring-up that failed while it waited, its admission then landing for a run that is over). Before
// 564c87e the reconcile ran out of its five attempts in about 15 s, and the ledger failed with
// every Update it had accepted. Separate
// processes: `gpures worker` reaches dockerd through a socket of the test's, closed for longer
// than those five attempts, then opened again; the box is sampled: the containers that run, the
// ledger's reservations against their labels, the run's status.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { WorkflowUpdateFailedError } from '@temporalio/client';
import { LedgerClient } from '../src/adapters/ledger/ledger-client';
import type { ledgerWorkflow } from '../src/workflows/ledger';
import { LABEL } from '../src/domain/serve';
import { admitUpdate, snapshotQuery, taskQueueFor, workflowIds } from '../src/shared/messages';
import { docker } from './support/box';
import type { TestServe } from './support/box';
import { gpures, show } from './support/cli';
import { startProcessBox } from './support/process-box';
import type { ProcessBox } from './support/process-box';
import { SocketProxy } from './support/socket-proxy';
import { sleep, untilReconciled, waitUntil } from './support/wait';

const GPU = { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 };
const SERVES: TestServe[] = [
  { name: 'fast', vram_mib: 14336, router_tier: 'fast-local' },
  { name: 'other', vram_mib: 1000, router_tier: 'other-local' },
];

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

  test('its reconcile waits out the outage: the ledger refuses what is asked meanwhile, saying why, then takes the running serve and answers it asked again', async () => {
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
    const admitArgs = { serve: 'other', vramMib: 1000, class: 'resident' as const, holder: 'outage-test', gpu };
    const ask = () =>
      run.executeUpdate(admitUpdate, { args: [admitArgs], updateId: 'outage-admit' }).then(
        (answer) => ({ ok: true as const, answer }),
        (err: unknown) => ({
          ok: false as const,
          type: err instanceof WorkflowUpdateFailedError && err.cause instanceof ApplicationFailure ? err.cause.type : undefined,
          message: err instanceof Error ? `${err.message}: ${String(err.cause)}` : String(err),
        }),
      );
    // Asked while the ledger reconciles: refused (nothing accepted, so nothing lands after its caller has gone).
    // Bounded: a ledger that accepted it instead holds it until Docker answers.
    const heldInstead = { ok: false as const, type: 'accepted and held: no answer within 10 s', message: '' };
    const refused = await Promise.race([ask(), sleep(10_000).then(() => heldInstead)]);
    assert.ok(!refused.ok && refused.type === 'LedgerReconciling', JSON.stringify(refused));
    // Through LedgerClient, as an operation's step asks: it waits its bound, then says what the reconcile meets.
    const clientAsked = new LedgerClient(temporal.client).admit(node, { ...admitArgs, holder: 'outage-client' }, 'outage-client-admit').then(
      () => 'answered',
      (err: unknown) => (err instanceof Error ? err.message : String(err)),
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
    const clientSaid = await clientAsked;
    console.log(`  LedgerClient's admit during the outage: ${clientSaid}`);
    assert.match(clientSaid, /still reconciling with the box after 20 s and decides nothing until it has; its reconcile's attempt \d+ failed: connect ENOENT/);
    await proxy.listen();
    await untilReconciled(run, 120_000);
    // The same Update sent again (as LedgerClient does) once the ledger has the box's truth.
    const outcome = await ask();
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
      `  Docker back after ${Date.now() - closedAt} ms: the admission refused during the outage (${refused.message}), sent again ${outcome.ok ? outcome.answer.decision.decision : `failed: ${outcome.message}`}; ` +
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

  test('a bring-up that failed while its fresh ledger waited for Docker leaves no reservation behind, and the serve comes up after', async () => {
    const { node, env, manifestPath, temporal } = box;
    const gpu = box.manifest.gpus[0];
    assert.ok(gpu);
    const ledgerId = workflowIds.ledger(node, gpu.role);
    const ledger = temporal.client.workflow.getHandle<typeof ledgerWorkflow>(ledgerId);
    await ledger.terminate('test: the ledger lost again');
    await proxy.close();
    const closedAt = Date.now();
    // The next operation starts the fresh ledger (LedgerClient), which cannot read the box.
    const first = gpures(['serves', 'up', 'other', '--manifest', manifestPath], env, 300_000);
    const upId = workflowIds.bringUp(node, 'other');
    // Its admit step (a local activity, 30 s × 5 attempts, not cancellable: an admission is never
    // left half-done) runs out of its attempts while Docker stays away: the run fails, with nothing
    // to compensate, since it never learnt it was admitted.
    const firstRun = await first;
    const up = await temporal.client.workflow.getHandle(upId).describe();
    const pending = (await ledger.describe()).raw.pendingActivities?.find((a) => a.activityType?.name === 'reconcileLedger');
    console.log(
      `  bring-up of other ended after ${Date.now() - closedAt} ms: ${up.status.name}, exit ${firstRun.code}; ` +
        `the ledger's reconcile at attempt ${pending?.attempt ?? 0}; the operator read: ${firstRun.stderr.trim().split('\n').slice(-2).join(' / ')}`,
    );
    assert.notEqual(firstRun.code, 0, show(firstRun));
    assert.equal(up.status.name, 'FAILED');

    await proxy.listen();
    await untilReconciled(ledger, 120_000);
    // Anything held for the ended run would run now, in the activation that ends the reconcile or the next.
    await new Promise((r) => setTimeout(r, 2000));
    const held = (await ledger.query(snapshotQuery)).reservations;
    const running = await docker().listContainers({ filters: { label: [`${LABEL.node}=${node}`], status: ['running'] } });
    const onBox = running.map((c) => `${c.Labels[LABEL.serve]} running ${c.Labels[LABEL.vramMib]}`).sort();
    console.log(
      `  Docker back after ${Date.now() - closedAt} ms: ledger ${held.map((r) => `${r.serve} ${r.phase} ${r.vramMib} MiB by ${r.holder}`).join('; ')}; ` +
        `on the box: ${onBox.join(', ')}`,
    );
    // No reservation of the ended run: the ledger holds what runs on the box, at its labels' MiB.
    assert.deepEqual(held.map((r) => `${r.serve} ${r.phase} ${r.vramMib}`).sort(), onBox);
    assert.deepEqual(onBox, ['fast running 14336']);

    // The operator reads, as the failure's cause, that the ledger was still reconciling and what its
    // reconcile meets: each attempt of the admit waited its 20 s for it, though the last timed out.
    const top = firstRun.stderr.split('\n').find((l) => l.includes(`; workflow ${upId}]`)) ?? '';
    console.log(`  the failure's line: ${top}`);
    assert.match(
      top,
      /^serves up other failed: the ledger of gpu_role 'dark-fast' on \S+ is still reconciling with the box and decided nothing \(its reconcile's attempt \d+ failed: connect ENOENT .*\[LedgerReconciling; workflow /,
      show(firstRun),
    );
    // And after it, why the ledger does not answer the command's own read.
    assert.match(
      firstRun.stderr,
      /still reconciling with the running containers after 30 s \(its reconcile's attempt \d+ failed: connect ENOENT/,
      show(firstRun),
    );

    const second = await gpures(['serves', 'up', 'other', '--manifest', manifestPath], env, 180_000);
    assert.equal(second.code, 0, show(second));
    const after = (await ledger.query(snapshotQuery)).reservations.map((r) => `${r.serve} ${r.phase} ${r.vramMib}`).sort();
    const nowRunning = (await docker().listContainers({ filters: { label: [`${LABEL.node}=${node}`], status: ['running'] } }))
      .map((c) => `${c.Labels[LABEL.serve]} running ${c.Labels[LABEL.vramMib]}`)
      .sort();
    assert.deepEqual(after, ['fast running 14336', 'other running 1000']);
    assert.deepEqual(nowRunning, after);
  });
});
