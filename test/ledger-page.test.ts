// The ledger page in a real headless Chromium (Debian's, driven by playwright-core), served by
// `gpures api` as a process over a simulated box: its bars, serves and operations are what
// `gpures ledger --json` and `gpures serves status --json` print, it follows the box live (an
// eviction held mid-drain, then finished) without a reload, says when its data is stale, and
// bound beyond loopback it shows nothing without the API token. A screenshot is kept.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http2';
import type { ServerHttp2Stream } from 'node:http2';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { Client, Connection, WorkflowNotFoundError } from '@temporalio/client';
import { buildApi } from '../src/client/api';
import { temporalUiLink } from '../src/client/ledger-page';
import { loopbackHost } from '../src/adapters/loopback-host';
import { serveAcquire, serveUp } from '../src/client/operations';
import type { OperationOutcome } from '../src/client/operations';
import { parseManifest } from '../src/config/manifest';
import { renderManifest } from './support/box';
import type { TestServe } from './support/box';
import { FAKE_NVIDIA_SMI } from '../src/sim/box';
import { workflowIds } from '../src/shared/messages';
import type { AcquireResult } from '../src/shared/operations';
import { startApiProcess } from './support/api-process';
import type { ApiProcess } from './support/api-process';
import { launchChromium } from './support/chromium';
import { httpGet } from './support/raw-http';
import type { TestBrowser } from './support/chromium';
import { gpures, ROOT, show } from './support/cli';
import { startSimTestBox } from './support/sim';
import type { SimTestBox } from './support/sim';
import { waitFor, waitUntil } from './support/wait';

const TOKEN = 'ledger-page-test-token-0123456789abcdef';
const UI = 'http://127.0.0.1:8233';
/** Where the screenshot is kept (git-ignored). */
export const SCREENSHOT = join(ROOT, 'test-artifacts', 'ledger-page.png');

const GPU = { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 };
const SERVES: TestServe[] = [
  { name: 'fast', vram_mib: 14336, router_tier: 'fast-local' },
  { name: 'vision', vram_mib: 12288, class: 'evictable', served_model_name: 'qwen3-vl-4b-instruct', router_tier: 'vision-local' },
  { name: 'comfyui-sim', vram_mib: 8192, class: 'on-demand' },
];

/** A reservation and a ledger as `gpures ledger --json` prints them (the fields compared). */
interface CliReservation {
  serve: string;
  vramMib: number;
  class: string;
  phase: string;
  holder: string;
}
interface CliLedger {
  gpuRole: string;
  capacityMib: number;
  reserveMib: number;
  committedMib: number;
  heldMib: number;
  freeMib: number;
  reservations: CliReservation[];
  physical: { usedMib: number; nonLedgerDrawMib: number; nonLedgerDrawMinMib: number; inFlux: { serve: string; phase: string }[] } | null;
}

/** What the page shows, read from its DOM. */
interface Shown {
  gpus: { role: string; figures: Record<string, number>; segments: { kind: string; serve: string | null; mib: number }[] }[];
  serves: { serve: string; class: string; phase: string; vram: string }[];
  operations: { workflowId: string; href: string }[];
  status: string;
  text: string;
}

/** Read in the page (the tests are compiled without the DOM's types, so it is a script text). */
const READ_PAGE = `(() => {
  const num = (e) => Number(e.getAttribute('data-mib'));
  const gpus = [...document.querySelectorAll('.gpu')].map((g) => ({
    role: g.getAttribute('data-gpu-role') || '',
    figures: Object.fromEntries([...g.querySelectorAll('[data-figure][data-mib]')].map((f) => [f.getAttribute('data-figure'), num(f)])),
    segments: [...g.querySelectorAll('.bar .seg')].map((s) => ({ kind: s.getAttribute('data-kind'), serve: s.getAttribute('data-serve'), mib: num(s) })),
  }));
  const cell = (r, col) => (r.querySelector('[data-col="' + col + '"]') || {}).textContent || '';
  const serves = [...document.querySelectorAll('#serves tr[data-serve]')].map((r) => ({
    serve: r.getAttribute('data-serve'), class: cell(r, 'class'), phase: cell(r, 'phase'), vram: cell(r, 'vram'),
  }));
  const operations = [...document.querySelectorAll('#operations tr[data-workflow-id]')].map((r) => ({
    workflowId: r.getAttribute('data-workflow-id'), href: (r.querySelector('a') || { getAttribute: () => '' }).getAttribute('href'),
  }));
  return { gpus, serves, operations, status: document.getElementById('status').getAttribute('data-state'), text: document.body.innerText };
})()`;

