// What the Temporal UI shows of a run, on a real dev server with its UI (the CLI's `start-dev`):
// summaries escaped by literalMarkdown render as written through the UI server's own markdown
// (/render, SmartyPants on), and on a namespace WITHOUT the project's search attributes a run
// started from the UI's form is never stuck by its tagging: it runs untagged, and once they are
// registered the next run is tagged (src/workflows/run-tags.ts).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { NativeConnection } from '@temporalio/worker';
import { fetchHistoryJson } from '../src/audit/export';
import { eventAttributes, eventTypeName } from '../src/audit/events';
import { buildReport } from '../src/audit/report';
import { path } from '../src/audit/report/read';
import { registerSearchAttributes } from '../src/client/search-attributes';
import { waitForServer } from '../src/dev/dev-server';
import { DEV_SERVER } from '../src/dev/toolchain';
import { literalMarkdown, WORD_JOINER } from '../src/domain/markdown';
import { taskQueueFor, workflowIds } from '../src/shared/messages';
import { renderManifest, uniqueNode } from './support/box';
import { freePort, installTestRuntime, temporalCliPath } from './support/temporal';
import type { TestTemporal } from './support/temporal';
import { waitFor } from './support/wait';
import { startTestWorker } from './support/worker';
import type { TestWorker } from './support/worker';

describe('literalMarkdown', () => {
  test('escapes only what the markdown would change', () => {
    const cases: [string, string][] = [
      ['serves up comfyui-sim --evict --force on primary-node', 'serves up comfyui-sim -\u2060-evict -\u2060-force on primary-node'],
      ['a --- b', 'a -\u2060-\u2060- b'],
      ['wait... or . . .', 'wait.\\.\\. or . \\. \\.'],
      ['(c) (TM) (r) (x)', '\\(c) \\(TM) \\(r) (x)'],
      ['1/2 and v1/2', '1&#47;2 and v1/2'],
      ['*a* _b_ gpu_role x_', '\\*a\\* \\_b\\_ gpu_role x\\_'],
      ['`k` [l](u) <b> a & b ~~s~~ a|b', '\\`k\\` \\[l\\](u) \\<b\\> a \\& b \\~\\~s\\~\\~ a\\|b'],
      ['http://x mailto:me', 'http\\://x mailto\\:me'],
      ['# h', '\\# h'],
      ['- x', '\\- x'],
      ['+ x', '\\+ x'],
      ['12. x', '12\\. x'],
      ['3) x', '3\\) x'],
      ['> q', '\\> q'],
      ['a\\b', 'a\\\\b'],
      ['    indented', 'indented'],
      ['router promote router: ghcr.io/org/router:1.2 (validate only) on n', 'router promote router: ghcr.io/org/router:1.2 (validate only) on n'],
    ];
    for (const [text, escaped] of cases) assert.equal(literalMarkdown(text), escaped, text);
  });

  test('an operation summary reads as typed where it is shown raw (temporal workflow describe)', () => {
    // A terminal draws the word joiner as nothing; a backslash it draws.
    for (const text of [
      'serves up comfyui-sim --evict --force --lease 2 h on primary-node',
      'serves down comfyui-sim --restore (lease expired) on primary-node',
      'serves up vision --evict (acquisition API, for the router) on primary-node',
    ])
      assert.equal(shownRaw(literalMarkdown(text)), text);
  });
});

/** What a terminal or a browser draws of a text: the word joiner is not drawn. */
function shownRaw(text: string): string {
  return text.replaceAll(WORD_JOINER, '');
}

