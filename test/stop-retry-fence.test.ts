// A stop issued is a stop issued, whatever a retry's fence says. A bring-down's stop attempt
// passes its fence, issues the stop and its worker dies (SIGKILL, its own process, at once or 3 s
// after); the ledger is lost (terminated) before the retry, which a second worker picks up at the
// heartbeat timeout, against a fresh ledger reconciled from the box. With a slow fence
// (2.5 s, as a busy ledger answers) the attempt's periodic heartbeat goes out first and the
// `issued` one waits out the 2 s throttle: it never reaches the server, the retry fences again,
// and before this fix the refusal failed the run as "it was not stopped" while vision was down,
// its compensation readmitting vision's tier (which the router refused here only because vision no
// longer answered /health). With the `issued` heartbeat delivered, the retry does not fence at all
// (bb1a26e, item 2). And an eviction's fences of two victims are two Updates (bb1a26e, item 3).
// Separate processes: the workers (gpures worker over the simulated box's runtime), the sim
// serves, the router, the test sampling the box (vision's process, its tier, the ledger).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Client } from '@temporalio/client';
import { ledgerSnapshots, serveAcquire, serveDown, serveUp } from '../src/client/operations';
import { containerName } from '../src/domain/serve';
import type { Manifest } from '../src/domain/types';
import type { StopResult } from '../src/shared/contracts';
import { taskQueueFor, workflowIds } from '../src/shared/messages';
import type { SimBox } from '../src/sim/box';
import type { TestServe } from './support/box';
import { gpuresSaying, show } from './support/cli';
import type { WorkerProcess } from './support/cli';
import { activityRuns } from './support/history-scan';
import { ROUTER_TOKEN } from './support/sim';
import { sampleUntilEnded, startSimWorkerBox } from './support/sim-worker-box';
import type { SimWorkerBox } from './support/sim-worker-box';
import type { TestTemporal } from './support/temporal';

const GPU = { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 };
const SERVES: TestServe[] = [
  { name: 'vision', vram_mib: 12288, class: 'evictable', router_tier: 'vision-local' },
  { name: 'v2', vram_mib: 10000, class: 'evictable', router_tier: 'v2-local' },
  // 27999 MiB to hand out: od fits only once both are evicted.
  { name: 'od', vram_mib: 20000, class: 'on-demand' },
];

type UpdateEvent = { workflowExecutionUpdateAcceptedEventAttributes?: { acceptedRequest?: { meta?: { updateId?: string | null } | null } | null } | null };

