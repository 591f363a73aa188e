// LedgerClient's bound on updates in flight per ledger, and its retry of an update the server
// refuses for its in-flight limit, against a stand-in for the Temporal client (no server: the
// same load on a real one is in test/ledger-workflow.test.ts).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ServiceError } from '@temporalio/client';
import type { Client } from '@temporalio/client';
import { isUpdateLimit, LedgerClient } from '../src/adapters/ledger/ledger-client';
import type { GpuSpec } from '../src/domain/types';
import { MockActivityEnvironment } from '@temporalio/testing';
import { ActivityCancellationDetails } from '@temporalio/common';
import { workflowIds } from '../src/shared/messages';
import { uniqueNode } from './support/box';
import { testTemporal } from './support/temporal';

const GPU: GpuSpec = { role: 'g', uuid: 'GPU-g', capacityMib: 1000, reserveMib: 0 };

/** A gRPC error as the SDK wraps it once its own retries gave up. */
function refused(code: number, details: string): ServiceError {
  return new ServiceError('Workflow Update failed', { cause: Object.assign(new Error(`${code} ${details}`), { code, details }) });
}

interface Sent {
  workflowId: string;
  updateId: string;
}

/** Answers each update after `delayMs`; `fail(sent, nth)` may throw instead (nth: tries of that update id so far). */
function standIn(delayMs: number, fail?: (sent: Sent, nth: number) => Error | undefined) {
  const inFlight = new Map<string, number>();
  const maxInFlight = new Map<string, number>();
  const order: string[] = [];
  const tries = new Map<string, number>();
  const client = {
    workflow: {
      getHandle: (workflowId: string) => ({
        executeUpdate: async (_def: unknown, opts: { updateId: string }) => {
          const n = (inFlight.get(workflowId) ?? 0) + 1;
          inFlight.set(workflowId, n);
          maxInFlight.set(workflowId, Math.max(maxInFlight.get(workflowId) ?? 0, n));
          order.push(opts.updateId);
          const nth = (tries.get(opts.updateId) ?? 0) + 1;
          tries.set(opts.updateId, nth);
          try {
            await new Promise((r) => setTimeout(r, delayMs));
            const err = fail?.({ workflowId, updateId: opts.updateId }, nth);
            if (err) throw err;
            return { released: true, vramMib: 1 };
          } finally {
            inFlight.set(workflowId, (inFlight.get(workflowId) ?? 1) - 1);
          }
        },
        // The ledger an operation records is read after each update, by a query (not bounded: it leaves no history).
        query: () => Promise.resolve({ node: 'n', gpuRole: 'g', gpuUuid: GPU.uuid, capacityMib: GPU.capacityMib, reserveMib: 0, reservations: [] }),
      }),
    },
  };
  return { client: client as unknown as Client, maxInFlight, order, tries };
}

describe('LedgerClient: updates in flight per ledger', () => {
  test('at most 8 in flight per ledger by default, served in arrival order; ledgers do not share a bound', async () => {
    const s = standIn(15);
    const ledger = new LedgerClient(s.client);
    const other: GpuSpec = { ...GPU, role: 'other' };
    await Promise.all([
      ...Array.from({ length: 40 }, (_, i) => ledger.release('n', GPU, { serve: `s${i}` }, `u${String(i).padStart(2, '0')}`)),
      ...Array.from({ length: 12 }, (_, i) => ledger.release('n', other, { serve: `s${i}` }, `o${i}`)),
    ]);
    assert.equal(s.maxInFlight.get('ledger/n/g'), 8);
    assert.equal(s.maxInFlight.get('ledger/n/other'), 8);
    const mine = s.order.filter((u) => u.startsWith('u'));
    assert.deepEqual(mine, [...mine].sort(), 'first come, first served');
  });

  test('the bound is an option from 1 to 10 (the server default), anything else refused by name', async () => {
    const s = standIn(5);
    const one = new LedgerClient(s.client, { maxUpdatesInFlight: 1 });
    await Promise.all(Array.from({ length: 5 }, (_, i) => one.release('n', GPU, { serve: `s${i}` }, `u${i}`)));
    assert.equal(s.maxInFlight.get('ledger/n/g'), 1);
    for (const bad of [0, 11, 2.5, Number.NaN]) {
      assert.throws(
        () => new LedgerClient(s.client, { maxUpdatesInFlight: bad }),
        /maxUpdatesInFlight must be an integer from 1 to 10 .*history\.maxInFlightUpdates.*got/,
      );
    }
  });

  test('an update the server refuses for its in-flight limit is retried, with its own update id, until answered', async () => {
    // Every update refused twice: RESOURCE_EXHAUSTED, then the abort of the updates in flight.
    const s = standIn(1, (_sent, nth) =>
      nth === 1
        ? refused(8, 'limit on number of concurrent in-flight updates has been reached')
        : nth === 2
          ? refused(14, 'workflow update was aborted')
          : undefined,
    );
    const ledger = new LedgerClient(s.client);
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => ledger.release('n', GPU, { serve: `s${i}` }, `u${i}`)));
    assert.equal(answers.length, 20);
    assert.ok(
      [...s.tries.values()].every((n) => n === 3),
      JSON.stringify([...s.tries]),
    );
    assert.ok((s.maxInFlight.get('ledger/n/g') ?? 0) <= 8);
  });

  test('other failures are not retried', async () => {
    const s = standIn(1, () => refused(3, 'invalid argument'));
    await assert.rejects(new LedgerClient(s.client).release('n', GPU, { serve: 's' }, 'u'), ServiceError);
    assert.equal(s.tries.get('u'), 1);
    assert.equal(isUpdateLimit(refused(14, 'connection refused')), false);
    assert.equal(isUpdateLimit(new Error('workflow update was aborted')), false);
  });
});

