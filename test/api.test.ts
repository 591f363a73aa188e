// The acquisition API: the answers that never reach Temporal (auth, body and route errors, all in
// one error shape); its token rule; and, against a real dev server, `gpures api` as a real
// process printing what it actually bound, and a GET that shows only its own node's acquisitions.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { Client } from '@temporalio/client';
import type { InjectOptions } from 'fastify';
import { buildApi, MIN_API_TOKEN_CHARS } from '../src/client/api';
import { parseManifest } from '../src/config/manifest';
import { fetchHistoryJson } from '../src/audit/export';
import { buildReport } from '../src/audit/report';
import { WORD_JOINER } from '../src/domain/markdown';
import { SEARCH_ATTRIBUTES } from '../src/shared/run-tags';
import { NODE_ANSWER_MS, taskQueueFor, workflowIds } from '../src/shared/messages';
import { gpures, show } from './support/cli';
import { startApiProcess } from './support/api-process';
import type { ApiProcess } from './support/api-process';
import { testTemporal } from './support/temporal';
import type { TestTemporal } from './support/temporal';
import { uniqueNode } from './support/box';
import { rawConnection, trickle } from './support/raw-http';
import type { RawConnection } from './support/raw-http';

const file = resolve(__dirname, '..', '..', 'examples', 'primary-node', 'serves.toml');
const parsed = parseManifest(readFileSync(file, 'utf8'), file);
assert.ok(parsed.ok);
const TOKEN = 'api-test-token-0123456789abcdef-0123456789';
const auth = { authorization: `Bearer ${TOKEN}` };