async function shown(page: Page): Promise<Shown> {
  return page.evaluate<Shown>(READ_PAGE);
}

/** The page's figures and serves equal the CLI's ledger, GPU by GPU and reservation by reservation. */
function assertSameAsCli(page: Shown, cli: CliLedger[]): void {
  assert.deepEqual(
    page.gpus.map((g) => g.role),
    cli.map((l) => l.gpuRole),
  );
  for (const l of cli) {
    const g = page.gpus.find((x) => x.role === l.gpuRole);
    assert.ok(g);
    assert.ok(l.physical, 'the CLI read the fake nvidia-smi');
    assert.deepEqual(g.figures, {
      capacity: l.capacityMib,
      committed: l.committedMib,
      held: l.heldMib,
      free: Math.max(0, l.freeMib),
      reserve: l.reserveMib,
      'nvidia-smi-used': l.physical.usedMib,
      'non-ledger-draw': l.physical.nonLedgerDrawMib,
      // A serve in flux makes the draw a range: its least beside it, as the CLI prints it.
      ...(l.physical.inFlux.length ? { 'non-ledger-draw-least': l.physical.nonLedgerDrawMinMib } : {}),
    });
    // The bar: a segment per reservation holding MiB (committed or held), then free and reserve.
    const holding = l.reservations.filter((r) => r.phase !== 'evicted');
    assert.deepEqual(
      g.segments.filter((s) => s.serve !== null).map((s) => [s.serve, s.mib, s.kind]),
      holding.map((r) => [r.serve, r.vramMib, r.phase === 'pending' ? 'held' : r.phase === 'evicting' ? 'evicting' : 'committed']),
    );
    assert.deepEqual(
      g.segments.filter((s) => s.serve === null).map((s) => [s.kind, s.mib]),
      [
        ['free', Math.max(0, l.freeMib)],
        ['reserve', l.reserveMib],
      ],
    );
    for (const r of l.reservations) {
      assert.deepEqual(
        page.serves.find((s) => s.serve === r.serve),
        { serve: r.serve, class: r.class, phase: r.phase, vram: `${r.vramMib} MiB` },
      );
    }
  }
  assert.doesNotMatch(page.text, /-\d+ MiB/, 'a negative figure in the text');
}

/** GET with a Host of our choosing (fetch may not set it): the status code and the body. */
async function getStatus(port: number, path: string, headers: Record<string, string>): Promise<number> {
  return (await httpGet(port, path, headers)).status;
}