/** `temporal server start-dev` with its UI and the project's dynamic config, but none of our search attributes. */
async function startBareDevServer(): Promise<{ address: string; uiUrl: string; child: ChildProcess }> {
  const port = await freePort();
  const uiPort = await freePort();
  const address = `${DEV_SERVER.ip}:${port}`;
  const args = ['server', 'start-dev', '--ip', DEV_SERVER.ip, '--port', String(port), '--ui-port', String(uiPort), '--log-level', DEV_SERVER.logLevel];
  for (const setting of DEV_SERVER.dynamicConfig) args.push('--dynamic-config-value', setting);
  const child = spawn(temporalCliPath(), args, { stdio: ['ignore', 'ignore', 'inherit'] });
  process.once('exit', () => child.kill('SIGKILL'));
  await waitForServer(address, child, 60_000);
  const uiUrl = `http://${DEV_SERVER.ip}:${uiPort}`;
  await waitFor('the dev server UI', async () => ((await fetch(uiUrl)).ok ? true : undefined), 30_000, 200);
  return { address, uiUrl, child };
}

/** The innermost cause's message: a workflow's failure wraps the activity's. */
function rootMessage(err: unknown): string {
  let e = err as Error | undefined;
  while (e?.cause instanceof Error) e = e.cause;
  return String(e?.message);
}

/** The run fails, and its innermost cause says why. */
async function failsWith(result: Promise<unknown>, why: RegExp): Promise<void> {
  const err = await result.then(
    () => assert.fail('the run completed'),
    (e: unknown) => e,
  );
  assert.match(rootMessage(err), why);
}

