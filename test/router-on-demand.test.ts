// The closed loop through the reference router, driven by the official `openai` client: a request
// for an on-demand preset whose serve is down makes the router acquire it through the acquisition
// API (a real dev server, the worker, the sim box) and hold the request until the acquisition's
// guarded readmit lets the tier back. Every 503 carries Retry-After and the router's error shape.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { WorkflowNotFoundError } from '@temporalio/client';
import { ledgerSnapshots, serveDown, serveUp } from '../src/client/operations';
import { workflowIds } from '../src/shared/messages';
import type { TestServe } from './support/box';
import { startOnDemandBox } from './support/on-demand-box';
import type { OnDemandBox } from './support/on-demand-box';
import { waitFor, waitUntil } from './support/wait';

const GPU = { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 };
const SERVES: TestServe[] = [
  { name: 'fast', vram_mib: 14336, router_tier: 'fast-local' },
  { name: 'vision', vram_mib: 12288, class: 'evictable', served_model_name: 'qwen3-vl-4b-instruct', router_tier: 'vision-local' },
  // Fits only by evicting vision: the on-demand chat model of the examples.
  { name: 'big', vram_mib: 8192, class: 'on-demand', router_tier: 'big-local' },
  // Fits beside the residents; slow to start, so requests stay queued long enough to look at.
  { name: 'slow', vram_mib: 512, class: 'on-demand', router_tier: 'slow-local', env: { SIM_START_DELAY_MS: '3000' } },
  { name: 'unbuilt', vram_mib: 256, class: 'on-demand', router_tier: 'unbuilt-local', image: 'gpures/not-built:none' },
  { name: 'liar', vram_mib: 256, class: 'on-demand', router_tier: 'liar-local', env: { SIM_MODEL_ID: 'someone-else' } },
  { name: 'huge', vram_mib: 20000, class: 'on-demand', router_tier: 'huge-local' },
  // Fits beside the residents: asked for without the client token, then with it.
  { name: 'guarded', vram_mib: 256, class: 'on-demand', router_tier: 'guarded-local' },
];

interface RouterError {
  error: { type: string; code: string; reason: string; tier: string; message: string; retry_after_s: number; acquisition?: { workflow_id: string } };
}

