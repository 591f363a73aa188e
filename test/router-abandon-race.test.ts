// A wasted on-demand acquisition abandoned (FIELD.md §2 item 12, llama-swap #727): a request for
// the on-demand tier od makes the router acquire od, evicting vision; the client disconnects while
// the acquisition drains vision (a request of vision's in flight). Nobody is held for od for the
// tier's abandon_after_s: the router asks the API to abandon the run, and the run, which has stopped
// nothing yet, undoes its quiesce of vision-local and ends. Raced as operators run it: `gpures
// worker`, `gpures api` and the reference router (main.js) as processes, fake-vLLM containers on
// the test dockerd; the box sampled every 200 ms: the containers, the router's tiers and the ledger.
// Refused: when an operator's `serves up` (a CLI process) joined the run, or once a victim's stop began.
// A `serves up` that joins once the run has abandoned (its compensation's readmit held by a proxy
// between the worker and the router) acquires afresh.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { exportWorkflow } from '../src/audit/export';
import { LedgerClient } from '../src/adapters/ledger/ledger-client';
import { progressQuery, workflowIds } from '../src/shared/messages';
import type { TestServe } from './support/box';
import { gpures, gpuresSaying, show } from './support/cli';
import { startProcessBox } from './support/process-box';
import type { ProcessBox } from './support/process-box';
import { StallingProxy } from './support/stalling-proxy';
import { GPU, visionProbes } from './support/vision-probes';
import { sleep, waitUntil } from './support/wait';

/** b and the evictable vision; od, on demand, does not fit beside them: acquiring it evicts vision. Its health takes 4 s. */
const SERVES: TestServe[] = [
  { name: 'b', vram_mib: 9000 },
  { name: 'vision', vram_mib: 12288, class: 'evictable', served_model_name: 'qwen3-vl-4b-instruct', router_tier: 'vision-local' },
  { name: 'od', vram_mib: 8192, class: 'on-demand', served_model_name: 'od-model', router_tier: 'od-local', env: { FAKE_START_DELAY_S: '4' } },
];
const ABANDON_AFTER_S = 2;
/** `serves up od --evict` processes joining the run after the first: an operator's script run again and again. */
const JOINERS = 4;
/** GPURES_SAVE_HISTORIES=DIR: the abandoned run and the refused one are written there (recording histories for test/histories). */
const SAVE_DIR = process.env['GPURES_SAVE_HISTORIES'];

interface TierView {
  state: string;
  inFlight: number;
  queued: number;
  acquisition: { workflowId: string | null; step: string | null; abandonAtEpochMs?: number } | null;
  abandon: { workflowId: string; askedAtEpochMs: number; answer: string; detail?: string } | null;
}

