// A victim's stop and a bring-down's stop are fenced: the ledger must hold the serve for the run
// that stops it (evicting for an acquisition's victim, stopping for a bring-down's take). The race:
// the run quiesces vision's tier and drains it (a request held through the router keeps the drain
// waiting), and the ledger is lost meanwhile (terminated); the fresh ledger reconciles vision's
// running container as running, held by the run on its label. Before the fence the stop went
// ahead: vision down, its tier quiesced, while the ledger committed its MiB as running for a run
// long ended, and nothing restored it. A `gpures worker` process, fake-vLLM containers, the
// reference router; the box is sampled every 200 ms from the ledger's loss until the run ends
// (vision's container, its tier), then the ledger's committed MiB against the running containers'.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { exportWorkflow } from '../src/audit/export';
import { LedgerClient } from '../src/adapters/ledger/ledger-client';
import { totals } from '../src/domain/ledger';
import { LABEL } from '../src/domain/serve';
import { progressQuery, taskQueueFor, workflowIds } from '../src/shared/messages';
import { docker } from './support/box';
import { gpures, show } from './support/cli';
import { sampleUntilEnded } from './support/sim-worker-box';
import { GPU, lateReadmitBox, visionProbes } from './support/vision-probes';
import { waitUntil } from './support/wait';

/** Where the runs' histories go when set (how stop-refused-*.json in test/histories were recorded). */
const SAVE_DIR = process.env['GPURES_SAVE_HISTORIES'];

describe('a stop whose serve a restarted ledger holds running for another run is refused', () => {
  const { box } = lateReadmitBox('stopfence');
  const { tier, routed, running } = visionProbes(box);
  const ledger = () => new LedgerClient(box().temporal.client).snapshot(box().node, box().manifest.gpus[0]!);

  /** The MiB the running containers' labels reserve: what the box holds, whatever the ledger says. */
  const labelMib = async () =>
    (await docker().listContainers({ filters: { label: [`${LABEL.node}=${box().node}`], status: ['running'] } })).reduce(
      (s, c) => s + Number(c.Labels[LABEL.vramMib] ?? 0),
      0,
    );

  /**
   * Starts `workflow` once a request holds vision's drain; once `quiesced` is recorded, terminates
   * the ledger and samples the box every 200 ms until the run ends. Returns the samples, how the
   * run ended, and the box and ledger after it.
   */
  async function ledgerLostMidDrain(workflow: 'acquireWorkflow' | 'bringDownWorkflow', workflowId: string, args: object, quiesced: string, save: string) {
    const { manifestPath, env, temporal, node } = box();
    const up = await gpures(['serves', 'up', 'b', 'vision', '--manifest', manifestPath], env);
    assert.equal(up.code, 0, show(up));
    const held = routed(15_000);
    await waitUntil('a request in flight at vision-local', async () => (await tier()).inFlight > 0, 10_000, 20);
    const handle = await temporal.client.workflow.start(workflow, { workflowId, taskQueue: taskQueueFor(node), args: [args] });
    await waitUntil(
      `${workflowId} past ${quiesced}`,
      async () => (await handle.query(progressQuery).catch(() => [])).some((s) => s.step === quiesced),
      60_000,
      20,
    );
    assert.equal((await tier()).state, 'quiesced');
    await temporal.client.workflow.getHandle(workflowIds.ledger(node, GPU.role)).terminate('test: the ledger is lost mid-drain');
    // A read starts a fresh ledger while vision drains (as `gpures ledger`, the API or the next
    // operation would): it reconciles vision's running container as running, held by its label's run.
    const fresh = (await ledger()).reservations.map((r) => `${r.serve} ${r.phase}`);
    console.log(`  the fresh ledger, vision still draining: [${fresh.join(', ')}]`);
    assert.deepEqual(fresh, ['b running', 'vision running']);
    const { ended, samples } = await sampleUntilEnded(handle.result() as Promise<{ message?: string }>, async () => {
      const [vision, t] = await Promise.all([running('vision'), tier()]);
      return { vision, tier: t.state };
    });
    const l = await ledger();
    const after = {
      vision: await running('vision'),
      tier: (await tier()).state,
      ledgerCommittedMib: totals(l).committedMib,
      labelMib: await labelMib(),
      ledger: l.reservations.map((r) => `${r.serve} ${r.phase}`),
    };
    const down = samples.filter((x) => !x.vision).length;
    console.log(
      `  ${workflow}: ${samples.length} samples from the ledger's loss to the run's end: vision down in ${down}, ` +
        `vision-local ${[...new Set(samples.map((x) => x.tier))].join('/')}; held request ${(await held).status}; ${ended}`,
    );
    console.log(`  after: ${JSON.stringify(after)}`);
    if (SAVE_DIR) {
      mkdirSync(SAVE_DIR, { recursive: true });
      await exportWorkflow(temporal.client, workflowId, { runId: handle.firstExecutionRunId, file: join(SAVE_DIR, `${save}.json`) });
    }
    return { samples, down, ended, after };
  }

  /** The box as a running vision has it: its container up in every sample, its tier back, the ledger committing what the containers' labels reserve. */
  function assertVisionRunsOn(r: Awaited<ReturnType<typeof ledgerLostMidDrain>>) {
    assert.ok(r.samples.length >= 3, 'the box was sampled while the run went on');
    assert.equal(r.down, 0, 'vision was stopped while the ledger held it running for another run');
    assert.equal(r.after.vision, true);
    assert.equal(r.after.ledgerCommittedMib, r.after.labelMib, 'the ledger commits MiB no running container holds');
    assert.equal(r.after.tier, 'active', 'vision runs and its tier was left quiesced');
    assert.deepEqual(r.after.ledger, ['b running', 'vision running']);
  }

  /** Runs a case, then puts the box back for the next whatever the case found: every serve down. */
  async function thenDown(run: () => Promise<void>): Promise<void> {
    try {
      await run();
    } finally {
      const down = await gpures(['serves', 'down', 'ondemand', 'b', 'vision', '--manifest', box().manifestPath], box().env, 120_000);
      assert.equal(down.code, 0, show(down));
    }
  }

  test("an acquisition's stop of its victim, after a fresh ledger took vision as running: refused, vision left running, its tier readmitted", () =>
    thenDown(async () => {
      const { node } = box();
      const r = await ledgerLostMidDrain(
        'acquireWorkflow',
        workflowIds.acquire(node, 'ondemand'),
        { serve: 'ondemand', evict: true },
        'quiesce vision',
        'acquire-stop-refused',
      );
      assertVisionRunsOn(r);
      assert.match(
        r.ended,
        /^failed: serves up ondemand --evict failed at stop vision: stop of vision refused: the reservation of 'vision' is held by \S+ \(running\)/,
      );
      assert.match(r.ended, /; it was not stopped; compensated: readmit tier vision-local, abort eviction/);
    }));

  test("a bring-down's stop, after a fresh ledger took vision as running: refused, vision left running, its tier readmitted", () =>
    thenDown(async () => {
      const { node } = box();
      const r = await ledgerLostMidDrain('bringDownWorkflow', workflowIds.bringDown(node, 'vision'), { serve: 'vision' }, 'quiesce', 'stop-refused-readmits');
      assertVisionRunsOn(r);
      assert.match(r.ended, /^failed: serves down vision failed at stop: stop of vision refused: the reservation of 'vision' is held by \S+ \(running\)/);
      // The hold is not the run's: nothing to let go of; the tier it quiesced is readmitted.
      assert.match(r.ended, /; it was not stopped; compensated: readmit tier vision-local$/);
    }));
});
