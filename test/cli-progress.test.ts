// What an operator watches while an operation runs, as processes on the simulated box: each step
// with its times, the probe count of a slow bring-up, the in-flight count of a drain falling as
// held requests end, a restore's child bring-up step by step (and a lease's bring-down with its
// restore beneath it), what a cancelled --evict undid, and a second `serves up` that joins the first. Captured under a pseudo-terminal (util-linux's
// script), where the step under way is redrawn in place, and without one, where it is not.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { HttpRouterAdmin } from '../src/adapters/router-admin/http';
import { workflowIds } from '../src/shared/messages';
import { routedChat } from './support/box';
import type { TestServe } from './support/box';
import { gpures, gpuresUnderPty, show } from './support/cli';
import { startProcessBox } from './support/process-box';
import type { ProcessBox } from './support/process-box';
import { waitForPendingActivity } from './support/history-scan';
import { waitUntil } from './support/wait';

const GPU = { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 };
const SERVES: TestServe[] = [
  { name: 'fast', vram_mib: 14336, router_tier: 'fast-local' },
  // Evictable again right after its restore: the cancelled eviction follows the restore.
  { name: 'vision', vram_mib: 12288, class: 'evictable', served_model_name: 'qwen3-vl-4b-instruct', router_tier: 'vision-local', min_residency_s: 0 },
  { name: 'comfyui-sim', vram_mib: 8192, class: 'on-demand', api: 'none', args: ['sleep', '3600'] },
  // /health answers 404 for its first 15 s: a model still loading, long enough on two loaded
  // cores for a second CLI to start and join while it loads (start_timeout_s stays 30).
  { name: 'slow', vram_mib: 1024, env: { FAKE_START_DELAY_S: '15' } },
];