/** A ledger that runs on a task queue nobody polls: its updates and queries are never answered. */
async function unpolledLedger(client: Client, prefix: string): Promise<{ node: string; ledger: LedgerClient }> {
  const node = uniqueNode(prefix);
  await client.workflow.start('ledgerWorkflow', { taskQueue: `nobody-${node}`, workflowId: workflowIds.ledger(node, GPU.role), args: [{ node, gpu: GPU }] });
  return { node, ledger: new LedgerClient(client) };
}

describe('an update sent from an activity ends with the activity (a real dev server, no worker)', () => {
  test('cancelled with its activity, as a stopping worker cancels it, rather than waiting for a ledger nobody runs', async () => {
    const temporal = await testTemporal();
    try {
      const { node, ledger } = await unpolledLedger(temporal.client, 'ledger-cancel');
      const env = new MockActivityEnvironment();
      const fenced = env.run(() => ledger.fence(node, GPU, { serve: 's', holder: 'h/r', step: 'started' }, 'h/r/fence-started/1'));
      const outcome = fenced.then(
        () => 'answered',
        (err: unknown) => err,
      );
      const unanswered = await Promise.race([outcome, new Promise((r) => setTimeout(() => r('waiting'), 1500))]);
      assert.equal(unanswered, 'waiting', 'nobody runs the ledger, so nothing answers');
      const cancelledAt = Date.now();
      env.cancel();
      const err = await Promise.race([outcome, new Promise((r) => setTimeout(() => r('still waiting 15 s after the cancel'), 15_000))]);
      assert.ok(err instanceof Error, `the update ended with ${String(err)}`);
      assert.equal(err.name, 'CancelledFailure', 'the activity ends as cancelled, not as failed');
      assert.ok(Date.now() - cancelledAt < 10_000, 'ended with the cancel, not by a timeout of its own');
      // A cancel that came before the update is sent (the worker stopping during a Docker create) ends it too.
      const early = new MockActivityEnvironment();
      const late = early.run(async () => {
        await new Promise((r) => setTimeout(r, 300));
        return ledger.fence(node, GPU, { serve: 's', holder: 'h/r', step: 'started' }, 'h/r/fence-started/2');
      });
      early.cancel();
      const lateErr = await Promise.race([
        late.then(
          () => 'answered',
          (e: unknown) => e,
        ),
        new Promise((r) => setTimeout(() => r('still waiting after 15 s'), 15_000)),
      ]);
      assert.ok(lateErr instanceof Error && lateErr.name === 'CancelledFailure', `ended with ${String(lateErr)}`);
      await temporal.client.workflow.getHandle(workflowIds.ledger(node, GPU.role)).terminate('test done');
    } finally {
      await temporal.close();
    }
  });
});

describe('a query sent from an activity ends with a stopping worker, and only then; none is sent with no other worker to answer (a real dev server, no worker)', () => {
  /** How `pending` ended, or `still waiting` if it has not within `ms`. */
  const within = (pending: Promise<unknown>, ms: number) =>
    Promise.race([
      pending.then(
        () => 'answered',
        (err: unknown) => err,
      ),
      new Promise((r) => setTimeout(() => r('still waiting'), ms)),
    ]);

  test("a worker's stop cuts the ledger's read short; the run's own cancel leaves it to its answer or its bound", async () => {
    const temporal = await testTemporal();
    try {
      const { node, ledger } = await unpolledLedger(temporal.client, 'ledger-query-stop');

      // As a stop fence's refusal reads the ledger (fencedOrDown), with the worker stopping meanwhile.
      const stopping = new MockActivityEnvironment();
      const read = stopping.run(() => ledger.snapshot(node, GPU, 10_000));
      assert.equal(await within(read, 1500), 'still waiting', 'nobody runs the ledger, so nothing answers');
      const stoppedAt = Date.now();
      stopping.cancel('WORKER_SHUTDOWN', new ActivityCancellationDetails({ workerShutdown: true }));
      const cut = await within(read, 5000);
      assert.ok(cut instanceof Error && cut.name === 'CancelledFailure', `the read ended with ${String(cut)}`);
      assert.ok(Date.now() - stoppedAt < 2000, `ended with the stop (${Date.now() - stoppedAt} ms), not at its 12 s bound`);

      // A start step's question while its worker stops (startServeContainer's notOurs): no other
      // worker polls the node's task queue to answer, so it is not asked, rather than waiting out its bound.
      const aloneAt = Date.now();
      const alone = await within(ledger.answerWhileStopping(node, GPU, 3000), 5000);
      assert.ok(alone instanceof Error && alone.name === 'LedgerUnanswered' && /no other worker polls/.test(alone.message), `it ended with ${String(alone)}`);
      assert.ok(Date.now() - aloneAt < 1000, `unanswered at once (${Date.now() - aloneAt} ms), not at its 3 s bound`);

      // The run's cancel (as startServeContainer's removal asks who holds the serve after it): the query goes on.
      const cancelled = new MockActivityEnvironment();
      const startedAt = Date.now();
      const asked = cancelled.run(() => ledger.answer(node, GPU.role, 5000));
      assert.equal(await within(asked, 1000), 'still waiting');
      cancelled.cancel();
      assert.equal(await within(asked, 2000), 'still waiting', "the run's cancel does not cut the query");
      const ended = await within(asked, 10_000);
      assert.ok(ended instanceof Error && ended.name === 'LedgerUnanswered', `the query ended with ${String(ended)}`);
      assert.ok(Date.now() - startedAt >= 4500, `at its own 5 s bound (${Date.now() - startedAt} ms)`);
      await temporal.client.workflow.getHandle(workflowIds.ledger(node, GPU.role)).terminate('test done');
    } finally {
      await temporal.close();
    }
  });
});
