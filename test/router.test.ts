// The reference router against real local backends: tiny node:http servers that imitate vLLM's
// /health, /v1/models, /v1/chat/completions (slow, gated, streaming) and /v1/embeddings. Admin
// calls go through HttpRouterAdmin, so the adapter is exercised too.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { HttpRouterAdmin } from '../src/adapters/router-admin/http';
import { PermanentError } from '../src/adapters/errors';
import type { ReadmitOutcome } from '../src/shared/contracts';
import { parseManifest } from '../src/config/manifest';
import { checkRouterAgainstManifest, parseRouterConfig, routerCheckErrors } from '../src/config/router-config';
import { parseBackendUrl, tierForPreset } from '../src/config/router-model';
import type { RouterConfig, RouterConfigResult } from '../src/config/router-model';
import type { Manifest, ManifestIssue } from '../src/domain/types';
import { formatIssue } from '../src/domain/types';
import { startRouter } from '../src/router/server';
import type { RunningRouter } from '../src/router/server';
import { parseExposition, valueOf } from './support/prom-text';
import { deadPort, rawConnection, trickle } from './support/raw-http';
import { StallingProxy } from './support/stalling-proxy';
import { sleep, waitUntil } from './support/wait';

// dist/test/router.test.js -> repo root
const ROOT = join(__dirname, '..', '..');
const TOKEN = 'test-admin-token-0123456789abcdef-0123';
/** What a request to an on-demand preset carries (GPURES_ROUTER_CLIENT_TOKEN). */
const CLIENT_TOKEN = 'test-client-token-0123456789abcdef-0123';

// ---------------------------------------------------------------------------------------------
// A fake vLLM serve

interface ChatBody {
  model?: string;
  messages?: { role: string; content: string }[];
  stream?: boolean;
  /** Hold the response this long. */
  delay_ms?: number;
  /** Hold the response (for a stream: after its first chunk) until release(gate). */
  gate?: string;
  /** Answer with this status instead. */
  fail_status?: number;
}

class FakeVllm {
  modelId: string;
  healthStatus = 200;
  healthDelayMs = 0;
  /** Requests being handled right now (decremented when their response closes). */
  active = 0;
  aborted = 0;
  readonly received: { path: string; body: ChatBody; headers: http.IncomingHttpHeaders }[] = [];
  private readonly gates = new Map<string, { promise: Promise<void>; resolve: () => void }>();
  private readonly server: http.Server;
  url = '';

  constructor(modelId: string) {
    this.modelId = modelId;
    this.server = http.createServer((req, res) => void this.handle(req, res));
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
    return this;
  }

  async close(): Promise<void> {
    for (const g of this.gates.values()) g.resolve();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private gate(name: string) {
    let g = this.gates.get(name);
    if (!g) {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => (resolve = r));
      g = { promise, resolve };
      this.gates.set(name, g);
    }
    return g;
  }

