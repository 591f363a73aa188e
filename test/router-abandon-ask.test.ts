// The router's abandon of its on-demand acquisition, against a fake acquisition API (a plain HTTP
// server answering as the API does) and the router in this process: when it asks, how often, what
// it does meanwhile, and what a request arriving around the run's end gets.
// test/router-abandon-race.test.ts races the whole thing with a worker and containers.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { HttpRouterAdmin } from '../src/adapters/router-admin/http';
import { startRouter } from '../src/router/server';
import type { RunningRouter } from '../src/router/server';
import { deadPort, rawConnection } from './support/raw-http';
import type { RawConnection } from './support/raw-http';
import { sleep, waitUntil } from './support/wait';

const TOKEN = 'test-admin-token-0123456789abcdef-0123';
const CLIENT_TOKEN = 'test-client-token-0123456789abcdef-0123';
const WORKFLOW_ID = 'acquire/n/od';

type Json = Record<string, unknown>;

/** The acquisition API as the router sees it; each answer is the test's to set as it goes. */
class FakeApi {
  posts = 0;
  gets: number[] = [];
  abandons: number[] = [];
  status: Json = { workflow_id: WORKFLOW_ID, status: 'running', step: { step: 'quiesce vision' } };
  /** The answer to the nth ask (0-based) and how long it takes. */
  abandonAnswer: (n: number) => { delayMs?: number; code?: number; body: Json } = () => ({ body: { abandoned: false, why: 'not set' } });
  onPost: (n: number) => void = () => undefined;
  url = '';
  private readonly server = http.createServer((req, res) => void this.handle(req, res));

  async start(): Promise<this> {
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((r) => this.server.close(() => r()));
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    for await (const _ of req) void _;
    const send = (code: number, body: Json): void => {
      res.writeHead(code, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    };
    if (req.method === 'GET') {
      this.gets.push(Date.now());
      return send(200, this.status);
    }
    if (req.url?.endsWith('/abandon')) {
      const n = this.abandons.push(Date.now()) - 1;
      const a = this.abandonAnswer(n);
      if (a.delayMs) await sleep(a.delayMs);
      if (a.code !== undefined) return send(a.code, a.body);
      return send(200, { workflow_id: WORKFLOW_ID, run_id: 'r', ...a.body });
    }
    this.onPost(++this.posts);
    return send(202, { workflow_id: WORKFLOW_ID, run_id: `r${this.posts}`, status_url: `/v1/acquisitions/${encodeURIComponent(WORKFLOW_ID)}` });
  }
}

/** A backend whose /health takes `healthDelayMs`: a guarded readmit of its tier holds the router's admin lock that long. */
async function slowBackend(healthDelayMs: number): Promise<{ url: string; close: () => Promise<void> }> {
  const server = http.createServer((req, res) => {
    if (req.url === '/health') {
      setTimeout(() => res.writeHead(200).end(), healthDelayMs);
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ object: 'list', data: [{ id: 'slow', object: 'model' }] }));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close: () => {
      server.closeAllConnections();
      return new Promise((r) => server.close(() => r()));
    },
  };
}

interface Box {
  dir: string;
  api: FakeApi;
  slow: Awaited<ReturnType<typeof slowBackend>>;
  router: RunningRouter;
  admin: HttpRouterAdmin;
  log: string[];
}

async function startBox(): Promise<Box> {
  const dir = mkdtempSync(join(tmpdir(), 'gpures-router-abandon-'));
  const api = await new FakeApi().start();
  const slow = await slowBackend(1500);
  const toml = [
    'mapping_version = "m1"',
    'retry_after_s = 1',
    '[[tiers]]',
    'name = "od-local"',
    `backend = "http://127.0.0.1:${await deadPort()}"`,
    'served_model_name = "od"',
    'model_identity = true',
    '[tiers.on_demand]',
    'serve = "od"',
    'wait_timeout_s = 60',
    'abandon_after_s = 1',
    '[[tiers]]',
    'name = "slow-local"',
    `backend = "${slow.url}"`,
    'served_model_name = "slow"',
    'model_identity = true',
    '[[presets]]',
    'name = "od"',
    'tier = "od-local"',
    '[[presets]]',
    'name = "slow"',
    'tier = "slow-local"',
    '',
  ].join('\n');
  writeFileSync(join(dir, 'router.toml'), toml);
  const log: string[] = [];
  const router = await startRouter({
    configPath: join(dir, 'router.toml'),
    adminToken: TOKEN,
    probeTimeoutMs: 3000,
    acquisitions: { url: api.url, token: 'api-token' },
    clientToken: CLIENT_TOKEN,
    acquisitionPollMs: 50,
    log: (line) => log.push(line),
  });
  return { dir, api, slow, router, admin: new HttpRouterAdmin({ baseUrl: router.url, token: TOKEN, timeoutMs: 10_000 }), log };
}

