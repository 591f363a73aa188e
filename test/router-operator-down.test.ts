// A serve an operator brought down is not one a client should retry: `gpures serves down vision`
// (a CLI process) quiesces vision's tier saying so, and the router answers its preset 503 without
// Retry-After, naming the tier, the reason and `gpures serves up vision`. Before, the 503 said
// "quiesced (evicted or draining); retry later" with Retry-After, and a client retried forever.
// Separate processes: the worker (gpures worker over the simulated box's runtime), the CLI, the
// sim serve; the router beside the test, which reads the box (vision's container, its tier's state).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { exportWorkflow } from '../src/audit/export';
import { serveUp } from '../src/client/operations';
import { containerName } from '../src/domain/serve';
import type { TierState } from '../src/shared/contracts';
import { workflowIds } from '../src/shared/messages';
import type { TestServe } from './support/box';
import { gpures, show } from './support/cli';
import type { WorkerProcess } from './support/cli';
import { ROUTER_TOKEN } from './support/sim';
import { startSimWorkerBox } from './support/sim-worker-box';
import type { SimWorkerBox } from './support/sim-worker-box';

/** Where the bring-down's history goes when set (how bring-down-operator-down.json was recorded). */
const SAVE_DIR = process.env['GPURES_SAVE_HISTORIES'];

const GPU = { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 };
const SERVES: TestServe[] = [{ name: 'vision', vram_mib: 12288, class: 'evictable', router_tier: 'vision-local' }];

describe('a serve an operator brought down, through the router', () => {
  let sim: SimWorkerBox;
  let worker: WorkerProcess | undefined;

  before(async () => {
    sim = await startSimWorkerBox('opdown', GPU, SERVES);
    worker = await sim.startWorker();
  });
  after(async () => {
    await worker?.stop();
    await sim?.close();
  });

  const tier = async () => {
    const res = await fetch(`${sim.box.router.url}/admin/tiers/vision-local`, { headers: { authorization: `Bearer ${ROUTER_TOKEN}` } });
    return (await res.json()) as TierState;
  };
  const visionRuns = async () => (await sim.box.runtime.inspect(containerName(sim.node, 'vision')))?.running === true;
  const ask = async () => {
    const res = await fetch(`${sim.box.router.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'vision', messages: [{ role: 'user', content: 'hello' }] }),
    });
    return { status: res.status, retryAfter: res.headers.get('retry-after'), body: (await res.json()) as { error?: Record<string, unknown> } };
  };

  test('`gpures serves down vision`: the next request gets 503 without Retry-After naming `gpures serves up vision`; `serves up` brings it back', async () => {
    const up = await serveUp(sim.temporal.client, sim.node, 'vision');
    assert.ok(up.ok, up.ok ? '' : up.message);
    assert.equal((await ask()).status, 200);

    const env = { TEMPORAL_ADDRESS: sim.temporal.address };
    const down = await gpures(['serves', 'down', 'vision', '--manifest', sim.manifestPath], env, 180_000);
    assert.equal(down.code, 0, show(down));
    // The box: vision's container down, its tier quiesced at the router, saying why.
    const state = await tier();
    const onBox = { vision: await visionRuns(), tier: state.state, reason: state.quiesceReason, serve: state.quiesceServe };
    const answer = await ask();
    console.log(
      `  after serves down: ${JSON.stringify(onBox)}; the router answered ${answer.status}, Retry-After ${answer.retryAfter}: ${JSON.stringify(answer.body)}`,
    );
    assert.deepEqual(onBox, { vision: false, tier: 'quiesced', reason: 'operator-down', serve: 'vision' });
    assert.equal(answer.status, 503);
    assert.equal(answer.retryAfter, null, 'no Retry-After: nobody brings vision back on their own');
    const message = String(answer.body.error?.message);
    assert.doesNotMatch(message, /retry later/);
    assert.match(message, /^tier 'vision-local' is down: an operator brought its serve 'vision' down .*`gpures serves up vision`/);
    assert.deepEqual(
      [answer.body.error?.reason, answer.body.error?.tier, answer.body.error?.brought_back_by],
      ['operator_down', 'vision-local', 'gpures serves up vision'],
    );
    if (SAVE_DIR) {
      mkdirSync(SAVE_DIR, { recursive: true });
      await exportWorkflow(sim.temporal.client, workflowIds.bringDown(sim.node, 'vision'), { file: join(SAVE_DIR, 'bring-down-operator-down.json') });
    }

    // What it names brings it back: the guarded readmit clears the reason.
    const again = await gpures(['serves', 'up', 'vision', '--manifest', sim.manifestPath], env, 180_000);
    assert.equal(again.code, 0, show(again));
    const back = await tier();
    assert.deepEqual([back.state, back.quiesceReason], ['active', undefined]);
    assert.equal((await ask()).status, 200);
  });
});
