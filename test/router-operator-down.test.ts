// A serve an operator brought down is not one a client should retry: `gpures serves down vision`
// (a CLI process) quiesces vision's tier saying so, and the router answers its preset 503 without
// Retry-After, naming the tier, the reason and `gpures serves up vision`. Before, the 503 said
// "quiesced (evicted or draining); retry later" with Retry-After, and a client retried forever.
// Separate processes: the worker (gpures worker over the simulated box's runtime), the CLI, the
// sim serve; the router beside the test, which reads the box (vision's container, its tier's state).
// The same for vision evicted by an acquisition (`serves up big --evict`) and then brought down:
// its tier, quiesced by the eviction without a reason, said "retry later" before; and for a serve
// put to sleep by one, which the bring-down stops.
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
const SERVES: TestServe[] = [
  { name: 'vision', vram_mib: 12288, class: 'evictable', router_tier: 'vision-local' },
  // Fits the card's 27999 MiB budget only once vision is evicted (or sleepy put to sleep).
  { name: 'big', vram_mib: 20480, class: 'on-demand' },
  // Evicted by sleeping: asleep, its container runs keeping 600 MiB.
  {
    name: 'sleepy',
    vram_mib: 12000,
    class: 'evictable',
    router_tier: 'sleepy-local',
    sleep: { level: 1, residual_mib: 600, host_ram_mib: 7000 },
    env: { SIM_SLEEP_RESIDUAL_MIB: '600' },
  },
];

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

  const tier = async (name = 'vision-local') => {
    const res = await fetch(`${sim.box.router.url}/admin/tiers/${name}`, { headers: { authorization: `Bearer ${ROUTER_TOKEN}` } });
    return (await res.json()) as TierState;
  };
  const runs = async (serve: string) => (await sim.box.runtime.inspect(containerName(sim.node, serve)))?.running === true;
  const visionRuns = () => runs('vision');
  const ask = async (model = 'vision') => {
    const res = await fetch(`${sim.box.router.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hello' }] }),
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

  test('`gpures serves down vision` of vision evicted by an acquisition: its tier, quiesced by the eviction, says operator-down, no Retry-After', async () => {
    const env = { TEMPORAL_ADDRESS: sim.temporal.address };
    const cli = (...args: string[]) => gpures([...args, '--manifest', sim.manifestPath], env, 180_000);
    if (!(await visionRuns())) {
      const up = await cli('serves', 'up', 'vision');
      assert.equal(up.code, 0, show(up));
    }
    assert.equal((await ask()).status, 200);
    const big = await cli('serves', 'up', 'big', '--evict');
    assert.equal(big.code, 0, show(big));
    // Evicted: down, its tier quiesced by the eviction, which gives no reason ("retry later").
    const evicted = await ask();
    assert.deepEqual([await visionRuns(), (await tier()).state, evicted.status, evicted.retryAfter !== null], [false, 'quiesced', 503, true]);

    const down = await cli('serves', 'down', 'vision');
    assert.equal(down.code, 0, show(down));
    const state = await tier();
    const onBox = { vision: await visionRuns(), tier: state.state, reason: state.quiesceReason, serve: state.quiesceServe };
    const answer = await ask();
    console.log(
      `  after serves down of evicted vision: ${JSON.stringify(onBox)}; the router answered ${answer.status}, Retry-After ${answer.retryAfter}: ${JSON.stringify(answer.body)}`,
    );
    assert.equal(answer.status, 503);
    assert.equal(answer.retryAfter, null, 'no Retry-After: the down dropped its restore link, nothing brings vision back on its own');
    assert.doesNotMatch(String(answer.body.error?.message), /retry later/);
    assert.deepEqual(
      [answer.body.error?.reason, answer.body.error?.tier, answer.body.error?.brought_back_by],
      ['operator_down', 'vision-local', 'gpures serves up vision'],
    );
    assert.deepEqual(onBox, { vision: false, tier: 'quiesced', reason: 'operator-down', serve: 'vision' });
    if (SAVE_DIR) {
      mkdirSync(SAVE_DIR, { recursive: true });
      await exportWorkflow(sim.temporal.client, workflowIds.bringDown(sim.node, 'vision'), { file: join(SAVE_DIR, 'bring-down-evicted-operator-down.json') });
    }

    // Back as it names: big down first (vision no longer comes back with it), then vision up.
    const bigDown = await cli('serves', 'down', 'big');
    assert.equal(bigDown.code, 0, show(bigDown));
    assert.equal(await visionRuns(), false, 'vision is not restored with big any more');
    const again = await cli('serves', 'up', 'vision');
    assert.equal(again.code, 0, show(again));
    assert.deepEqual([(await tier()).state, (await tier()).quiesceReason], ['active', undefined]);
    assert.equal((await ask()).status, 200);
  });

  test('`gpures serves down sleepy` of sleepy put to sleep by an acquisition: stopped, its tier says operator-down, no Retry-After', async () => {
    const env = { TEMPORAL_ADDRESS: sim.temporal.address };
    const cli = (...args: string[]) => gpures([...args, '--manifest', sim.manifestPath], env, 180_000);
    // vision out of the way: big's eviction is sleepy's sleep alone.
    for (const s of ['vision', 'big']) {
      const r = await cli('serves', 'down', s);
      assert.equal(r.code, 0, show(r));
    }
    const up = await cli('serves', 'up', 'sleepy');
    assert.equal(up.code, 0, show(up));
    assert.equal((await ask('sleepy')).status, 200);
    const big = await cli('serves', 'up', 'big', '--evict');
    assert.equal(big.code, 0, show(big));
    // Asleep: its container runs, its tier quiesced by the eviction, which gives no reason ("retry later").
    const asleep = await ask('sleepy');
    assert.deepEqual([await runs('sleepy'), (await tier('sleepy-local')).state, asleep.status, asleep.retryAfter !== null], [true, 'quiesced', 503, true]);

    const down = await cli('serves', 'down', 'sleepy');
    assert.equal(down.code, 0, show(down));
    const state = await tier('sleepy-local');
    const onBox = { sleepy: await runs('sleepy'), tier: state.state, reason: state.quiesceReason, serve: state.quiesceServe };
    const answer = await ask('sleepy');
    console.log(
      `  after serves down of sleeping sleepy: ${JSON.stringify(onBox)}; the router answered ${answer.status}, Retry-After ${answer.retryAfter}: ${JSON.stringify(answer.body)}`,
    );
    assert.equal(answer.status, 503);
    assert.equal(answer.retryAfter, null, 'no Retry-After: nothing wakes sleepy any more');
    assert.deepEqual(
      [answer.body.error?.reason, answer.body.error?.tier, answer.body.error?.brought_back_by],
      ['operator_down', 'sleepy-local', 'gpures serves up sleepy'],
    );
    assert.deepEqual(onBox, { sleepy: false, tier: 'quiesced', reason: 'operator-down', serve: 'sleepy' });
    const bigDown = await cli('serves', 'down', 'big');
    assert.equal(bigDown.code, 0, show(bigDown));
    assert.equal(await runs('sleepy'), false, 'sleepy is not woken with big any more');
  });
});