async function stopBox(b: Box | undefined): Promise<void> {
  if (!b) return;
  await b.router.close();
  await b.api.close();
  await b.slow.close();
  rmSync(b.dir, { recursive: true, force: true });
}

/** A request for od; `abort` makes its client go away (disconnected). */
function ask(b: Box): { answer: Promise<{ status: number; body: Json } | 'gone'>; abort: () => void } {
  const ac = new AbortController();
  const answer = fetch(`${b.router.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${CLIENT_TOKEN}` },
    body: JSON.stringify({ model: 'od', messages: [{ role: 'user', content: 'hi' }] }),
    signal: ac.signal,
  }).then(
    async (r) => ({ status: r.status, body: (await r.json()) as Json }),
    () => 'gone' as const,
  );
  return { answer, abort: () => ac.abort() };
}

/** The first request held, the acquisition POSTed, the request gone; resolves at the router's first abandon ask. */
async function heldThenGone(b: Box): Promise<void> {
  const r = ask(b);
  await waitUntil('the acquisition POST', () => b.api.posts === 1);
  await sleep(200);
  r.abort();
  await waitUntil('the first abandon ask', () => b.api.abandons.length === 1, 5000);
}

/** Runs `fn` over a fresh box, stopped afterwards whatever happens. */
async function withBox(fn: (b: Box) => Promise<void>): Promise<void> {
  const b = await startBox();
  try {
    await fn(b);
  } finally {
    await stopBox(b);
  }
}

/** The router's /metrics lines naming abandons. */
async function abandonMetrics(b: Box): Promise<string[]> {
  const text = await (await fetch(`${b.router.url}/metrics`)).text();
  return text.split('\n').filter((l) => l.startsWith('gpures_router_abandon'));
}

interface TierJson {
  acquisition: Json | null;
  abandon: Json | null;
  state: string;
  queued: number;
  inFlight: number;
}

async function tierState(b: Box): Promise<TierJson> {
  const r = await fetch(`${b.router.url}/admin/tiers/od-local`, { headers: { authorization: `Bearer ${TOKEN}` } });
  return (await r.json()) as TierJson;
}