describe('the ledger page without Temporal', () => {
  const text = renderManifest('page-unit', [GPU], SERVES);
  const parsed = parseManifest(text, 'serves.toml');
  assert.ok(parsed.ok);
  // A lazy client: none of these requests may reach it.
  const client = new Client();
  const open = buildApi({ client, manifest: parsed.manifest, manifestFile: 'serves.toml', token: TOKEN, loopbackOnly: true });
  const closed = buildApi({ client, manifest: parsed.manifest, manifestFile: 'serves.toml', token: TOKEN });
  after(async () => {
    await open.close();
    await closed.close();
    await client.connection.close();
  });

  test('a loopback Host is a loopback name with or without its port; a Temporal UI link encodes the workflow id', () => {
    for (const host of ['127.0.0.1:8420', '127.0.0.1', '[::1]:8420', 'localhost:8420', 'LOCALHOST']) assert.equal(loopbackHost(host), true, host);
    for (const host of [undefined, '', 'rebound.example:8420', '10.0.0.1:8420', '[::2]:8420', '127.0.0.1.example', '0.0.0.0:8420'])
      assert.equal(loopbackHost(host), false, String(host));
    assert.equal(
      temporalUiLink(UI, 'default', 'acquire/box/comfyui-sim', 'r-1'),
      'http://127.0.0.1:8233/namespaces/default/workflows/acquire%2Fbox%2Fcomfyui-sim/r-1',
    );
  });

  test('the document: no data in it, inline style and script allowed by hash only, never cached', async () => {
    const r = await closed.inject({ method: 'GET', url: '/ledger' });
    assert.equal(r.statusCode, 200);
    assert.match(String(r.headers['content-type']), /^text\/html/);
    assert.equal(r.headers['cache-control'], 'no-store');
    const csp = String(r.headers['content-security-policy']);
    assert.match(csp, /default-src 'none'/);
    assert.match(csp, /script-src 'sha256-[A-Za-z0-9+/=]+'(;|$)/);
    assert.doesNotMatch(csp, /unsafe-inline/);
    assert.ok(!r.body.includes('page-unit') && !r.body.includes('vision'), 'the document carries data');
    assert.doesNotMatch(r.body, /<(script|link|img)[^>]+(src|href)=/, 'the document loads something');
  });

  test('its JSON: 401 without the token unless loopback-only and asked by a loopback name; the acquisitions still need the token', async () => {
    assert.equal((await closed.inject({ method: 'GET', url: '/v1/ledger', headers: { host: '127.0.0.1:8090' } })).statusCode, 401);
    assert.equal((await closed.inject({ method: 'GET', url: '/v1/ledger', headers: { authorization: `Bearer ${TOKEN}x` } })).statusCode, 401);
    const post = await open.inject({ method: 'POST', url: '/v1/acquisitions', headers: { host: '127.0.0.1:8090' }, payload: { serve: 'comfyui-sim' } });
    assert.equal(post.statusCode, 401);
  });

  test('loopback-only, a Host that is not a loopback name (DNS rebinding) gets 421 and the loopback URL on every route, token or not: never the page', async () => {
    for (const [method, url] of [
      ['GET', '/ledger'],
      ['GET', '/v1/ledger'],
      ['GET', '/healthz'],
      ['GET', '/metrics'],
      ['POST', '/v1/acquisitions'],
      ['GET', '/v1/acquisitions/acquire%2Fpage-unit%2Fcomfyui-sim'],
    ] as const) {
      for (const headers of [{ host: 'rebound.example:8090' }, { host: 'rebound.example:8090', authorization: `Bearer ${TOKEN}` }, { host: '10.0.0.1:8090' }]) {
        const r = await open.inject({ method, url, headers, ...(method === 'POST' ? { payload: { serve: 'comfyui-sim' } } : {}) });
        assert.equal(r.statusCode, 421, `${method} ${url} ${JSON.stringify(headers)}`);
        assert.match(String(r.headers['content-type']), /^text\/plain/);
        assert.equal(
          r.body,
          `This API listens on loopback only and answers only to a loopback name (127.0.0.1, ::1, localhost): open http://127.0.0.1:8090${url}\n`,
        );
        assert.doesNotMatch(r.body, /token/i);
      }
    }
    // A loopback name still gets the page; bound beyond loopback, any Host does (the token guards the figures).
    assert.equal((await open.inject({ method: 'GET', url: '/ledger', headers: { host: 'localhost:8090' } })).statusCode, 200);
    assert.equal((await closed.inject({ method: 'GET', url: '/ledger', headers: { host: 'box.example:8090' } })).statusCode, 200);
  });

  test('a read that does not finish within its deadline answers 503 naming the parts that did not answer, and the next poll reads afresh', async () => {
    // A Temporal address that takes every call and never answers one (an HTTP/2 server that holds its streams).
    const held: ServerHttp2Stream[] = [];
    const hole = createServer();
    hole.on('stream', (stream) => held.push(stream));
    await new Promise<void>((ok) => hole.listen(0, '127.0.0.1', ok));
    const address = hole.address();
    assert.ok(address && typeof address === 'object');
    const silent = new Client({ connection: Connection.lazy({ address: `127.0.0.1:${address.port}` }) });
    const api = buildApi({
      client: silent,
      manifest: parsed.manifest,
      manifestFile: 'serves.toml',
      token: TOKEN,
      loopbackOnly: true,
      ledgerPage: { readDeadlineMs: 300, nvidiaSmi: FAKE_NVIDIA_SMI },
    });
    try {
      for (let poll = 1; poll <= 2; poll++) {
        const r = await api.inject({ method: 'GET', url: '/v1/ledger', headers: { host: '127.0.0.1:8090' } });
        assert.equal(r.statusCode, 503, r.body);
        const { error } = JSON.parse(r.body) as { error: { type: string; message: string } };
        assert.equal(error.type, 'unavailable');
        assert.match(error.message, /^the ledger could not be read within 0\.3 s: .*did not answer$/);
        for (const part of ["the ledgers of node 'page-unit'", 'the leases', 'the operations running (visibility)'])
          assert.ok(error.message.includes(part), error.message);
      }
      assert.throws(
        () => buildApi({ client: silent, manifest: parsed.manifest, manifestFile: 'f', token: TOKEN, ledgerPage: { readDeadlineMs: 15_000 } }),
        /readDeadlineMs/,
      );
    } finally {
      await api.close();
      // The API's close waited for the reads it gave up on: no call is left on the connection.
      await silent.connection.close();
      for (const s of held) s.close();
      await new Promise((ok) => hole.close(ok));
    }
  });
});