// eslint-disable-next-line no-control-regex
const CONTROL = /\x1b\[[0-9;?]*[A-Za-z]|\r/g;
const plain = (s: string) => s.replace(CONTROL, '');
/** Where every cursor-control sequence begins. */
const CSI = '\x1b[';

function seconds(text: string): number {
  const m = /^(?:(\d+)h)?(?:(\d+)m)?(?:([\d.]+)s)?$/.exec(text);
  assert.ok(m, `a time: ${text}`);
  return Number(m[1] ?? 0) * 3600 + Number(m[2] ?? 0) * 60 + Number(m[3] ?? 0);
}

/** Each step line's name, elapsed and own time, at `indent` spaces. */
function timedSteps(out: string, indent = 2): { step: string; elapsedS: number; tookS: number }[] {
  const re = new RegExp(`^ {${indent}}([^ …][^:]*): .*  \\[\\+(\\S+), took (\\S+)\\]$`, 'gm');
  return [...plain(out).matchAll(re)].map((m) => ({ step: m[1] ?? '', elapsedS: seconds(m[2] ?? ''), tookS: seconds(m[3] ?? '') }));
}

function assertIncreasing(values: number[], what: string): void {
  assert.ok(values.length >= 2, `${what}: at least two (${values.join(', ')})`);
  for (let i = 1; i < values.length; i++) assert.ok((values[i] ?? 0) >= (values[i - 1] ?? 0), `${what} in order: ${values.join(', ')}`);
  assert.ok((values[values.length - 1] ?? 0) > (values[0] ?? 0), `${what} grow: ${values.join(', ')}`);
}

describe('live progress of serves up, --evict, serves down --restore, as processes with and without a terminal', () => {
  let box: ProcessBox;
  let manifest: string;
  let env: Record<string, string>;

  before(async () => {
    box = await startProcessBox('cli-progress', GPU, SERVES);
    ({ env, manifestPath: manifest } = box);
  });

  after(async () => {
    await box?.close();
  });

  test('a slow bring-up on a terminal: probe count redrawn in place, steps timed; a second serves up joins it, in plain lines', async () => {
    const first = gpuresUnderPty(['serves', 'up', 'slow', '--manifest', manifest], env, 120_000);
    const bringUp = box.temporal.client.workflow.getHandle(workflowIds.bringUp(box.node, 'slow'));
    await waitForPendingActivity(bringUp, 'waitHealthy', { heartbeated: true });
    const second = await gpures(['serves', 'up', 'slow', '--manifest', manifest], env, 120_000);
    const tty = await first;
    assert.equal(tty.code, 0, show(tty));
    assert.equal(second.code, 0, show(second));

    // The terminal: the status line erased and drawn again, the probe count rising in it.
    assert.ok(tty.stdout.includes(`${CSI}2K`), show(tty));
    const shown = plain(tty.stdout);
    assert.match(shown, /^serves up slow: workflow serves-up\/\S+\/slow \(run [0-9a-f-]+\)$/m, show(tty));
    const probes = [...shown.matchAll(/^ {2}… health: probe (\d+), last: HTTP 404, [\d.]+s of 30s$/gm)].map((m) => Number(m[1]));
    assert.ok(Math.max(...probes) >= 2, `probe count shown rising: ${probes.join(', ')}\n${show(tty)}`);
    const steps = timedSteps(tty.stdout);
    assert.deepEqual(
      steps.map((s) => s.step),
      ['admit', 'room', 'start', 'health', 'identity', 'measure', 'running'],
      show(tty),
    );
    assertIncreasing(
      steps.map((s) => s.elapsedS),
      'elapsed since the start',
    );
    // The health step waited out the model's load: it ended after the probes of 404s shown.
    const healthAt = steps.find((s) => s.step === 'health')?.elapsedS ?? 0;
    assert.ok(healthAt > (steps.find((s) => s.step === 'start')?.elapsedS ?? Infinity), show(tty));

    // The second process joined the first's run and says so, in plain lines.
    assert.ok(!second.stderr.includes(CSI), show(second));
    assert.match(
      second.stderr,
      // The first CLI's identity, pid@host and a random tail: a reused pid is not taken for this process.
      /^joined serves up slow already running since \d\d:\d\d:\d\d \(started by gpures-cli\/\d+@\S+\/[0-9a-f]{8}; workflow serves-up\/\S+\/slow\)$/m,
      show(second),
    );
    assert.doesNotMatch(second.stderr, /^serves up slow: workflow/m, show(second));
    assert.doesNotMatch(shown, /^joined/m, show(tty));
    assert.match(second.stderr, /^ {2}… health: probe \d+, last: HTTP 404, [\d.]+s of 30s$/m, show(second));
    assertIncreasing(
      timedSteps(second.stderr).map((s) => s.elapsedS),
      "the joiner's elapsed",
    );
  });

  test('an eviction: the in-flight count falls as held requests end; the restore prints its child bring-up step by step', async () => {
    // Down whether or not the test before passed: its 1024 MiB would change this one's figures.
    const down = await gpures(['serves', 'down', 'slow', '--manifest', manifest], env);
    assert.equal(down.code, 0, show(down));
    const up = await gpures(['serves', 'up', 'fast', 'vision', '--manifest', manifest], env);
    assert.equal(up.code, 0, show(up));
    const admin = new HttpRouterAdmin({ baseUrl: box.router.url, token: box.routerToken });
    // Ending 10 s apart: on two loaded cores the drain (and its heartbeat every 2 s, read every 1.5 s)
    // still sees a count between the first and none.
    const held = [5000, 15_000, 25_000].map((ms) => routedChat(box.router.url, 'vision', { sim_delay_ms: ms }));
    await waitUntil('three requests in flight to vision', async () => (await admin.tierState('vision-local')).inFlight === 3, 10_000, 50);

    const evict = await gpures(['serves', 'up', 'comfyui-sim', '--evict', '--manifest', manifest], env, 120_000);
    assert.equal(evict.code, 0, show(evict));
    for (const r of await Promise.all(held)) assert.equal(r.status, 200);
    assert.ok(!evict.stderr.includes(CSI), show(evict));
    const counts = [...evict.stderr.matchAll(/^ {2}… drain vision: (\d+) in flight at the router(?:, \d+ running in the serve)?, ([\d.]+)s of 120s$/gm)].map(
      (m) => ({
        inFlight: Number(m[1]),
        elapsedS: Number(m[2]),
      }),
    );
    // A plain line each time a count changes: never rising, and at least one between three and none
    // (a request ended while others were still held).
    const seen = counts.map((c) => c.inFlight);
    assert.ok(seen.length >= 1 && (seen[0] ?? 4) <= 3, `drain lines: ${seen.join(', ')}\n${show(evict)}`);
    for (let i = 1; i < seen.length; i++) assert.ok((seen[i] ?? 0) <= (seen[i - 1] ?? 0), `in flight never rising: ${seen.join(', ')}`);
    assert.ok(
      seen.some((n) => n > 0 && n < 3),
      `an intermediate count: ${seen.join(', ')}\n${show(evict)}`,
    );
    for (let i = 1; i < counts.length; i++) assert.ok((counts[i]?.elapsedS ?? 0) >= (counts[i - 1]?.elapsedS ?? 0), "the drain's elapsed in order");
    const steps = timedSteps(evict.stderr);
    assertIncreasing(
      steps.map((s) => s.elapsedS),
      'elapsed since the start',
    );
    // The drain step is reported after every drain status line: the wait, then its end.
    const drainStep = evict.stderr.search(/^ {2}drain vision: .*\[\+/m);
    assert.ok(drainStep > evict.stderr.lastIndexOf('… drain vision:'), show(evict));

    const restore = await gpures(['serves', 'down', 'comfyui-sim', '--restore', '--manifest', manifest], env, 120_000);
    assert.equal(restore.code, 0, show(restore));
    const lines = restore.stderr.split('\n');
    const at = (re: RegExp) => lines.findIndex((l) => re.test(l));
    const child = at(/^ {2}serves-up\/\S+\/vision \(bringUpWorkflow\):$/);
    const childAdmit = at(/^ {4}admit: admitted 12288 MiB .* \[\+\S+, took \S+\]$/);
    const childRunning = at(/^ {4}running: .* \[\+\S+, took \S+\]$/);
    const restored = at(/^ {2}restore: serves up vision: restored/);
    assert.ok(child >= 0 && child < childAdmit && childAdmit < childRunning && childRunning < restored, show(restore));
    assert.deepEqual(
      timedSteps(restore.stderr, 4).map((s) => s.step),
      ['admit', 'room', 'start', 'health', 'identity', 'measure', 'readmit', 'running'],
      show(restore),
    );
    assertIncreasing(
      timedSteps(restore.stderr, 4).map((s) => s.elapsedS),
      "the child's elapsed",
    );
  });

  test('a cancelled --evict prints what it undid and who cancelled it', async () => {
    // vision and fast run again (the restore above); one request keeps the drain waiting.
    const admin = new HttpRouterAdmin({ baseUrl: box.router.url, token: box.routerToken });
    // Held past the CLI's start and the acquisition's way to the drain on loaded cores.
    const heldRequest = routedChat(box.router.url, 'vision', { sim_delay_ms: 30_000 });
    await waitUntil('a request in flight to vision', async () => (await admin.tierState('vision-local')).inFlight === 1, 10_000, 50);
    const evict = gpures(['serves', 'up', 'comfyui-sim', '--evict', '--manifest', manifest], env, 120_000);
    const acquire = box.temporal.client.workflow.getHandle(workflowIds.acquire(box.node, 'comfyui-sim'));
    await Promise.race([
      waitForPendingActivity(acquire, 'drainServe', { heartbeated: true }),
      evict.then((r) => Promise.reject(new Error(`serves up --evict ended before its drain: ${show(r)}`))),
    ]);
    await acquire.cancel();
    const r = await evict;
    assert.notEqual(r.code, 0, show(r));
    assert.match(r.stderr, /^ {2}drain vision: cancelled {2}\[/m, show(r));
    const undone = 'serves up comfyui-sim --evict cancelled at drain vision; compensated: readmit tier vision-local, abort eviction';
    assert.match(r.stderr, new RegExp(`^ {2}compensate: ${undone} {2}\\[`, 'm'), show(r));
    assert.match(r.stderr, new RegExp(`^${undone} \\(cancelled by (gpures-cli/)?\\d+@\\S+\\) \\[CancelledFailure; workflow acquire/`, 'm'), show(r));
    assert.doesNotMatch(r.stderr, /Workflow canceled/, show(r));
    // Undone indeed: vision answers through its tier again, and the held request finished.
    assert.equal((await heldRequest).status, 200);
    assert.equal((await routedChat(box.router.url, 'vision')).status, 200);

    // --json on a terminal: stdout (to a file, as `gpures … --json >out.json`) is the JSON alone,
    // no control sequence in it; progress on the terminal in plain lines, nothing redrawn.
    const out = join(mkdtempSync(join(tmpdir(), 'gpures-json-')), 'out.json');
    const down = await gpuresUnderPty(['serves', 'down', 'vision', 'fast', '--json', '--manifest', manifest], env, 60_000, out);
    assert.equal(down.code, 0, show(down));
    const json = readFileSync(out, 'utf8');
    assert.ok(!json.includes('\x1b') && !json.includes('\r'), JSON.stringify(json));
    const result = JSON.parse(json) as { outcomes?: unknown[] };
    assert.equal(result.outcomes?.length, 2, json);
    assert.ok(!down.stdout.includes(CSI), show(down));
    assert.match(plain(down.stdout), /^ {2}stop: container \S+-vision: stopped, removed {2}\[\+/m, show(down));
    assert.doesNotMatch(down.stdout, /"outcomes"/, show(down));
  });

  test("serves release: the lease's bring-down and its restore, each printed beneath the run that started it", async () => {
    const up = await gpures(['serves', 'up', 'fast', 'vision', '--manifest', manifest], env);
    assert.equal(up.code, 0, show(up));
    const leased = await gpures(['serves', 'up', 'comfyui-sim', '--evict', '--lease', '10m', '--manifest', manifest], env, 120_000);
    assert.equal(leased.code, 0, show(leased));
    const release = await gpures(['serves', 'release', 'comfyui-sim', '--manifest', manifest], env, 120_000);
    assert.equal(release.code, 0, show(release));
    const lines = release.stderr.split('\n');
    const at = (re: RegExp) => lines.findIndex((l) => re.test(l));
    const down = at(/^ {2}serves-down\/\S+\/comfyui-sim \(bringDownWorkflow\):$/);
    const stop = at(/^ {4}stop: container \S+-comfyui-sim: stopped, removed {2}\[\+/);
    const restore = at(/^ {4}serves-up\/\S+\/vision \(bringUpWorkflow\):$/);
    const running = at(/^ {6}running: reservation marked running {2}\[\+/);
    const restored = at(/^ {4}restore: serves up vision: restored/);
    const leaseDown = at(/^ {2}down: serves down comfyui-sim: stopped/);
    assert.ok(0 <= down && down < stop && stop < restore && restore < running && running < restored && restored < leaseDown, show(release));

    const rest = await gpures(['serves', 'down', 'vision', 'fast', '--manifest', manifest], env);
    assert.equal(rest.code, 0, show(rest));
  });
});