  release(name: string): void {
    this.gate(name).resolve();
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const json = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (req.method === 'GET' && req.url === '/health') {
      if (this.healthDelayMs) await sleep(this.healthDelayMs);
      res.writeHead(this.healthStatus);
      res.end();
      return;
    }
    if (req.method === 'GET' && req.url === '/v1/models') {
      json(200, { object: 'list', data: [{ id: this.modelId, object: 'model', root: `/models/${this.modelId}` }] });
      return;
    }
    if (req.method !== 'POST') return json(404, { error: 'not found' });

    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as ChatBody;
    this.received.push({ path: req.url ?? '', body, headers: req.headers });
    this.active++;
    let finished = false;
    res.once('finish', () => (finished = true));
    res.once('close', () => {
      this.active--;
      if (!finished) this.aborted++;
    });

    if (body.fail_status) return json(body.fail_status, { object: 'error', message: `asked to fail with ${body.fail_status}` });
    if (req.url === '/v1/embeddings') {
      return json(200, { object: 'list', model: body.model, data: [{ object: 'embedding', index: 0, embedding: [0.25, 0.5] }] });
    }
    if (req.url !== '/v1/chat/completions') return json(404, { error: 'not found' });

    const content = `echo:${body.messages?.at(-1)?.content ?? ''}`;
    if (body.stream) {
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
      const event = (delta: Record<string, unknown>, finish: string | null) =>
        `data: ${JSON.stringify({ object: 'chat.completion.chunk', model: body.model, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
      res.write(event({ role: 'assistant', content: 'first' }, null));
      if (body.gate) await this.gate(body.gate).promise;
      if (body.delay_ms) await sleep(body.delay_ms);
      if (res.destroyed) return;
      res.write(event({ content: ' second' }, 'stop'));
      res.end('data: [DONE]\n\n');
      return;
    }
    if (body.gate) await this.gate(body.gate).promise;
    if (body.delay_ms) await sleep(body.delay_ms);
    if (res.destroyed) return;
    json(200, {
      id: 'chatcmpl-fake',
      object: 'chat.completion',
      model: body.model,
      choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
    });
  }
}

// ---------------------------------------------------------------------------------------------
// Helpers

interface ChatAnswer {
  status: number;
  contentType: string | null;
  body: Record<string, unknown>;
  headers: Headers;
}

async function post(base: string, path: string, body: unknown, signal?: AbortSignal, authorization?: string): Promise<ChatAnswer> {
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(authorization ? { authorization } : {}) },
    body: JSON.stringify(body),
    ...(signal ? { signal } : {}),
  });
  return { status: res.status, contentType: res.headers.get('content-type'), body: (await res.json()) as Record<string, unknown>, headers: res.headers };
}

function chat(base: string, model: string, extra: Partial<ChatBody> = {}, signal?: AbortSignal, authorization?: string): Promise<ChatAnswer> {
  return post(base, '/v1/chat/completions', { model, messages: [{ role: 'user', content: 'hi' }], ...extra }, signal, authorization);
}

function content(a: ChatAnswer): unknown {
  const choices = a.body.choices as { message: { content: string } }[] | undefined;
  return choices?.[0]?.message.content;
}

async function expectPermanent(p: Promise<unknown>, type: string): Promise<PermanentError> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof PermanentError, `expected PermanentError ${type}, got ${String(err)}`);
    assert.equal(err.type, type);
    return err;
  }
  assert.fail(`expected PermanentError ${type}, but the call succeeded`);
}

function refusal(o: ReadmitOutcome): Extract<ReadmitOutcome, { ok: false }> {
  if (o.ok) assert.fail(`expected a refusal, got ${JSON.stringify(o)}`);
  return o;
}

function routerToml(v: { mapping: string; chat: string; vision: string; dead: string; extra?: string }): string {
  return `mapping_version = "${v.mapping}"

[[tiers]]
name = "chat-local"
backend = "${v.chat}"
served_model_name = "fake-chat"
model_identity = true

[[tiers]]
name = "plain-local"
backend = "${v.chat}/"
served_model_name = "fake-chat"

[[tiers]]
name = "vision-local"
backend = "${v.vision}"
served_model_name = "qwen3-vl-4b-instruct"
model_identity = true

[[tiers]]
name = "dead-local"
backend = "${v.dead}"
served_model_name = "nobody"
model_identity = true

[[presets]]
name = "chat"
tier = "chat-local"

[[presets]]
name = "embeddings"
tier = "chat-local"

[[presets]]
name = "plain"
tier = "plain-local"

[[presets]]
name = "vision"
tier = "vision-local"

[[presets]]
name = "dead"
tier = "dead-local"
${v.extra ?? ''}`;
}

// ---------------------------------------------------------------------------------------------
// The router over real backends

describe('reference router', () => {
  let dir: string;
  let configPath: string;
  let chatBackend: FakeVllm;
  let visionBackend: FakeVllm;
  let router: RunningRouter;
  let admin: HttpRouterAdmin;
  let toml: string;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gpures-router-'));
    configPath = join(dir, 'router.toml');
    chatBackend = await new FakeVllm('fake-chat').start();
    visionBackend = await new FakeVllm('qwen3-vl-4b-instruct').start();
    toml = routerToml({
      mapping: 'test.v1',
      chat: chatBackend.url,
      vision: visionBackend.url,
      dead: `http://127.0.0.1:${await deadPort()}`,
    });
    writeFileSync(configPath, toml);
    router = await startRouter({ configPath, adminToken: TOKEN, probeTimeoutMs: 1000 });
    admin = new HttpRouterAdmin({ baseUrl: router.url, token: TOKEN, timeoutMs: 5000 });
  });

  after(async () => {
    await router?.close();
    await chatBackend?.close();
    await visionBackend?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test('binds loopback; /healthz and /v1/models list the presets', async () => {
    assert.match(router.url, /^http:\/\/127\.0\.0\.1:\d+$/);
    assert.deepEqual(await admin.healthz(), { ok: true, mappingVersion: 'test.v1' });
    const res = await fetch(`${router.url}/healthz`);
    assert.deepEqual(await res.json(), { status: 'ok', mapping_version: 'test.v1' });
    const models = (await (await fetch(`${router.url}/v1/models`)).json()) as { object: string; data: unknown[] };
    assert.equal(models.object, 'list');
    assert.deepEqual(
      models.data,
      [
        ['chat', 'chat-local'],
        ['embeddings', 'chat-local'],
        ['plain', 'plain-local'],
        ['vision', 'vision-local'],
        ['dead', 'dead-local'],
      ].map(([id, tier]) => ({ id, object: 'model', owned_by: 'gpures-router', tier, availability: 'unknown' })),
      'a fresh router: every tier active, no backend answered yet (dead-local has none)',
    );
  });

  test("a tier is listed now once its backend has answered, and dead-local's never is; the admin state says which answered", async () => {
    assert.equal((await chat(router.url, 'chat')).status, 200);
    assert.equal((await chat(router.url, 'dead')).status, 502);
    const models = (await (await fetch(`${router.url}/v1/models`)).json()) as { data: { id: string; availability: string }[] };
    assert.deepEqual(
      models.data.map((m) => [m.id, m.availability]),
      [
        ['chat', 'now'],
        ['embeddings', 'now'],
        ['plain', 'unknown'],
        ['vision', 'unknown'],
        ['dead', 'unknown'],
      ],
    );
    const tiers = (await (await fetch(`${router.url}/admin/tiers`, { headers: { authorization: `Bearer ${TOKEN}` } })).json()) as {
      tiers: { tier: string; state: string; backendAnswered: boolean }[];
    };
    assert.deepEqual(
      tiers.tiers.map((t) => [t.tier, t.state, t.backendAnswered]),
      [
        ['chat-local', 'active', true],
        ['plain-local', 'active', false],
        ['vision-local', 'active', false],
        ['dead-local', 'active', false],
      ],
    );
  });

  test('routes a preset to its tier, rewrites model, relays status, content-type and body', async () => {
    const before = visionBackend.received.length;
    const a = await post(router.url, '/v1/chat/completions', {
      model: 'vision',
      messages: [{ role: 'user', content: 'describe' }],
      temperature: 0,
    });
    assert.equal(a.status, 200);
    assert.match(a.contentType ?? '', /^application\/json/);
    assert.equal(a.body.model, 'qwen3-vl-4b-instruct');
    assert.equal(content(a), 'echo:describe');
    const got = visionBackend.received.slice(before);
    assert.equal(got.length, 1);
    assert.equal(got[0]?.path, '/v1/chat/completions');
    assert.equal(got[0]?.body.model, 'qwen3-vl-4b-instruct', 'the backend sees the served model name, not the preset');
    assert.equal((got[0]?.body as Record<string, unknown>).temperature, 0, 'other fields pass through');

    const e = await post(router.url, '/v1/embeddings', { model: 'embeddings', input: 'x' });
    assert.equal(e.status, 200);
    assert.equal(e.body.model, 'fake-chat');
    assert.equal(chatBackend.received.at(-1)?.path, '/v1/embeddings');

    // A backend error is relayed as is.
    const f = await chat(router.url, 'chat', { fail_status: 400 });
    assert.equal(f.status, 400);
    assert.equal(f.body.message, 'asked to fail with 400');
  });

  test('unknown preset -> 404 naming the known presets; unreachable backend -> 502 naming tier and backend; each with its code', async () => {
    const u = await chat(router.url, 'no-such-preset');
    assert.equal(u.status, 404);
    const err = u.body.error as { message: string; type: string; code: string; presets: string[] };
    assert.match(err.message, /unknown model 'no-such-preset'/);
    assert.deepEqual([err.type, err.code], ['model_not_found', 'model_not_found']);
    assert.deepEqual(err.presets, ['chat', 'embeddings', 'plain', 'vision', 'dead']);
    const missing = await post(router.url, '/v1/chat/completions', { messages: [] });
    assert.equal(missing.status, 400);
    assert.deepEqual(missing.body.error, {
      message: 'missing "model"; known presets: chat, embeddings, plain, vision, dead',
      type: 'model_not_found',
      code: 'missing_model',
      presets: ['chat', 'embeddings', 'plain', 'vision', 'dead'],
    });
    const notObject = await post(router.url, '/v1/chat/completions', ['chat']);
    assert.equal(notObject.status, 400);
    assert.deepEqual(notObject.body.error, {
      message: 'request body must be a JSON object with a "model" field',
      type: 'invalid_request',
      code: 'invalid_body',
    });

    const d = await chat(router.url, 'dead');
    assert.equal(d.status, 502);
    const derr = d.body.error as { message: string; type: string; code: string; tier: string; backend: string };
    assert.deepEqual([derr.type, derr.code], ['backend_unreachable', 'backend_unreachable']);
    assert.equal(derr.tier, 'dead-local');
    assert.match(derr.message, /dead-local/);
    assert.ok(derr.message.includes(derr.backend));
    assert.equal((await admin.tierState('dead-local')).inFlight, 0);
  });

  test('quiesce: new requests get 503 naming the tier, the 5 in flight finish 200, inFlight 5 -> 0 only after', async () => {
    const inflight = Array.from({ length: 5 }, (_, i) => chat(router.url, 'vision', { delay_ms: 700, messages: [{ role: 'user', content: `q${i}` }] }));
    let settled = 0;
    for (const p of inflight)
      void p.then(
        () => settled++,
        () => settled++,
      );
    await waitUntil('5 requests at the backend', () => visionBackend.active === 5);

    assert.equal((await admin.tierState('vision-local')).inFlight, 5);
    const beforeQuiesce = Date.now();
    const q = await admin.quiesce('vision-local');
    const { lastUsedAtEpochMs: usedAtQuiesce, quiesceMark: markAtQuiesce, ...rest } = q;
    assert.deepEqual(rest, { tier: 'vision-local', state: 'quiesced', inFlight: 5, backend: visionBackend.url, modelIdentity: true });
    assert.ok(typeof usedAtQuiesce === 'number' && usedAtQuiesce <= beforeQuiesce, 'the requests in flight began before the quiesce');
    // Idempotent in effect; each quiesce has a mark of its own (whoever quiesces relies on it).
    const again = await admin.quiesce('vision-local');
    assert.deepEqual({ ...again, quiesceMark: markAtQuiesce }, q, 'quiesce is idempotent');
    assert.match(markAtQuiesce ?? '', /^[0-9a-f]{8}\.\d+$/);
    assert.notEqual(again.quiesceMark, markAtQuiesce, 'a quiesce of a quiesced tier moves its mark');

    const refused = await chat(router.url, 'vision');
    assert.equal(refused.status, 503);
    assert.deepEqual(refused.body, {
      error: {
        message: "tier 'vision-local' is quiesced (evicted or draining); retry later",
        type: 'tier_unavailable',
        code: 'quiesced',
        tier: 'vision-local',
        reason: 'quiesced',
        retry_after_s: 10,
      },
    });
    assert.equal(visionBackend.active, 5, 'the refused request never reached the backend');

    // Still draining: nothing finished yet, so the count holds.
    const mid = await admin.tierState('vision-local');
    assert.equal(settled, 0);
    assert.equal(mid.inFlight, 5);
    assert.equal(mid.state, 'quiesced');

    const answers = await Promise.all(inflight);
    assert.deepEqual(
      answers.map((a) => a.status),
      [200, 200, 200, 200, 200],
    );
    assert.deepEqual(answers.map(content), ['echo:q0', 'echo:q1', 'echo:q2', 'echo:q3', 'echo:q4']);
    const drained = await admin.tierState('vision-local');
    assert.deepEqual(drained, { ...again, inFlight: 0, lastUsedAtEpochMs: drained.lastUsedAtEpochMs });
    // A readmit that lifts only the first quiesce refuses over the second (the backend is healthy), and changes nothing.
    const stale = await admin.readmit('vision-local', markAtQuiesce);
    assert.equal(stale.ok, false);
    assert.equal(!stale.ok && stale.reason, 'quiesced_since');
    assert.match(!stale.ok ? stale.message : '', /^tier 'vision-local' was quiesced again since quiesce mark \S+ \(now \S+: /);
    assert.equal((await admin.tierState('vision-local')).state, 'quiesced');
    assert.ok((drained.lastUsedAtEpochMs ?? 0) > usedAtQuiesce, 'the last response to end counts as use');
    assert.equal(router.state().tiers.find((t) => t.tier === 'vision-local')?.inFlight, 0);
    assert.equal((await chat(router.url, 'vision')).status, 503, 'still quiesced after the drain');

    // Other tiers are untouched.
    assert.equal((await chat(router.url, 'chat')).status, 200);

    const back = await admin.readmit('vision-local');
    assert.deepEqual(back, { ok: true, tier: 'vision-local', observedModel: 'qwen3-vl-4b-instruct' });
  });

  test('guarded readmit refuses identity_not_configured, identity_mismatch and unhealthy, then readmits', async () => {
    // A tier without model_identity: refused, and its state is left alone.
    const nc = refusal(await admin.readmit('plain-local'));
    assert.equal(nc.reason, 'identity_not_configured');
    assert.equal(nc.tier, 'plain-local');
    assert.match(nc.message, /model_identity = true/);
    assert.equal((await admin.tierState('plain-local')).state, 'active');

    await admin.quiesce('vision-local');

    // Wrong model behind the port; exact match is required, so case matters too.
    for (const wrong of ['qwen3-vl-8b-instruct', 'Qwen3-VL-4B-Instruct']) {
      visionBackend.modelId = wrong;
      const mm = refusal(await admin.readmit('vision-local'));
      assert.equal(mm.reason, 'identity_mismatch');
      assert.ok(mm.message.includes(wrong), `message names the observed id: ${mm.message}`);
      assert.ok(mm.message.includes('qwen3-vl-4b-instruct'));
      assert.equal((await admin.tierState('vision-local')).state, 'quiesced');
    }
    visionBackend.modelId = 'qwen3-vl-4b-instruct';

    visionBackend.healthStatus = 503;
    const uh = refusal(await admin.readmit('vision-local'));
    assert.equal(uh.reason, 'unhealthy');
    assert.match(uh.message, /503/);
    assert.equal((await chat(router.url, 'vision')).status, 503);

    const dead = refusal(await admin.readmit('dead-local'));
    assert.equal(dead.reason, 'unhealthy');
    assert.match(dead.message, /\/health failed/);

    visionBackend.healthStatus = 200;
    const ok = await admin.readmit('vision-local');
    assert.deepEqual(ok, { ok: true, tier: 'vision-local', observedModel: 'qwen3-vl-4b-instruct' });
    assert.equal((await admin.tierState('vision-local')).state, 'active');
    const routed = await chat(router.url, 'vision', { messages: [{ role: 'user', content: 'again' }] });
    assert.equal(routed.status, 200);
    assert.equal(content(routed), 'echo:again');

    // Readmit of an active tier re-probes: a wrong identity is refused and the tier stays active.
    visionBackend.modelId = 'something-else';
    assert.equal(refusal(await admin.readmit('vision-local')).reason, 'identity_mismatch');
    assert.equal((await admin.tierState('vision-local')).state, 'active');
    visionBackend.modelId = 'qwen3-vl-4b-instruct';
    assert.equal((await admin.readmit('vision-local')).ok, true);
  });

  test('a quiesce sent while a readmit is probing wins: admin changes are serialized', async () => {
    await admin.quiesce('vision-local');
    visionBackend.healthDelayMs = 200;
    try {
      const readmit = admin.readmit('vision-local');
      await sleep(50);
      const quiesce = admin.quiesce('vision-local');
      assert.equal((await readmit).ok, true);
      assert.equal((await quiesce).state, 'quiesced');
      assert.equal((await admin.tierState('vision-local')).state, 'quiesced');
    } finally {
      visionBackend.healthDelayMs = 0;
    }
    assert.equal((await admin.readmit('vision-local')).ok, true);
  });

  test('admin without or with a wrong token -> 401, and nothing changes', async () => {
    const noToken = await fetch(`${router.url}/admin/tiers/vision-local/quiesce`, { method: 'POST' });
    assert.equal(noToken.status, 401);
    const body = (await noToken.json()) as { error: { type: string; code: string; message: string } };
    assert.deepEqual([body.error.type, body.error.code], ['unauthorized', 'unauthorized']);
    const unknown = await fetch(`${router.url}/admin/tiers/nope`, { headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(unknown.status, 404);
    assert.deepEqual(await unknown.json(), {
      error: {
        message: "unknown tier 'nope' (known tiers: chat-local, plain-local, vision-local, dead-local)",
        type: 'unknown_tier',
        code: 'unknown_tier',
        tier: 'nope',
      },
    });

    const wrong = new HttpRouterAdmin({ baseUrl: router.url, token: `${TOKEN}x` });
    await expectPermanent(wrong.quiesce('vision-local'), 'RouterAuthFailed');
    await expectPermanent(wrong.readmit('vision-local'), 'RouterAuthFailed');
    await expectPermanent(wrong.reload(), 'RouterAuthFailed');
    await expectPermanent(new HttpRouterAdmin({ baseUrl: router.url, token: '' }).tierState('vision-local'), 'RouterAuthFailed');
    // Unknown tier with a wrong token is still 401: auth comes first.
    await expectPermanent(wrong.tierState('nope'), 'RouterAuthFailed');

    assert.equal((await admin.tierState('vision-local')).state, 'active');
    assert.equal((await chat(router.url, 'vision')).status, 200);

    await expectPermanent(admin.tierState('nope'), 'UnknownTier');
    await expectPermanent(admin.quiesce('nope'), 'UnknownTier');
    await expectPermanent(admin.readmit('nope'), 'UnknownTier');
  });

  test('bound to loopback, a Host that is not a loopback name (DNS rebinding) gets 421 on every route, token or not: no backend request, nothing changes', async () => {
    const port = new URL(router.url).port;
    const rebound = (method: string, path: string, headers: Record<string, string>, body?: string) =>
      new Promise<{ status: number; type: string; body: string }>((resolve, reject) => {
        // fetch sets Host from the URL; a rebound page's request carries its own name.
        const req = http.request({ host: '127.0.0.1', port, method, path, headers }, (res) => {
          let text = '';
          res.on('data', (c: Buffer) => (text += c.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, type: String(res.headers['content-type']), body: text }));
        });
        req.on('error', reject);
        req.end(body);
      });
    const seen = visionBackend.received.length + chatBackend.received.length;
    const json: Record<string, string> = { 'content-type': 'application/json' };
    for (const [method, path, body] of [
      ['POST', '/v1/chat/completions', JSON.stringify({ model: 'vision', messages: [{ role: 'user', content: 'hi' }] })],
      ['POST', '/v1/embeddings', JSON.stringify({ model: 'embeddings', input: 'x' })],
      ['GET', '/v1/models', undefined],
      ['GET', '/healthz', undefined],
      ['GET', '/metrics', undefined],
      ['POST', '/admin/tiers/vision-local/quiesce', undefined],
      ['POST', '/admin/reload', undefined],
    ] as const) {
      for (const host of [`rebound.example:${port}`, `10.0.0.1:${port}`]) {
        for (const auth of [{}, { authorization: `Bearer ${TOKEN}` }] as Record<string, string>[]) {
          const r = await rebound(method, path, { host, ...auth, ...(body ? json : {}) }, body);
          assert.equal(r.status, 421, `${method} ${path} Host ${host}`);
          assert.match(r.type, /^text\/plain/);
          assert.equal(
            r.body,
            `This router listens on loopback only and answers only to a loopback name (127.0.0.1, ::1, localhost): open http://127.0.0.1:${port}${path}\n`,
          );
        }
      }
    }
    assert.equal(visionBackend.received.length + chatBackend.received.length, seen, 'no request reached a backend');
    assert.equal((await admin.tierState('vision-local')).state, 'active');
    // Its own loopback names still reach it.
    for (const host of [`localhost:${port}`, `127.0.0.1:${port}`]) {
      assert.equal((await rebound('GET', '/healthz', { host })).status, 200, host);
    }
  });

  test('a client abort ends the in-flight count exactly once and cancels the backend request', async () => {
    const abortedBefore = chatBackend.aborted;
    const ac = new AbortController();
    const p = chat(router.url, 'chat', { gate: 'never' }, ac.signal);
    await waitUntil('the request at the backend', () => chatBackend.active === 1);
    assert.equal((await admin.tierState('chat-local')).inFlight, 1);
    ac.abort();
    await assert.rejects(p);
    await waitUntil('in-flight back to 0', async () => (await admin.tierState('chat-local')).inFlight === 0);
    await waitUntil('the backend sees the abort', () => chatBackend.aborted === abortedBefore + 1);
    await sleep(50);
    assert.equal((await admin.tierState('chat-local')).inFlight, 0, 'never negative');
  });

  test('SSE streaming relays chunks before the backend has finished', async () => {
    const res = await fetch(`${router.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'vision', stream: true, gate: 'sse', messages: [{ role: 'user', content: 's' }] }),
    });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
    assert.ok(res.body);
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    const decoder = new TextDecoder();
    let text = '';
    while (!text.includes('\n\n')) {
      const { value, done } = await reader.read();
      assert.equal(done, false, 'stream ended before the first event');
      text += decoder.decode(value, { stream: true });
    }
    // The backend is still holding the stream open (gated): the first event got through anyway.
    assert.match(text, /"content":"first"/);
    assert.doesNotMatch(text, /second/);
    assert.equal(visionBackend.active, 1);
    assert.equal((await admin.tierState('vision-local')).inFlight, 1);

    visionBackend.release('sse');
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
    assert.match(text, /"content":" second"/);
    assert.ok(text.trimEnd().endsWith('data: [DONE]'));
    assert.match(text, /"model":"qwen3-vl-4b-instruct"/);
    await waitUntil('stream no longer in flight', async () => (await admin.tierState('vision-local')).inFlight === 0);
  });

  test('reload: new mapping_version shows in /healthz, quiesced tiers stay quiesced; invalid config -> 400, old mapping kept', async () => {
    await admin.quiesce('vision-local');
    writeFileSync(
      configPath,
      toml.replace('mapping_version = "test.v1"', 'mapping_version = "test.v2"') +
        `\n[[tiers]]\nname = "new-local"\nbackend = "${chatBackend.url}"\nserved_model_name = "fake-chat"\n\n[[presets]]\nname = "new"\ntier = "new-local"\n`,
    );
    assert.deepEqual(await admin.reload(), { mappingVersion: 'test.v2' });
    assert.deepEqual(await admin.healthz(), { ok: true, mappingVersion: 'test.v2' });
    assert.equal((await admin.tierState('vision-local')).state, 'quiesced', 'a kept tier keeps its state');
    assert.equal((await admin.tierState('new-local')).state, 'active');
    assert.equal((await chat(router.url, 'new')).status, 200);

    // Invalid: a preset naming an unknown tier and an unknown key.
    writeFileSync(
      configPath,
      toml.replace('mapping_version = "test.v1"', 'mapping_version = "test.v3"\nbogus = 1').replace('tier = "dead-local"', 'tier = "ghost"'),
    );
    const err = await expectPermanent(admin.reload(), 'RouterConfigInvalid');
    assert.match(err.message, /ghost/);
    const raw = await fetch(`${router.url}/admin/reload`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` } });
    assert.equal(raw.status, 400);
    const body = (await raw.json()) as { error: { type: string; code: string; errors: string[]; mapping_version: string } };
    assert.deepEqual([body.error.type, body.error.code], ['invalid_config', 'invalid_config']);
    assert.equal(body.error.mapping_version, 'test.v2');
    assert.ok(
      body.error.errors.some((e) => e.includes('presets[4].tier') && e.includes("unknown tier 'ghost'")),
      body.error.errors.join('\n'),
    );
    assert.ok(body.error.errors.some((e) => e.includes('bogus')));
    assert.deepEqual(await admin.healthz(), { ok: true, mappingVersion: 'test.v2' }, 'the old mapping stays');
    assert.equal((await chat(router.url, 'new')).status, 200);

    // Back to the original config; tiers that disappear are gone, vision-local is still quiesced.
    writeFileSync(configPath, toml);
    assert.deepEqual(await admin.reload(), { mappingVersion: 'test.v1' });
    await expectPermanent(admin.tierState('new-local'), 'UnknownTier');
    assert.equal((await chat(router.url, 'new')).status, 404);
    assert.equal((await admin.tierState('vision-local')).state, 'quiesced');
    assert.equal((await admin.readmit('vision-local')).ok, true);
  });
});

/**
 * An acquisition API that accepts every POST (its URL kept in `posts`) as acquisition
 * acquire/n/<serve>, and answers every GET with `status`.
 */