describe('the ledger page in headless Chromium over a simulated box', () => {
  let t: SimTestBox;
  let browser: TestBrowser;
  let api: ApiProcess;
  let page: Page;
  let env: Record<string, string>;
  let base: string;
  /** Script errors in the page: none is expected. */
  const pageErrors: string[] = [];

  before(async () => {
    t = await startSimTestBox('page', [GPU], SERVES);
    env = {
      TEMPORAL_ADDRESS: t.temporal.address,
      GPURES_NVIDIA_SMI: FAKE_NVIDIA_SMI,
      FAKE_NVIDIA_SMI_STATE: t.box.nvidiaSmiStatePath,
      GPURES_API_TOKEN: TOKEN,
      GPURES_TEMPORAL_UI_URL: UI,
    };
    browser = await launchChromium();
    api = await startApiProcess(t.manifestPath, [], env);
    base = `http://127.0.0.1:${api.port}`;
    page = await browser.context.newPage();
    page.on('pageerror', (err) => pageErrors.push(err.message));
  });

  after(async () => {
    await api?.stop();
    await browser?.close();
    await t?.close();
  });

  async function cliLedger(): Promise<CliLedger[]> {
    const r = await gpures(['ledger', '--json', '--manifest', t.manifestPath], env);
    assert.equal(r.code, 0, show(r));
    return JSON.parse(r.stdout) as CliLedger[];
  }

  /** Waits until the page shows the serves in these phases (it polls once a second). */
  async function pageShows(phases: Record<string, string>): Promise<Shown> {
    return waitFor(
      `the page to show ${JSON.stringify(phases)}`,
      async () => {
        const s = await shown(page);
        const ok = s.status === 'live' && Object.entries(phases).every(([serve, phase]) => s.serves.some((x) => x.serve === serve && x.phase === phase));
        return ok ? s : undefined;
      },
      20_000,
      200,
    );
  }

  test('before any serve: no ledger runs, the page says so for the GPU and starts none', async () => {
    const r = await httpGet(api.port, '/v1/ledger', {});
    assert.equal(r.status, 200, r.body);
    const body = JSON.parse(r.body) as { ledgers: unknown[]; noLedger: { gpuRole: string }[] };
    assert.deepEqual(body.ledgers, []);
    assert.deepEqual(
      body.noLedger.map((g) => g.gpuRole),
      [GPU.role],
    );
    // The process names the address it listens on to a rebound name.
    const rebound = await httpGet(api.port, '/ledger', { host: `rebound.example:${api.port}` });
    assert.equal(rebound.status, 421);
    assert.match(rebound.body, new RegExp(`open http://127\\.0\\.0\\.1:${api.port}/ledger\n$`));
    await page.goto(`${base}/ledger`);
    await waitUntil('the page to say no ledger', async () => /no ledger running for this GPU/.test((await shown(page)).text), 10_000, 200);
    assert.equal((await shown(page)).status, 'live');
    // The page read it a few times by now: still no ledger workflow at all.
    await assert.rejects(t.temporal.client.workflow.getHandle(workflowIds.ledger(t.node, GPU.role)).describe(), WorkflowNotFoundError);
  });

  test('the bars, serves and figures are those of gpures ledger --json', async () => {
    for (const s of ['fast', 'vision']) {
      const o = await serveUp(t.temporal.client, t.node, s);
      assert.ok(o.ok, !o.ok ? o.message : '');
    }
    await page.goto(`${base}/ledger`);
    await pageShows({ fast: 'running', vision: 'running', 'comfyui-sim': 'stopped' });
    // A bring-up's result comes before its run's close reaches visibility (the page's "operations
    // running"): CI's clean clone once read vision's run still listed, 2 s old. Waited for, as the page polls once a second.
    await waitUntil('the page to list no operation running', async () => (await shown(page)).operations.length === 0, 20_000, 200);
    const s = await pageShows({ fast: 'running', vision: 'running', 'comfyui-sim': 'stopped' });
    const cli = await cliLedger();
    assertSameAsCli(s, cli);
    assert.deepEqual(
      s.serves.find((x) => x.serve === 'comfyui-sim'),
      { serve: 'comfyui-sim', class: 'on-demand', phase: 'stopped', vram: '8192 MiB' },
    );
    assert.equal(cli[0]?.freeMib, 1375);
    assert.match(s.text, /no operation running/);
    // The ledger's decisions so far, newest first, as the audit report words them.
    assert.match(s.text, /admitted vision 12288 MiB, free after 1375 MiB/);
  });

  test('an eviction held mid-drain, then finished: the page follows without a reload, as the CLI does', async () => {
    await page.evaluate('window.sameDocument = true');
    // One request in flight at vision holds its drain until it ends (the router counts it until the client goes).
    const inFlight = new AbortController();
    const slow = fetch(`${t.box.router.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'vision', messages: [{ role: 'user', content: 'hold the drain' }], sim_delay_ms: 600_000 }),
      signal: inFlight.signal,
    }).catch((err: unknown) => err);
    await waitUntil('1 in flight at vision-local', async () => (await t.box.routerAdmin.tierState('vision-local')).inFlight === 1, 10_000);
    let acquired: Promise<OperationOutcome<AcquireResult>> | undefined;
    try {
      acquired = serveAcquire(t.temporal.client, t.node, { serve: 'comfyui-sim', evict: true });
      const during = await pageShows({ vision: 'evicting', 'comfyui-sim': 'pending' });
      const cli = await cliLedger();
      assertSameAsCli(during, cli);
      const l = cli[0];
      assert.ok(l);
      assert.equal(l.heldMib, 8192);
      assert.ok(l.freeMib < 0, `free ${l.freeMib}: committed and held exceed the budget while vision drains`);
      assert.match(during.text, /evicting vision \(12288 MiB\) for comfyui-sim: short by 6817 MiB/);
      // vision draining holds between none and all of its reservation: the draw is a range, here as in the CLI.
      assert.deepEqual(
        l.physical?.inFlux.map((f) => `${f.serve} ${f.phase}`),
        ['vision evicting'],
      );
      assert.match(during.text, /non-ledger draw \d+ MiB to \d+ MiB \(up to \d+ MiB of it vision evicting\)/);
      assert.doesNotMatch(during.text, /still held by this run/, 'a fence that changed nothing listed as a decision');
      // The ledger's own wording (src/domain/ledger.ts freeText), as `gpures ledger` prints it.
      assert.match(during.text, /free 0 MiB \(over budget by \d+ MiB until vision stops\)/);
      const text = await gpures(['ledger', '--manifest', t.manifestPath], env);
      assert.equal(text.code, 0, show(text));
      const free = /free 0 MiB \(over budget by \d+ MiB until vision stops\)/.exec(text.stdout)?.[0];
      assert.ok(free, text.stdout);
      assert.ok(during.text.includes(free), `the page does not say ${free}`);

      // Held for whom: the acquisition's run, linked into the Temporal UI; the same run is the operation running now.
      const acquireId = workflowIds.acquire(t.node, 'comfyui-sim');
      const holder = l.reservations.find((r) => r.serve === 'comfyui-sim')?.holder ?? '';
      const runId = holder.slice(acquireId.length + 1);
      assert.equal(holder, `${acquireId}/${runId}`);
      const href = `${UI}/namespaces/default/workflows/${encodeURIComponent(acquireId)}/${runId}`;
      const heldLinks = await page.evaluate<string[][]>(
        `[...document.querySelectorAll('.gpu .figures a')].map((a) => [a.textContent, a.getAttribute('href')])`,
      );
      assert.deepEqual(heldLinks, [[acquireId, href]]);
      const status = await gpures(['serves', 'status', '--json', '--manifest', t.manifestPath], env);
      assert.equal(status.code, 0, show(status));
      const running = (JSON.parse(status.stdout) as { operation: { workflowId: string } | null }[]).flatMap((r) =>
        r.operation ? [r.operation.workflowId] : [],
      );
      assert.deepEqual(
        during.operations.map((o) => o.workflowId),
        running,
      );
      assert.deepEqual(during.operations, [{ workflowId: acquireId, href }]);

      mkdirSync(join(ROOT, 'test-artifacts'), { recursive: true });
      await page.screenshot({ path: SCREENSHOT, fullPage: true });
      console.log(`ledger page screenshot (an eviction mid-drain): ${SCREENSHOT}`);
    } finally {
      inFlight.abort();
      await slow;
      // The acquisition ends once the drain does, whatever failed above: not left to the next test.
      await acquired?.catch(() => undefined);
    }
    const o = await acquired;
    assert.ok(o.ok, !o.ok ? o.message : '');
    await pageShows({ vision: 'evicted', 'comfyui-sim': 'running' });
    // The ledger says so as the acquisition's last step; the run's close reaches visibility (the
    // page's "operations running") a moment after it: waited for, as the page polls once a second.
    await waitUntil('the page to list no operation running', async () => (await shown(page)).operations.length === 0, 20_000, 200);
    const settled = await pageShows({ vision: 'evicted', 'comfyui-sim': 'running' });
    const cli = await cliLedger();
    assertSameAsCli(settled, cli);
    assert.deepEqual(settled.operations, []);
    assert.match(settled.text, /vision's MiB handed to comfyui-sim/);
    assert.equal(await page.evaluate<boolean | undefined>('window.sameDocument'), true, 'the page was reloaded');
    assert.deepEqual(pageErrors, []);
  });

  test('the API gone: the page says its data is stale, and recovers when the API is back', async () => {
    const port = api.port;
    assert.equal(await api.stop(), 0);
    await waitUntil('the page to say stale', async () => (await shown(page)).status === 'stale', 10_000, 200);
    assert.match((await page.textContent('#status')) ?? '', /^stale: last update \d+ s ago/);
    api = await startApiProcess(t.manifestPath, ['--port', String(port)], env);
    await waitUntil('the page live again', async () => (await shown(page)).status === 'live', 20_000, 200);
  });

  test('bound beyond loopback: no figures without the token, then the token typed into the page', async () => {
    const wide = await startApiProcess(t.manifestPath, ['--host', '0.0.0.0', '--allow-non-loopback'], env);
    try {
      const url = `http://127.0.0.1:${wide.port}`;
      assert.equal(await getStatus(wide.port, '/v1/ledger', {}), 401);
      assert.equal(await getStatus(wide.port, '/v1/ledger', { authorization: `Bearer ${TOKEN}` }), 200);
      const p = await browser.context.newPage();
      try {
        await p.goto(`${url}/ledger`);
        await p.waitForSelector('#token-form:not([hidden])');
        assert.equal((await shown(p)).gpus.length, 0);
        assert.equal((await shown(p)).status, 'locked');
        await p.fill('#token', 'not-the-token-0123456789abcdef0123456789');
        await p.click('#token-form button[type="submit"]');
        await waitUntil('the refusal', async () => /refused this token/.test((await p.textContent('#token-message')) ?? ''), 10_000, 100);
        assert.equal((await shown(p)).gpus.length, 0);
        await p.fill('#token', TOKEN);
        await p.click('#token-form button[type="submit"]');
        await waitUntil('the figures', async () => (await shown(p)).gpus.length === 1 && (await shown(p)).status === 'live', 20_000, 200);
        assertSameAsCli(await shown(p), await cliLedger());
        assert.equal(p.url(), `${url}/ledger`, 'the token went into the URL');
      } finally {
        await p.close();
      }
    } finally {
      // Within stop()'s 10 s: the page's spare connection does not hold the close.
      const code = await wide.stop();
      assert.equal(code, 0);
    }
  });

  test('text from the data is shown as text, never as markup', async () => {
    const p = await browser.context.newPage();
    try {
      const evil = '<img src=x onerror="window.injected=1">';
      await p.route('**/v1/ledger', (route) =>
        route.fulfill({
          contentType: 'application/json',
          body: JSON.stringify({
            node: evil,
            readAt: new Date().toISOString(),
            namespace: 'default',
            temporalUi: UI,
            ledgers: [
              {
                node: evil,
                gpuRole: evil,
                gpuUuid: evil,
                capacityMib: 100,
                reserveMib: 10,
                committedMib: 50,
                heldMib: 0,
                freeMib: 40,
                freeText: evil,
                budgetMib: 90,
                reservations: [{ serve: evil, vramMib: 50, class: evil, phase: 'running', holder: `${evil}/r` }],
                leases: [],
                physical: null,
              },
            ],
            serves: [],
            operations: [{ serve: evil, workflowId: evil, runId: 'r', workflowType: evil, since: new Date().toISOString(), url: 'javascript:alert(1)' }],
            decisions: [{ gpuRole: evil, update: evil, summary: evil }],
            links: {},
          }),
        }),
      );
      await p.goto(`${base}/ledger`);
      await p.waitForSelector('#decisions');
      assert.equal(await p.$$eval('main img', (imgs) => imgs.length), 0);
      assert.equal(await p.evaluate<number | undefined>('window.injected'), undefined);
      assert.ok(((await p.textContent('#decisions')) ?? '').includes(evil));
      assert.ok(((await p.textContent('.gpu h3')) ?? '').includes(evil));
      assert.equal(await p.textContent('[data-figure="free"]'), evil);
      assert.equal(await p.$$eval('a[href^="javascript"]', (as) => as.length), 0);
    } finally {
      await p.close();
    }
  });
});
