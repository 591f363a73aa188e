// A victim stopped for an acquisition has no container: a ledger lost and started afresh used to
// reconcile from the running containers alone and forget it, and the acquirer's `serves down
// --restore` then restored nothing. The fresh ledger now carries the lost run's evicted entries
// (read by a query that replays that run). A `gpures worker` process, fake-vLLM containers, the
// reference router; each case terminates the ledger after the acquisition, and samples the box
// every 200 ms while `serves down ondemand --restore` (its own process) runs: which serves'
// containers run, and vision's tier. Then a victim whose stop lands while the ledger is lost (the
// lost run still held it evicting), and a lost run whose history is gone (the fresh ledger says so).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { LedgerClient } from '../src/adapters/ledger/ledger-client';
import { formatLedger, totals } from '../src/domain/ledger';
import { containerName, LABEL } from '../src/domain/serve';
import { progressQuery, taskQueueFor, workflowIds } from '../src/shared/messages';
import { docker } from './support/box';
import { gpures, show } from './support/cli';
import { startProcessBox } from './support/process-box';
import type { ProcessBox } from './support/process-box';
import { GPU, SERVES, visionProbes } from './support/vision-probes';
import { waitUntil } from './support/wait';

describe('a fresh ledger keeps the restore links of the one it replaces', () => {
  let b: ProcessBox | undefined;
  const box = () => {
    if (!b) throw new Error('the box has not started');
    return b;
  };
  before(async () => {
    b = await startProcessBox('lostrestore', GPU, SERVES);
  });
  after(async () => {
    await b?.close();
  });
  const { tier, routed } = visionProbes(box);
  const ledger = () => new LedgerClient(box().temporal.client).snapshot(box().node, box().manifest.gpus[0]!);
  const cli = (...args: string[]) => gpures([...args, '--manifest', box().manifestPath], box().env, 120_000);

  /** The serves whose containers run, by their labels, and the MiB those labels reserve. */
  const runningServes = async () => {
    const cs = await docker().listContainers({ filters: { label: [`${LABEL.node}=${box().node}`], status: ['running'] } });
    return { serves: cs.map((c) => c.Labels[LABEL.serve] ?? '?').sort(), mib: cs.reduce((s, c) => s + Number(c.Labels[LABEL.vramMib] ?? 0), 0) };
  };

  /** b and vision up, then ondemand acquired by evicting vision; the ledger then terminated. */
  async function evictedThenLedgerLost(): Promise<void> {
    const up = await cli('serves', 'up', 'b', 'vision');
    assert.equal(up.code, 0, show(up));
    const acq = await cli('serves', 'up', 'ondemand', '--evict');
    assert.equal(acq.code, 0, show(acq));
    assert.deepEqual((await runningServes()).serves, ['b', 'ondemand']);
    assert.equal((await tier()).state, 'quiesced');
    await box().temporal.client.workflow.getHandle(workflowIds.ledger(box().node, GPU.role)).terminate('test: the ledger is lost after an acquisition');
  }

  /** `serves down ondemand --restore` as its own process, the box sampled every 200 ms until it ends; then the box and the ledger. */
  async function downRestoreSampled() {
    let ended = false;
    const down = cli('serves', 'down', 'ondemand', '--restore').finally(() => (ended = true));
    const samples: string[] = [];
    while (!ended) {
      const [{ serves }, t] = await Promise.all([runningServes(), tier()]);
      samples.push(`${serves.join('+')} ${t.state}`);
      await new Promise((r) => setTimeout(r, 200));
    }
    const run = await down;
    const l = await ledger();
    const after = {
      running: await runningServes(),
      tier: (await tier()).state,
      routed: await routed(),
      committedMib: totals(l).committedMib,
      ledger: l.reservations.map((r) => `${r.serve} ${r.phase}`),
    };
    // Distinct samples in order, with how many times each was seen.
    const seen = samples.reduce<string[]>((acc, s, i) => (s === samples[i - 1] ? acc : [...acc, s]), []);
    console.log(`  ${samples.length} samples while serves down ondemand --restore ran: ${seen.join(' -> ')}`);
    console.log(`  ${run.stderr.trim().split('\n').at(-1) ?? ''}; after: ${JSON.stringify(after)}`);
    return { run, samples, after };
  }

  /** vision came back: its container runs, its tier is active and answers, the ledger commits what the containers' labels reserve; never beside ondemand. */
  function assertVisionRestored(r: Awaited<ReturnType<typeof downRestoreSampled>>, said: string) {
    assert.equal(r.run.code, 0, show(r.run));
    assert.ok(r.run.stderr.split('\n').includes(said), show(r.run));
    assert.ok(r.samples.length >= 3, 'the box was sampled while the bring-down ran');
    assert.deepEqual(
      r.samples.filter((s) => s.startsWith('b+ondemand+vision')),
      [],
      'vision ran beside ondemand: over the budget',
    );
    assert.deepEqual(r.after.running.serves, ['b', 'vision'], 'vision was not restored');
    assert.equal(r.after.tier, 'active');
    assert.deepEqual(r.after.routed, { status: 200, byVision: true });
    assert.equal(r.after.committedMib, r.after.running.mib);
    assert.deepEqual(r.after.ledger, ['b running', 'vision running']);
  }

  /** Puts the box back for the next case whatever this one found: every serve down. */
  async function thenDown(run: () => Promise<void>): Promise<void> {
    try {
      await run();
    } finally {
      const down = await cli('serves', 'down', 'ondemand', 'b', 'vision');
      assert.equal(down.code, 0, show(down));
    }
  }

  test('the acquirer still runs: its serves down --restore, the first call to the fresh ledger, brings vision back', () =>
    thenDown(async () => {
      await evictedThenLedgerLost();
      assertVisionRestored(await downRestoreSampled(), "serves down ondemand: stopped, 8192 MiB released on 'dark-fast'; restore: vision restored");
    }));

  test("the acquirer's container gone too: the fresh ledger lists vision evicted for it, and its serves down --restore brings vision back", () =>
    thenDown(async () => {
      await evictedThenLedgerLost();
      // ondemand's container removed while no ledger runs (a crash, a hand on the box).
      await docker().getContainer(containerName(box().node, 'ondemand')).remove({ force: true });
      assert.deepEqual(formatLedger(await ledger()).slice(1), [
        '  b 9000 MiB (resident, running)',
        '  vision 12288 MiB (evictable, evicted for ondemand): not committed',
      ]);
      // Its take finds nothing and its release frees nothing; the restore goes by the ledger after the release.
      assertVisionRestored(await downRestoreSampled(), 'serves down ondemand: was not running, nothing to stop; restore: vision restored');
    }));

  test("vision's stop lands while the ledger is lost, the lost run holding it evicting: the fresh ledger lists it evicted for ondemand, the acquisition fails at its start's fence, and serves down --restore brings vision back", () =>
    thenDown(async () => {
      const { node, temporal } = box();
      const up = await cli('serves', 'up', 'b', 'vision');
      assert.equal(up.code, 0, show(up));
      // vision's memory stays held under its pid after its exit until the test lets it go: the
      // acquisition waits at its release check with vision stopped, still evicting in the ledger.
      const visionPid = (await docker().getContainer(containerName(node, 'vision')).inspect()).State.Pid;
      const gpuUuid = box().manifest.gpus[0]?.uuid ?? '';
      box().writeNvidiaSmiState({ heldPids: [{ gpuUuid, pid: visionPid, vramMib: 12288 }] });
      let fresh: string[] = [];
      let acquired = '';
      try {
        const handle = await temporal.client.workflow.start('acquireWorkflow', {
          workflowId: workflowIds.acquire(node, 'ondemand'),
          taskQueue: taskQueueFor(node),
          args: [{ serve: 'ondemand', evict: true, releaseTimeoutS: 120 }],
        });
        await waitUntil(
          'vision stopped by the acquisition',
          async () => (await handle.query(progressQuery).catch(() => [])).some((s) => s.step === 'stop vision'),
          90_000,
          50,
        );
        assert.deepEqual((await runningServes()).serves, ['b'], "vision's container is gone");
        await temporal.client.workflow.getHandle(workflowIds.ledger(node, GPU.role)).terminate('test: the ledger is lost while vision, stopped, is evicting');
        // The fresh ledger, started by this read, before the acquisition's hand-over reaches it.
        fresh = formatLedger(await ledger()).slice(1);
        box().writeNvidiaSmiState({ heldPids: [] });
        acquired = await handle.result().then(
          (r: { message?: string }) => `completed: ${r.message ?? ''}`,
          (e: Error) => `failed: ${(e.cause as Error | undefined)?.message ?? e.message}`,
        );
      } finally {
        box().writeNvidiaSmiState({ heldPids: [] });
      }
      console.log(`  the fresh ledger with vision stopped: [${fresh.join(';')}]; the acquisition ${acquired}`);
      // The acquisition still runs, between its victim's stop and its start: the fresh ledger
      // carries the start slot it took before that stop (de18ad8), its holder's run running (4382fc7).
      assert.deepEqual(
        fresh.filter((l) => !l.startsWith('start slot: ')),
        ['  b 9000 MiB (resident, running)', '  vision 12288 MiB (evictable, evicted for ondemand): not committed'],
      );
      assert.match(
        fresh.find((l) => l.startsWith('start slot: ')) ?? 'no start slot',
        /^start slot: ondemand is evicting to start \(acquire\/[^/]+\/ondemand\/[^)]+\) since /,
      );
      // Its hold was the lost run's alone: refused at its start's fence, nothing of ondemand started.
      assert.match(
        acquired,
        /^failed: serves up ondemand --evict failed at start: start of ondemand refused: 'ondemand' holds no reservation .*; victims now down: vision \(restore with gpures serves up vision\)$/,
      );
      assert.deepEqual((await runningServes()).serves, ['b']);
      assertVisionRestored(await downRestoreSampled(), 'serves down ondemand: was not running, nothing to stop; restore: vision restored');
    }));

  test("the lost run's history gone: the fresh ledger says it could not read it, in `gpures ledger` and in the next operation's steps, and reconciles all the same", () =>
    thenDown(async () => {
      const { node, temporal } = box();
      await evictedThenLedgerLost();
      // Every run of the ledger deleted (past retention, or a server that lost its state). The
      // server may take 20 s or more to delete a run a worker has just replayed for a query.
      const id = workflowIds.ledger(node, GPU.role);
      const client = temporal.client;
      const runs: string[] = [];
      for await (const wf of client.workflow.list({ query: `WorkflowId = '${id}'` })) runs.push(wf.runId);
      const gone = (runId: string) =>
        client.workflow
          .getHandle(id, runId)
          .describe()
          .then(
            () => false,
            () => true,
          );
      for (const runId of runs) {
        await client.workflowService.deleteWorkflowExecution({ namespace: client.options.namespace, workflowExecution: { workflowId: id, runId } });
        await waitUntil(`run ${runId} of ${id} deleted`, () => gone(runId), 90_000, 250);
      }
      const listedRuns = async () => {
        let n = 0;
        for await (const wf of client.workflow.list({ query: `WorkflowId = '${id}'` })) if (wf.workflowId === id) n++;
        return n;
      };
      await waitUntil('no run of the ledger listed', async () => (await listedRuns()) === 0, 30_000, 500);
      const listed = await cli('ledger');
      assert.equal(listed.code, 0, show(listed));
      const down = await cli('serves', 'down', 'ondemand', '--restore');
      const note = listed.stdout.split('\n').find((l) => l.startsWith('note: ')) ?? '';
      const told = down.stderr.split('\n').filter((l) => /^ {2}ledger: /.test(l));
      console.log(
        `  gpures ledger: ${listed.stdout.trim().split('\n').join(' / ')}; serves down ondemand --restore said: ${told.join(' / ') || '(nothing of it)'}; ${down.stderr.trim().split('\n').at(-1) ?? ''}`,
      );
      // The box alone: vision, stopped for ondemand, is not listed, and nothing restores it; the operator is told why.
      assert.deepEqual(
        listed.stdout
          .split('\n')
          .filter((l) => l.startsWith('  '))
          .map((l) => l.trim()),
        ['b 9000 MiB (resident, running)', 'ondemand 8192 MiB (on-demand, running)'],
      );
      assert.match(
        note,
        /^note: reconciled from the box alone at \S+: the ledger run it replaced could not be read \(no earlier run of this ledger is listed, yet serves of its GPU run: its history is gone\); a serve that run held evicted or asleep for an acquirer may be missing/,
      );
      assert.equal(down.code, 0, show(down));
      assert.equal(told.length, 1, show(down));
      assert.match(told[0] ?? '', /^ {2}ledger: reconciled from the box alone at /);
      assert.match(down.stderr, /restore: no serve was evicted for ondemand/);
      assert.deepEqual((await runningServes()).serves, ['b']);
      // Told once: the ledger still lists it, the next operation's steps do not repeat it.
      const up = await cli('serves', 'up', 'vision');
      assert.equal(up.code, 0, show(up));
      assert.doesNotMatch(up.stderr, /^ {2}ledger: /m);
      assert.match((await cli('ledger')).stdout, /^note: reconciled from the box alone at /m);
    }));
});