describe('a stop issued by an attempt whose worker died', () => {
  let temporal: TestTemporal;
  let box: SimBox;
  let manifest: Manifest;
  let node: string;
  let worker: WorkerProcess | undefined;
  let startWorker: (extra?: string[]) => Promise<WorkerProcess>;
  let cliEnv: Record<string, string>;
  let manifestPath: string;

  let simWorkerBox: SimWorkerBox;

  before(async () => {
    simWorkerBox = await startSimWorkerBox('stop-retry', GPU, SERVES);
    ({ node, manifest, box, temporal } = simWorkerBox);
    startWorker = (extra = []) => simWorkerBox.startWorker(extra);
    manifestPath = simWorkerBox.manifestPath;
    cliEnv = { TEMPORAL_ADDRESS: temporal.address };
    worker = await startWorker();
  });
  after(async () => {
    await worker?.stop();
    await simWorkerBox?.close();
  });

  const client = (): Client => temporal.client;
  const ledgerId = () => workflowIds.ledger(node, GPU.role);
  const tierState = async (tier: string) => {
    const res = await fetch(`${box.router.url}/admin/tiers/${tier}`, { headers: { authorization: `Bearer ${ROUTER_TOKEN}` } });
    return ((await res.json()) as { state: string }).state;
  };
  const visionRuns = async () => (await box.runtime.inspect(containerName(node, 'vision')))?.running === true;
  const ledger = async () => {
    const [l] = await ledgerSnapshots(client(), manifest);
    assert.ok(l);
    return l.reservations.map((r) => `${r.serve} ${r.phase}`).sort();
  };
  /** The update ids the ledger's latest run accepted. */
  const ledgerUpdateIds = async () =>
    ((await client().workflow.getHandle(ledgerId()).fetchHistory()).events as UpdateEvent[]).flatMap((e) => {
      const id = e.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest?.meta?.updateId;
      return id ? [id] : [];
    });

  /**
   * `serves up vision`, then `serves down vision` on a worker started with `killArgs`, which dies
   * right after the stop is issued; the ledger is terminated, a plain worker started, and the box
   * sampled every 200 ms until the bring-down ends. Returns how it ended, the samples, the stop
   * activity's runs, and the box after.
   */
  async function downAcrossKill(killArgs: string[]) {
    const up = await serveUp(client(), node, 'vision');
    assert.ok(up.ok, !up.ok ? up.message : '');
    assert.equal(await tierState('vision-local'), 'active');
    await worker?.stop();
    worker = await startWorker(['--kill-after-stop', 'vision', ...killArgs]);
    const dying = worker;
    const died = new Promise((r) => dying.child.once('exit', r));
    const workflowId = workflowIds.bringDown(node, 'vision');
    const handle = await client().workflow.start('bringDownWorkflow', { workflowId, taskQueue: taskQueueFor(node), args: [{ serve: 'vision' }] });
    await died;
    assert.match(dying.stderr(), /stop of \S+ issued; killed in/, 'the worker died at the stop');
    // The ledger is lost before the retry: the next Update starts a fresh one, reconciled from the box.
    await client().workflow.getHandle(ledgerId()).terminate('test: the ledger is lost after the stop was issued');
    worker = await startWorker();
    const { ended, samples } = await sampleUntilEnded(handle.result() as Promise<{ message?: string }>, async () => {
      const [vision, tier] = await Promise.all([visionRuns(), tierState('vision-local')]);
      return { vision, tier };
    });
    const stops = activityRuns((await handle.fetchHistory()).events ?? [], 'stopServeContainer');
    const after = { vision: await visionRuns(), tier: await tierState('vision-local'), ledger: await ledger() };
    const readmittedWhileDown = samples.filter((s) => !s.vision && s.tier === 'active').length;
    console.log(
      `  ${samples.length} samples from the kill to the run's end, vision-local active while vision was down in ${readmittedWhileDown}; ${ended}\n` +
        `  stop: ${JSON.stringify(stops)}\n  after: ${JSON.stringify(after)}`,
    );
    return { ended, samples, readmittedWhileDown, stop: stops[0], after };
  }

  test("its `issued` heartbeat lost (a slow fence, the beat throttled), the retry refused by a fresh ledger: the stop taken as done, vision's tier not readmitted", async () => {
    const r = await downAcrossKill(['--stop-fence-delay-ms', '2500']);
    assert.ok((r.stop?.attempt ?? 0) >= 2, `the stop completed on a retry (attempt ${r.stop?.attempt})`);
    const st = r.stop?.result as StopResult | undefined;
    assert.equal(st?.issuedByAttempt, undefined, 'the retry read no `issued` heartbeat: the case is not reached');
    assert.equal(r.readmittedWhileDown, 0, 'vision-local was readmitted while vision was down');
    assert.match(r.ended ?? '', /^completed: /);
    assert.match(st?.downAfterRefusal ?? '', /^stop of vision refused: .*; (container \S+ exited|no container \S+)/);
    // The result's own field says what the box shows: an exited container left, not 'absent'.
    const onBox = await box.runtime.inspect(containerName(node, 'vision'));
    console.log(`  on the box: ${onBox ? onBox.status : 'no container'}; the stop's result: stop ${st?.stop}, remove ${st?.remove}`);
    assert.equal(st?.remove, onBox ? `left ${onBox.status}` : 'absent', `remove: ${st?.remove} while the box shows ${onBox ? onBox.status : 'none'}`);
    assert.deepEqual(r.after, { vision: false, tier: 'quiesced', ledger: [] });
  });

  test("its `issued` heartbeat delivered: the retry does not fence again, and reports the first attempt's stop", async () => {
    // Past the 2 s throttle: the `issued` beat has gone out whether or not a periodic one went before it.
    const r = await downAcrossKill(['--kill-after-ms', '3000']);
    assert.ok((r.stop?.attempt ?? 0) >= 2, `the stop completed on a retry (attempt ${r.stop?.attempt})`);
    const st = r.stop?.result as StopResult | undefined;
    assert.equal(st?.issuedByAttempt, 1, `the retry did not report attempt 1's stop: ${JSON.stringify(st)}`);
    assert.equal(st?.downAfterRefusal, undefined);
    const fences = (await ledgerUpdateIds()).filter((id) => id.includes('/fence-stop/'));
    assert.deepEqual(fences, [], 'the fresh ledger was asked a stop fence');
    assert.equal(r.readmittedWhileDown, 0);
    assert.match(r.ended ?? '', /^completed: /);
    assert.deepEqual(r.after, { vision: false, tier: 'quiesced', ledger: [] });
  });

  test('a first attempt refused with the serve already down (it exited, a fresh ledger holds nothing for it): says so and exits 0, its tier not readmitted', async () => {
    const up = await serveUp(client(), node, 'vision');
    assert.ok(up.ok, !up.ok ? up.message : '');
    await worker?.stop();
    // The take lands, then the stop's fence waits 4 s: the ledger is lost meanwhile.
    worker = await startWorker(['--stop-fence-delay-ms', '4000']);
    // vision exits on its own (a crash), unseen by the ledger, which holds it running.
    await box.runtime.stop(containerName(node, 'vision'), 5);
    assert.equal(await visionRuns(), false);
    const cli = gpuresSaying(['serves', 'down', 'vision', '--manifest', manifestPath], cliEnv, 'serves down vision', 180_000);
    let ended = false;
    const samples: { vision: boolean; tier: string }[] = [];
    const run = cli.run.then((r) => ((ended = true), r));
    // Taken: held stopping by the bring-down. Then the ledger is terminated before the fence asks it.
    for (let i = 0; i < 600 && !(await ledger()).includes('vision stopping'); i++) await new Promise((r) => setTimeout(r, 100));
    assert.ok((await ledger()).includes('vision stopping'), 'the bring-down took vision');
    await client().workflow.getHandle(ledgerId()).terminate('test: the ledger is lost between the take and the stop');
    while (!ended) {
      const [vision, tier] = await Promise.all([visionRuns(), tierState('vision-local')]);
      samples.push({ vision, tier });
      await new Promise((r) => setTimeout(r, 200));
    }
    const r = await run;
    const after = { vision: await visionRuns(), tier: await tierState('vision-local'), ledger: await ledger() };
    // Sampled from the ledger's loss, which can come before the bring-down's quiesce lands: a readmit is active after quiesced.
    const quiescedAt = samples.findIndex((x) => x.tier === 'quiesced');
    assert.ok(quiescedAt >= 0, `the bring-down quiesced vision-local: ${JSON.stringify(samples)}`);
    const readmittedWhileDown = samples.slice(quiescedAt).filter((x) => !x.vision && x.tier === 'active').length;
    const stopLine = r.stderr.split('\n').find((l) => l.includes('stop vision') || l.includes('  stop')) ?? '';
    console.log(
      `  ${samples.length} samples (the first quiesced: ${quiescedAt}), vision-local active while vision was down after it in ${readmittedWhileDown}; exit ${r.code}\n  stop step: ${stopLine}\n  after: ${JSON.stringify(after)}`,
    );
    assert.equal(r.code, 0, show(r));
    assert.match(r.stderr, /vision was already down: no reservation, no running container \(container \S+ exited\); nothing stopped/, show(r));
    // The command's result line (stderr's last; stdout has the ledger): nothing was stopped, so it does not say stopped.
    const lastLine = r.stderr.trim().split('\n').at(-1) ?? '';
    assert.equal(lastLine, 'serves down vision: already stopped, nothing changed', show(r));
    assert.equal(readmittedWhileDown, 0, 'vision-local was readmitted while vision was down');
    assert.deepEqual(after, { vision: false, tier: 'quiesced', ledger: [] });
  });

  test("an eviction's stops of two victims are two fence Updates, one per victim", async () => {
    for (const s of ['vision', 'v2']) {
      const o = await serveUp(client(), node, s);
      assert.ok(o.ok, !o.ok ? o.message : '');
    }
    const before = new Set(await ledgerUpdateIds());
    const o = await serveAcquire(client(), node, { serve: 'od', evict: true });
    assert.ok(o.ok, !o.ok ? o.message : '');
    const fences = (await ledgerUpdateIds()).filter((id) => !before.has(id) && id.includes('/fence-stop/'));
    console.log(`  the acquisition's stop fences: ${JSON.stringify(fences)}`);
    assert.equal(fences.length, 2, `two victims stopped, ${fences.length} fence Update(s) reached the ledger: ${JSON.stringify(fences)}`);
    assert.deepEqual(fences.map((id) => id.split('/').at(-2)).sort(), ['v2', 'vision']);
    assert.deepEqual(await ledger(), ['od running', 'v2 evicted', 'vision evicted']);
    const down = await serveDown(client(), node, 'od');
    assert.ok(down.ok, !down.ok ? down.message : '');
  });
});