/** The text a browser shows of the UI server's rendering of `content`. */
async function rendered(uiUrl: string, content: string): Promise<string> {
  const html = await (await fetch(`${uiUrl}/render?${new URLSearchParams({ content, theme: 'light' }).toString()}`)).text();
  const main = /<main>([\s\S]*)<\/main>/.exec(html)?.[1] ?? '';
  const named: Record<string, string> = {
    amp: '&',
    lt: '<',
    gt: '>',
    quot: '"',
    ndash: '–',
    mdash: '—',
    hellip: '…',
    lsquo: '‘',
    rsquo: '’',
    ldquo: '“',
    rdquo: '”',
  };
  return main
    .replace(/<[^>]*>/g, '')
    .replace(/&#(\d+);/g, (_m, n: string) => String.fromCodePoint(Number(n)))
    .replace(/&([a-z]+);/g, (m, n: string) => named[n] ?? m)
    .trim();
}

/** A run started the way the UI's "Start workflow" form starts it: the UI server's HTTP API, its CSRF cookie, no identity. */
async function startFromUi(uiUrl: string, workflowId: string, taskQueue: string, workflowType: string, input: unknown): Promise<string> {
  const page = await fetch(`${uiUrl}/namespaces/default/workflows`);
  const cookie = (page.headers.get('set-cookie') ?? '').split(';')[0] ?? '';
  const token = cookie.replace(/^_csrf=/, '');
  const b64 = (s: string) => Buffer.from(s).toString('base64');
  const res = await fetch(`${uiUrl}/api/v1/namespaces/default/workflows/${encodeURIComponent(workflowId)}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', cookie, 'x-csrf-token': token },
    body: JSON.stringify({
      workflowId,
      taskQueue: { name: taskQueue },
      workflowType: { name: workflowType },
      input: { payloads: [{ metadata: { encoding: b64('json/plain') }, data: b64(JSON.stringify(input)) }] },
      userMetadata: {},
      searchAttributes: null,
    }),
  });
  const body = (await res.json()) as { runId?: string; message?: string };
  assert.ok(res.ok && body.runId, `UI start: ${res.status} ${JSON.stringify(body)}`);
  return body.runId;
}

describe('the Temporal UI, on a namespace without the search attributes', () => {
  let server: Awaited<ReturnType<typeof startBareDevServer>>;
  let temporal: TestTemporal;
  let worker: TestWorker;
  const node = uniqueNode('bare');
  before(async () => {
    installTestRuntime();
    server = await startBareDevServer();
    const connection = await Connection.connect({ address: server.address });
    const nativeConnection = await NativeConnection.connect({ address: server.address });
    temporal = {
      address: server.address,
      client: new Client({ connection, namespace: 'default' }),
      nativeConnection,
      async close() {
        await nativeConnection.close();
        await connection.close();
      },
    };
    const dir = mkdtempSync(join(tmpdir(), 'gpures-bare-'));
    const manifest = join(dir, 'serves.toml');
    writeFileSync(manifest, renderManifest(node, [{ role: 'main', capacity_mib: 24576, reserve_mib: 1024 }], [{ name: 'vision', vram_mib: 8192 }]));
    worker = await startTestWorker({ temporal, node, manifest });
  });
  after(async () => {
    await worker?.stop();
    await temporal?.close();
    if (server && server.child.exitCode === null) {
      const exited = new Promise((r) => server.child.once('exit', r));
      server.child.kill('SIGTERM');
      await exited;
    }
  });

  test('summaries escaped by literalMarkdown render as written; unescaped, the UI changes them', async () => {
    const texts = [
      'serves up comfyui-sim --evict --force --lease 2 h on primary-node',
      'serves up comfyui-sim --evict (acquisition API, for the router) on primary-node',
      'serves down comfyui-sim --restore (lease expired) on primary-node',
      'router promote router: ghcr.io/org/router:1.2 (validate only) on primary-node',
      'ledger of gpu_role dark_fast on primary-node',
      'a --- b ... c . . . d (c) (tm) 1/2 *e* _f_ `g` [h](i) <b>j</b> ~~k~~ http://l.m a\\b & n',
      '# heading',
      '- item',
      '1. item',
      '> quote',
    ];
    for (const text of texts) assert.equal(shownRaw(await rendered(server.uiUrl, literalMarkdown(text))), text);
    // The same texts as they were sent before: the UI made en dashes of `--evict`, and more.
    assert.equal(await rendered(server.uiUrl, texts[0] ?? ''), 'serves up comfyui-sim –evict –force –lease 2 h on primary-node');
    // What cannot be escaped: SmartyPants curls a straight quote however it is written.
    assert.equal(await rendered(server.uiUrl, literalMarkdown("gpu_role 'main'")), 'gpu_role ‘main’');
  });

  test('a run started from the UI form runs untagged rather than stuck; registered, the next run is tagged and found', async () => {
    const workflowId = workflowIds.bringUp(node, 'ghost');
    const runId = await startFromUi(server.uiUrl, workflowId, taskQueueFor(node), 'bringUpWorkflow', { serve: 'ghost' });
    // A serve the manifest lacks: the run fails at once, after its tagging, which must not hold it.
    await failsWith(temporal.client.workflow.getHandle(workflowId, runId).result(), /no serve named 'ghost'/);
    const h = await fetchHistoryJson(temporal.client, workflowId, runId);
    const types = h.events.map((e) => eventTypeName(String(e.eventType)));
    assert.ok(!types.includes('WorkflowTaskFailed'), types.join(', '));
    const upserted = h.events
      .filter((e) => eventTypeName(String(e.eventType)) === 'UpsertWorkflowSearchAttributes')
      .flatMap((e) => Object.keys((path(eventAttributes(e), 'searchAttributes', 'indexedFields') as object | undefined) ?? {}));
    assert.deepEqual(
      upserted.filter((k) => k.startsWith('Gpures')),
      [],
    );
    assert.ok(types.includes('MarkerRecorded'), 'the local activity that asked which are registered');
    const report = buildReport(h);
    assert.deepEqual(report.workflow.startedBy, { caller: 'UI', identity: '' });

    assert.deepEqual((await registerSearchAttributes(temporal.client)).sort(), ['GpuresNode', 'GpuresOperation', 'GpuresServe', 'GpuresVictims']);
    const second = await startFromUi(server.uiUrl, workflowId, taskQueueFor(node), 'bringUpWorkflow', { serve: 'ghost' });
    await failsWith(temporal.client.workflow.getHandle(workflowId, second).result(), /no serve named 'ghost'/);
    await waitFor(
      `GpuresServe = 'ghost' to list run ${second}`,
      async () => {
        for await (const w of temporal.client.workflow.list({ query: `GpuresServe = 'ghost' AND GpuresNode = '${node}' AND GpuresOperation = 'serves up'` })) {
          if (w.runId === second) return true;
        }
        return undefined;
      },
      15_000,
      200,
    );
  });
});