describe("the router's abandon of its on-demand acquisition", () => {
  test('an ask the run cannot decide yet is asked again while nobody is held, and the status polls go on while an ask is in flight', async () => {
    await withBox(async (box) => {
      await box.admin.quiesce('od-local');
      // The first ask: the run is still admitting, and its answer takes 2 s; the second: abandoned.
      box.api.abandonAnswer = (n) => {
        if (n === 0) return { delayMs: 2000, body: { abandoned: false, why: 'still admitting: ask again', reason: 'admitting', ask_again: true } };
        box.api.status = {
          workflow_id: WORKFLOW_ID,
          status: 'failed',
          error: { type: 'Abandoned', message: 'serves up od --evict abandoned at drain vision' },
        };
        return { body: { abandoned: true, at: 'drain vision' } };
      };
      await heldThenGone(box);
      const getsAtAsk = box.api.gets.length;
      await sleep(1500);
      const getsWhileAsked = box.api.gets.length - getsAtAsk;
      await waitUntil('a second ask', () => box.api.abandons.length >= 2, 6000).catch(() => undefined);
      const asks = box.api.abandons.length;
      console.log(`status GETs in the 1.5 s the first ask was in flight: ${getsWhileAsked}; asks: ${asks}; router log: ${box.log.join(' | ')}`);
      assert.ok(getsWhileAsked >= 5, `the poll loop waited on the ask: ${getsWhileAsked} status GETs in 1.5 s (poll 50 ms)`);
      assert.equal(asks, 2, 'asked again after "still admitting: ask again"');
      await waitUntil('the acquisition ended', async () => (await tierState(box)).acquisition === null, 5000);
      const st = await tierState(box);
      assert.equal(st.abandon?.answer, 'abandoned', JSON.stringify(st.abandon));
      const metrics = await abandonMetrics(box);
      console.log(`metrics: ${metrics.join(' | ')}`);
      assert.ok(metrics.includes('gpures_router_abandon_asks_total{tier="od-local"} 2'), metrics.join('\n'));
      assert.ok(metrics.includes('gpures_router_abandoned_total{tier="od-local"} 1'), metrics.join('\n'));
      assert.ok(metrics.includes('gpures_router_abandon_refused_total{tier="od-local",reason="admitting"} 1'), metrics.join('\n'));
    });
  });
  test('undecided asks are asked again 1 s, then 2, 4, 8 s later (at most 10), and a refusal saying a stop has begun ends the asking', async () => {
    await withBox(async (box) => {
      await box.admin.quiesce('od-local');
      // Four asks go undecided (the run's worker down: 504; then the run answers them late), the
      // fifth is refused: the stop of vision has begun.
      box.api.abandonAnswer = (n) => {
        if (n < 2) return { code: 504, body: { error: { type: 'abandon_unanswered', message: 'did not answer the abandon within 3000 ms: ask again' } } };
        if (n < 4) return { body: { abandoned: false, why: "asked 4.0 s ago, past the asker's wait: ask again", reason: 'late', ask_again: true } };
        return { body: { abandoned: false, why: 'the stop of vision has begun: abandoning now would save nothing', reason: 'committed' } };
      };
      await heldThenGone(box);
      await waitUntil('the fifth ask', () => box.api.abandons.length >= 5, 25_000).catch(() => undefined);
      const gaps = box.api.abandons.slice(1).map((t, i) => t - box.api.abandons[i]!);
      const fifthAt = box.api.abandons.length;
      await sleep(6000);
      const st = await tierState(box);
      const metrics = await abandonMetrics(box);
      console.log(`asks ${box.api.abandons.length} (${fifthAt} when the fifth was awaited); gaps ${gaps.join(', ')} ms; abandon ${JSON.stringify(st.abandon)}`);
      console.log(`metrics: ${metrics.join(' | ')}`);
      assert.equal(box.api.abandons.length, 5, 'asks after the refusal that a stop had begun, or too many before it');
      // 1, 2, 4, 8 s, each within the poll loop's 50 ms and a loaded host's slack.
      for (const [i, want] of [1000, 2000, 4000, 8000].entries()) {
        const gap = gaps[i] ?? 0;
        assert.ok(gap >= want - 100 && gap < want + 1500, `ask ${i + 2} came ${gap} ms after the one before, expected about ${want}`);
      }
      assert.equal(st.abandon?.answer, 'refused');
      assert.equal(st.abandon?.reason, 'committed');
      for (const line of [
        'gpures_router_abandon_asks_total{tier="od-local"} 5',
        'gpures_router_abandon_refused_total{tier="od-local",reason="unanswered"} 2',
        'gpures_router_abandon_refused_total{tier="od-local",reason="late"} 2',
        'gpures_router_abandon_refused_total{tier="od-local",reason="committed"} 1',
      ]) {
        assert.ok(metrics.includes(line), `no '${line}' in ${metrics.join('\n')}`);
      }
    });
  });
  test("a request arriving while the router hands back its quiesce after an abandon starts a new acquisition, not the abandon's 503", async () => {
    await withBox(async (box) => {
      // od-local active over its down serve: the first request is refused by it, held, and the
      // router quiesces the tier itself (the quiesce it hands back once the run is abandoned).
      box.api.abandonAnswer = () => ({ body: { abandoned: true, at: 'drain vision' } });
      await heldThenGone(box);
      // Another change holds the router's admin lock for 1.5 s: a guarded readmit probing a slow /health.
      await box.admin.quiesce('slow-local');
      const readmit = box.admin.readmit('slow-local');
      await sleep(100);
      // The run ends Abandoned; a second acquisition's run is running.
      box.api.onPost = () => (box.api.status = { workflow_id: WORKFLOW_ID, status: 'running', step: { step: 'quiesce vision' } });
      box.api.status = { workflow_id: WORKFLOW_ID, status: 'failed', error: { type: 'Abandoned', message: 'serves up od --evict abandoned at drain vision' } };
      await sleep(300);
      const r2 = ask(box);
      let answered: { status: number; body: Json } | 'gone' | undefined;
      void r2.answer.then((a) => (answered = a));
      await waitUntil('a second acquisition POST', () => box.api.posts >= 2 || answered !== undefined, 6000).catch(() => undefined);
      await sleep(200);
      console.log(`after the abandon: POSTs ${box.api.posts}; the request after it: ${answered === undefined ? 'held' : JSON.stringify(answered)}`);
      assert.equal(answered, undefined, 'the request held after the abandon was answered with its refusal');
      assert.equal(box.api.posts, 2, 'a new acquisition for the request held after the abandon');
      assert.equal((await tierState(box)).state, 'quiesced');
      r2.abort();
      await readmit;
    });
  });
  test('a refused abandon of one run does not stop the router asking the run it POSTs after waiting out a serve going down', async () => {
    await withBox(async (box) => {
      await box.admin.quiesce('od-local');
      box.api.abandonAnswer = (n) => ({
        body: { abandoned: false, why: n === 0 ? 'the stop of vision has begun: abandoning now would save nothing' : 'asked again: refused' },
      });
      await heldThenGone(box);
      // Someone is held again; the run completes over a serve its lease is taking down: the router
      // waits that out and POSTs again for the request held.
      const r2 = ask(box);
      await sleep(300);
      box.api.onPost = () => (box.api.status = { workflow_id: WORKFLOW_ID, status: 'running', step: { step: 'quiesce vision' } });
      box.api.status = { workflow_id: WORKFLOW_ID, status: 'completed', result: {}, serve_going_down: 'its lease is expiring' };
      await waitUntil('the POST after the serve went down', () => box.api.posts === 2, 8000);
      await sleep(200);
      r2.abort();
      await waitUntil('an ask of the new run', () => box.api.abandons.length >= 2, 5000).catch(() => undefined);
      console.log(`POSTs ${box.api.posts}; abandon asks ${box.api.abandons.length}; router log: ${box.log.join(' | ')}`);
      assert.equal(box.api.abandons.length, 2, 'the run POSTed after the serve went down was never asked to abandon');
    });
  });
  test('a held request whose client aborts leaves nothing behind: off the queue, not in flight, and no connection keeps the close waiting', async () => {
    const box = await startBox();
    let conn: RawConnection | undefined;
    let closing: Promise<void> | undefined;
    try {
      await box.admin.quiesce('od-local');
      const r = ask(box);
      await waitUntil('the acquisition POST', () => box.api.posts === 1);
      r.abort();
      assert.equal(await r.answer, 'gone');
      await waitUntil('the aborted request off the queue', async () => (await tierState(box)).queued === 0, 5000);
      const st = await tierState(box);
      // A connection that has sent nothing yet: fetch (undici) opens one again at once after an
      // abort, and any client may connect ahead of its request.
      conn = await rawConnection(box.router.url);
      const startedAt = Date.now();
      closing = box.router.close();
      const silentClosedAfter = await conn.closed(5000);
      const closeTook = await Promise.race([closing.then(() => Date.now() - startedAt), sleep(10_000).then(() => undefined)]);
      console.log(
        `after the abort: queued ${st.queued}, in flight ${st.inFlight}; silent connection closed ${silentClosedAfter ?? 'not'} ms after it opened; close took ${closeTook ?? 'over 10000'} ms`,
      );
      assert.equal(st.inFlight, 0, 'the aborted held request counted in flight: a drain would wait on it');
      assert.ok(silentClosedAfter !== undefined, 'a connection that never sent a request was still open 5 s into the close');
      assert.ok(closeTook !== undefined, "the router's close was still waiting 10 s on");
    } finally {
      conn?.destroy();
      await (closing ?? box.router.close());
      await box.api.close();
      await box.slow.close();
      rmSync(box.dir, { recursive: true, force: true });
    }
  });
});
