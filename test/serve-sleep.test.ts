// The sleep-mode adapter (src/adapters/serve-sleep/http.ts) against the simulated vLLM's endpoints
// (src/sim/sleep-mode.ts): a sleep and a wake at each level, the order of level 2's wake (weights,
// reload, KV cache: the server logs each), and the errors an activity will tell apart.
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ServeUnreachable, SleepEndpointError } from '../src/adapters/errors';
import { HttpServeSleep } from '../src/adapters/serve-sleep/http';
import { startModelServer } from '../src/sim/model-server';
import type { ModelServer } from '../src/sim/model-server';
import type { SleepModeOptions } from '../src/sim/sleep-mode';

const SLEEP: SleepModeOptions = {
  devMode: true,
  enabled: true,
  memory: { vramMib: 12288, weightsMib: 8840, residualMib: 600, leakMib: 0 },
  sleepDelayMs: 0,
  wakeDelayMs: 0,
  reloadDelayMs: 50,
  wakeFails: false,
};

describe('HttpServeSleep against the simulated vLLM', () => {
  const servers: ModelServer[] = [];
  after(async () => {
    for (const s of servers) await s.shutdown(100);
  });

  async function serve(sleep: SleepModeOptions | undefined, lines: string[] = []): Promise<string> {
    const s = await startModelServer({
      model: 'org/vision',
      servedModelName: 'vision',
      host: '127.0.0.1',
      port: 0,
      startDelayMs: 0,
      responseDelayMs: 0,
      drainTimeoutMs: 1000,
      ...(sleep ? { sleep } : {}),
      log: (l) => lines.push(l),
    });
    servers.push(s);
    return `http://127.0.0.1:${s.port}`;
  }

  const adapter = new HttpServeSleep();

  test('level 1: asleep, then awake', async () => {
    const base = await serve(SLEEP);
    assert.equal(await adapter.isSleeping(base, 1000), false);
    await adapter.sleep(base, 1, 1000);
    assert.equal(await adapter.isSleeping(base, 1000), true);
    await adapter.wake(base, 1, 1000);
    assert.equal(await adapter.isSleeping(base, 1000), false);
  });

  test('level 2: the wake reallocates the weights, reloads them, then the KV cache, in that order', async () => {
    const lines: string[] = [];
    const base = await serve(SLEEP, lines);
    await adapter.sleep(base, 2, 1000);
    await adapter.wake(base, 2, 2000);
    assert.equal(await adapter.isSleeping(base, 1000), false);
    const steps = lines.filter((l) => /^(sleeping|partly awake|weights reloaded|awake)/.test(l));
    assert.deepEqual(steps, ['sleeping at level 2', 'partly awake (weights)', 'weights reloaded', 'awake']);
    const chat = await fetch(`${base}/v1/chat/completions`, { method: 'POST', body: JSON.stringify({ messages: [{ role: 'user', content: 'x' }] }) });
    assert.equal(chat.status, 200);
  });

  test('a serve without the endpoints is named as such; a failed wake carries its status; nothing listening is ServeUnreachable', async () => {
    const plain = await serve(undefined);
    await assert.rejects(adapter.sleep(plain, 1, 1000), (e) => e instanceof SleepEndpointError && e.status === 404 && /VLLM_SERVER_DEV_MODE=1/.test(e.message));
    const failing = await serve({ ...SLEEP, wakeFails: true });
    await adapter.sleep(failing, 1, 1000);
    await assert.rejects(adapter.wake(failing, 1, 1000), (e) => e instanceof SleepEndpointError && e.status === 500 && /out of memory/.test(e.message));
    await assert.rejects(adapter.isSleeping('http://127.0.0.1:1', 1000), ServeUnreachable);
  });

  test("a wake's steps share its deadline: a slow reload ends the wake at the deadline", async () => {
    const base = await serve({ ...SLEEP, reloadDelayMs: 5000 });
    await adapter.sleep(base, 2, 1000);
    const started = Date.now();
    await assert.rejects(adapter.wake(base, 2, 400), (e) => e instanceof ServeUnreachable && e.code === 'TIMEOUT');
    assert.ok(Date.now() - started < 4500, `not held for the 5 s reload: the wake gave up after ${Date.now() - started} ms`);
  });
});