describe('acquisition API without Temporal', () => {
  // A lazy client: none of these requests may reach it.
  const client = new Client();
  const api = buildApi({ client, manifest: parsed.manifest, manifestFile: file, token: TOKEN });
  after(async () => {
    await api.close();
    await client.connection.close();
  });

  test('no token, a wrong token: 401, and the token is compared whole', async () => {
    for (const headers of [{}, { authorization: `Bearer ${TOKEN.slice(0, -1)}` }, { authorization: `Bearer ${TOKEN}!` }, { authorization: TOKEN }]) {
      const r = await api.inject({ method: 'POST', url: '/v1/acquisitions', headers, payload: { serve: 'comfyui-sim', evict: true } });
      assert.equal(r.statusCode, 401);
      assert.deepEqual(r.json(), { error: { type: 'unauthorized', message: 'missing or wrong bearer token' } });
    }
  });

  test('bad bodies, unknown serves and routes answer in the API error shape', async () => {
    const cases: [InjectOptions, number, string, RegExp][] = [
      [
        { method: 'POST', url: '/v1/acquisitions', headers: auth, payload: { serve: 'comfyui-sim', evict: 'yes' } },
        400,
        'bad_request',
        /^evict: must be true or false \(got "yes"\)$/,
      ],
      // Each field in the API's own words, not zod's ("Invalid input: expected string, received undefined").
      [
        { method: 'POST', url: '/v1/acquisitions', headers: auth, payload: {} },
        400,
        'bad_request',
        /^serve: is required \(the name of a serve in the manifest\)$/,
      ],
      [
        { method: 'POST', url: '/v1/acquisitions', headers: { ...auth, 'content-type': 'application/json' }, payload: '[]' },
        400,
        'bad_request',
        /^body: must be a JSON object \(got an array\)$/,
      ],
      [
        { method: 'POST', url: '/v1/acquisitions', headers: auth, payload: { serve: {} } },
        400,
        'bad_request',
        /^serve: must be the name of a serve in the manifest \(got an object\)$/,
      ],
      [
        { method: 'POST', url: '/v1/acquisitions', headers: auth, payload: { serve: '', force: 1, trigger: 'cron' } },
        400,
        'bad_request',
        /^serve: must be the name of a serve in the manifest \(got ""\); force: must be true or false \(got 1\); trigger: must be "operator" or "router" \(got "cron"\)$/,
      ],
      // The workflow's spelling, and a typo: named as the manifest names an unknown key.
      [
        { method: 'POST', url: '/v1/acquisitions', headers: auth, payload: { serve: 'comfyui-sim', drainTimeoutS: 3 } },
        400,
        'bad_request',
        /^body: unknown key "drainTimeoutS" \(did you mean 'drain_timeout_s'\?\)$/,
      ],
      [
        { method: 'POST', url: '/v1/acquisitions', headers: auth, payload: { serve: 'comfyui-sim', evcit: true, colour: 'red' } },
        400,
        'bad_request',
        /^body: unknown key "evcit" \(did you mean 'evict'\?\); body: unknown key "colour" \(allowed keys: serve, evict, force, trigger, drain_timeout_s, lease_s\)$/,
      ],
      // Bounded as the CLI and the workflow bound it: refused before anything reaches Temporal.
      [
        {
          method: 'POST',
          url: '/v1/acquisitions',
          headers: { ...auth, 'content-type': 'application/json' },
          payload: '{"serve": "comfyui-sim", "evict": true, "drain_timeout_s": 1e300}',
        },
        400,
        'bad_request',
        /^drain_timeout_s: must be a whole number of seconds in 1\.\.3600 \(got 1e\+300\)$/,
      ],
      [
        { method: 'POST', url: '/v1/acquisitions', headers: auth, payload: { serve: 'comfyui-sim', drain_timeout_s: 0.5 } },
        400,
        'bad_request',
        /^drain_timeout_s: must be a whole number of seconds in 1\.\.3600 \(got 0\.5\)$/,
      ],
      [
        { method: 'POST', url: '/v1/acquisitions', headers: { ...auth, 'content-type': 'application/json' }, payload: '{"serve": ' },
        400,
        'bad_request',
        /JSON/i,
      ],
      [
        { method: 'POST', url: '/v1/acquisitions', headers: { ...auth, 'content-type': 'application/x-www-form-urlencoded' }, payload: 'serve=x' },
        415,
        'bad_request',
        /Unsupported Media Type/i,
      ],
      [{ method: 'POST', url: '/v1/acquisitions', headers: auth, payload: { serve: 'comfyui' } }, 404, 'unknown_serve', /no serve named 'comfyui'/],
      [
        { method: 'GET', url: '/v1/acquisitions/serves-up%2Fprimary-node%2Fvision', headers: auth },
        404,
        'not_found',
        /is not an acquisition of node 'primary-node'/,
      ],
      [{ method: 'GET', url: '/v1/acquisitions/acquire%2Fprimary-node', headers: auth }, 404, 'not_found', /is not an acquisition of node 'primary-node'/],
      [{ method: 'GET', url: '/v1/nothing', headers: auth }, 404, 'not_found', /no route GET \/v1\/nothing/],
    ];
    for (const [req, status, type, message] of cases) {
      const r = await api.inject(req);
      assert.equal(r.statusCode, status, r.body);
      const body = r.json<{ error: { type: string; message: string } }>();
      assert.equal(body.error.type, type, r.body);
      assert.match(body.error.message, message);
    }
  });

  test('a body trickled a byte at a time is cut within the request bound, also after a 401 for a wrong token; a whole request is answered', async () => {
    // Small, as an option: the production 60 s would make this test wait minutes.
    const boundMs = 400;
    const bounded = buildApi({ client, manifest: parsed.manifest, manifestFile: file, token: TOKEN, requestTimeoutMs: boundMs });
    const url = await bounded.listen({ host: '127.0.0.1', port: 0 });
    const post = (authorization: string, length: number) =>
      `POST /v1/acquisitions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: ${authorization}\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n`;
    const conns: RawConnection[] = [];
    const stops: (() => void)[] = [];
    try {
      for (const authorization of [`Bearer ${TOKEN}!`, `Bearer ${TOKEN}`]) {
        const c = await rawConnection(url);
        conns.push(c);
        c.write(post(authorization, 1000));
        stops.push(trickle(c, ' '.repeat(1000), 100));
      }
      const within = boundMs + 2000;
      const closed = await Promise.all(conns.map((c) => c.closed(within)));
      assert.deepEqual(
        closed.map((ms) => ms !== undefined),
        [true, true],
        `still open after ${within} ms (wrong token, right token): ${JSON.stringify(closed)}`,
      );
      assert.match(conns[0]?.received() ?? '', /^HTTP\/1\.1 401 /);
      // One answer: no 408 written after the 401 when the bound closes the connection.
      assert.equal(conns[0]?.received().match(/HTTP\/1\.1 /g)?.length, 1, conns[0]?.received());
      // The 408 in the API's shape, not fastify's (`"error":"Request Timeout"`).
      assert.match(
        conns[1]?.received() ?? '',
        /^HTTP\/1\.1 408 [^]*\r\n\r\n\{"error":\{"message":"the request did not arrive whole within 0\.4 s[^"]*","type":"request_timeout","code":"request_timeout"\}\}$/,
      );
      const whole = await fetch(`${url}/v1/acquisitions`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: '{"serve": "comfyui"}',
      });
      assert.equal(whole.status, 404);
    } finally {
      for (const stop of stops) stop();
      for (const c of conns) c.destroy();
      await bounded.close();
    }
  });

  test("a request on a kept-alive connection while the API closes: 503 with Retry-After in the API's shape, the connection closed", async () => {
    const closing = buildApi({ client, manifest: parsed.manifest, manifestFile: file, token: TOKEN });
    const url = await closing.listen({ host: '127.0.0.1', port: 0 });
    const conn = await rawConnection(url);
    let closed: Promise<void> | undefined;
    try {
      // A request under way when the close begins (its body still to come), so its connection is not idle and stays open.
      const body = '{"serve": "comfyui"}';
      conn.write(
        `POST /v1/acquisitions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${TOKEN}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`,
      );
      await new Promise((r) => setTimeout(r, 200));
      closed = closing.close();
      conn.write(body);
      await new Promise((r) => setTimeout(r, 300));
      assert.match(conn.received(), /^HTTP\/1\.1 404 /, 'the request under way is answered');
      conn.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
      assert.ok((await conn.closed(5000)) !== undefined, 'the connection still open after the answer while closing');
      const text = conn.received();
      const second = text.slice(text.lastIndexOf('HTTP/1.1 '));
      assert.match(second, /^HTTP\/1\.1 503 /, text);
      assert.match(second, /\r\nretry-after: 5\r\n/i);
      assert.match(second, /\r\nconnection: close\r\n/i);
      assert.deepEqual(JSON.parse(second.slice(second.indexOf('\r\n\r\n') + 4)), {
        error: {
          type: 'shutting_down',
          code: 'shutting_down',
          message: 'the acquisition API is shutting down; send the request again once it is back',
          retry_after_s: 5,
        },
      });
    } finally {
      conn.destroy();
      await (closed ?? closing.close());
    }
  });

  test(`a token shorter than ${MIN_API_TOKEN_CHARS} characters is refused, naming the minimum`, () => {
    const client2 = new Client();
    try {
      assert.throws(
        () => buildApi({ client: client2, manifest: parsed.manifest, manifestFile: file, token: 'x'.repeat(MIN_API_TOKEN_CHARS - 1) }),
        /31 characters, too short to be secret: at least 32/,
      );
      assert.throws(() => buildApi({ client: client2, manifest: parsed.manifest, manifestFile: file, token: '' }), /GPURES_API_TOKEN is not set/);
    } finally {
      void client2.connection.close();
    }
  });

  test('gpures api with a short token: exit 2, the minimum named, before Temporal is asked', async () => {
    // TEMPORAL_ADDRESS points nowhere: a refusal after connecting would be exit 4, not 2.
    const r = await gpures(['api', '--manifest', file, '--port', '0'], { GPURES_API_TOKEN: 's3cret', TEMPORAL_ADDRESS: '127.0.0.1:1' });
    assert.equal(r.code, 2, show(r));
    assert.match(r.stderr, /GPURES_API_TOKEN is 6 characters, too short to be secret: at least 32 are required/);
    assert.ok(!r.stderr.includes('s3cret') && !r.stdout.includes('s3cret'), 'the token is printed');
  });
});