describe('an on-demand acquisition whose held requests have all gone', () => {
  let box: ProcessBox;
  // Once stalled, holds the worker's readmits of vision's tier: an abandoned run's compensation.
  const proxy = new StallingProxy((method, url) => method === 'POST' && url.startsWith('/admin/tiers/vision-local/readmit'));
  before(async () => {
    box = await startProcessBox('abandon', GPU, SERVES, {
      onDemand: { 'od-local': { serve: 'od', evict: true, wait_timeout_s: 120, abandon_after_s: ABANDON_AFTER_S } },
      workerRouterUrl: (url) => proxy.start(url),
    });
  });
  after(async () => {
    proxy.resume();
    await box?.close();
    await proxy.close();
  });

  const { tier: visionTier, routed, running } = visionProbes(() => box);
  const odTier = async () => {
    const res = await fetch(`${box.router.url}/admin/tiers/od-local`, { headers: { authorization: `Bearer ${box.routerToken}` } });
    return (await res.json()) as TierView;
  };
  const reservations = async () =>
    (await new LedgerClient(box.temporal.client).snapshot(box.node, box.manifest.gpus[0]!)).reservations.map((r) => `${r.serve} ${r.phase}`);
  const acquisition = () => box.temporal.client.workflow.getHandle(workflowIds.acquire(box.node, 'od'));
  /** A chat request for od through the router, with the client token; aborted by `signal`. */
  const chatOd = (signal?: AbortSignal) =>
    fetch(`${box.router.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${box.api?.clientToken ?? ''}` },
      body: JSON.stringify({ model: 'od', messages: [{ role: 'user', content: 'x' }] }),
      ...(signal ? { signal } : {}),
    });

  /** Everything down, then b and vision up, vision's tier active and answering. */
  async function visionServing(): Promise<void> {
    const down = await gpures(['serves', 'down', 'od', 'vision', 'b', '--manifest', box.manifestPath], box.env, 120_000);
    assert.equal(down.code, 0, show(down));
    const up = await gpures(['serves', 'up', 'b', 'vision', '--manifest', box.manifestPath], box.env);
    assert.equal(up.code, 0, show(up));
    assert.equal((await routed()).status, 200);
  }

  /** A client's request for od, which makes the router acquire od; resolves once the run has done `step`. Abort it to disconnect. */
  async function clientAcquiring(step: string): Promise<{ client: AbortController; request: Promise<unknown> }> {
    const client = new AbortController();
    const request = chatOd(client.signal).then(
      (r) => r.status,
      (err: Error) => err.name,
    );
    await waitUntil(
      `od's acquisition at ${step}`,
      async () =>
        (
          await acquisition()
            .query(progressQuery)
            .catch(() => [])
        ).some((s) => s.step === step),
      60_000,
      50,
    );
    return { client, request };
  }

  /** Once the router has had an answer to an abandon it asked after `since`. */
  const answered = (since: number) =>
    waitUntil(
      'the router asked to abandon, and was answered',
      async () => {
        const a = (await odTier()).abandon;
        return a !== null && a.askedAtEpochMs >= since && a.answer !== 'asked';
      },
      20_000,
      100,
    );

  /** Writes the acquisition's run `runId` (the latest without one) to SAVE_DIR/`name`.json, when asked to. */
  async function save(name: string, runId?: string): Promise<void> {
    if (!SAVE_DIR) return;
    mkdirSync(SAVE_DIR, { recursive: true });
    await exportWorkflow(box.temporal.client, workflowIds.acquire(box.node, 'od'), { ...(runId ? { runId } : {}), file: join(SAVE_DIR, `${name}.json`) });
  }

  /** How the run closed: its failure's type and message, or 'completed'. */
  const closed = () =>
    acquisition()
      .result()
      .then(
        () => 'completed',
        (err: Error) => {
          const cause = err.cause as { type?: string; message?: string } | undefined;
          return `${cause?.type ?? err.name}: ${cause?.message ?? err.message}`;
        },
      );

  /**
   * vision serving a request held `heldMs` (the drain waits on it), od acquired for a client which
   * then disconnects during vision's quiesce; `beforeGone` runs just before it does.
   */
  async function goneWhileDraining(heldMs: number, beforeGone: () => void = () => undefined) {
    await visionServing();
    const held = routed(heldMs);
    await waitUntil('the request held at vision-local', async () => (await visionTier()).inFlight > 0, 10_000, 20);
    const { client, request } = await clientAcquiring('quiesce vision');
    const firstRun = (await acquisition().describe()).runId;
    beforeGone();
    client.abort();
    const goneAt = Date.now();
    assert.equal(await request, 'AbortError');
    return { held, firstRun, goneAt };
  }

  test('the client gone while vision drains: the run is abandoned, vision never stops, its tier is back, and od acquires again on the next request', async () => {
    const { held, firstRun, goneAt } = await goneWhileDraining(15_000);
    const ended = closed();
    let endedAt: number | undefined;
    void ended.then(() => (endedAt = Date.now()));

    const samples: string[] = [];
    let sampled = 0;
    let last = '';
    let visionStopped = 0;
    let odRan = 0;
    let activeAt: number | undefined;
    // Every 200 ms until vision's request is answered and the run has ended (30 s at most).
    let heldStatus: number | undefined;
    void held.then((r) => (heldStatus = r.status));
    for (const t0 = Date.now(); (heldStatus === undefined || endedAt === undefined) && Date.now() - t0 < 30_000; await sleep(200)) {
      const [vt, ot, vUp, oUp, ledger] = await Promise.all([visionTier(), odTier(), running('vision'), running('od'), reservations()]);
      const at = Date.now() - goneAt;
      if (!vUp) visionStopped += 1;
      if (oUp) odRan += 1;
      if (vt.state === 'active') activeAt ??= at;
      const line =
        `vision-local ${vt.state} in-flight ${vt.inFlight}; od-local ${ot.state} queued ${ot.queued} abandon ${ot.abandon?.answer ?? '-'}; ` +
        `containers vision ${vUp ? 'up' : 'DOWN'} od ${oUp ? 'UP' : 'down'}; ledger [${ledger.join(', ')}]`;
      // Every sample counts; those that changed are printed.
      sampled += 1;
      if (line !== last) samples.push(`+${at}ms ${line}`);
      last = line;
    }
    const end = await ended;
    const od = await odTier();
    console.log(`  disconnect → run ended in ${endedAt === undefined ? '?' : endedAt - goneAt} ms: ${end}`);
    console.log(
      `  od-local's abandon: ${JSON.stringify(od.abandon)}; vision-local active at +${activeAt ?? '-'} ms; held request ${heldStatus}; ` +
        `${sampled} samples: vision stopped in ${visionStopped}, od running in ${odRan}; the changes:`,
    );
    console.log(
      `  router log: ${(box.api?.routerLog() ?? '')
        .split('\n')
        .filter((l) => l.includes('abandon'))
        .join(' | ')}`,
    );
    for (const s of samples) console.log(`    ${s}`);

    assert.equal(visionStopped, 0, "vision's container was stopped");
    assert.equal(odRan, 0, "od's container ran");
    assert.match(
      end,
      /^Abandoned: serves up od --evict abandoned at drain vision: .*; vision left running; compensated: readmit tier vision-local, abort eviction/,
    );
    assert.equal(od.abandon?.answer, 'abandoned');
    assert.ok(activeAt !== undefined && activeAt < (ABANDON_AFTER_S + 6) * 1000, `vision-local active again at +${activeAt ?? 'never'} ms`);
    assert.equal(heldStatus, 200, "vision's in-flight request completed");
    assert.deepEqual(await reservations(), ['b running', 'vision running']);
    assert.match(box.api?.routerLog() ?? '', /tier 'od-local': nobody held for .* asked to abandon acquire\/.*\/od: abandoned/);
    await save('acquire-abandoned', firstRun);

    // Nobody wanted it: no cooldown. The next request acquires od again, at once, and is answered by it.
    const next = await chatOd();
    await next.text();
    const second = await acquisition().describe();
    console.log(
      `  next request: ${next.status} (tier ${next.headers.get('x-gpures-tier')}); acquisition run ${second.runId.slice(0, 8)} ${second.status.name}`,
    );
    assert.equal(next.status, 200);
    assert.equal(next.headers.get('x-gpures-tier'), 'od-local');
    assert.notEqual(second.runId, firstRun);
    assert.equal(await running('od'), true);
  });

  /** The acquisition's history: every event, and how many of them tell the run a caller joined (a joined signal, or the joinedAnswered Update). */
  async function odHistory(): Promise<{ events: number; joins: number }> {
    const h = await box.temporal.client.workflowService.getWorkflowExecutionHistory({
      namespace: 'default',
      execution: { workflowId: workflowIds.acquire(box.node, 'od') },
    });
    const events = h.history?.events ?? [];
    const joins = events.filter(
      (e) =>
        e.workflowExecutionSignaledEventAttributes?.signalName === 'joined' ||
        e.workflowExecutionUpdateAcceptedEventAttributes?.acceptedRequest?.input?.name === 'joinedAnswered',
    ).length;
    return { events: events.length, joins };
  }

  test("an operator's serves up joined the run: the abandon is refused, and the acquisition completes; more serves up add no events", async () => {
    await visionServing();
    // Held long enough for JOINERS more CLI processes to start and join while the run drains.
    const held = routed(25_000);
    await waitUntil('the request held at vision-local', async () => (await visionTier()).inFlight > 0, 10_000, 20);
    const { client, request } = await clientAcquiring('quiesce vision');
    const upOd = ['serves', 'up', 'od', '--evict', '--manifest', box.manifestPath];
    // The operator's `serves up od --evict` joins the router's run, and waits for it.
    const cli = gpures(upOd, box.env, 120_000);
    await waitUntil('the CLI joined', async () => (await odHistory()).joins > 0, 30_000, 100);
    // A script's "ensure up": more `serves up od --evict`, each a process joining the same run
    // while it drains; what they add to its history is counted once each has said it joined.
    const before = await odHistory();
    const joiners = Array.from({ length: JOINERS }, () => gpuresSaying(upOd, box.env, 'joined serves up od --evict', 120_000));
    await Promise.all(joiners.map((j) => j.said));
    const after = await odHistory();
    console.log(
      `  ${JOINERS} more serves up joined: history ${before.events} → ${after.events} events, join events ${before.joins} → ${after.joins}; drain still under way: ${(
        await acquisition().query(progressQuery)
      ).every((s) => s.step !== 'drain vision')}`,
    );
    client.abort();
    const goneAt = Date.now();
    assert.equal(await request, 'AbortError');
    await answered(goneAt);
    const od = await odTier();
    const up = await cli;
    const end = await closed();
    const ups = await Promise.all(joiners.map((j) => j.run));
    console.log(`  od-local's abandon: ${JSON.stringify(od.abandon)}; serves up exit ${up.code}, the others' ${ups.map((u) => u.code).join(' ')}; run: ${end}`);
    assert.equal(before.joins, 1, 'the first serves up told the run once');
    assert.equal(after.joins, 1, `join events after ${JOINERS} more serves up`);
    // Nothing else of the run's happens while it drains: at most one workflow task's events (scheduled, started, completed) for anything that does.
    assert.ok(after.events - before.events <= 3, `${JOINERS} more serves up added ${after.events - before.events} events to the run's history`);
    assert.equal(od.abandon?.answer, 'refused');
    assert.match(od.abandon?.detail ?? '', /`gpures serves up` joined it and waits for od/);
    assert.equal(up.code, 0, show(up));
    for (const u of ups) assert.equal(u.code, 0, show(u));
    assert.equal(end, 'completed');
    await save('acquire-abandon-refused-joined');
    assert.equal((await held).status, 200);
    assert.equal(await running('od'), true);
    assert.equal(await running('vision'), false);
  });

  test('a serves up that joins just after the abandon landed acquires od afresh, rather than reporting Abandoned', async () => {
    // The run's compensation readmit is held: abandoned, it stays running until the proxy resumes.
    const { held, firstRun, goneAt } = await goneWhileDraining(20_000, () => {
      proxy.held = 0;
      proxy.stall();
    });
    await answered(goneAt);
    assert.equal((await odTier()).abandon?.answer, 'abandoned');
    await waitUntil('the compensation readmit held', () => proxy.held > 0, 20_000, 50);
    const cli = gpures(['serves', 'up', 'od', '--evict', '--manifest', box.manifestPath], box.env, 120_000);
    await waitUntil('the CLI joined the abandoned run', async () => (await odHistory()).joins > 0, 30_000, 100);
    proxy.resume();
    const up = await cli;
    const latest = await acquisition().describe();
    console.log(
      `  serves up exit ${up.code}; first run …${firstRun.slice(-8)}, latest …${latest.runId.slice(-8)} ${latest.status.name}; ` +
        `od running ${await running('od')}; output: ${up.stdout
          .split('\n')
          .concat(up.stderr.split('\n'))
          .filter((l) => /abandon|joined|workflow/.test(l))
          .join(' | ')}`,
    );
    assert.equal(up.code, 0, show(up));
    assert.notEqual(latest.runId, firstRun, 'no acquisition of its own');
    assert.equal(latest.status.name, 'COMPLETED');
    assert.equal(await running('od'), true);
    assert.match(`${up.stdout}${up.stderr}`, /was abandoned before the join reached it: acquiring afresh/);
    assert.equal((await held).status, 200);
  });

  test("a victim's stop already begun: the abandon is refused, and the acquisition completes", async () => {
    await visionServing();
    // vision idle: the drain ends at once and the stop follows; od's health then takes 4 s.
    const { client, request } = await clientAcquiring('stop vision');
    client.abort();
    const goneAt = Date.now();
    assert.equal(await request, 'AbortError');
    await answered(goneAt);
    const od = await odTier();
    const end = await closed();
    console.log(`  od-local's abandon: ${JSON.stringify(od.abandon)}; run: ${end}`);
    assert.equal(od.abandon?.answer, 'refused');
    assert.match(od.abandon?.detail ?? '', /the stop of vision has begun: abandoning now would save nothing/);
    assert.equal(end, 'completed');
    assert.equal(await running('od'), true);
  });
});
