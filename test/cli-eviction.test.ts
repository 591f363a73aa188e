// The operator's eviction path as processes: `gpures worker` with the router and nvidia-smi from
// its environment, and `gpures serves up --evict` / `serves down --restore` against fake-vLLM
// containers on the test dockerd, the reference router in front of them.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { HttpRouterAdmin } from '../src/adapters/router-admin/http';
import type { StopResult } from '../src/shared/contracts';
import type { DrainResult } from '../src/shared/contracts';
import { containerName } from '../src/domain/serve';
import { workflowIds } from '../src/shared/messages';
import { docker, routedChat } from './support/box';
import type { TestServe } from './support/box';
import { gpures, show, startWorkerProcess } from './support/cli';
import { startProcessBox } from './support/process-box';
import type { ProcessBox } from './support/process-box';
import { activityRuns, waitForPendingActivity } from './support/history-scan';
import type { TestTemporal } from './support/temporal';
import { waitUntil } from './support/wait';

const GPU = { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 };
const SERVES: TestServe[] = [
  { name: 'fast', vram_mib: 14336, router_tier: 'fast-local' },
  { name: 'vision', vram_mib: 12288, class: 'evictable', served_model_name: 'qwen3-vl-4b-instruct', router_tier: 'vision-local' },
  // The report's stand-in: no HTTP, a container that just holds its reservation.
  { name: 'comfyui-sim', vram_mib: 8192, class: 'on-demand', api: 'none', args: ['sleep', '3600'] },
];
const header = (committed: number, free: number) => `gpu_role 'dark-fast': capacity 32607 MiB, reserve 4608 MiB, committed ${committed} MiB, free ${free} MiB`;