/** The local addresses listening on `port`, from the kernel's own tables (what `ss -ltn` reads). */
function listeningOn(port: number): string[] {
  const out: string[] = [];
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(table, 'utf8').trim().split('\n').slice(1)) {
      const [, local, , state] = line.trim().split(/\s+/);
      const [hex, portHex] = (local ?? '').split(':');
      if (state !== '0A' || Number.parseInt(portHex ?? '', 16) !== port || !hex) continue;
      if (hex.length === 8)
        out.push(
          (hex.match(/../g) ?? [])
            .reverse()
            .map((b) => Number.parseInt(b, 16))
            .join('.'),
        );
      else out.push(/^0+$/.test(hex) ? '::' : `ipv6:${hex}`);
    }
  }
  return out.sort();
}

describe('acquisition API against a real dev server', () => {
  let temporal: TestTemporal;
  const node = uniqueNode('api');
  const other = uniqueNode('api-other');
  const manifest = { ...parsed.manifest, node };
  const otherId = workflowIds.acquire(other, 'comfyui-sim');

  before(async () => {
    temporal = await testTemporal();
    // Another node's acquisition, left running: no worker polls that node's queue.
    await temporal.client.workflow.start('acquireWorkflow', {
      workflowId: otherId,
      taskQueue: taskQueueFor(other),
      args: [{ serve: 'comfyui-sim', evict: true }],
    });
  });

  after(async () => {
    await temporal.client.workflow
      .getHandle(otherId)
      .terminate('test over')
      .catch(() => undefined);
    await temporal?.close();
  });

  test("GET of another node's acquisition: 404, as one never started; its own node's API sees it", async () => {
    const path = `/v1/acquisitions/${encodeURIComponent(otherId)}`;
    const mine = buildApi({ client: temporal.client, manifest, manifestFile: file, token: TOKEN });
    const theirs = buildApi({ client: temporal.client, manifest: { ...manifest, node: other }, manifestFile: file, token: TOKEN });
    try {
      const r = await mine.inject({ method: 'GET', url: path, headers: auth });
      assert.equal(r.statusCode, 404, r.body);
      assert.deepEqual(r.json(), { error: { type: 'not_found', message: `${otherId} is not an acquisition of node '${node}'` } });
      const seen = await theirs.inject({ method: 'GET', url: path, headers: auth });
      assert.equal(seen.statusCode, 200, seen.body);
      assert.equal(seen.json<{ status: string }>().status, 'running');
    } finally {
      await mine.close();
      await theirs.close();
    }
  });

  test("GET of an acquisition whose node's worker ran its first task and is gone: running, no progress, within the answer bound", async () => {
    const dead = uniqueNode('api-dead');
    const id = workflowIds.acquire(dead, 'comfyui-sim');
    const { client } = temporal;
    const started = await client.workflow.start('acquireWorkflow', {
      workflowId: id,
      taskQueue: taskQueueFor(dead),
      args: [{ serve: 'comfyui-sim', evict: true }],
    });
    const api = buildApi({ client, manifest: { ...manifest, node: dead }, manifestFile: file, token: TOKEN });
    try {
      // What a worker that ran the first task and was killed leaves: the task answered (with no
      // command: the workflow waits) and its poller listed for minutes, so a query waits for it.
      const task = await client.withDeadline(Date.now() + 10_000, () =>
        client.workflowService.pollWorkflowTaskQueue({
          namespace: client.options.namespace,
          taskQueue: { name: taskQueueFor(dead) },
          identity: 'a worker that died',
        }),
      );
      assert.ok(task.taskToken?.length, 'the first workflow task was polled');
      await client.workflowService.respondWorkflowTaskCompleted({
        namespace: client.options.namespace,
        taskToken: task.taskToken,
        identity: 'a worker that died',
      });
      const t0 = Date.now();
      const r = await api.inject({ method: 'GET', url: `/v1/acquisitions/${encodeURIComponent(id)}`, headers: auth });
      const ms = Date.now() - t0;
      console.log(`GET with ${dead}'s worker gone: ${r.statusCode} after ${(ms / 1000).toFixed(2)} s`);
      assert.equal(r.statusCode, 200, r.body);
      assert.deepEqual(r.json(), { workflow_id: id, run_id: started.firstExecutionRunId, status: 'running' });
      // The progress query's bound and a loaded machine's slack: generous, never the RPC's own timeout.
      assert.ok(ms < NODE_ANSWER_MS + 10_000, `took ${ms} ms`);
    } finally {
      await api.close();
      await started.terminate('test over').catch(() => undefined);
    }
  });

  async function startApi(args: string[]): Promise<ApiProcess> {
    const api = await startApiProcess(file, args, { GPURES_API_TOKEN: TOKEN, TEMPORAL_ADDRESS: temporal.address });
    assert.ok(!api.stderr().includes(TOKEN), 'the token is printed');
    return api;
  }

  test('gpures api prints the address it bound: loopback by default, and 0.0.0.0 as every interface', async () => {
    for (const [args, host, note] of [
      [[], '127.0.0.1', ''],
      [['--host', '0.0.0.0', '--allow-non-loopback'], '0.0.0.0', ' (every IPv4 interface: reachable beyond this host)'],
    ] as const) {
      const api = await startApi([...args]);
      try {
        const m = /^http:\/\/([\d.]+):(\d+)(.*)$/.exec(api.printed);
        assert.ok(m, api.printed);
        assert.equal(m[1], host, api.printed);
        assert.equal(m[3], note);
        const port = Number(m[2]);
        assert.deepEqual(listeningOn(port), [host], `printed ${api.printed}`);
        // It answers there, as the API.
        const res = await fetch(`http://127.0.0.1:${port}/v1/acquisitions/nope`, { headers: auth });
        assert.equal(res.status, 404);
      } finally {
        assert.equal(await api.stop(), 0);
      }
    }
  });

  test('a run gpures api starts names it: identity gpures-api/<pid>@<host>, caller API; tagged, its summary escaped for the UI', async () => {
    const api = await startApi([]);
    const port = Number(/:(\d+)/.exec(api.printed)?.[1]);
    const id = workflowIds.acquire(parsed.manifest.node, 'comfyui-sim');
    try {
      const res = await fetch(`http://127.0.0.1:${port}/v1/acquisitions`, {
        method: 'POST',
        headers: { ...auth, 'content-type': 'application/json' },
        body: JSON.stringify({ serve: 'comfyui-sim', evict: true }),
      });
      assert.equal(res.status, 202, await res.clone().text());
      const runId = ((await res.json()) as { run_id: string }).run_id;
      const report = buildReport(await fetchHistoryJson(temporal.client, id, runId));
      assert.equal(report.workflow.startedBy.caller, 'API');
      assert.match(report.workflow.startedBy.identity, /^gpures-api\/\d+@/);
      const d = await temporal.client.workflow.getHandle(id, runId).describe();
      assert.equal((await d.staticSummary())?.replaceAll(WORD_JOINER, ''), `serves up comfyui-sim --evict (acquisition API) on ${parsed.manifest.node}`);
      assert.equal(d.typedSearchAttributes.get(SEARCH_ATTRIBUTES.operation), 'serves up');
      assert.equal(d.typedSearchAttributes.get(SEARCH_ATTRIBUTES.serve), 'comfyui-sim');
    } finally {
      await temporal.client.workflow
        .getHandle(id)
        .terminate('test over')
        .catch(() => undefined);
      assert.equal(await api.stop(), 0);
    }
  });

  test('gpures api --host beyond loopback without --allow-non-loopback: exit 2', async () => {
    const r = await gpures(['api', '--manifest', file, '--host', '0.0.0.0', '--port', '0'], { GPURES_API_TOKEN: TOKEN, TEMPORAL_ADDRESS: temporal.address });
    assert.equal(r.code, 2, show(r));
    assert.match(r.stderr, /--host 0\.0\.0\.0 is not a loopback address.*--allow-non-loopback/);
  });
});
