// An acquisition reads the card's room before it evicts, on a simulated box: real dev server, the
// reference router, sim serves as separate processes, the fake nvidia-smi listing each by its pid,
// a process outside the ledger started on the card by hand, and `gpures serves up --evict` run as
// its own process. The box is sampled the whole time (its running containers, the victim's tier
// at the router), not only the ledger's word.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { containerName } from '../src/domain/serve';
import { ledgerSnapshots, serveDown } from '../src/client/operations';
import { exportWorkflow } from '../src/audit/export';
import { workflowIds } from '../src/shared/messages';
import type { TestServe } from './support/box';
import { startSquatter } from './support/sim';
import { sampleBoxUntilStopped, simTestBoxPerSuite } from './support/sim-worker-box';
import { gpures, show } from './support/cli';
import { scheduledActivities } from './support/history-scan';

/** The activity tasks each completed workflow task scheduled, in order (local steps not included). */
function activitiesByWorkflowTask(
  events: readonly {
    workflowTaskCompletedEventAttributes?: unknown;
    activityTaskScheduledEventAttributes?: { activityType?: { name?: string | null } | null } | null;
  }[],
): string[][] {
  const tasks: string[][] = [];
  for (const e of events) {
    if (e.workflowTaskCompletedEventAttributes) tasks.push([]);
    const name = e.activityTaskScheduledEventAttributes?.activityType?.name;
    if (name) tasks[tasks.length - 1]?.push(name);
  }
  return tasks;
}

const GPU = { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 };
const SERVES: TestServe[] = [
  { name: 'fast', vram_mib: 14336, router_tier: 'fast-local' },
  { name: 'vision', vram_mib: 12288, class: 'evictable', served_model_name: 'qwen3-vl-4b-instruct', router_tier: 'vision-local' },
  { name: 'comfyui-sim', vram_mib: 8192, class: 'on-demand' },
  // Run on the card by hand, outside the ledger (its manifest entry only lends it a port and a command).
  { name: 'squatter', vram_mib: 12288 },
];
/** Where the acquisitions' histories go when set (how test/histories/eviction-room-refused.json and eviction-room-local.json were recorded). */
const SAVE_DIR = process.env['GPURES_SAVE_HISTORIES'];

/** What the box showed at one moment: the running containers and the victim's tier at the router. */
interface Sample {
  running: string[];
  visionTier: string;
}