async function fakeAcquisitionApi(
  serve: string,
  status: { code: number; body: unknown },
): Promise<{ server: http.Server; url: string; posts: string[]; status: { code: number; body: unknown } }> {
  const posts: string[] = [];
  const server = http.createServer((req, res) => {
    res.setHeader('content-type', 'application/json');
    if (req.method === 'POST') {
      posts.push(req.url ?? '');
      res.writeHead(202).end(JSON.stringify({ workflow_id: `acquire/n/${serve}` }));
    } else res.writeHead(status.code).end(JSON.stringify(status.body));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  // The status GETs answer: the test may change it as it goes.
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, posts, status };
}

/** A config of one on-demand tier, <serve>-local, whose preset and served model are both <serve>. */
function onDemandToml(serve: string, backend: string, top: string[] = [], waitTimeoutS = 60): string {
  return [
    'mapping_version = "m1"',
    ...top,
    '[[tiers]]',
    `name = "${serve}-local"`,
    `backend = "${backend}"`,
    `served_model_name = "${serve}"`,
    'model_identity = true',
    '[tiers.on_demand]',
    `serve = "${serve}"`,
    `wait_timeout_s = ${waitTimeoutS}`,
    '[[presets]]',
    `name = "${serve}"`,
    `tier = "${serve}-local"`,
    '',
  ].join('\n');
}

/**
 * A router over one on-demand tier of `serve` (its config `config(backend url)`) with a fake vLLM
 * behind it and a fake acquisition API whose acquisition runs until the test readmits the tier.
 */
async function startOnDemandRouter(
  serve: string,
  dirPrefix: string,
  config: (backendUrl: string) => string,
  extra: Partial<Parameters<typeof startRouter>[0]> | ((dir: string) => Partial<Parameters<typeof startRouter>[0]>) = {},
): Promise<{ dir: string; backend: FakeVllm; api: Awaited<ReturnType<typeof fakeAcquisitionApi>>; router: RunningRouter; admin: HttpRouterAdmin }> {
  const dir = mkdtempSync(join(tmpdir(), dirPrefix));
  const backend = await new FakeVllm(serve).start();
  const api = await fakeAcquisitionApi(serve, { code: 200, body: { workflow_id: `acquire/n/${serve}`, status: 'running' } });
  writeFileSync(join(dir, 'router.toml'), config(backend.url));
  const router = await startRouter({ ...onDemandRouterOptions(dir, api.url), ...(typeof extra === 'function' ? extra(dir) : extra) });
  return { dir, backend, api, router, admin: new HttpRouterAdmin({ baseUrl: router.url, token: TOKEN, timeoutMs: 5000 }) };
}

/** The options of startOnDemandRouter's router, over the config in `dir` and the acquisition API at `apiUrl`. */
function onDemandRouterOptions(dir: string, apiUrl: string): Parameters<typeof startRouter>[0] {
  return {
    configPath: join(dir, 'router.toml'),
    adminToken: TOKEN,
    probeTimeoutMs: 1000,
    acquisitions: { url: apiUrl, token: 'api-token' },
    clientToken: CLIENT_TOKEN,
    acquisitionPollMs: 50,
  };
}

/** What startOnDemandRouter started, whatever of it a failed before() got to. */
async function stopOnDemandRouter(r: {
  router?: RunningRouter;
  backend?: FakeVllm;
  api?: Awaited<ReturnType<typeof fakeAcquisitionApi>>;
  dir?: string;
}): Promise<void> {
  await r.router?.close();
  await r.backend?.close();
  const api = r.api;
  if (api) await new Promise<void>((resolve) => api.server.close(() => resolve()));
  if (r.dir) rmSync(r.dir, { recursive: true, force: true });
}

describe('a request held across a residency window, and the acquisition after it', () => {
  test("one whose wait_timeout_s ends before the window and the tier's last acquisition time is answered at the denial, not held to time out during the next acquisition; one that can wait is held and answered", async () => {
    // wait_timeout_s 4. The tier's first acquisition takes 2 s; the second is denied for a window
    // of 3 s: a request held for it would time out 1 s into the acquisition after the window.
    const { dir, backend, api, router, admin } = await startOnDemandRouter('chat', 'gpures-router-window-', (url) =>
      onDemandToml('chat', url, ['retry_after_s = 1'], 4),
    );
    const running = { status: 'running', step: { step: 'start' } };
    const denied = (windowS: number) => ({
      status: 'failed',
      error: { type: 'AdmissionDenied', message: `vision is inside its minimum residency for ${windowS} s more`, retry_after_s: windowS },
    });
    const status = api.status;
    const ask = async () => {
      const started = Date.now();
      const r = await fetch(`${router.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${CLIENT_TOKEN}` },
        body: JSON.stringify({ model: 'chat', messages: [{ role: 'user', content: 'hi' }] }),
      });
      const body = (await r.json()) as { error?: { code: string; message: string; retry_after_s: number } };
      return { status: r.status, retryAfter: r.headers.get('retry-after'), body, ms: Date.now() - started };
    };
    const acquisitionOf = async () =>
      ((await (await fetch(`${router.url}/admin/tiers/chat-local`, { headers: { authorization: `Bearer ${TOKEN}` } })).json()) as { acquisition: unknown })
        .acquisition as { residencyWindowEndsAtEpochMs?: number } | null;
    try {
      // The tier's serve acquired: 2 s from the POST to the readmit.
      status.body = running;
      await admin.quiesce('chat-local');
      const first = ask();
      await waitUntil('the first acquisition', () => api.posts.length === 1);
      await sleep(2000);
      assert.equal((await admin.readmit('chat-local')).ok, true);
      assert.equal((await first).status, 200);

      // Evicted; the next acquisition is denied for a 3 s window. 4 s < 3 s + 2 s.
      await admin.quiesce('chat-local');
      status.body = denied(3);
      const asked = ask();
      // Denied once; the acquisition after the window would run (its victim evictable by then).
      await waitUntil('the denial for 3 s', async () => (await acquisitionOf())?.residencyWindowEndsAtEpochMs !== undefined, 3000);
      status.body = running;
      const second = await asked;
      console.log(
        `held request, window 3 s, last acquisition 2 s, wait_timeout_s 4: ${second.status} ${second.body.error?.code} after ${second.ms} ms, Retry-After ${second.retryAfter}`,
      );
      assert.equal(second.status, 503);
      assert.equal(second.body.error?.code, 'acquisition_denied', second.body.error?.message);
      assert.ok(second.ms < 2000, `answered after ${second.ms} ms: held into the window`);
      assert.ok(Number(second.retryAfter) >= 2 && Number(second.retryAfter) <= 3, `Retry-After ${second.retryAfter}: what is left of the window`);
      assert.match(
        second.body.error?.message ?? '',
        /this tier holds a request at most 4 s \(wait_timeout_s\), less than the [23] s left of that window and the 2 s its last acquisition took$/,
      );
      // Nobody held: when the window ends no acquisition is started for anyone.
      await waitUntil('the window passed', async () => (await acquisitionOf()) === null, 6000);
      assert.equal(api.posts.length, 2, 'no acquisition after the window: nobody could wait for it');

      // A window of 1 s: 4 s >= 1 s + 2 s, so the request is held through it and answered.
      status.body = denied(1);
      const third = ask();
      await waitUntil('the denial for 1 s', async () => (await acquisitionOf())?.residencyWindowEndsAtEpochMs !== undefined, 3000);
      status.body = running;
      await waitUntil('the acquisition after the window', () => api.posts.length === 4, 3000);
      assert.equal((await admin.readmit('chat-local')).ok, true);
      const held = await third;
      assert.equal(held.status, 200, JSON.stringify(held.body));
    } finally {
      await stopOnDemandRouter({ router, backend, api, dir });
    }
  });
});

describe("a tier's last acquisition time across a router restart", () => {
  test('kept in the state file: after a restart, a request that cannot wait out a residency window and the acquisition after it is answered at the denial, not held to time out', async () => {
    const { dir, backend, api, router, admin } = await startOnDemandRouter(
      'chat',
      'gpures-router-window-restart-',
      (url) => onDemandToml('chat', url, ['retry_after_s = 1'], 4),
      (d) => ({ stateFile: join(d, 'router-state.json') }),
    );
    const stateFile = join(dir, 'router-state.json');
    let firstRouter: RunningRouter | undefined = router;
    let restarted: RunningRouter | undefined;
    try {
      // The tier's serve acquired by the first router: 2 s from the POST to the readmit.
      await admin.quiesce('chat-local');
      const first = fetch(`${router.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${CLIENT_TOKEN}` },
        body: JSON.stringify({ model: 'chat', messages: [{ role: 'user', content: 'hi' }] }),
      });
      await waitUntil('the first acquisition', () => api.posts.length === 1);
      await sleep(2000);
      assert.equal((await admin.readmit('chat-local')).ok, true);
      assert.equal((await first).status, 200);
      const keptOf = () => (JSON.parse(readFileSync(stateFile, 'utf8')) as { last_acquisition_ms?: Record<string, number> }).last_acquisition_ms;
      await waitUntil('the state file to keep the acquisition time', () => keptOf() !== undefined, 2000).catch(() => undefined);
      const kept = keptOf();
      assert.ok(kept?.['chat-local'] !== undefined && kept['chat-local'] >= 2000 && kept['chat-local'] < 4000, `state file: ${JSON.stringify(kept)}`);
      await router.close();
      firstRouter = undefined;

      restarted = await startRouter({ ...onDemandRouterOptions(dir, api.url), stateFile });
      const admin2 = new HttpRouterAdmin({ baseUrl: restarted.url, token: TOKEN, timeoutMs: 5000 });
      // Evicted; the next acquisition is denied for a 3 s window; 4 s < 3 s + the 2 s kept.
      await admin2.quiesce('chat-local');
      api.status.body = {
        status: 'failed',
        error: { type: 'AdmissionDenied', message: 'vision is inside its minimum residency for 3 s more', retry_after_s: 3 },
      };
      const started = Date.now();
      const r = await fetch(`${restarted.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${CLIENT_TOKEN}` },
        body: JSON.stringify({ model: 'chat', messages: [{ role: 'user', content: 'hi' }] }),
      });
      const body = (await r.json()) as { error?: { code: string; message: string } };
      const ms = Date.now() - started;
      console.log(`after a restart, window 3 s, last acquisition kept 2 s, wait_timeout_s 4: ${r.status} ${body.error?.code} after ${ms} ms`);
      assert.equal(r.status, 503);
      assert.equal(body.error?.code, 'acquisition_denied', body.error?.message);
      assert.ok(ms < 2000, `answered after ${ms} ms: held into the window`);
      assert.match(body.error?.message ?? '', /less than the [23] s left of that window and the 2 s its last acquisition took$/);
      await restarted.close();
      restarted = undefined;

      // A state file whose figure is not one: refused naming the file and the field.
      writeFileSync(stateFile, JSON.stringify({ quiesced: [], last_acquisition_ms: { 'chat-local': 'soon' } }));
      await assert.rejects(startRouter({ configPath: join(dir, 'router.toml'), adminToken: TOKEN, stateFile }), {
        message: `${stateFile} (--state): last_acquisition_ms must map tier names to whole numbers of milliseconds (chat-local: "soon")`,
      });
    } finally {
      await restarted?.close();
      await stopOnDemandRouter({ ...(firstRouter ? { router: firstRouter } : {}), backend, api, dir });
    }
  });
});