describe('gpures serves up --evict and serves down --restore, as processes on Docker', () => {
  let box: ProcessBox;
  let temporal: TestTemporal;
  let router: ProcessBox['router'];
  let node: string;
  let manifest: string;
  let env: Record<string, string>;

  before(async () => {
    box = await startProcessBox('cli-evict', GPU, SERVES);
    ({ temporal, router, node, env, manifestPath: manifest } = box);
  });

  after(async () => {
    await box?.close();
  });

  const routedVision = async (): Promise<number> => (await routedChat(router.url, 'vision')).status;

  test('evict vision for comfyui-sim, then restore it through the guarded readmit', async () => {
    const up = await gpures(['serves', 'up', 'fast', 'vision', '--manifest', manifest], env);
    assert.equal(up.code, 0, show(up));
    assert.ok(
      up.stdout.endsWith(`${[header(26624, 1375), '  fast 14336 MiB (resident, running)', '  vision 12288 MiB (evictable, running)'].join('\n')}\n`),
      show(up),
    );
    assert.equal(await routedVision(), 200);

    const evict = await gpures(['serves', 'up', 'comfyui-sim', '--evict', '--manifest', manifest], env);
    assert.equal(evict.code, 0, show(evict));
    // Live progress, in the report's order, then the outcome.
    const progress = evict.stderr
      .split('\n')
      .filter((l) => l.startsWith('  '))
      .map((l) => l.trim().split(':')[0]);
    // The room read twice: as the card will be once vision is evicted (before its quiesce), and before the start.
    const order = ['plan', 'preflight', 'room', 'quiesce vision', 'drain vision', 'stop vision', 'release vision', 'room', 'start', 'health', 'running'];
    assert.deepEqual(
      progress.filter((p) => order.includes(p ?? '')),
      order,
      show(evict),
    );
    assert.match(evict.stderr, /^ {2}release vision: nvidia-smi: 12288 MiB back on GPU-/m);
    assert.match(evict.stderr, /^ {2}health: container gpures-.*-comfyui-sim stayed running \(api none: no HTTP to probe\) {2}\[\+[\d.]+s, took [\d.]+s\]$/m);
    assert.match(evict.stderr, /^serves up comfyui-sim --evict: running, 8192 MiB committed on 'dark-fast'; evicted vision$/m);
    assert.ok(
      evict.stdout.endsWith(
        `${[header(22528, 5471), '  fast 14336 MiB (resident, running)', '  vision 12288 MiB (evictable, evicted for comfyui-sim): not committed', '  comfyui-sim 8192 MiB (on-demand, running)'].join('\n')}\n`,
      ),
      show(evict),
    );
    assert.equal(await routedVision(), 503);

    const restore = await gpures(['serves', 'down', 'comfyui-sim', '--restore', '--manifest', manifest], env);
    assert.equal(restore.code, 0, show(restore));
    assert.match(restore.stderr, /^serves down comfyui-sim: stopped, 8192 MiB released on 'dark-fast'; restore: vision restored$/m);
    assert.ok(
      restore.stdout.endsWith(`${[header(26624, 1375), '  fast 14336 MiB (resident, running)', '  vision 12288 MiB (evictable, running)'].join('\n')}\n`),
      show(restore),
    );
    // Answered by the vision container again, through the readmitted tier.
    assert.equal(await routedVision(), 200);

    const down = await gpures(['serves', 'down', 'vision', 'fast', '--manifest', manifest], env);
    assert.equal(down.code, 0, show(down));
    assert.ok(down.stdout.endsWith(`${header(0, 27999)}\n`), show(down));
  });

  test("a worker whose GPURES_ROUTER_TOKEN is not the router's: serves down fails at quiesce naming the 401 and the variable, exit 1; vision still runs, routed", async () => {
    const up = await gpures(['serves', 'up', 'fast', 'vision', '--manifest', manifest], env);
    assert.equal(up.code, 0, show(up));
    await box.worker.stop();
    const wrong = await startWorkerProcess(['--manifest', manifest, '--gpus', 'off'], { ...box.workerEnv, GPURES_ROUTER_TOKEN: `${box.routerToken}-not-it` });
    try {
      // Said at start, once for every tier (the token is the router's, not a tier's), before any operation finds it.
      const warned =
        /^worker: warning: router tier state of tier 'fast-local' answered 401: .*\(GPURES_ROUTER_TOKEN in the worker's environment is not the token the router at http:\/\/127\.0\.0\.1:\d+ was started with\); until then the quiesce, drain and guarded readmit of routed serves fail$/m;
      await waitUntil('the start-up warning', () => warned.test(wrong.stderr()), 20_000, 100);
      assert.equal(wrong.stderr().match(/^worker: warning: .*answered 401/gm)?.length, 1, wrong.stderr());
      const down = await gpures(['serves', 'down', 'vision', '--manifest', manifest], env);
      assert.equal(down.code, 1, show(down));
      // Before: "Activity task failed [ActivityFailure; …]", the router's answer nowhere.
      assert.match(
        down.stderr,
        /^serves down vision failed at quiesce: router quiesce of tier 'vision-local' answered 401: .*\(GPURES_ROUTER_TOKEN in the worker's environment is not the token the router at http:\/\/127\.0\.0\.1:\d+ was started with\); compensated: let go of the serve \[RouterAuthFailed; workflow serves-down\/.*\/vision\]$/m,
        show(down),
      );
      assert.match(down.stderr, /^ {2}quiesce: failed: router quiesce of tier 'vision-local' answered 401/m, show(down));
      // Nothing changed on the box: the container runs, the ledger holds it running, the tier answers.
      assert.deepEqual(
        (await docker().listContainers({ filters: { name: [containerName(node, 'vision')] } })).map((c) => c.State),
        ['running'],
      );
      assert.ok(
        down.stdout.endsWith(`${[header(26624, 1375), '  fast 14336 MiB (resident, running)', '  vision 12288 MiB (evictable, running)'].join('\n')}\n`),
        show(down),
      );
      assert.equal(await routedVision(), 200);
    } finally {
      await wrong.stop();
      await box.startWorker();
    }
    const rest = await gpures(['serves', 'down', 'vision', 'fast', '--manifest', manifest], env);
    assert.equal(rest.code, 0, show(rest));
    assert.ok(rest.stdout.endsWith(`${header(0, 27999)}\n`), show(rest));
  });

  /** SIGKILL, as a crash: no drain of in-flight tasks, no goodbye to the server. */
  async function killWorker(): Promise<number> {
    const child = box.worker.child;
    const exited = new Promise((r) => child.once('exit', r));
    const at = Date.now();
    child.kill('SIGKILL');
    await exited;
    return at;
  }

  test("kill -9 of the worker mid-drain and right after the victim's stop: each step retried within 30 s, evidence from the attempt that acted", async () => {
    const up = await gpures(['serves', 'up', 'fast', 'vision', '--manifest', manifest], env);
    assert.equal(up.code, 0, show(up));
    // One request in flight to vision, long enough to outlive the first worker but not its retry.
    const slow = fetch(`${router.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'vision', messages: [{ role: 'user', content: 'a long answer' }], sim_delay_ms: 8000 }),
    }).then(async (r) => (await r.text(), Date.now()));
    const admin = new HttpRouterAdmin({ baseUrl: router.url, token: box.routerToken });
    await waitUntil('the request in flight at the router', async () => (await admin.tierState('vision-local')).inFlight === 1, 10_000, 50);

    const evict = gpures(['serves', 'up', 'comfyui-sim', '--evict', '--manifest', manifest], env, 180_000);
    const acquire = temporal.client.workflow.getHandle(workflowIds.acquire(node, 'comfyui-sim'));
    // The drain's first poll is its first heartbeat: once the server has it, the figures at the start are durable.
    await waitForPendingActivity(acquire, 'drainServe', { heartbeated: true });
    const drainKilledAt = await killWorker();

    // The second worker takes the drain's retry; it is killed the moment vision's container exits under its stop.
    const visionName = containerName(node, 'vision');
    const events = await docker().getEvents({ filters: { container: [visionName], event: ['die'] } });
    const died = new Promise<void>((resolve) => events.once('data', () => resolve()));
    await box.startWorker();
    await died;
    const stopKilledAt = await killWorker();
    (events as unknown as { destroy?: () => void }).destroy?.();
    await box.startWorker();

    const r = await evict;
    assert.equal(r.code, 0, show(r));
    const slowEndedAt = await slow;
    const history = (await acquire.fetchHistory()).events ?? [];
    const [drain] = activityRuns(history, 'drainServe');
    const [stop] = activityRuns(history, 'stopServeContainer');
    assert.ok(drain && stop, 'one drain and one stop in the acquisition');
    assert.ok(drain.attempt >= 2 && stop.attempt >= 2, `retried: drain attempt ${drain.attempt}, stop attempt ${stop.attempt}`);
    const drainGapMs = drain.startedAtMs - drainKilledAt;
    const stopGapMs = stop.startedAtMs - stopKilledAt;
    console.log(
      `  retry gaps after kill -9: drain ${(drainGapMs / 1000).toFixed(1)} s (attempt ${drain.attempt}), victim's stop ${(stopGapMs / 1000).toFixed(1)} s (attempt ${stop.attempt})`,
    );
    assert.ok(drainGapMs > 0 && drainGapMs < 30_000, `drain retried ${drainGapMs} ms after the kill`);
    assert.ok(stopGapMs > 0 && stopGapMs < 30_000, `stop retried ${stopGapMs} ms after the kill`);

    // The drain's figures at its start are the first attempt's: 1 in flight, though the retry saw none.
    const drained = drain.result as DrainResult;
    assert.equal(drained.drained, true);
    assert.equal(drained.routerInFlightAtStart, 1, JSON.stringify(drained));
    assert.ok(slowEndedAt < drain.startedAtMs, 'the request had ended before the drain was retried');
    // The stop's issue time is the first attempt's, before the kill, not the retry's.
    const stopped = stop.result as StopResult;
    assert.equal(stopped.issuedByAttempt, 1, JSON.stringify(stopped));
    assert.equal(stopped.stop, 'stopped');
    assert.ok(
      stopped.issuedAtEpochMs <= stopKilledAt && stopKilledAt - stopped.issuedAtEpochMs < 10_000,
      `stop issued at ${stopped.issuedAtEpochMs}, killed at ${stopKilledAt}`,
    );
    assert.match(r.stdout, /comfyui-sim 8192 MiB \(on-demand, running\)/, show(r));
    const [start] = activityRuns(history, 'startServeContainer');
    assert.ok(start);
    console.log(
      `  GPU idle from the victim's stop (attempt 1) to the acquirer's container start: ${((start.startedAtMs - stopped.issuedAtEpochMs) / 1000).toFixed(1)} s`,
    );

    const down = await gpures(['serves', 'down', 'comfyui-sim', '--restore', '--manifest', manifest], env);
    assert.equal(down.code, 0, show(down));
    const rest = await gpures(['serves', 'down', 'vision', 'fast', '--manifest', manifest], env);
    assert.equal(rest.code, 0, show(rest));
    assert.ok(rest.stdout.endsWith(`${header(0, 27999)}\n`), show(rest));
  });
});