describe('an acquisition reads the card has the room before it evicts', () => {
  const suite = simTestBoxPerSuite('evict-room', GPU, SERVES);

  const client = () => suite.t.temporal.client;
  const squatterName = () => `squatter-${suite.t.node}`;
  const cli = (...args: string[]) => gpures([...args, '--manifest', suite.t.manifestPath], suite.env, 120_000);
  const ledgerLines = async () => (await ledgerSnapshots(client(), suite.t.manifest))[0]?.reservations.map((r) => `${r.serve} ${r.phase}`);

  /** The box every 100 ms until stopped (2 min at most): its running containers and vision's tier. */
  const sampleBox = () =>
    sampleBoxUntilStopped<Sample>(async () => {
      const [containers, tier] = await Promise.all([suite.t.box.runtime.list({}), suite.t.box.routerAdmin.tierState('vision-local')]);
      return { running: containers.filter((c) => c.running).map((c) => c.name), visionTier: tier.state };
    });

  async function upFastAndVision(): Promise<void> {
    for (const s of ['fast', 'vision']) {
      const r = await cli('serves', 'up', s);
      assert.equal(r.code, 0, show(r));
    }
  }

  async function restoreBox(): Promise<void> {
    await suite.t.box.runtime.remove(squatterName());
    for (const s of ['comfyui-sim', 'vision', 'fast']) await serveDown(client(), suite.t.node, s);
    assert.deepEqual((await ledgerLines()) ?? [], []);
  }

  test('a process outside the ledger that no eviction makes room beside: refused before any quiesce, the victim never stopped, its tier never quiesced', async () => {
    try {
      await upFastAndVision();
      const visionName = containerName(suite.t.node, 'vision');
      // 12288 MiB: once vision is down the card holds fast 14336 + comfyui-sim 8192 + this, 2209 MiB past its 32607.
      const [squatterPid] = await startSquatter(suite.t, 12288);
      const box = sampleBox();
      const r = await cli('serves', 'up', 'comfyui-sim', '--evict');
      const samples = await box.stop();
      const quiesced = samples.filter((s) => s.visionTier !== 'active');
      const visionDown = samples.filter((s) => !s.running.includes(visionName));
      console.log(
        `  exit ${r.code}; ${samples.length} samples, ${quiesced.length} with vision-local not active, ${visionDown.length} with vision not running; ` +
          `stderr: ${r.stderr.trim().split('\n').pop()}`,
      );
      // The box first: on a build that reads the room only at the start, vision was quiesced and stopped.
      assert.equal(quiesced.length, 0, `vision-local was seen ${quiesced[0]?.visionTier} in ${quiesced.length} of ${samples.length} samples`);
      assert.equal(visionDown.length, 0, `vision was seen not running in ${visionDown.length} of ${samples.length} samples`);
      assert.equal(r.code, 1, show(r));
      assert.match(
        r.stderr,
        new RegExp(
          `comfyui-sim \\(8192 MiB\\) refused before any eviction: the card cannot hold it even once vision is evicted \\(12288 MiB freed\\): ` +
            `ledger commits 22528 MiB on ${suite.uuid} \\(comfyui-sim included\\), processes outside the ledger hold 12288 MiB \\(pid ${squatterPid} \\S+ 12288 MiB\\): ` +
            `34816 MiB against the card's 32607 MiB, short by 2209 MiB; no serve was evicted, nothing was started`,
        ),
      );
      assert.match(r.stderr, /stop that process, then bring it up again/);
      assert.doesNotMatch(r.stderr, /victims now down/);
      assert.ok(!samples.some((s) => s.running.includes(containerName(suite.t.node, 'comfyui-sim'))), 'comfyui-sim was seen running');
      assert.deepEqual(await ledgerLines(), ['fast running', 'vision running']);
      if (SAVE_DIR) {
        mkdirSync(SAVE_DIR, { recursive: true });
        await exportWorkflow(client(), workflowIds.acquire(suite.t.node, 'comfyui-sim'), { file: join(SAVE_DIR, 'eviction-room-refused.json') });
      }
    } finally {
      await restoreBox();
    }
  });

  test('a process outside the ledger that the eviction makes room beside: the acquisition goes through, its room read before the quiesce', async () => {
    try {
      await upFastAndVision();
      // 4096 MiB: fast 14336 + comfyui-sim 8192 + 4096 = 26624 of 32607 once vision is down.
      await startSquatter(suite.t, 4096);
      // The worker's process listings (nvidia-smi --query-compute-apps): spawned, or the latest reused.
      const listings = suite.t.box.gpu.listings;
      const [spawnedBefore, reusedBefore] = [listings.spawned, listings.reused];
      const box = sampleBox();
      const r = await cli('serves', 'up', 'comfyui-sim', '--evict', '--json');
      const samples = await box.stop();
      const [spawned, reused] = [listings.spawned - spawnedBefore, listings.reused - reusedBefore];
      assert.equal(r.code, 0, show(r));
      const steps = (JSON.parse(r.stdout) as { outcomes: { result?: { steps: { step: string; outcome: string }[] } }[] }).outcomes[0]?.result?.steps ?? [];
      const rooms = steps.filter((s) => s.step === 'room').map((s) => s.outcome);
      const room = rooms[0] ?? '';
      console.log(
        `  exit ${r.code}; steps ${steps.map((s) => s.step).join(', ')}; first room: ${room}; second room: ${rooms[1]}; ` +
          `process listings: ${spawned} spawned, ${reused} reused`,
      );
      assert.deepEqual(
        steps.map((s) => s.step),
        [
          'plan',
          'preflight',
          'room',
          'quiesce vision',
          'drain vision',
          'stop vision',
          'release vision',
          'room',
          'start',
          'health',
          'identity',
          'measure',
          'running',
        ],
      );
      assert.match(
        room,
        /^once vision is evicted \(12288 MiB freed\), ledger commits 22528 MiB .* processes outside the ledger hold 4096 MiB \(pid \d+ \S+ 4096 MiB\): 26624 of the card's 32607 MiB$/,
      );
      // The room before the start lists no processes of its own: the release wait's listing, queried
      // after vision's stop, is reused, and still shows the process outside the ledger. That listing
      // is the one the stop started as vision went down, and the measure's the one the health check
      // started: four spawned (the room before the eviction, the drain's, those two), three taken up.
      // A listing is taken up only within 2 s of its start (LISTED_AHEAD_MAX_AGE_MS): on a loaded
      // host one of the two started ahead may age past it between the steps, and its step lists for
      // itself. Seven asked in all, either way; at least the room's and one started ahead taken up.
      assert.equal(spawned + reused, 7, `process listings: ${spawned} spawned, ${reused} reused`);
      assert.ok(reused >= 2, `process listings: ${spawned} spawned, ${reused} reused (4 and 3 when none aged out)`);
      assert.match(rooms[1] ?? '', /processes outside the ledger hold 4096 MiB \(pid \d+ \S+ 4096 MiB\)/);
      const last = samples[samples.length - 1];
      assert.ok(
        last?.running.includes(containerName(suite.t.node, 'comfyui-sim')) && !last.running.includes(containerName(suite.t.node, 'vision')),
        JSON.stringify(last),
      );
      assert.deepEqual(await ledgerLines(), ['fast running', 'vision evicted', 'comfyui-sim running']);
      // Both room reads are local steps (no activity task, no workflow task of their own after them),
      // and the measure's read of comfyui-sim's processes is scheduled beside its identity check.
      const events = (await client().workflow.getHandle(workflowIds.acquire(suite.t.node, 'comfyui-sim')).fetchHistory()).events ?? [];
      const local = scheduledActivities(events).filter((a) => a === 'readStartRoom').length;
      const byTask = activitiesByWorkflowTask(events);
      console.log(`  activity tasks by workflow task: ${byTask.map((t) => t.join('+') || '-').join(' | ')}`);
      assert.ok(!byTask.flat().includes('readStartRoom'), 'readStartRoom scheduled as an activity task');
      assert.equal(local, 2, 'room reads run as local steps');
      assert.ok(
        byTask.some((t) => t.includes('verifyIdentity') && t.includes('measureOwnProcesses')),
        'verifyIdentity and measureOwnProcesses scheduled by the same workflow task',
      );
      if (SAVE_DIR) {
        mkdirSync(SAVE_DIR, { recursive: true });
        await exportWorkflow(client(), workflowIds.acquire(suite.t.node, 'comfyui-sim'), { file: join(SAVE_DIR, 'eviction-room-local.json') });
      }
    } finally {
      await restoreBox();
    }
  });
});
