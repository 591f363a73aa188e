// What an operator sees in the Temporal UI of an operation, in a real headless Chromium (Debian's,
// driven by playwright-core) on a dev server with its UI, under User Metadata: the run's steps
// name the serve and tier each acts on (src/workflows/activity-summaries.ts) under "Events with
// Metadata", which before listed no event at all (and every victim's drain read `drainServe`);
// and a run's Current Details say the step under way and those done (src/workflows/step-log.ts),
// where before they repeated the run's summary.
// Chromium missing fails the test (launchChromium says what to install): it never skips.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { Page } from 'playwright-core';
import { serveAcquire, serveUp } from '../src/client/operations';
import { startDevServer } from '../src/dev/dev-server';
import type { DevServer } from '../src/dev/dev-server';
import { workflowIds } from '../src/shared/messages';
import { launchChromium } from './support/chromium';
import type { TestBrowser } from './support/chromium';
import { startSimTestBox } from './support/sim';
import type { SimTestBox } from './support/sim';

const GPU = { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 };
const SERVES = [
  { name: 'fast', vram_mib: 14336, router_tier: 'fast-local' },
  { name: 'vision', vram_mib: 12288, class: 'evictable' as const, served_model_name: 'qwen3-vl-4b-instruct', router_tier: 'vision-local' },
  { name: 'comfyui-sim', vram_mib: 8192, class: 'on-demand' as const },
  // Never healthy: its bring-up waits at health until cancelled.
  { name: 'stuck', vram_mib: 1000, env: { SIM_START_DELAY_MS: 'never' }, start_timeout_s: 120 },
];

/** The run's page in the UI, on one of its tabs. */
async function openRun(page: Page, uiUrl: string, workflowId: string, runId: string, tab: string): Promise<void> {
  await page.goto(`${uiUrl}/namespaces/default/workflows/${encodeURIComponent(workflowId)}/${runId}/${tab}`, { waitUntil: 'load' });
}

describe('the Temporal UI of an operation', () => {
  let server: DevServer;
  let t: SimTestBox;
  let browser: TestBrowser;
  let uiUrl: string;
  let acquisition: { workflowId: string; runId: string };

  before(async () => {
    server = await startDevServer({ ui: true });
    uiUrl = server.uiUrl ?? '';
    // The tests' shared client and worker (test/support/temporal.ts) on this server, UI and all.
    process.env['TEMPORAL_TEST_ADDRESS'] = server.address;
    t = await startSimTestBox('ui', [GPU], SERVES);
    browser = await launchChromium();
    for (const s of ['fast', 'vision']) {
      const o = await serveUp(t.temporal.client, t.node, s);
      assert.ok(o.ok, o.ok ? '' : o.message);
    }
    const o = await serveAcquire(t.temporal.client, t.node, { serve: 'comfyui-sim', evict: true });
    assert.ok(o.ok, o.ok ? '' : o.message);
    const workflowId = workflowIds.acquire(t.node, 'comfyui-sim');
    const d = await t.temporal.client.workflow.getHandle(workflowId).describe();
    acquisition = { workflowId, runId: d.runId };
  });
  after(async () => {
    await browser?.close();
    await t?.close();
    await server?.stop();
  });

  test("each step of the acquisition names what it acts on: the victim's quiesce, drain and stop, the acquirer's start", async () => {
    const page = await browser.context.newPage();
    await openRun(page, uiUrl, acquisition.workflowId, acquisition.runId, 'user-metadata');
    await page.getByText('Events with Metadata', { exact: true }).waitFor({ timeout: 20_000 });
    const wanted = ['quiesceTier tier vision-local', 'drainServe vision (tier vision-local)', 'stopServeContainer vision', 'startServeContainer comfyui-sim'];
    const missing: string[] = [];
    for (const summary of wanted) {
      const shown = await page
        .getByText(summary, { exact: true })
        .first()
        .waitFor({ timeout: 10_000 })
        .then(() => true)
        .catch(() => false);
      if (!shown) missing.push(summary);
    }
    assert.deepEqual(missing, [], `not under Events with Metadata; the page says:\n${await page.innerText('main')}`);
    await page.close();
  });

  test('a run waiting for health says so in its Current Details, with the steps done before', async () => {
    const pending = serveUp(t.temporal.client, t.node, 'stuck');
    const handle = t.temporal.client.workflow.getHandle(workflowIds.bringUp(t.node, 'stuck'));
    const page = await browser.context.newPage();
    try {
      const { runId } = await handle.describe();
      await openRun(page, uiUrl, handle.workflowId, runId, 'user-metadata');
      // Details are rendered through the UI server's /render, in a frame of their own.
      const details = async (): Promise<string> => {
        const texts = await Promise.all(page.frames().map((f) => (f.url().includes('/render?') ? f.innerText('body').catch(() => '') : Promise.resolve(''))));
        return texts.join('\n---\n');
      };
      let seen = '';
      const deadline = Date.now() + 45_000;
      // The UI reads current details as the page loads: load again until the run is at health.
      while (Date.now() < deadline && !/under way since \d\d:\d\d:\d\d: health/.test(seen)) {
        for (let i = 0; i < 8 && !/under way/.test(seen); i++) {
          await page.waitForTimeout(750);
          seen = await details();
        }
        if (!/under way since \d\d:\d\d:\d\d: health/.test(seen)) await page.reload({ waitUntil: 'load' });
      }
      assert.match(seen, /serves up stuck on /, seen);
      assert.match(seen, /done \d\d:\d\d:\d\d: admit: admitted 1000 MiB/, seen);
      assert.match(seen, /done \d\d:\d\d:\d\d: start: /, seen);
      assert.match(seen, /under way since \d\d:\d\d:\d\d: health/, seen);
    } finally {
      await page.close();
      await handle.cancel();
      await pending;
    }
  });
});