describe('a held request and the status GET in flight at the readmit', () => {
  test("the tier readmitted while the router's GET of the acquisition is unanswered: the held request goes on then, not once the GET is answered", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gpures-router-release-'));
    const backend = await new FakeVllm('chat').start();
    const api = await fakeAcquisitionApi('chat', { code: 200, body: { workflow_id: 'acquire/n/chat', status: 'running', step: { step: 'start' } } });
    // Between the router and the API: holds the status GETs while stalled (a describe and a query of a busy run).
    const proxy = new StallingProxy((method) => method === 'GET');
    writeFileSync(join(dir, 'router.toml'), onDemandToml('chat', backend.url));
    const router = await startRouter(onDemandRouterOptions(dir, await proxy.start(api.url)));
    const admin = new HttpRouterAdmin({ baseUrl: router.url, token: TOKEN, timeoutMs: 5000 });
    try {
      await admin.quiesce('chat-local');
      proxy.stall();
      const order: string[] = [];
      const held = fetch(`${router.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${CLIENT_TOKEN}` },
        body: JSON.stringify({ model: 'chat', messages: [{ role: 'user', content: 'hi' }] }),
      }).then((r) => {
        order.push('request answered');
        return r;
      });
      await waitUntil('the router GETs the acquisition (held by the proxy)', () => proxy.held >= 1);
      // What the acquisition's last step does: the guarded readmit, which passes (healthy, 'chat').
      assert.equal((await admin.readmit('chat-local')).ok, true);
      // Bounded, so the fault shows as the order below rather than a hung test.
      await Promise.race([held, sleep(5000)]);
      order.push('status GET answered');
      proxy.resume();
      const res = await held;
      assert.equal(res.status, 200);
      assert.deepEqual(order, ['request answered', 'status GET answered'], `order: ${order.join(' -> ')}`);
    } finally {
      await router.close();
      await proxy.close();
      await backend.close();
      await new Promise<void>((resolve) => api.server.close(() => resolve()));
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('an on-demand acquisition the API no longer answers for', () => {
  test('a 404 for its status: the waiting request gets 503 acquisition_unavailable at once, the tier is given back, and a later request starts a new one', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gpures-router-api-'));
    // An acquisition API that started one and then knows it no more (restarted on another namespace, say).
    const {
      server: api,
      url: apiUrl,
      posts,
    } = await fakeAcquisitionApi('big', {
      code: 404,
      body: { error: { type: 'not_found', message: 'no acquisition acquire/n/big' } },
    });
    const configPath = join(dir, 'router.toml');
    writeFileSync(configPath, onDemandToml('big', `http://127.0.0.1:${await deadPort()}`, ['retry_after_s = 1']));
    const router = await startRouter({
      configPath,
      adminToken: TOKEN,
      probeTimeoutMs: 1000,
      acquisitions: { url: apiUrl, token: 'api-token' },
      clientToken: CLIENT_TOKEN,
      acquisitionPollMs: 50,
    });
    try {
      const ask = async () => {
        const started = Date.now();
        const r = await fetch(`${router.url}/v1/chat/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${CLIENT_TOKEN}` },
          body: JSON.stringify({ model: 'big', messages: [{ role: 'user', content: 'hi' }] }),
        });
        return { status: r.status, body: (await r.json()) as { error: { code: string; message: string } }, ms: Date.now() - started };
      };
      const first = await ask();
      assert.equal(first.status, 503);
      assert.equal(first.body.error.code, 'acquisition_unavailable');
      assert.match(
        first.body.error.message,
        /acquisition acquire\/n\/big can no longer be followed: GET \/v1\/acquisitions\/.* answered 404: no acquisition acquire\/n\/big/,
      );
      assert.ok(first.ms < 10_000, `answered after ${first.ms} ms, not its 60 s wait`);
      // Nothing left quiesced that was not before: the router quiesced the tier for this acquisition.
      const admin = new HttpRouterAdmin({ baseUrl: router.url, token: TOKEN, timeoutMs: 5000 });
      assert.equal((await admin.tierState('big-local')).state, 'active');
      // Past the cooldown (retry_after_s 1) a request starts a new acquisition, not a wait on the lost one.
      await sleep(1200);
      await ask();
      assert.equal(posts.length, 2);
    } finally {
      await router.close();
      await new Promise<void>((resolve) => api.close(() => resolve()));
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('/v1/models of an on-demand tier whose serve was never seen up', () => {
  test('lists it on_demand until its backend answers, then now', async () => {
    const { dir, backend, api, router } = await startOnDemandRouter('big', 'gpures-router-models-', (url) => onDemandToml('big', url));
    const availability = async () =>
      ((await (await fetch(`${router.url}/v1/models`)).json()) as { data: { id: string; availability: string }[] }).data.find((m) => m.id === 'big')
        ?.availability;
    try {
      // A fresh router: the tier is active (never quiesced), its serve never answered.
      assert.equal(await availability(), 'on_demand');
      assert.equal((await chat(router.url, 'big', {}, undefined, `Bearer ${CLIENT_TOKEN}`)).status, 200);
      assert.equal(await availability(), 'now');
      assert.deepEqual(api.posts, [], 'no acquisition: the serve was up');
    } finally {
      await stopOnDemandRouter({ router, backend, api, dir });
    }
  });
});

describe('on-demand presets require the client token', () => {
  let dir: string;
  let configPath: string;
  let backend: FakeVllm;
  let api: Awaited<ReturnType<typeof fakeAcquisitionApi>>;
  let router: RunningRouter;
  let admin: HttpRouterAdmin;
  // An ordinary tier, and its preset.
  const plainTier = (backendUrl: string) =>
    [
      '[[tiers]]',
      'name = "plain-local"',
      `backend = "${backendUrl}"`,
      'served_model_name = "plain"',
      '[[presets]]',
      'name = "plain"',
      'tier = "plain-local"',
      '',
    ].join('\n');
  // The on-demand tier's backend is up: the tier is active until the test quiesces it.
  const config = (backendUrl: string) => onDemandToml('big', backendUrl, ['retry_after_s = 1']) + plainTier(backendUrl);

  before(async () => {
    ({ dir, backend, api, router, admin } = await startOnDemandRouter('big', 'gpures-router-client-', config));
    configPath = join(dir, 'router.toml');
  });
  after(() => stopOnDemandRouter({ router, backend, api, dir }));

  const WRONG = [undefined, `Bearer ${CLIENT_TOKEN}x`, `Bearer ${TOKEN}`, `Basic ${CLIENT_TOKEN}`, CLIENT_TOKEN, 'Bearer '];

  const assertUnauthorized = (a: ChatAnswer, what: string) => {
    assert.equal(a.status, 401, what);
    assert.equal(a.headers.get('www-authenticate'), 'Bearer realm="gpures-router"', what);
    const e = a.body.error as { type: string; code: string; reason: string; tier: string; message: string };
    assert.deepEqual([e.type, e.code, e.reason, e.tier], ['unauthorized', 'unauthorized', 'unauthorized', 'big-local'], what);
    assert.equal(
      e.message,
      "preset 'big' is on demand: a request to it can acquire serve 'big' of tier 'big-local', which can evict other serves, " +
        "so it must carry Authorization: Bearer <client token> (GPURES_ROUTER_CLIENT_TOKEN; an OpenAI client's api_key); missing or wrong token",
    );
    assert.ok(!JSON.stringify(a.body).includes(CLIENT_TOKEN.slice(0, 16)), 'the token is never in the answer');
  };

  test('quiesced: without the token or with a wrong one, 401 and nothing held, acquired or forwarded; with it, acquired and answered', async () => {
    await admin.quiesce('big-local');
    for (const authorization of WRONG) {
      assertUnauthorized(await chat(router.url, 'big', {}, undefined, authorization), `Authorization ${authorization ?? '(none)'}`);
    }
    assertUnauthorized(await chat(router.url, 'big', { stream: true }), 'a streamed request: the plain 401, no held stream');
    assertUnauthorized(await post(router.url, '/v1/embeddings', { model: 'big', input: 'x' }), '/v1/embeddings');
    assert.deepEqual(api.posts, [], 'no acquisition POSTed');
    const state = (await (await fetch(`${router.url}/admin/tiers/big-local`, { headers: { authorization: `Bearer ${TOKEN}` } })).json()) as {
      state: string;
      inFlight: number;
      queued: number;
      acquisition: unknown;
    };
    assert.deepEqual([state.state, state.inFlight, state.queued, state.acquisition], ['quiesced', 0, 0, null]);
    assert.equal(backend.received.length, 0, 'nothing reached the backend');

    // The token, its scheme in any case: held, one acquisition, answered once the tier is back.
    const held = chat(router.url, 'big', {}, undefined, `bEARER ${CLIENT_TOKEN}`);
    await waitUntil('the acquisition POSTed', () => api.posts.length === 1);
    assert.equal((await admin.readmit('big-local')).ok, true);
    const answered = await held;
    assert.equal(answered.status, 200);
    assert.equal(content(answered), 'echo:hi');
    // The client's token stays with the router: the backend got no Authorization header.
    assert.equal(backend.received.length, 1);
    assert.equal(backend.received[0]?.headers.authorization, undefined);
  });

  test('active (its serve up, nothing to acquire): still 401 without the token, nothing forwarded; with it proxied, the header not forwarded', async () => {
    if ((await admin.tierState('big-local')).state === 'quiesced') assert.equal((await admin.readmit('big-local')).ok, true);
    const before = backend.received.length;
    for (const authorization of WRONG)
      assertUnauthorized(await chat(router.url, 'big', {}, undefined, authorization), `Authorization ${authorization ?? '(none)'}`);
    assert.equal(backend.received.length, before, 'nothing reached the backend');
    const ok = await chat(router.url, 'big', {}, undefined, `Bearer ${CLIENT_TOKEN}`);
    assert.equal(ok.status, 200);
    assert.equal(backend.received.at(-1)?.headers.authorization, undefined);
    // Of the client's headers (authorization, user-agent, accept-encoding, …) only Accept is passed on.
    const passed = Object.keys(backend.received.at(-1)?.headers ?? {}).filter((h) => !['host', 'connection', 'content-length', 'content-type'].includes(h));
    assert.deepEqual(passed, ['accept']);
  });

  test('an ordinary preset needs no token, and a token sent to it is not forwarded; /v1/models needs none', async () => {
    const posts = api.posts.length;
    assert.equal((await chat(router.url, 'plain')).status, 200);
    const withToken = await chat(router.url, 'plain', {}, undefined, `Bearer ${CLIENT_TOKEN}`);
    assert.equal(withToken.status, 200);
    assert.equal(backend.received.at(-1)?.body.model, 'plain');
    assert.equal(backend.received.at(-1)?.headers.authorization, undefined);
    const models = (await (await fetch(`${router.url}/v1/models`)).json()) as { data: { id: string; availability: string }[] };
    assert.deepEqual(
      models.data.map((m) => m.id),
      ['big', 'plain'],
    );
    assert.equal(api.posts.length, posts, 'no acquisition');
  });

  test('a router that can acquire refuses, at start and on reload, a config with an on-demand tier but no client token, naming the tier and the variable', async () => {
    const expected =
      /tiers\[0\]\.on_demand: tier 'big-local' is on demand: a request to it can acquire serve 'big', evicting others, and the router has no client token to require of it: set GPURES_ROUTER_CLIENT_TOKEN/;
    const acquisitions = { url: api.url, token: 'api-token' };
    await assert.rejects(startRouter({ configPath, adminToken: TOKEN, acquisitions }), (err: Error) => {
      assert.match(err.message, expected);
      return true;
    });
    await assert.rejects(startRouter({ configPath, adminToken: TOKEN, acquisitions, clientToken: '' }), expected);
    // main.js's rule (requireAcquisitionApi) asks for it even without an API, beside the API itself.
    await assert.rejects(startRouter({ configPath, adminToken: TOKEN, requireAcquisitionApi: true }), (err: Error) => {
      assert.match(err.message, /set GPURES_API_URL and GPURES_API_TOKEN/);
      assert.match(err.message, expected);
      return true;
    });
    // Without an acquisition API (and not under main.js's rule) an on-demand tier is ordinary: no token asked, none required.
    const ordinary = await startRouter({ configPath, adminToken: TOKEN });
    try {
      assert.equal((await chat(ordinary.url, 'big')).status, 200);
    } finally {
      await ordinary.close();
    }

    // Started on a config without on-demand tiers, the router takes no reload that adds one.
    const plainPath = join(dir, 'plain.toml');
    writeFileSync(plainPath, `mapping_version = "plain.v1"\n${plainTier(backend.url)}`);
    const r = await startRouter({ configPath: plainPath, adminToken: TOKEN, acquisitions });
    try {
      const a = new HttpRouterAdmin({ baseUrl: r.url, token: TOKEN, timeoutMs: 5000 });
      assert.deepEqual(await a.healthz(), { ok: true, mappingVersion: 'plain.v1' });
      writeFileSync(plainPath, config(backend.url));
      const res = await fetch(`${r.url}/admin/reload`, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` } });
      assert.equal(res.status, 400);
      const body = (await res.json()) as { error: { type: string; errors: string[]; mapping_version: string } };
      assert.equal(body.error.type, 'invalid_config');
      assert.equal(body.error.errors.length, 1);
      assert.match(body.error.errors[0] ?? '', expected);
      assert.deepEqual(await a.healthz(), { ok: true, mappingVersion: 'plain.v1' }, 'the running mapping stays');
      assert.equal((await chat(r.url, 'big')).status, 404, 'no preset big was loaded');
    } finally {
      await r.close();
    }
  });
});

describe("the router's bounds on receiving a request", () => {
  // Small bounds, as an option: the production 60 s would make these tests wait minutes.
  const BOUND_MS = 400;
  // The bound, Node's check of it (every BOUND_MS / 4 here), and a loaded runner's delay.
  const CUT_WITHIN_MS = BOUND_MS + 2000;
  let dir: string;
  let backend: FakeVllm;
  let api: Awaited<ReturnType<typeof fakeAcquisitionApi>>;
  let router: RunningRouter;
  let admin: HttpRouterAdmin;

  before(async () => {
    ({ dir, backend, api, router, admin } = await startOnDemandRouter('chat', 'gpures-router-bounds-', (url) => onDemandToml('chat', url), {
      requestTimeoutMs: BOUND_MS,
    }));
  });
  after(() => stopOnDemandRouter({ router, backend, api, dir }));

  const head = (length: number) =>
    `POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${CLIENT_TOKEN}\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;

  test('headers without their body, a body trickled a byte at a time, a connection that sends nothing: each closed within the bound, the first with 408', async () => {
    const headersOnly = await rawConnection(router.url);
    headersOnly.write(head(100));
    const trickled = await rawConnection(router.url);
    trickled.write(head(1000));
    const stop = trickle(trickled, '{'.repeat(1000), 100);
    const silent = await rawConnection(router.url);
    try {
      const [a, b, c] = await Promise.all([headersOnly.closed(CUT_WITHIN_MS), trickled.closed(CUT_WITHIN_MS), silent.closed(CUT_WITHIN_MS)]);
      assert.ok(a !== undefined, `headers without a body: still open after ${CUT_WITHIN_MS} ms`);
      assert.ok(b !== undefined, `a trickled body: still open after ${CUT_WITHIN_MS} ms`);
      assert.ok(c !== undefined, `a silent connection: still open after ${CUT_WITHIN_MS} ms`);
      assert.match(headersOnly.received(), /^HTTP\/1\.1 408 /);
      assert.equal(backend.received.length, 0);
    } finally {
      stop();
      for (const conn of [headersOnly, trickled, silent]) conn.destroy();
    }
  });

  test('the bound is on receiving only: a request held past it for its on-demand tier, then answered, gets 200', async () => {
    assert.equal((await chat(router.url, 'chat', {}, undefined, `Bearer ${CLIENT_TOKEN}`)).status, 200);
    await admin.quiesce('chat-local');
    // A connection of its own: one fetch kept alive from an earlier request would not show a
    // timeout set on a new connection, and the held request waits in silence.
    const held = await rawConnection(router.url);
    try {
      const body = JSON.stringify({ model: 'chat', messages: [{ role: 'user', content: 'hi' }] });
      held.write(head(Buffer.byteLength(body)) + body);
      await waitUntil('the held request to start an acquisition', () => api.posts.length === 1);
      await sleep(BOUND_MS * 3);
      assert.equal(await held.closed(0), undefined, 'the held request was cut while it waited');
      assert.equal(held.received(), '');
      assert.equal((await admin.readmit('chat-local')).ok, true);
      await waitUntil('the held request answered', () => held.received().includes('echo:hi'), 5000);
      assert.match(held.received(), /^HTTP\/1\.1 200 /);
    } finally {
      held.destroy();
    }
  });

  test("what fastify and Node answer before a route does is in the router's error shape: 408 to a slow client, 413, 400 on bad JSON, 404, 415, 431, 400 on what is not HTTP; and no 408 after an answer given before the body", async () => {
    const forwarded = backend.received.length;
    const slow = await rawConnection(router.url);
    slow.write(head(100) + '{"model":');
    // Answered before its body is read (421: a Host that is not a loopback name), then that body
    // trickled past the bound: the connection is closed then, with no 408 after the 421.
    const misdirected = await rawConnection(router.url);
    misdirected.write(head(1000).replace('Host: 127.0.0.1', 'Host: evil.example'));
    const stop = trickle(misdirected, ' '.repeat(1000), 50);
    try {
      await waitUntil('the 421', () => misdirected.received().includes('loopback only'), 5000);
      assert.ok((await slow.closed(CUT_WITHIN_MS)) !== undefined, `a slow client still open after ${CUT_WITHIN_MS} ms`);
      const timedOut = answerOf(slow.received());
      assert.equal(timedOut.status, 408, slow.received());
      assert.match(timedOut.headers, /\r\ncontent-type: application\/json/i);
      assert.match(timedOut.headers, /\r\nconnection: close/i);
      assert.deepEqual({ ...timedOut.error, message: undefined }, { message: undefined, type: 'request_timeout', code: 'request_timeout' }, slow.received());
      assert.match(String(timedOut.error.message), /^the request did not arrive whole within 0\.4 s of its first byte \(this server's request timeout\)/);

      assert.ok((await misdirected.closed(CUT_WITHIN_MS)) !== undefined, 'the trickled body past the bound still open');
      assert.equal(misdirected.received().match(/HTTP\/1\.1 /g)?.length, 1, `one answer, not a 408 after the 421: ${misdirected.received()}`);
      assert.match(misdirected.received(), /^HTTP\/1\.1 421 /);
    } finally {
      stop();
      slow.destroy();
      misdirected.destroy();
    }

    // Each on a connection of its own: the first answer and its body.
    const exchange = async (text: string) => {
      const c = await rawConnection(router.url);
      try {
        c.write(text);
        await waitUntil(`an answer to ${JSON.stringify(text.slice(0, 40))}`, () => /\r\n\r\n\{.*\}/s.test(c.received()), 5000);
        return answerOf(c.received());
      } finally {
        c.destroy();
      }
    };
    const large = await exchange(head(64 * 1024 * 1024 + 1));
    assert.equal(large.status, 413);
    assert.deepEqual(large.error, {
      message: "the request body is over the router's limit of 67108864 bytes (64.00 MiB)",
      type: 'invalid_request',
      code: 'body_too_large',
    });
    const badJson = await exchange(head(9) + '{"model":');
    assert.equal(badJson.status, 400);
    assert.deepEqual([badJson.error.type, badJson.error.code], ['invalid_request', 'invalid_json']);
    assert.match(String(badJson.error.message), /^request body is not valid JSON: /);
    const noRoute = await exchange('GET /v1/nowhere HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
    assert.equal(noRoute.status, 404);
    assert.deepEqual(noRoute.error, { message: 'no route for GET /v1/nowhere', type: 'not_found', code: 'not_found' });
    const text = await exchange('POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/xml\r\nContent-Length: 4\r\n\r\n<a/>');
    assert.equal(text.status, 415);
    assert.deepEqual([text.error.type, text.error.code], ['invalid_request', 'unsupported_media_type']);
    const headers = await exchange(`GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ${'x'.repeat(20_000)}\r\n\r\n`);
    assert.equal(headers.status, 431);
    assert.deepEqual([headers.error.type, headers.error.code], ['headers_too_large', 'headers_too_large']);
    const notHttp = await exchange('HELLO THERE\r\n\r\n');
    assert.equal(notHttp.status, 400);
    assert.deepEqual([notHttp.error.type, notHttp.error.code], ['malformed_request', 'malformed_request']);
    assert.equal(backend.received.length, forwarded, 'none reached the backend');
  });

  test("a request on a kept-alive connection while the router closes: 503 with Retry-After in the router's shape, the connection closed", async () => {
    // Without acquisitions the on-demand tier is an ordinary one over the fake vLLM.
    const closing = await startRouter({ configPath: join(dir, 'router.toml'), adminToken: TOKEN, requestTimeoutMs: 60_000 });
    const conn = await rawConnection(closing.url);
    let closed: Promise<void> | undefined;
    try {
      // In flight when the close begins, so its connection is not idle and stays open.
      const slowBody = JSON.stringify({ model: 'chat', messages: [{ role: 'user', content: 'slow' }], delay_ms: 1500 });
      conn.write(head(Buffer.byteLength(slowBody)) + slowBody);
      await sleep(300);
      closed = closing.close();
      await waitUntil('the first answer', () => conn.received().includes('echo:slow'), 5000);
      conn.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
      assert.ok((await conn.closed(5000)) !== undefined, 'the connection still open after the answer while closing');
      const second = answerOf(conn.received().slice(conn.received().lastIndexOf('HTTP/1.1 ')));
      assert.equal(second.status, 503, conn.received());
      assert.match(second.headers, /\r\nretry-after: 10\r\n/i);
      assert.match(second.headers, /\r\nconnection: close\r\n/i);
      assert.deepEqual(second.error, {
        message: 'the router is shutting down; send the request again (to the router that replaces it)',
        type: 'server_busy',
        code: 'shutting_down',
        reason: 'shutting_down',
        retry_after_s: 10,
      });
    } finally {
      conn.destroy();
      await (closed ?? closing.close());
    }
  });

  test('connections past the cap are dropped as they arrive; a place freed serves again', async () => {
    const capped = await startRouter({ configPath: join(dir, 'router.toml'), adminToken: TOKEN, requestTimeoutMs: 60_000, maxConnections: 2 });
    const open = [await rawConnection(capped.url), await rawConnection(capped.url)];
    try {
      open.push(await rawConnection(capped.url));
      assert.ok((await open[2]?.closed(CUT_WITHIN_MS)) !== undefined, 'a third connection past a cap of 2 stayed open');
      for (const conn of open) conn.destroy();
      await waitUntil('a request within the cap answered', async () => (await fetch(`${capped.url}/healthz`).catch(() => undefined))?.status === 200);
    } finally {
      for (const conn of open) conn.destroy();
      await capped.close();
    }
  });
});

describe('a refused body on a kept-alive connection (as OpenAI clients keep theirs)', () => {
  const MIB = 1024 * 1024;
  let dir: string;
  let backend: FakeVllm;
  let router: RunningRouter;
  let agent: http.Agent;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gpures-router-keepalive-'));
    backend = await new FakeVllm('fake-chat').start();
    const dead = `http://127.0.0.1:${await deadPort()}`;
    writeFileSync(join(dir, 'router.toml'), routerToml({ mapping: 'test.keepalive', chat: backend.url, vision: backend.url, dead }));
    router = await startRouter({ configPath: join(dir, 'router.toml'), adminToken: TOKEN, bodyLimitBytes: MIB });
  });
  after(async () => {
    agent?.destroy();
    await router?.close();
    await backend?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** One POST through the agent: its answer, and the socket it went on (its local port). */
  const send = (body: string | string[]) =>
    new Promise<{ status: number; connection: string | undefined; error: Record<string, unknown>; port: number | undefined; reused: boolean }>(
      (resolve, reject) => {
        const chunked = Array.isArray(body);
        const headers = { 'content-type': 'application/json', ...(chunked ? {} : { 'content-length': Buffer.byteLength(body) }) };
        const req = http.request(`${router.url}/v1/chat/completions`, { method: 'POST', agent, headers }, (res) => {
          const port = res.socket.localPort;
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const parsed = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { error?: Record<string, unknown> };
            resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, error: parsed.error ?? {}, port, reused: req.reusedSocket });
          });
        });
        req.on('error', reject);
        if (chunked) {
          for (const c of body) req.write(c);
          req.end();
        } else req.end(body);
      },
    );
  const hi = JSON.stringify({ model: 'chat', messages: [{ role: 'user', content: 'hi' }] });

  test('a 413 for a body over --body-limit-mib with its Content-Length, and a 400 for a whole body that is not JSON: the next request goes on the same socket', async () => {
    agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const first = await send(hi);
    assert.equal(first.status, 200);
    // Over the 1 MiB limit by a byte, and sent whole: the router answers before reading it and
    // reads the rest off the socket.
    const large = await send(JSON.stringify({ model: 'chat', pad: 'x'.repeat(MIB) }));
    assert.equal(large.status, 413);
    assert.equal(large.error.code, 'body_too_large');
    assert.notEqual(large.connection, 'close', 'the 413 closed the connection');
    const after413 = await send(hi);
    assert.equal(after413.status, 200);
    assert.deepEqual([after413.reused, after413.port], [true, first.port], 'the request after the 413 went on a new connection');
    // The admin token is still looked at first.
    const admin = await fetch(`${router.url}/admin/reload`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: 'x'.repeat(2 * MIB) });
    assert.equal(admin.status, 401);

    const bad = await send('{"model":');
    assert.deepEqual([bad.status, bad.error.code], [400, 'invalid_json']);
    assert.notEqual(bad.connection, 'close', 'the 400 closed the connection');
    const after400 = await send(hi);
    assert.equal(after400.status, 200);
    assert.deepEqual([after400.reused, after400.port], [true, first.port], 'the request after the 400 went on a new connection');
  });

  test('a chunked body over the limit: 413 with Connection: close, said on purpose (its end is unknown, the router reads no further); the next request gets a new socket and its answer', async () => {
    agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const first = await send(hi);
    const large = await send([JSON.stringify({ model: 'chat', pad: 'x'.repeat(MIB / 2) }).slice(0, -2), 'x'.repeat(MIB / 2) + '"}']);
    assert.deepEqual([large.status, large.error.code, large.connection], [413, 'body_too_large', 'close']);
    const next = await send(hi);
    assert.equal(next.status, 200);
    assert.notEqual(next.port, first.port);
  });
});

/** The first HTTP answer in raw socket text: its status, its header block, and its body's `error`. */
function answerOf(text: string): { status: number; headers: string; error: Record<string, unknown> } {
  const split = text.indexOf('\r\n\r\n');
  const headers = text.slice(0, split + 2);
  const status = Number(/^HTTP\/1\.1 (\d{3}) /.exec(headers)?.[1] ?? NaN);
  const length = Number(/\r\ncontent-length: (\d+)\r\n/i.exec(headers)?.[1] ?? NaN);
  const body = text.slice(split + 4, split + 4 + length);
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    assert.fail(`not a JSON body (${status}): ${JSON.stringify(body)}`);
  }
  const error = (parsed as { error?: unknown }).error;
  assert.ok(typeof error === 'object' && error !== null, `the body's error is not an object: ${body}`);
  return { status, headers, error: error as Record<string, unknown> };
}

/** A router in a process of its own (so its RSS is its own), started by startRouter with `options` (JSON); resolves at its URL. */
async function routerProcess(dir: string, options: Record<string, unknown>): Promise<{ url: string; pid: number; stop: () => Promise<void> }> {
  const script = join(dir, 'router-process.js');
  writeFileSync(
    script,
    `const { startRouter } = require(${JSON.stringify(join(ROOT, 'dist', 'src', 'router', 'server.js'))});
startRouter(JSON.parse(process.env.ROUTER_OPTIONS)).then(
  (r) => { process.stdout.write(r.url + '\\n'); process.once('SIGTERM', () => r.close().then(() => process.exit(0))); },
  (err) => { process.stderr.write(String(err && err.message) + '\\n'); process.exit(2); },
);
`,
  );
  const child = spawn(process.execPath, [script], { env: { ...process.env, ROUTER_OPTIONS: JSON.stringify(options) }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (err += c.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
  await waitUntil(`the router process's URL (stderr: ${err})`, () => out.includes('\n') || child.exitCode !== null, 10_000);
  if (!out.includes('\n')) throw new Error(`the router process exited ${String(child.exitCode)}: ${err}`);
  return {
    url: out.trim(),
    pid: child.pid ?? 0,
    stop: async () => {
      child.kill('SIGTERM');
      // Closing waits for requests still open; a test that failed may have left some.
      const late = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(late);
    },
  };
}

/** A process's resident set and its peak so far, in MiB (/proc/PID/status). */
function rssMib(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB$`, 'm').exec(status)?.[1] ?? NaN);
  return { rss: kib('VmRSS') / 1024, peak: kib('VmHWM') / 1024 };
}

describe('the request bodies the router holds at once', () => {
  const MIB = 1024 * 1024;
  // Each body just under the limit; the budget takes two of them.
  const LIMIT = 16 * MIB;
  const BUDGET = 2 * LIMIT;
  const CLIENTS = 16;
  const RETRY_AFTER_S = 3;
  let dir: string;
  let backend: FakeVllm;
  let router: Awaited<ReturnType<typeof routerProcess>>;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gpures-router-body-budget-'));
    backend = await new FakeVllm('fake-chat').start();
    const configPath = join(dir, 'router.toml');
    writeFileSync(
      configPath,
      [
        'mapping_version = "budget.v1"',
        `retry_after_s = ${RETRY_AFTER_S}`,
        '[[tiers]]',
        'name = "chat-local"',
        `backend = "${backend.url}"`,
        'served_model_name = "fake-chat"',
        '[[presets]]',
        'name = "chat"',
        'tier = "chat-local"',
        '',
      ].join('\n'),
    );
    router = await routerProcess(dir, { configPath, adminToken: TOKEN, bodyLimitBytes: LIMIT, bodyBudgetBytes: BUDGET });
  });
  after(async () => {
    await router?.stop();
    await backend?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const counted = async () => {
    const text = await (await fetch(`${router.url}/metrics`)).text();
    const e = parseExposition(text);
    return { bytes: valueOf(e, 'gpures_router_body_bytes'), refused: valueOf(e, 'gpures_router_body_budget_refused_total') };
  };
  const head = (length: number | 'chunked') =>
    'POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n' +
    (length === 'chunked' ? 'Transfer-Encoding: chunked\r\n\r\n' : `Content-Length: ${length}\r\n\r\n`);
  /** A chat request of exactly `size` bytes. */
  const bodyOf = (size: number) => {
    const start = '{"model":"chat","messages":[{"role":"user","content":"hi"}],"pad":"';
    return Buffer.from(start + 'x'.repeat(size - start.length - 2) + '"}');
  };

  test('16 clients each sending a body just under the limit: two are received, the others answered 503 with Retry-After unread; the RSS grows by the budget, not by 16 bodies', async () => {
    await fetch(`${router.url}/healthz`);
    const before = rssMib(router.pid);
    const size = LIMIT - 1024;
    const body = bodyOf(size);
    const conns = await Promise.all(Array.from({ length: CLIENTS }, () => rawConnection(router.url)));
    try {
      // Every body but its last byte, all at once: a request is not parsed until its last byte.
      await Promise.all(conns.map((c) => c.send(Buffer.concat([Buffer.from(head(size)), body.subarray(0, size - 1)]))));
      // All but two answered; without a budget none is, and the figures below are read after 5 s.
      await waitUntil('every client answered or its body taken', () => conns.filter((c) => c.received() !== '').length >= CLIENTS - 2, 5000).catch(
        () => undefined,
      );
      await sleep(500);
      const during = rssMib(router.pid);
      const { bytes, refused } = await counted();
      const answered = conns.filter((c) => c.received() !== '');
      console.log(
        `router RSS ${before.rss.toFixed(0)} MiB before, peak ${during.peak.toFixed(0)} MiB with ${CLIENTS} bodies of ${(size / MIB).toFixed(2)} MiB sent ` +
          `(+${(during.peak - before.rss).toFixed(0)} MiB); counted ${bytes ?? 'n/a'} bytes, ${answered.length} answered, ${refused ?? 'n/a'} refused`,
      );
      assert.equal(answered.length, CLIENTS - 2, 'all but two answered at once');
      for (const c of answered) {
        const text = c.received();
        assert.match(text, /^HTTP\/1\.1 503 /);
        assert.match(text, new RegExp(`\\r\\nretry-after: ${RETRY_AFTER_S}\\r\\n`, 'i'));
        const error = (JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) as { error: Record<string, unknown> }).error;
        assert.deepEqual([error.type, error.code, error.retry_after_s], ['server_busy', 'body_budget', RETRY_AFTER_S]);
        assert.match(String(error.message), /^the router holds 32\.00 MiB of request bodies being received or answered, .*past its budget of 32\.00 MiB/);
      }
      assert.deepEqual([bytes, refused], [2 * size, CLIENTS - 2]);
      assert.ok(
        // 128 MiB of room for the process's own growth under load (runs here: +58 to +76 MiB);
        // 16 bodies held, as before the budget, grew it by 257 MiB.
        during.peak - before.rss < BUDGET / MIB + 128,
        `RSS peak ${during.peak.toFixed(0)} MiB, ${before.rss.toFixed(0)} before: more than the budget and 128 MiB`,
      );
      assert.equal(backend.received.length, 0);

      // The two complete their bodies and are answered; the budget is whole again.
      const taken = conns.filter((c) => c.received() === '');
      await Promise.all(taken.map((c) => c.send('}')));
      await waitUntil('the two taken answered', () => taken.every((c) => c.received().includes('echo:hi')), 10_000);
      for (const c of taken) assert.match(c.received(), /^HTTP\/1\.1 200 /);
      await waitUntil('nothing counted once they are answered', async () => (await counted()).bytes === 0);
    } finally {
      for (const c of conns) c.destroy();
    }
    assert.equal((await chat(router.url, 'chat')).status, 200);
  });

  test('a chunked body is counted as it arrives: refused 503 with the chunk that would pass the budget', async () => {
    const size = LIMIT - 1024;
    const held = await Promise.all([rawConnection(router.url), rawConnection(router.url)]);
    const chunked = await rawConnection(router.url);
    try {
      const body = bodyOf(size);
      await Promise.all(held.map((c) => c.send(Buffer.concat([Buffer.from(head(size)), body.subarray(0, size - 1)]))));
      await waitUntil('both bodies counted', async () => (await counted()).bytes === 2 * size);
      // 2048 bytes are left of the budget: a chunk of 4 KiB passes it.
      const chunk = '{"model":"chat",' + ' '.repeat(4096 - 16);
      await chunked.send(`${head('chunked')}1000\r\n${chunk}\r\n`);
      await waitUntil('the chunked request answered', () => chunked.received().includes('\r\n\r\n{'), 5000);
      assert.match(chunked.received(), /^HTTP\/1\.1 503 /);
      assert.match(chunked.received(), /"code":"body_budget"/);
      assert.equal((await counted()).bytes, 2 * size, 'the refused chunk is not counted');
    } finally {
      for (const c of [...held, chunked]) c.destroy();
    }
    await waitUntil('nothing counted once the clients are gone', async () => (await counted()).bytes === 0);
    // With room, a chunked body is taken and answered.
    const ok = await rawConnection(router.url);
    try {
      const text = JSON.stringify({ model: 'chat', messages: [{ role: 'user', content: 'chunked' }] });
      await ok.send(`${head('chunked')}${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n0\r\n\r\n`);
      await waitUntil('the chunked request answered', () => ok.received().includes('echo:chunked'), 5000);
      assert.match(ok.received(), /^HTTP\/1\.1 200 /);
    } finally {
      ok.destroy();
    }
    assert.equal((await counted()).bytes, 0);
  });

  test('startRouter refuses a budget below the body limit, naming both', async () => {
    // One that starts after all is closed, and its start is the failure.
    const started = startRouter({ configPath: join(dir, 'router.toml'), adminToken: TOKEN, bodyLimitBytes: LIMIT, bodyBudgetBytes: LIMIT - 1 });
    await assert.rejects(
      started.then(async (r) => r.close()),
      { message: `startRouter: bodyBudgetBytes (${LIMIT - 1}) is below bodyLimitBytes (${LIMIT}): the largest body the router takes would always be refused` },
    );
  });
});

/** A router over one fake vision serve, in a directory of its own: start(true) keeps its state file, start(false) none. */
async function routerWithState(mapping: string) {
  const dir = mkdtempSync(join(tmpdir(), `gpures-router-${mapping}-`));
  const vision = await new FakeVllm('qwen3-vl-4b-instruct').start();
  const configPath = join(dir, 'router.toml');
  const stateFile = join(dir, 'router-state.json');
  writeFileSync(configPath, routerToml({ mapping: `test.${mapping}`, chat: vision.url, vision: vision.url, dead: `http://127.0.0.1:${await deadPort()}` }));
  const start = async (withState: boolean, log?: (line: string) => void) => {
    const r = await startRouter({ configPath, adminToken: TOKEN, probeTimeoutMs: 1000, ...(withState ? { stateFile } : {}), ...(log ? { log } : {}) });
    return { r, admin: new HttpRouterAdmin({ baseUrl: r.url, token: TOKEN, timeoutMs: 5000 }) };
  };
  const close = async () => {
    await vision.close();
    rmSync(dir, { recursive: true, force: true });
  };
  return { dir, configPath, stateFile, start, close };
}

describe('quiesced tiers across a router restart', () => {
  test('with a state file, a tier quiesced before a restart is still quiesced after it; a readmit clears it', async () => {
    const { dir, configPath, stateFile, start, close } = await routerWithState('state');
    try {
      let { r, admin } = await start(true);
      await admin.quiesce('vision-local');
      const kept = JSON.parse(readFileSync(stateFile, 'utf8')) as { quiesced: string[]; router_instance: string; quiesces: Record<string, number> };
      assert.deepEqual(kept, { quiesced: ['vision-local'], router_instance: kept.router_instance, quiesces: { 'vision-local': 1 } });
      await r.close();

      ({ r, admin } = await start(true));
      assert.equal((await admin.tierState('vision-local')).state, 'quiesced');
      assert.equal((await chat(r.url, 'vision')).status, 503);
      assert.equal((await admin.tierState('chat-local')).state, 'active');
      assert.equal((await admin.readmit('vision-local')).ok, true);
      assert.deepEqual((JSON.parse(readFileSync(stateFile, 'utf8')) as { quiesced: string[] }).quiesced, []);
      await r.close();

      ({ r, admin } = await start(true));
      assert.equal((await admin.tierState('vision-local')).state, 'active');
      await admin.quiesce('vision-local');
      await r.close();
      // Without the file the quiesce is forgotten: every tier starts active.
      ({ r, admin } = await start(false));
      assert.equal((await admin.tierState('vision-local')).state, 'active');
      await r.close();
      // A state file that cannot be written fails the start, not the first eviction.
      await assert.rejects(startRouter({ configPath, adminToken: TOKEN, stateFile: join(dir, 'missing', 'router-state.json') }), /ENOENT/);
      // A state file that is not the router's: refused naming the file and the flag, before anything listens.
      const bad = join(dir, 'not-state.json');
      writeFileSync(bad, 'not json');
      await assert.rejects(startRouter({ configPath, adminToken: TOKEN, stateFile: bad }), (err: Error) =>
        err.message.startsWith(`${bad} (--state): not JSON: `),
      );
      writeFileSync(bad, 'null');
      await assert.rejects(startRouter({ configPath, adminToken: TOKEN, stateFile: bad }), {
        message: `${bad} (--state): quiesced must be a list of tier names`,
      });
    } finally {
      await close();
    }
  });
});

describe('a tier whose serve was brought down (a quiesce with a reason)', () => {
  test('operator-down: 503 without Retry-After naming the tier, the reason and `gpures serves up vision`; listed unavailable so; kept across a restart; a readmit clears it; a reason the router does not know loads as none, with a warning', async () => {
    const { stateFile, start, close } = await routerWithState('down');
    let running: RunningRouter | undefined;
    try {
      let { r, admin } = await start(true);
      running = r;
      const state = await admin.quiesce('vision-local', { reason: 'operator-down', serve: 'vision' });
      assert.deepEqual([state.state, state.quiesceReason, state.quiesceServe], ['quiesced', 'operator-down', 'vision']);
      const expectDown = async (url: string) => {
        const a = await chat(url, 'vision');
        assert.equal(a.status, 503);
        assert.equal(a.headers.get('retry-after'), null, 'no Retry-After: no wait brings the serve back');
        const e = a.body.error as Record<string, unknown>;
        assert.deepEqual(
          { code: e.code, reason: e.reason, tier: e.tier, brought_back_by: e.brought_back_by, retry_after_s: e.retry_after_s },
          { code: 'operator_down', reason: 'operator_down', tier: 'vision-local', brought_back_by: 'gpures serves up vision', retry_after_s: undefined },
        );
        assert.equal(
          e.message,
          "tier 'vision-local' is down: an operator brought its serve 'vision' down (gpures serves down); it stays down until `gpures serves up vision`: retrying will not bring it back",
        );
        const models = (await (await fetch(`${url}/v1/models`)).json()) as { data: { id: string }[]; unavailable: Record<string, unknown>[] };
        assert.ok(!models.data.some((m) => m.id === 'vision'));
        assert.deepEqual(
          models.unavailable.map(({ message: _m, ...rest }) => rest),
          [{ id: 'vision', tier: 'vision-local', reason: 'operator_down', brought_back_by: 'gpures serves up vision' }],
        );
      };
      await expectDown(r.url);
      // Kept in the state file with the quiesce, and the router restarted still says it.
      const kept = JSON.parse(readFileSync(stateFile, 'utf8')) as { quiesce_reasons?: unknown };
      assert.deepEqual(kept.quiesce_reasons, { 'vision-local': { reason: 'operator-down', serve: 'vision' } });
      await r.close();
      ({ r, admin } = await start(true));
      running = r;
      await expectDown(r.url);

      // A reason the router does not know: 400 naming the field, nothing changed (mark, reason, file).
      const mark = (await admin.tierState('vision-local')).quiesceMark;
      const bad = await fetch(`${r.url}/admin/tiers/vision-local/quiesce?reason=gone-fishing&serve=vision`, {
        method: 'POST',
        headers: { authorization: `Bearer ${TOKEN}` },
      });
      assert.equal(bad.status, 400);
      const badBody = (await bad.json()) as { error: { code: string; message: string } };
      assert.equal(badBody.error.code, 'invalid_quiesce');
      assert.match(
        badBody.error.message,
        /^quiesce of tier 'vision-local' refused, nothing changed: reason must be one of "draining", "evicted", "operator-down", "lease-ended" \(got "gone-fishing"\)$/,
      );
      const after = await admin.tierState('vision-local');
      assert.deepEqual([after.quiesceMark, after.quiesceReason], [mark, 'operator-down']);

      // A readmit clears the reason, in memory and in the file; a quiesce without one has the old meaning.
      assert.equal((await admin.readmit('vision-local')).ok, true);
      assert.equal((await admin.tierState('vision-local')).quiesceReason, undefined);
      assert.equal((JSON.parse(readFileSync(stateFile, 'utf8')) as { quiesce_reasons?: unknown }).quiesce_reasons, undefined);
      await admin.quiesce('vision-local');
      const old = await chat(r.url, 'vision');
      assert.equal(old.status, 503);
      assert.ok(old.headers.get('retry-after'), 'a quiesce without a reason keeps its Retry-After');
      assert.match((old.body.error as { message: string }).message, /quiesced \(evicted or draining\); retry later$/);

      // lease-ended on a tier this router does not acquire: down as an operator's, saying what brings it back.
      await admin.quiesce('vision-local', { reason: 'lease-ended', serve: 'vision' });
      const ended = await chat(r.url, 'vision');
      assert.equal(ended.status, 503);
      assert.equal(ended.headers.get('retry-after'), null);
      assert.equal((ended.body.error as { reason: string }).reason, 'lease_ended');
      await r.close();
      running = undefined;

      // A state file from before reasons were kept loads: its quiesced tier answers as before.
      writeFileSync(stateFile, `${JSON.stringify({ quiesced: ['vision-local'] })}\n`);
      ({ r, admin } = await start(true));
      running = r;
      const before = await chat(r.url, 'vision');
      assert.equal(before.status, 503);
      assert.ok(before.headers.get('retry-after'));
      assert.equal((await admin.tierState('vision-local')).quiesceReason, undefined);
      await r.close();
      running = undefined;
      // A reason this router does not know (a newer router's, kept across a downgrade): the router
      // starts, the tier quiesced without a reason (Retry-After), one warning naming the file, the tier and the value.
      writeFileSync(
        stateFile,
        `${JSON.stringify({ quiesced: ['vision-local'], quiesce_reasons: { 'vision-local': { reason: 'bored', serve: 'vision' } } })}\n`,
      );
      const warned: string[] = [];
      ({ r, admin } = await start(true, (line) => warned.push(line)));
      running = r;
      assert.deepEqual(warned, [
        `warning: ${stateFile} (--state): quiesce_reasons.vision-local: reason "bored" is not one this router knows ` +
          '(draining, evicted, operator-down, lease-ended): the tier stays quiesced, without a reason (503 with Retry-After)',
      ]);
      const unknown = await admin.tierState('vision-local');
      assert.deepEqual([unknown.state, unknown.quiesceReason], ['quiesced', undefined]);
      const later = await chat(r.url, 'vision');
      assert.equal(later.status, 503);
      assert.ok(later.headers.get('retry-after'), 'quiesced without a reason: back on its own, as before reasons');
      await r.close();
      running = undefined;
      // An entry that is not a reason at all (a serve that is no serve's name): refused naming the file, the field and the tier.
      writeFileSync(
        stateFile,
        `${JSON.stringify({ quiesced: ['vision-local'], quiesce_reasons: { 'vision-local': { reason: 'operator-down', serve: '../x' } } })}\n`,
      );
      await assert.rejects(start(true), {
        message: `${stateFile} (--state): quiesce_reasons.vision-local: serve must be a serve's name: letters, digits, '.', '_', '-', at most 63 ("../x")`,
      });
    } finally {
      await running?.close();
      await close();
    }
  });
});

describe('quiesce marks across a router restart', () => {
  test('kept with the quiesced tiers in the state file: a mark taken before a restart readmits after it, and a quiesce after it still moves the mark', async () => {
    const { stateFile, start: startWith, close } = await routerWithState('marks');
    const start = () => startWith(true);
    let running: RunningRouter | undefined;
    try {
      let { r, admin } = await start();
      running = r;
      // An eviction's quiesce, its mark kept for the compensation's readmit; the router then restarts.
      const before = (await admin.quiesce('vision-local')).quiesceMark;
      await r.close();
      ({ r, admin } = await start());
      running = r;
      const after = await admin.tierState('vision-local');
      console.log(`  mark before the restart ${before}, after: ${after.state} ${after.quiesceMark}`);
      assert.deepEqual([after.state, after.quiesceMark], ['quiesced', before], 'the restart kept the tier quiesced and its mark');
      const readmit = await admin.readmit('vision-local', before);
      assert.equal(readmit.ok, true, JSON.stringify(readmit));
      assert.equal((await admin.tierState('vision-local')).state, 'active');

      // Quiesced again, restarted, and quiesced after the restart (an eviction made since): the older mark lifts nothing.
      const older = (await admin.quiesce('vision-local')).quiesceMark;
      await r.close();
      ({ r, admin } = await start());
      running = r;
      const since = (await admin.quiesce('vision-local')).quiesceMark;
      assert.notEqual(since, older, 'a quiesce after the restart moves the mark');
      const stale = await admin.readmit('vision-local', older);
      assert.equal(!stale.ok && stale.reason, 'quiesced_since', JSON.stringify(stale));
      assert.equal((await admin.tierState('vision-local')).state, 'quiesced');
      assert.equal((await admin.readmit('vision-local', since)).ok, true);
      // Active tiers keep their count too: a tier quiesced, readmitted, restarted and quiesced once more has a mark of its own.
      const once = (await admin.quiesce('vision-local')).quiesceMark;
      assert.equal((await admin.readmit('vision-local', once)).ok, true);
      await r.close();
      ({ r, admin } = await start());
      running = r;
      const twice = (await admin.quiesce('vision-local')).quiesceMark;
      assert.notEqual(twice, once);
      assert.equal((await admin.readmit('vision-local', once)).ok, false);
      await r.close();
      running = undefined;

      // A state file written before marks were kept: its quiesced tiers stay quiesced, and a mark from before lifts nothing (as then).
      writeFileSync(stateFile, JSON.stringify({ quiesced: ['vision-local'] }));
      ({ r, admin } = await start());
      running = r;
      const old = await admin.tierState('vision-local');
      assert.equal(old.state, 'quiesced');
      const fromOld = await admin.readmit('vision-local', twice);
      assert.equal(!fromOld.ok && fromOld.reason, 'quiesced_since');
      assert.equal((await admin.readmit('vision-local', old.quiesceMark)).ok, true);
      await r.close();
      running = undefined;

      // Marks that are not marks: refused naming the file and the field, before anything listens.
      writeFileSync(stateFile, JSON.stringify({ quiesced: [], router_instance: 'a.b' }));
      await assert.rejects(start(), { message: `${stateFile} (--state): router_instance must be a word of letters and digits ("a.b")` });
      writeFileSync(stateFile, JSON.stringify({ quiesced: [], router_instance: 'e91f6795', quiesces: { 'vision-local': -1 } }));
      await assert.rejects(start(), { message: `${stateFile} (--state): quiesces must map tier names to whole numbers (vision-local: -1)` });
    } finally {
      await running?.close();
      await close();
    }
  });
});

describe('router start-up', () => {
  test('startRouter refuses an invalid config and an empty token', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gpures-router-'));
    try {
      const file = join(dir, 'router.toml');
      writeFileSync(file, 'mapping_version = "x"\n[[tiers]]\nname = "a"\nbackend = "ftp://x"\nserved_model_name = "m"\n');
      await assert.rejects(startRouter({ configPath: file, adminToken: TOKEN }), /tiers\[0\]\.backend\): must be an http\(s\) base URL/);
      await assert.rejects(startRouter({ configPath: join(dir, 'missing.toml'), adminToken: TOKEN }), /cannot read/);
      await assert.rejects(startRouter({ configPath: file, adminToken: '' }), /adminToken is required/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('main.js --help lists the environment, the client token with it', async () => {
    const main = join(ROOT, 'dist', 'src', 'router', 'main.js');
    const p = spawn(process.execPath, [main, '--help'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    p.stdout.on('data', (c: Buffer) => (out += c.toString()));
    assert.equal(await new Promise<number | null>((resolve) => p.on('close', (code) => resolve(code))), 0);
    assert.match(out, /^usage: GPURES_ROUTER_TOKEN=<secret> node dist\/src\/router\/main\.js --config FILE/);
    assert.match(out, /\n {2}GPURES_ROUTER_CLIENT_TOKEN {2}the token a request to an on-demand preset must carry, as Authorization: Bearer\n/);
  });

  test("main.js --validate-only --config FILE: the file's own rules, with no token and nothing listening; exit 0 with its mapping_version, 1 with each problem (a promotion's validate step)", async () => {
    const main = join(ROOT, 'dist', 'src', 'router', 'main.js');
    const dir = mkdtempSync(join(tmpdir(), 'gpures-router-validate-'));
    try {
      const good = join(dir, 'good.toml');
      const bad = join(dir, 'bad.toml');
      const base = `mapping_version = "v.1"\n[[tiers]]\nname = "chat-local"\nbackend = "http://127.0.0.1:30001"\nserved_model_name = "chat"\n[[presets]]\nname = "chat"\ntier = "chat-local"\n`;
      writeFileSync(good, base);
      writeFileSync(bad, `retry_after_s = -5\n${base}bogus = 1\n`);
      const env: NodeJS.ProcessEnv = { ...process.env };
      for (const k of ['GPURES_ROUTER_TOKEN', 'GPURES_API_URL', 'GPURES_API_TOKEN', 'GPURES_ROUTER_CLIENT_TOKEN']) delete env[k];
      const run = (config: string) =>
        new Promise<{ code: number | null; out: string }>((resolve) => {
          const p = spawn(process.execPath, [main, '--validate-only', '--config', config], { env, stdio: ['ignore', 'pipe', 'pipe'] });
          let out = '';
          p.stdout.on('data', (c: Buffer) => (out += c.toString()));
          p.on('close', (code) => resolve({ code, out }));
        });
      const [ok, refused] = await Promise.all([run(good), run(bad)]);
      assert.deepEqual(ok, { code: 0, out: `${good}: valid (mapping_version 'v.1')\n` });
      assert.equal(refused.code, 1, refused.out);
      assert.match(refused.out, /^\S+bad\.toml: preset 'chat' \(presets\[0\]\.bogus\): unknown key "bogus"/m);
      assert.match(refused.out, /^\S+bad\.toml: retry_after_s: must be /m);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('main.js takes the HTTP bounds as flags: refused outside their bounds or against each other, naming the flag, before anything listens; within them, in force', async () => {
    const main = join(ROOT, 'dist', 'src', 'router', 'main.js');
    const dir = mkdtempSync(join(tmpdir(), 'gpures-router-flags-'));
    const backend = await new FakeVllm('fake-chat').start();
    const config = join(dir, 'router.toml');
    writeFileSync(
      config,
      `mapping_version = "flags.v1"\n[[tiers]]\nname = "chat-local"\nbackend = "${backend.url}"\nserved_model_name = "fake-chat"\n[[presets]]\nname = "chat"\ntier = "chat-local"\n`,
    );
    const env: NodeJS.ProcessEnv = { ...process.env, GPURES_ROUTER_TOKEN: TOKEN };
    for (const k of ['GPURES_API_URL', 'GPURES_API_TOKEN', 'GPURES_ROUTER_CLIENT_TOKEN']) delete env[k];
    const run = (flags: string[]) => {
      const p = spawn(process.execPath, [main, '--config', config, '--port', '0', ...flags], { env, stdio: ['ignore', 'ignore', 'pipe'] });
      let err = '';
      p.stderr.on('data', (c: Buffer) => (err += c.toString()));
      const exited = new Promise<number | null>((resolve) => p.on('close', (code) => resolve(code)));
      return { p, stderr: () => err, exited };
    };
    try {
      for (const [flags, expected] of [
        [['--body-limit-mib', '0'], "--body-limit-mib must be a whole number of MiB in 1..1024 (got '0')"],
        [['--body-limit-mib', '64.5'], "--body-limit-mib must be a whole number of MiB in 1..1024 (got '64.5')"],
        [['--body-budget-mib', '4097'], "--body-budget-mib must be a whole number of MiB in 1..4096 (got '4097')"],
        [['--held-mib', ''], "--held-mib must be a whole number of MiB in 1..4096 (got '')"],
        [['--request-timeout-s', '1e3'], "--request-timeout-s must be a whole number of seconds in 1..600 (got '1e3')"],
        [
          ['--max-connections', '0x10', '--request-timeout-s', '601'],
          "--request-timeout-s must be a whole number of seconds in 1..600 (got '601')\ngpures-router: --max-connections must be a whole number of connections in 1..65536 (got '0x10')",
        ],
        [
          ['--body-budget-mib', '32'],
          '--body-budget-mib 32 is below --body-limit-mib 64 (the default): a body the router takes could never fit its budget for all bodies together',
        ],
        [
          ['--body-limit-mib', '128', '--body-budget-mib', '100'],
          '--body-budget-mib 100 is below --body-limit-mib 128: a body the router takes could never fit its budget for all bodies together',
        ],
        [
          ['--held-mib', '600'],
          '--held-mib 600 is above --body-budget-mib 512 (the default): held requests count against that budget too, so the on-demand queues could never hold that much',
        ],
      ] as const) {
        const r = run([...flags]);
        assert.equal(await r.exited, 2, `${flags.join(' ')}: ${r.stderr()}`);
        assert.equal(r.stderr(), `gpures-router: ${expected}\n`, flags.join(' '));
      }

      const r = run(['--body-limit-mib', '1', '--body-budget-mib', '2', '--held-mib', '1', '--request-timeout-s', '1', '--max-connections', '4']);
      try {
        await waitUntil('the bounds line', () => /gpures-router: bodies/.test(r.stderr()), 10_000);
        assert.match(
          r.stderr(),
          /\(mapping_version flags\.v1\)\ngpures-router: bodies up to 1 MiB each and 2 MiB together, 1 MiB of them held; a request whole within 1 s; 4 connections\n/,
        );
        const url = /router listening on (http:\/\/127\.0\.0\.1:\d+) /.exec(r.stderr())?.[1] ?? '';
        const large = await chat(url, 'chat', { messages: [{ role: 'user', content: 'x'.repeat(1024 * 1024) }] });
        assert.equal(large.status, 413);
        assert.deepEqual(large.body.error, {
          message: "the request body is over the router's limit of 1048576 bytes (1.00 MiB)",
          type: 'invalid_request',
          code: 'body_too_large',
        });
        const budget = parseExposition(await (await fetch(`${url}/metrics`)).text());
        assert.equal(valueOf(budget, 'gpures_router_body_budget_bytes'), 2 * 1024 * 1024);
        const slow = await rawConnection(url);
        try {
          slow.write('POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 10\r\n\r\n{');
          assert.ok((await slow.closed(4000)) !== undefined, 'a slow client still open 4 s after a bound of 1 s');
          assert.match(slow.received(), /^HTTP\/1\.1 408 [^]*"message":"the request did not arrive whole within 1 s of its first byte/);
        } finally {
          slow.destroy();
        }
        // Four connections open at once: a fifth is closed as it arrives.
        const open = await Promise.all(Array.from({ length: 4 }, () => rawConnection(url)));
        try {
          await sleep(100);
          const fifth = await rawConnection(url);
          assert.ok((await fifth.closed(2000)) !== undefined, 'a fifth connection past --max-connections 4 stayed open');
        } finally {
          for (const c of open) c.destroy();
        }
      } finally {
        r.p.kill('SIGTERM');
      }
      assert.equal(await r.exited, 0);
    } finally {
      await backend.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('main.js refuses to start without GPURES_ROUTER_TOKEN, and runs and closes on SIGTERM with one', async () => {
    const main = join(ROOT, 'dist', 'src', 'router', 'main.js');
    const config = join(ROOT, 'examples', 'primary-node', 'router.toml');
    const env = { ...process.env };
    delete env.GPURES_ROUTER_TOKEN;

    const refused = spawn(process.execPath, [main, '--config', config, '--port', '0'], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let refusedErr = '';
    refused.stderr.on('data', (c: Buffer) => (refusedErr += c.toString()));
    const refusedCode = await new Promise<number | null>((resolve) => refused.on('close', (code) => resolve(code)));
    assert.equal(refusedCode, 2);
    assert.match(refusedErr, /GPURES_ROUTER_TOKEN is not set/);

    // A token short enough to guess is refused, by its length (never its value).
    const short = spawn(process.execPath, [main, '--config', config, '--port', '0'], {
      env: { ...env, GPURES_ROUTER_TOKEN: 'admin' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let shortErr = '';
    short.stderr.on('data', (c: Buffer) => (shortErr += c.toString()));
    assert.equal(await new Promise<number | null>((resolve) => short.on('close', (code) => resolve(code))), 2);
    assert.match(shortErr, /GPURES_ROUTER_TOKEN is 5 characters, too short to be secret: at least 32 are required/);
    assert.doesNotMatch(shortErr, /admin\b(?! API)/);

    // A port that is not digits (Number('') is 0: a random port; '0x1f41' is 8001) is refused as typed.
    for (const port of ['', '0x1f41', ' 8002', '1e3', '65536']) {
      const p = spawn(process.execPath, [main, '--config', config, '--port', port], {
        env: { ...env, GPURES_ROUTER_TOKEN: TOKEN },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let pErr = '';
      p.stderr.on('data', (c: Buffer) => (pErr += c.toString()));
      assert.equal(await new Promise<number | null>((resolve) => p.on('close', (code) => resolve(code))), 2, port);
      assert.equal(pErr, `gpures-router: --port must be an integer in 0..65535 (got '${port}')\n`);
    }

    // Beyond loopback only when asked: a request to an on-demand tier can evict serves.
    const wide = spawn(process.execPath, [main, '--config', config, '--port', '0', '--host', '0.0.0.0'], {
      env: { ...env, GPURES_ROUTER_TOKEN: TOKEN, GPURES_API_URL: 'http://127.0.0.1:9', GPURES_API_TOKEN: 'x'.repeat(32) },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let wideErr = '';
    wide.stderr.on('data', (c: Buffer) => (wideErr += c.toString()));
    assert.equal(await new Promise<number | null>((resolve) => wide.on('close', (code) => resolve(code))), 2);
    assert.match(wideErr, /--host 0\.0\.0\.0 is not a loopback address: .*add --allow-non-loopback/);
    assert.doesNotMatch(wideErr, /router listening/);

    // The example's chat-large-local tier is on demand: without the acquisition API it refuses too.
    const noApi = spawn(process.execPath, [main, '--config', config, '--port', '0'], {
      env: { ...env, GPURES_ROUTER_TOKEN: TOKEN },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let noApiErr = '';
    noApi.stderr.on('data', (c: Buffer) => (noApiErr += c.toString()));
    assert.equal(await new Promise<number | null>((resolve) => noApi.on('close', (code) => resolve(code))), 2);
    assert.match(noApiErr, /tiers\[5\]\.on_demand: tier 'chat-large-local' is on demand, .*set GPURES_API_URL and GPURES_API_TOKEN/);

    // With the API but no client token: a request to it would evict serves untokened, so it refuses too.
    const apiEnv: NodeJS.ProcessEnv = { ...env, GPURES_ROUTER_TOKEN: TOKEN, GPURES_API_URL: 'http://127.0.0.1:9', GPURES_API_TOKEN: 'x'.repeat(32) };
    delete apiEnv.GPURES_ROUTER_CLIENT_TOKEN;
    const refusedBy = async (extra: Record<string, string>) => {
      const p = spawn(process.execPath, [main, '--config', config, '--port', '0'], { env: { ...apiEnv, ...extra }, stdio: ['ignore', 'ignore', 'pipe'] });
      let pErr = '';
      p.stderr.on('data', (c: Buffer) => (pErr += c.toString()));
      // One that starts after all is stopped, and its start is the failure.
      const stop = setTimeout(() => p.kill('SIGTERM'), 15_000);
      const code = await new Promise<number | null>((resolve) => p.on('close', (c) => resolve(c)));
      clearTimeout(stop);
      assert.equal(code, 2, pErr);
      assert.doesNotMatch(pErr, /router listening/);
      return pErr;
    };
    assert.match(
      await refusedBy({}),
      /tiers\[5\]\.on_demand: tier 'chat-large-local' is on demand: a request to it can acquire serve 'chat-large', evicting others, .*set GPURES_ROUTER_CLIENT_TOKEN/,
    );
    // Checked like the others, by length and by not being one of them, never quoted.
    const shortClient = await refusedBy({ GPURES_ROUTER_CLIENT_TOKEN: 'open-sesame' });
    assert.match(shortClient, /GPURES_ROUTER_CLIENT_TOKEN is 11 characters, too short to be secret: at least 32 are required/);
    assert.doesNotMatch(shortClient, /open-sesame/);
    const sameAsAdmin = await refusedBy({ GPURES_ROUTER_CLIENT_TOKEN: TOKEN });
    assert.match(sameAsAdmin, /GPURES_ROUTER_CLIENT_TOKEN is the same as GPURES_ROUTER_TOKEN: every client of the router's on-demand presets holds it/);
    assert.ok(!sameAsAdmin.includes(TOKEN));
    assert.match(await refusedBy({ GPURES_ROUTER_CLIENT_TOKEN: 'x'.repeat(32) }), /GPURES_ROUTER_CLIENT_TOKEN is the same as GPURES_API_TOKEN/);

    // The API is only called for a request: any URL lets the router start.
    const child = spawn(process.execPath, [main, '--config', config, '--port', '0'], {
      env: { ...apiEnv, GPURES_ROUTER_CLIENT_TOKEN: CLIENT_TOKEN },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    let err = '';
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    try {
      await waitUntil('the listening line', () => /router listening on/.test(err), 10_000);
      const m = /router listening on (http:\/\/127\.0\.0\.1:\d+) \(mapping_version 2026-07-13\.primary-node-t013-vision\)/.exec(err);
      assert.ok(m?.[1], err);
      const h = new HttpRouterAdmin({ baseUrl: m[1], token: TOKEN });
      assert.deepEqual(await h.healthz(), { ok: true, mappingVersion: '2026-07-13.primary-node-t013-vision' });
      assert.equal((await h.tierState('vision-local')).modelIdentity, true);
      // The on-demand preset asks for the client token before anything else (this API URL leads nowhere).
      assert.equal((await chat(m[1], 'chat-large')).status, 401);
      assert.equal((await chat(m[1], 'chat-large', {}, undefined, `Bearer ${TOKEN}`)).status, 401, 'the admin token is not the client token');
      assert.doesNotMatch(err, new RegExp(CLIENT_TOKEN), 'the token is never logged');
    } finally {
      child.kill('SIGTERM');
    }
    assert.equal(await exited, 0);
  });
});

// ---------------------------------------------------------------------------------------------
// The config model

const CFG = 'router.toml';

function parse(text: string): RouterConfigResult {
  return parseRouterConfig(text, CFG);
}

function errorsOf(r: RouterConfigResult): ManifestIssue[] {
  assert.equal(r.ok, false, 'expected the config to be rejected');
  return r.ok ? [] : r.errors;
}

function okConfig(r: RouterConfigResult): RouterConfig {
  if (!r.ok) assert.fail(`expected ok, got:\n${r.errors.map(formatIssue).join('\n')}`);
  return r.config;
}

const MIN = `mapping_version = "m1"
[[tiers]]
name = "a-local"
backend = "http://127.0.0.1:30001/"
served_model_name = "model-a"
[[presets]]
name = "a"
tier = "a-local"
`;

describe('parseRouterConfig', () => {
  test('a minimal config: defaults, trailing slash dropped, lookups', () => {
    const r = parse(MIN);
    const config = okConfig(r);
    assert.deepEqual(config, {
      mappingVersion: 'm1',
      retryAfterS: 10,
      tiers: [{ name: 'a-local', backend: 'http://127.0.0.1:30001', servedModelName: 'model-a', modelIdentity: false }],
      presets: [{ name: 'a', tier: 'a-local' }],
    });
    assert.equal(tierForPreset(config, 'a')?.name, 'a-local');
    assert.equal(tierForPreset(config, 'b'), undefined);
    assert.deepEqual(r.ok && r.warnings, []);
  });

  test('every problem is reported with file, dotted path and message', () => {
    const errors = errorsOf(
      parse(`
[[tiers]]
name = "a-local"
backend = "ftp://127.0.0.1:30001"
served_model_name = "model-a"
model_identiy = true

[[tiers]]
name = "a-local"
backend = "http://127.0.0.1:30002"
served_model_name = "model-b"

[[tiers]]
name = "c-local"
backend = "not a url"
served_model_name = ""

[[presets]]
name = "a"
tier = "a-local"

[[presets]]
name = "a"
tier = "a-local"

[[presets]]
name = "b"
tier = "ghost"
`),
    );
    const lines = errors.map(formatIssue);
    const expect = (prefix: string, ...fragments: string[]) => {
      const hit = lines.find((l) => l.startsWith(prefix) && fragments.every((f) => l.includes(f)));
      assert.ok(hit, `no issue ${prefix} ${fragments.join(' ')} in:\n${lines.join('\n')}`);
    };
    expect('router.toml: mapping_version: is required');
    expect("router.toml: tier 'a-local' (tiers[0].backend): must be an http(s) base URL", '"ftp://127.0.0.1:30001"');
    expect("router.toml: tier 'a-local' (tiers[0].model_identiy): unknown key", "did you mean 'model_identity'");
    expect("router.toml: tier 'a-local' (tiers[1].name): duplicate tier name 'a-local' (first declared at tiers[0])");
    expect("router.toml: tier 'c-local' (tiers[2].backend): must be an http(s) base URL", '"not a url"');
    expect("router.toml: tier 'c-local' (tiers[2].served_model_name): must be a non-empty string");
    expect("router.toml: preset 'a' (presets[1].name): duplicate preset name 'a' (first declared at presets[0])");
    expect("router.toml: presets[2].tier: preset 'b' names unknown tier 'ghost'", "'a-local'", "'c-local'");
    assert.equal(lines.length, 8, lines.join('\n'));
  });

  test('unknown top-level keys, no tiers, invalid TOML, bad value types', () => {
    const top = errorsOf(parse('mapping_version = "m"\npresetz = 1\n')).map(formatIssue);
    assert.deepEqual(top.sort(), [
      'router.toml: presetz: unknown key "presetz" (did you mean \'presets\'?)',
      'router.toml: tiers: at least one tier is required: add a [[tiers]] table with name, backend and served_model_name',
    ]);
    const toml = errorsOf(parse('mapping_version = \n'));
    assert.equal(toml.length, 1);
    assert.match(formatIssue(toml[0] as ManifestIssue), /^router\.toml: mapping_version: line 1, column \d+: invalid TOML/);
    const types = errorsOf(parse(MIN.replace('served_model_name = "model-a"', 'served_model_name = "model-a"\nmodel_identity = "yes"'))).map(formatIssue);
    assert.deepEqual(types, [`router.toml: tier 'a-local' (tiers[0].model_identity): must be true or false (got "yes")`]);
    const name = errorsOf(parse(MIN.replace('name = "a-local"', 'name = "a local"').replace('tier = "a-local"', 'tier = "a local"')));
    assert.equal(name[0]?.path, 'tiers[0].name');
  });

  test('a tier no preset reaches is a warning', () => {
    const r = parse(`${MIN}[[tiers]]\nname = "lonely"\nbackend = "https://h.example"\nserved_model_name = "x"\n`);
    okConfig(r);
    assert.deepEqual(r.ok && r.warnings.map(formatIssue), [
      "router.toml: tiers[1]: tier 'lonely' has no preset: clients cannot reach it (admin endpoints still can)",
    ]);
  });

  test('parseBackendUrl', () => {
    assert.deepEqual(parseBackendUrl('http://127.0.0.1:30008'), { scheme: 'http', host: '127.0.0.1', port: 30008, path: '' });
    assert.deepEqual(parseBackendUrl('https://[::1]/vllm/'), { scheme: 'https', host: '[::1]', port: 443, path: '/vllm' });
    for (const bad of ['ftp://h', 'http://', 'http://h:0', 'http://h:70000', 'http://h/?q=1', 'http://u:p@h', 'h:80', 'http://h#x']) {
      assert.equal(parseBackendUrl(bad), undefined, bad);
    }
  });
});

describe('checkRouterAgainstManifest (the load-time rule of seed T013, finding 2)', () => {
  const MANIFEST = 'serves.toml';
  const manifestText = readFileSync(join(ROOT, 'examples', 'primary-node', 'serves.toml'), 'utf8');
  const routerText = readFileSync(join(ROOT, 'examples', 'primary-node', 'router.toml'), 'utf8');
  const manifestResult = parseManifest(manifestText, MANIFEST);
  if (!manifestResult.ok) throw new Error(manifestResult.errors.map(formatIssue).join('\n'));
  const manifest: Manifest = manifestResult.manifest;

  test('the two example files agree: no errors, no warnings', () => {
    const r = parseRouterConfig(routerText, CFG);
    const config = okConfig(r);
    assert.deepEqual(r.ok && r.warnings, []);
    assert.equal(config.mappingVersion, '2026-07-13.primary-node-t013-vision');
    assert.deepEqual(
      config.tiers.map((t) => [t.name, t.backend, t.servedModelName, t.modelIdentity]),
      [
        ['fast-local', 'http://127.0.0.1:30001', 'gemma4-e4b-it', true],
        ['embeddings-local', 'http://127.0.0.1:30003', 'bge-m3', true],
        ['reranker-local', 'http://127.0.0.1:30004', 'bge-reranker-v2-m3', true],
        ['ocr-local', 'http://127.0.0.1:30007', 'paddleocr-vl', true],
        ['vision-local', 'http://127.0.0.1:30008', 'qwen3-vl-4b-instruct', true],
        ['chat-large-local', 'http://127.0.0.1:30010', 'qwen3-14b-awq', true],
      ],
    );
    assert.deepEqual(config.tiers.find((t) => t.onDemand)?.onDemand, {
      serve: 'chat-large',
      evict: true,
      queueSize: 64,
      waitTimeoutS: 300,
      keepaliveS: 15,
      abandonAfterS: 5,
    });
    assert.deepEqual(
      config.presets.map((p) => [p.name, p.tier]),
      [
        ['chat-fast', 'fast-local'],
        ['chat', 'fast-local'],
        ['embeddings', 'embeddings-local'],
        ['rerank', 'reranker-local'],
        ['ocr', 'ocr-local'],
        ['vision', 'vision-local'],
        ['chat-large', 'chat-large-local'],
      ],
    );
    assert.deepEqual(checkRouterAgainstManifest(config, CFG, manifest, MANIFEST), []);
  });

  test("an evictable serve's tier without model_identity = true is an error naming the tier and the file", () => {
    const config = okConfig(parseRouterConfig(routerText.replace(/(name = "vision-local"[^[]*?)model_identity = true\n/, '$1'), CFG));
    const issues = checkRouterAgainstManifest(config, CFG, manifest, MANIFEST);
    const errors = routerCheckErrors(issues);
    assert.equal(errors.length, 1, issues.map(formatIssue).join('\n'));
    assert.equal(
      formatIssue(errors[0] as ManifestIssue),
      "router.toml: tiers[4].model_identity: tier 'vision-local' is backed by evictable serve 'vision' (serves.toml) and must set model_identity = true, or its guarded readmit will refuse with identity_not_configured and the tier can never re-enter rotation after an eviction",
    );
  });

  test('idle_ttl_s on a serve whose tier is not on demand for it is a warning naming the serve and the fix (the example once had it on ocr)', () => {
    const moved = manifestText.replace(/\nidle_ttl_s = 600\n/, '\n').replace('start_timeout_s = 900\n', 'start_timeout_s = 900\nidle_ttl_s = 600\n');
    const parsed = parseManifest(moved, MANIFEST);
    if (!parsed.ok) throw new Error(parsed.errors.map(formatIssue).join('\n'));
    const issues = checkRouterAgainstManifest(okConfig(parseRouterConfig(routerText, CFG)), CFG, parsed.manifest, MANIFEST);
    assert.deepEqual(routerCheckErrors(issues), []);
    assert.deepEqual(issues.map(formatIssue), [
      "serves.toml: serves[3].idle_ttl_s: serve 'ocr' declares idle_ttl_s, but its tier 'ocr-local' is not on demand for it in router.toml: only the router's acquisition of an on-demand tier takes an idle lease, so nothing would bring it down when idle; move idle_ttl_s to the serve the tier acquires, or add [tiers.on_demand] serve = \"ocr\"",
    ]);
  });

  test("a resident serve's tier without model_identity is a warning: serves down quiesces it, the next up readmits through the guard", () => {
    const config = okConfig(parseRouterConfig(routerText.replace(/(name = "fast-local"[^[]*?)model_identity = true\n/, '$1'), CFG));
    const issues = checkRouterAgainstManifest(config, CFG, manifest, MANIFEST);
    assert.deepEqual(routerCheckErrors(issues), []);
    assert.deepEqual(issues.map(formatIssue), [
      "router.toml: tiers[0].model_identity: tier 'fast-local' is backed by resident serve 'fast' (serves.toml) without model_identity = true: after `serves down fast` the tier stays quiesced and the guarded readmit of the next `serves up` will refuse with identity_not_configured",
    ]);
  });

  test("a served_model_name that differs from the serve's is an error; so is a router_tier the router config lacks", () => {
    const config = okConfig(
      parseRouterConfig(
        routerText
          .replace('served_model_name = "paddleocr-vl"', 'served_model_name = "paddleocr"')
          .replace(/\[\[tiers\]\]\nname = "reranker-local"[^[]*/, '')
          .replace(/\[\[presets\]\]\nname = "rerank"[^[]*/, ''),
        CFG,
      ),
    );
    const issues = checkRouterAgainstManifest(config, CFG, manifest, MANIFEST);
    assert.deepEqual(
      issues.map((i) => [i.severity, formatIssue(i)]),
      [
        [
          'error',
          "serves.toml: serves[2].router_tier: serve 'reranker' declares router_tier 'reranker-local', which is not a tier in router.toml: the router cannot route to it, quiesce it or readmit it, so serves down reranker would fail at its quiesce; fix the name, add the tier to router.toml, or remove router_tier",
        ],
        [
          'error',
          "router.toml: tiers[2].served_model_name: tier 'ocr-local' sends model 'paddleocr', but its serve 'ocr' (serves.toml) serves 'paddleocr-vl': routed requests would be rejected by the backend and a guarded readmit would refuse with identity_mismatch",
        ],
      ],
    );
  });

  test("a backend port that is not the serve's port is a warning", () => {
    const config = okConfig(parseRouterConfig(routerText.replace('http://127.0.0.1:30008', 'http://127.0.0.1:30009'), CFG));
    const issues = checkRouterAgainstManifest(config, CFG, manifest, MANIFEST);
    assert.deepEqual(routerCheckErrors(issues), []);
    assert.equal(issues.length, 1);
    assert.equal(issues[0]?.path, 'tiers[4].backend');
  });
});