describe('on-demand tiers through the router (openai client, sim box, acquisition API)', () => {
  let box: OnDemandBox;
  const statuses: number[] = [];
  let openai: OpenAI;
  // The router runs in this process: Node's warning that one response gathered too many listeners.
  const listenerWarnings: string[] = [];
  const onWarning = (w: Error) => {
    if (w.name === 'MaxListenersExceededWarning') listenerWarnings.push(w.message);
  };
  process.on('warning', onWarning);

  before(async () => {
    box = await startOnDemandBox({
      prefix: 'router-od',
      gpu: GPU,
      serves: SERVES,
      retryAfterS: 1,
      // Small enough to pass with one request: what a client can make the router hold is bounded.
      heldBytesLimit: 64 * 1024,
      onDemand: [
        // Shorter than vision's 120 s window: a request denied inside it cannot wait for its end.
        { tier: 'big-local', serve: 'big', evict: true, wait_timeout_s: 30 },
        { tier: 'slow-local', serve: 'slow', queue_size: 2, keepalive_s: 1 },
        { tier: 'unbuilt-local', serve: 'unbuilt' },
        { tier: 'liar-local', serve: 'liar' },
        { tier: 'huge-local', serve: 'huge' },
        { tier: 'guarded-local', serve: 'guarded' },
      ],
    });
    // Every answer the client saw, retries included.
    const counting: typeof fetch = async (input, init) => {
      const res = await fetch(input, init);
      statuses.push(res.status);
      return res;
    };
    // The client token as its api key: openai sends it as Authorization: Bearer.
    openai = new OpenAI({ baseURL: `${box.router.url}/v1`, apiKey: box.clientToken, fetch: counting, maxRetries: 8 });
    for (const s of ['fast', 'vision']) {
      const o = await serveUp(box.temporal.client, box.node, s);
      assert.ok(o.ok, o.ok ? '' : o.message);
    }
  });
  after(async () => {
    await box?.close();
  });

  const chat = (model: string) => openai.chat.completions.create({ model, messages: [{ role: 'user', content: 'hello' }] });
  const raw = (model: string, extra: Record<string, unknown> = {}, init: { signal?: AbortSignal; authorization?: string | null } = {}) =>
    fetch(`${box.router.url}/v1/chat/completions`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        ...(init.authorization === null ? {} : { authorization: init.authorization ?? `Bearer ${box.clientToken}` }),
      },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'hello' }], ...extra }),
      ...(init.signal ? { signal: init.signal } : {}),
    });
  const acquisitionRuns = async (serve: string) => {
    const ids: string[] = [];
    for await (const w of box.temporal.client.workflow.list({ query: `WorkflowId = '${workflowIds.acquire(box.node, serve)}'` })) ids.push(w.runId);
    return ids;
  };
  const modes = async () => Object.fromEntries((await box.tiers()).map((t) => [t.tier, t.state]));

  test('10 concurrent requests to a down on-demand serve: one acquisition (evicting vision), all answered 200', async () => {
    // A fresh router has big-local active over a backend that refuses connections.
    const answers = await Promise.all(Array.from({ length: 10 }, () => chat('big')));
    for (const a of answers) assert.equal(a.model, 'big');
    assert.deepEqual(
      statuses.filter((s) => s !== 200),
      [],
      'no request needed a retry',
    );
    const runs = await waitFor('the acquisition in visibility', async () => ((await acquisitionRuns('big')).length > 0 ? acquisitionRuns('big') : undefined));
    assert.equal(runs.length, 1, `one acquire workflow run, got ${runs.join(', ')}`);
    const tiers = await modes();
    assert.equal(tiers['big-local'], 'active');
    assert.equal(tiers['vision-local'], 'quiesced', 'vision was evicted for big');
  });

  test('an on-demand preset without the client token, or with a wrong one: 401, nothing held, no acquisition; with it, acquired', async () => {
    await box.admin.quiesce('guarded-local');
    const acquireId = workflowIds.acquire(box.node, 'guarded');
    for (const authorization of [null, `Bearer ${box.clientToken.slice(0, -1)}x`, `Basic ${box.clientToken}`, box.clientToken]) {
      const r = await raw('guarded', {}, { authorization });
      assert.equal(r.status, 401, `Authorization ${authorization === null ? 'absent' : 'wrong'}`);
      assert.equal(r.headers.get('www-authenticate'), 'Bearer realm="gpures-router"');
      assert.equal(r.headers.get('retry-after'), null, 'no retry will help');
      const text = await r.text();
      assert.ok(!text.includes(box.clientToken.slice(0, 20)), 'the token is never in the answer');
      const body = JSON.parse(text) as RouterError;
      assert.deepEqual([body.error.type, body.error.reason, body.error.tier], ['unauthorized', 'unauthorized', 'guarded-local']);
      assert.match(body.error.message, /^preset 'guarded' is on demand: .*can evict other serves, so it must carry Authorization: Bearer <client token>/);
    }
    // A streamed request too gets the plain 401, not a held stream.
    assert.equal((await raw('guarded', { stream: true }, { authorization: null })).status, 401);
    // Nothing held, nothing acquired: the router shows no queue and no acquisition, the tier is still
    // quiesced, and Temporal knows no such workflow (describe reads the workflow, not visibility).
    const state = (await box.tiers()).find((t) => t.tier === 'guarded-local');
    assert.deepEqual([state?.state, state?.queued, state?.acquisition], ['quiesced', 0, null]);
    await assert.rejects(box.temporal.client.workflow.getHandle(acquireId).describe(), (err: unknown) => err instanceof WorkflowNotFoundError);
    let [ledger] = await ledgerSnapshots(box.temporal.client, box.manifest);
    assert.ok(!ledger?.reservations.some((r) => r.serve === 'guarded'), 'nothing reserved for guarded');

    // The token, its scheme in any case (as the APIs take it): acquired as before, and answered.
    const ok = await raw('guarded', {}, { authorization: `bearer ${box.clientToken}` });
    assert.equal(ok.status, 200, await ok.clone().text());
    assert.equal(((await ok.json()) as { model: string }).model, 'guarded');
    assert.equal((await box.temporal.client.workflow.getHandle(acquireId).describe()).workflowId, acquireId);
    // Its serve up and the tier active: still no request without the token (it would renew the idle lease).
    assert.equal((await modes())['guarded-local'], 'active');
    assert.equal((await raw('guarded', {}, { authorization: null })).status, 401);
    // Ordinary presets and the model list need none.
    assert.equal((await raw('fast', {}, { authorization: null })).status, 200);
    const models = await fetch(`${box.router.url}/v1/models`);
    assert.equal(models.status, 200);
    assert.ok(((await models.json()) as { data: { id: string }[] }).data.some((m) => m.id === 'guarded'));

    const down = await serveDown(box.temporal.client, box.node, 'guarded');
    assert.ok(down.ok, down.ok ? '' : down.message);
    [ledger] = await ledgerSnapshots(box.temporal.client, box.manifest);
    assert.ok(!ledger?.reservations.some((r) => r.serve === 'guarded' && r.phase === 'running'));
  });

  test('an evicted tier answers 503 with Retry-After and the JSON body; the client retries succeed once it is back', async () => {
    const res = await raw('vision');
    assert.equal(res.status, 503);
    assert.equal(res.headers.get('retry-after'), '1');
    const body = (await res.json()) as RouterError;
    assert.equal(body.error.tier, 'vision-local');
    assert.equal(body.error.reason, 'quiesced');
    assert.equal(body.error.retry_after_s, 1);
    // openai.models.list() reads `data`; `unavailable` is for clients that look further.
    const listed = await openai.models.list();
    assert.ok(!listed.data.some((m) => m.id === 'vision'), 'an evicted preset is not listed as answering');
    const models = (await (await fetch(`${box.router.url}/v1/models`)).json()) as { data: { id: string }[]; unavailable?: { id: string; reason: string }[] };
    assert.deepEqual(
      models.unavailable?.filter((m) => m.id === 'vision').map((m) => m.reason),
      ['quiesced'],
    );

    statuses.length = 0;
    const answer = chat('vision');
    await waitUntil('the client got a 503', () => statuses.includes(503));
    const down = await serveDown(box.temporal.client, box.node, 'big', { restore: true });
    assert.ok(down.ok, down.ok ? '' : down.message);
    assert.equal((await answer).model, 'qwen3-vl-4b-instruct');
    assert.ok(statuses.filter((s) => s === 503).length >= 1 && statuses[statuses.length - 1] === 200, `statuses ${statuses.join(',')}`);
  });

  test("inside vision's minimum residency, longer than the tier's wait: a request that would evict it again gets 503 at once with the window's own Retry-After", async () => {
    // vision has just come back by the restore above, so for the node's default 120 s it is no victim.
    const r = await raw('big');
    assert.equal(r.status, 503);
    const body = (await r.json()) as RouterError;
    assert.equal(body.error.reason, 'acquisition_denied');
    const m = /over budget by \d+ MiB.*vision came back \d+ s ago and stays resident for 120 s: it may be evicted in (\d+) s/.exec(body.error.message);
    assert.ok(m, body.error.message);
    // The first test acquired big through this router: how long that took is said too.
    assert.match(
      body.error.message,
      /this tier holds a request at most 30 s \(wait_timeout_s\), less than the \d+ s left of that window and the \d+ s its last acquisition took$/,
    );
    const left = Number(m[1]);
    assert.ok(left > 60 && left <= 120, `evictable again in ${left} s`);
    // What is left of the window when the router answers: the ledger's figure, a second less at most.
    assert.ok(
      Math.abs(body.error.retry_after_s - left) <= 1,
      `retry_after_s ${body.error.retry_after_s}: the window (${left} s), not the router default of 1 s`,
    );
    assert.equal(r.headers.get('retry-after'), String(body.error.retry_after_s));
    assert.equal((await modes())['vision-local'], 'active', 'vision untouched');
    // No cooldown stands in for the window: the router shows it open, and a later request is told the same, by its own wait.
    const open = (await box.tiers()).find((t) => t.tier === 'big-local')?.acquisition as { residencyWindowEndsAtEpochMs?: number } | null | undefined;
    const endsInS = ((open?.residencyWindowEndsAtEpochMs ?? 0) - Date.now()) / 1000;
    assert.ok(endsInS > 50 && endsInS <= 121, `the window open in the tier's state, ending in ${endsInS} s`);
    const again = (await (await raw('big')).json()) as RouterError;
    assert.equal(again.error.reason, 'acquisition_denied');
    assert.match(again.error.message, /this tier holds a request at most 30 s \(wait_timeout_s\)/);
  });

  test('past the queue limit: 503 queue_full with Retry-After naming the acquisition; the queued ones answered', async () => {
    const held = [raw('slow'), raw('slow')];
    // Once the POST has answered, the acquisition has an id to name.
    await waitUntil('two requests queued on slow-local, its acquisition started', async () =>
      (await box.tiers()).some((t) => t.tier === 'slow-local' && t.queued === 2 && t.acquisition?.workflowId),
    );
    const over = await raw('slow');
    assert.equal(over.status, 503);
    assert.equal(over.headers.get('retry-after'), '1');
    const body = (await over.json()) as RouterError;
    assert.equal(body.error.reason, 'queue_full');
    assert.equal(body.error.tier, 'slow-local');
    const id = workflowIds.acquire(box.node, 'slow');
    assert.equal(body.error.acquisition?.workflow_id, id);
    // Admin tier state shows the queue and the acquisition; the API's GET its last step.
    const state = (await box.tiers()).find((t) => t.tier === 'slow-local');
    assert.equal(state?.queued, 2);
    assert.equal(state?.acquisition?.workflowId, id);
    // The serve takes 3 s to turn healthy: meanwhile the last step completed is its start.
    const progress = await waitFor('the acquisition past its start step', async () => {
      const get = await fetch(`${box.apiUrl}/v1/acquisitions/${encodeURIComponent(id)}`, { headers: { authorization: `Bearer ${box.apiToken}` } });
      const p = (await get.json()) as { status: string; step?: { step: string; outcome: string }; steps_completed?: number };
      return p.step?.step === 'start' ? p : undefined;
    });
    assert.equal(progress.status, 'running');
    assert.equal(progress.steps_completed, 3, 'admit, room, start');
    for (const r of await Promise.all(held)) assert.equal(r.status, 200);
    const down = await serveDown(box.temporal.client, box.node, 'slow');
    assert.ok(down.ok, down.ok ? '' : down.message);
    assert.equal((await modes())['slow-local'], 'quiesced', 'serves down quiesced the tier');
    // Saying an operator brought it down: an on-demand tier is acquired again all the same (the next test).
    assert.equal((await box.tiers()).find((t) => t.tier === 'slow-local')?.quiesceReason, 'operator-down');
  });

  test('a streaming request held in the queue gets SSE keepalives, then the stream', async () => {
    // slow-local is quiesced now (serves down, operator-down): the quiesced path, with the serve's 3 s start.
    const res = await raw('slow', { stream: true });
    assert.equal(res.status, 200);
    const text = await res.text();
    const keepalives = text.split('\n').filter((l) => l.startsWith(': waiting for tier'));
    assert.ok(keepalives.length >= 1, `keepalives before the stream: ${text.slice(0, 300)}`);
    assert.ok(text.indexOf(': waiting') < text.indexOf('data: {'), 'keepalives come before the first event');
    assert.match(text, /data: \[DONE\]/);
    // And the official client takes such a stream as it is.
    const down = await serveDown(box.temporal.client, box.node, 'slow');
    assert.ok(down.ok);
    const stream = await openai.chat.completions.create({ model: 'slow', stream: true, messages: [{ role: 'user', content: 'hi' }] });
    let content = '';
    for await (const chunk of stream) content += chunk.choices[0]?.delta?.content ?? '';
    assert.ok(content.length > 0);
  });

  test('a failed acquisition (image missing, identity mismatch): every queued request gets 503 with the reason; nothing left quiesced', async () => {
    const before = await modes();
    for (const [preset, reason] of [
      ['unbuilt', /ImageMissing|image/i],
      ['liar', /identity|someone-else/i],
    ] as const) {
      const answers = await Promise.all(Array.from({ length: 3 }, () => raw(preset)));
      for (const r of answers) {
        assert.equal(r.status, 503);
        assert.ok(Number(r.headers.get('retry-after')) >= 1);
        const body = (await r.json()) as RouterError;
        assert.equal(body.error.reason, 'acquisition_failed', JSON.stringify(body));
        assert.match(body.error.message, reason);
        assert.equal(body.error.acquisition?.workflow_id, workflowIds.acquire(box.node, preset));
      }
      assert.equal((await acquisitionRuns(preset)).length, 1, `one acquisition of ${preset}`);
    }
    assert.deepEqual(await modes(), before, 'every tier as it was');
    const [ledger] = await ledgerSnapshots(box.temporal.client, box.manifest);
    assert.ok(ledger && !ledger.reservations.some((r) => r.serve === 'unbuilt' || r.serve === 'liar'), 'nothing reserved for them');
  });

  test('a request that would take the queues past the bytes the router holds: 503 queue_full, and no acquisition started for it', async () => {
    const r = await raw('huge', { padding: 'x'.repeat(70 * 1024) });
    assert.equal(r.status, 503);
    assert.equal(r.headers.get('retry-after'), '1');
    const body = (await r.json()) as RouterError;
    assert.equal(body.error.reason, 'queue_full');
    assert.match(
      body.error.message,
      /^tier 'huge-local' would hold this request \(0\.07 MiB\) while its serve is acquired, past the 0\.06 MiB of waiting requests the router holds at most \(0\.00 MiB now\); retry later$/,
    );
    const state = (await box.tiers()).find((t) => t.tier === 'huge-local');
    assert.deepEqual([state?.queued, state?.acquisition], [0, null]);
  });

  test("a denied acquisition passes the ledger's text", async () => {
    const r = await raw('huge');
    assert.equal(r.status, 503);
    assert.ok(r.headers.get('retry-after'));
    const body = (await r.json()) as RouterError;
    assert.equal(body.error.reason, 'acquisition_denied');
    assert.match(body.error.message, /over budget by \d+ MiB/);
  });

  test('a client that goes away leaves the queue', async () => {
    const down = await serveDown(box.temporal.client, box.node, 'slow');
    assert.ok(down.ok, down.ok ? '' : down.message);
    const abort = new AbortController();
    const gone = raw('slow', {}, { signal: abort.signal }).catch((err: unknown) => err);
    await waitUntil('one request queued on slow-local', async () => (await box.tiers()).some((t) => t.tier === 'slow-local' && t.queued === 1));
    abort.abort();
    assert.ok((await gone) instanceof Error);
    await waitUntil('the queue empty again', async () => (await box.tiers()).some((t) => t.tier === 'slow-local' && t.queued === 0));
    // The acquisition the request set off goes on without it (the serve comes up for the next):
    // it ends here, not under the box's teardown.
    const acquired: unknown = await box.temporal.client.workflow.getHandle(workflowIds.acquire(box.node, 'slow')).result();
    assert.equal((acquired as { outcome?: string }).outcome, 'started');
  });

  // A request whose first attempt met the refusing backend enters the tier twice; each attempt's
  // listeners stayed on its response until it closed.
  test("no response of the router's gathered listeners past Node's warning, held and refused requests included", () => {
    process.off('warning', onWarning);
    assert.deepEqual(listenerWarnings, []);
  });
});

describe('an on-demand acquisition denied inside a residency window the request can wait out', () => {
  let box: OnDemandBox;
  before(async () => {
    box = await startOnDemandBox({
      prefix: 'router-od-window',
      gpu: GPU,
      serves: [
        { name: 'fast', vram_mib: 14336, router_tier: 'fast-local' },
        { name: 'vision', vram_mib: 12288, class: 'evictable', served_model_name: 'qwen3-vl-4b-instruct', router_tier: 'vision-local', min_residency_s: 6 },
        { name: 'big', vram_mib: 8192, class: 'on-demand', router_tier: 'big-local' },
      ],
      retryAfterS: 1,
      onDemand: [{ tier: 'big-local', serve: 'big', evict: true }],
    });
    for (const serve of ['fast', 'vision']) assert.ok((await serveUp(box.temporal.client, box.node, serve)).ok);
  });
  after(async () => {
    await box?.close();
  });

  const chat = (model: string) => box.chat(model);
  const runs = async (status?: string) => {
    const found: string[] = [];
    const query = `WorkflowId = '${workflowIds.acquire(box.node, 'big')}'${status ? ` AND ExecutionStatus = '${status}'` : ''}`;
    for await (const w of box.temporal.client.workflow.list({ query })) found.push(w.runId);
    return found;
  };

  test('the requests are held until the window ends, then one acquisition evicts vision and every one is answered 200; none sees a 503', async () => {
    // big acquired over vision, then down with vision restored: vision's 6 s window starts when it runs again, after this instant.
    assert.equal((await chat('big')).status, 200);
    const beforeRestore = Date.now();
    const down = await serveDown(box.temporal.client, box.node, 'big', { restore: true });
    assert.ok(down.ok, down.ok ? '' : down.message);
    const first = chat('big').then(async (r) => ({ status: r.status, body: await r.text(), at: Date.now() }));
    // The second acquisition is denied: vision is inside its window.
    await waitFor('a denied acquisition of big', async () => ((await runs('Failed')).length > 0 ? true : undefined), 10_000);
    const tier = (await box.tiers()).find((t) => t.tier === 'big-local');
    assert.equal(tier?.queued, 1, 'the request is still held, not refused');
    // A request arriving meanwhile joins the wait: no acquisition of its own.
    const second = chat('big').then(async (r) => ({ status: r.status, body: await r.text(), at: Date.now() }));
    for (const answer of await Promise.all([first, second])) {
      assert.equal(answer.status, 200, answer.body);
      assert.ok(answer.at >= beforeRestore + 6000, `answered ${answer.at - beforeRestore} ms after vision's restore was asked, inside its 6 s window`);
    }
    assert.deepEqual(
      [(await runs()).length, (await runs('Failed')).length],
      [3, 1],
      'the first acquisition, the denied one, the one that evicted vision again',
    );
    const tiers = Object.fromEntries((await box.tiers()).map((t) => [t.tier, t.state]));
    assert.deepEqual([tiers['big-local'], tiers['vision-local']], ['active', 'quiesced']);
    // The router answers once big is healthy with its model, which can be before the acquisition
    // has marked it running: the ledger is read when that run has ended.
    const acquired: unknown = await box.temporal.client.workflow.getHandle(workflowIds.acquire(box.node, 'big')).result();
    assert.equal((acquired as { outcome?: string }).outcome, 'started');
    const [ledger] = await ledgerSnapshots(box.temporal.client, box.manifest);
    assert.deepEqual(
      ledger?.reservations.map((r) => `${r.serve}:${r.phase}`),
      ['fast:running', 'vision:evicted', 'big:running'],
    );
  });
});
