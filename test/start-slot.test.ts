// One cold start at a time per GPU (the ledger's start slot), on a simulated box: real dev server,
// sim serves as separate processes, the fake nvidia-smi listing each by its pid, and `gpures serves
// up` run as separate processes at once. The box is sampled every ~100 ms (its containers, and
// each one's own /health), not only the ledger's word.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { containerName, serveHealthUrl } from '../src/domain/serve';
import { ledgerSnapshots, serveDown } from '../src/client/operations';
import { exportWorkflow } from '../src/audit/export';
import { workflowIds } from '../src/shared/messages';
import type { TestServe } from './support/box';
import { startSimTestBox } from './support/sim';
import type { SimTestBox } from './support/sim';
import { gpures, show } from './support/cli';
import { sleep, waitUntil } from './support/wait';

const GPU = { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 };
const SERVES: TestServe[] = [
  // Each slow to answer health, as a model load is: two started at once would profile together.
  { name: 'a', vram_mib: 8000, router_tier: 'a-local', env: { SIM_START_DELAY_MS: '3000' } },
  { name: 'b', vram_mib: 6000, env: { SIM_START_DELAY_MS: '3000' } },
  // Never healthy within its 15 s: its start fails and is compensated.
  { name: 'stuck', vram_mib: 4000, start_timeout_s: 15, env: { SIM_START_DELAY_MS: 'never' } },
  // Never healthy, with a long timeout: its run is terminated while it holds the slot.
  { name: 'hung', vram_mib: 4000, start_timeout_s: 600, env: { SIM_START_DELAY_MS: 'never' } },
];
/** Where the waiting bring-up's history goes when set (how test/histories/start-slot-waited.json was recorded). */
const SAVE_DIR = process.env['GPURES_SAVE_HISTORIES'];

interface Sample {
  atMs: number;
  /** Serves whose container runs and whose /health does not answer 200 yet. */
  starting: string[];
  running: string[];
}

describe('one cold start at a time per GPU: the start slot', () => {
  let t: SimTestBox;
  let env: Record<string, string>;

  before(async () => {
    t = await startSimTestBox('start-slot', [GPU], SERVES);
    env = { TEMPORAL_ADDRESS: t.temporal.address };
  });
  after(async () => {
    await t?.close();
  });

  const client = () => t.temporal.client;
  const cli = (...args: string[]) => gpures([...args, '--manifest', t.manifestPath], env, 180_000);
  const ledger = async () => (await ledgerSnapshots(client(), t.manifest))[0];

  async function healthy(serve: string): Promise<boolean> {
    const spec = t.manifest.serves.find((s) => s.name === serve);
    if (!spec) return false;
    try {
      return (await fetch(serveHealthUrl(spec), { signal: AbortSignal.timeout(300) })).status === 200;
    } catch {
      return false;
    }
  }

  /** The box every ~100 ms until stopped (3 min at most): which serves' containers run, and which of them are not healthy yet. */
  function sampleBox(): { stop: () => Promise<Sample[]> } {
    const samples: Sample[] = [];
    let going = true;
    const until = Date.now() + 180_000;
    const names = new Map(SERVES.map((s) => [containerName(t.node, s.name), s.name]));
    const once = async () => {
      const running = (await t.box.runtime.list({})).filter((c) => c.running && names.has(c.name)).map((c) => names.get(c.name) ?? '');
      const health = await Promise.all(running.map(async (s) => [s, await healthy(s)] as const));
      samples.push({ atMs: Date.now(), running, starting: health.filter(([, ok]) => !ok).map(([s]) => s) });
    };
    const loop = (async () => {
      while (going && Date.now() < until) {
        await once();
        await sleep(100);
      }
    })();
    return {
      stop: async () => {
        going = false;
        await loop;
        await once();
        return samples;
      },
    };
  }

  /** Each serve's own process MiB, as the fake nvidia-smi lists it. */
  async function ownMib(serve: string): Promise<number | undefined> {
    const pids = (await t.box.runtime.processes?.(containerName(t.node, serve))) ?? [];
    const apps = await t.box.gpu.computeApps();
    return apps.filter((p) => pids.includes(p.pid)).reduce((sum, p) => sum + (p.usedMib ?? 0), 0);
  }

  async function clearBox(): Promise<void> {
    for (const s of SERVES.map((x) => x.name)) await serveDown(client(), t.node, s);
    const l = await ledger();
    assert.deepEqual(l?.reservations.map((r) => r.serve) ?? [], []);
    assert.equal(l?.startSlot, undefined, 'the start slot is still held once every serve is down');
  }

  test('two serves up on one GPU at once, each from its own process: one starts at a time, both run, each measured as its own process', async () => {
    try {
      const box = sampleBox();
      const [ra, rb] = await Promise.all([cli('serves', 'up', 'a'), cli('serves', 'up', 'b')]);
      const samples = await box.stop();
      const both = samples.filter((s) => s.starting.length > 1);
      const l = await ledger();
      const measured = Object.fromEntries((l?.reservations ?? []).map((r) => [r.serve, r.measuredMib]));
      const own = { a: await ownMib('a'), b: await ownMib('b') };
      const waited = [ra, rb].find((r) => /start slot: [ab] is starting on dark-fast since \d+ s; waiting/.test(r.stdout + r.stderr));
      console.log(
        `  a exit ${ra.code}, b exit ${rb.code}; ${both.length} of ${samples.length} samples with two starting ` +
          `(first: ${JSON.stringify(both[0] ?? null)}); measured ${JSON.stringify(measured)}, own ${JSON.stringify(own)}; one waited: ${Boolean(waited)}`,
      );
      assert.equal(ra.code, 0, show(ra));
      assert.equal(rb.code, 0, show(rb));
      assert.equal(both.length, 0, `two containers starting at once: ${JSON.stringify(both.slice(0, 3))}`);
      assert.deepEqual(samples[samples.length - 1]?.running.sort(), ['a', 'b']);
      assert.deepEqual(l?.reservations.map((r) => `${r.serve} ${r.phase}`).sort(), ['a running', 'b running']);
      assert.equal(measured['a'], own.a);
      assert.equal(measured['b'], own.b);
      assert.ok(waited, 'neither CLI printed the start slot it waited for');
      assert.equal(l?.startSlot, undefined);
    } finally {
      await clearBox();
    }
  });

  test('a start that fails (never healthy within its timeout) gives the slot back, and the start waiting for it proceeds', async () => {
    try {
      const box = sampleBox();
      const stuck = cli('serves', 'up', 'stuck');
      await waitUntil('stuck holds the start slot', async () => (await ledger())?.startSlot?.serve === 'stuck', 60_000, 100);
      const ra = await cli('serves', 'up', 'a');
      const rs = await stuck;
      const samples = await box.stop();
      const both = samples.filter((s) => s.starting.length > 1);
      console.log(
        `  stuck exit ${rs.code}, a exit ${ra.code}; ${both.length} of ${samples.length} samples with two starting; a: ${ra.stdout.trim().split('\n').slice(0, 4).join(' | ')}`,
      );
      assert.equal(rs.code, 1, show(rs));
      assert.equal(ra.code, 0, show(ra));
      assert.match(ra.stdout + ra.stderr, /start slot: stuck is starting on dark-fast since \d+ s; waiting/);
      assert.equal(both.length, 0, JSON.stringify(both.slice(0, 3)));
      assert.equal((await ledger())?.startSlot, undefined);
      const rb = await cli('serves', 'up', 'b');
      assert.equal(rb.code, 0, show(rb));
      assert.doesNotMatch(rb.stdout + rb.stderr, /waiting/);
      if (SAVE_DIR) {
        mkdirSync(SAVE_DIR, { recursive: true });
        await exportWorkflow(client(), workflowIds.bringUp(t.node, 'a'), { file: join(SAVE_DIR, 'start-slot-waited.json') });
      }
    } finally {
      await clearBox();
    }
  });

  test('a slot whose holder was terminated is taken over by the next start', async () => {
    const hung = cli('serves', 'up', 'hung');
    await waitUntil('hung holds the start slot', async () => (await ledger())?.startSlot?.serve === 'hung', 60_000, 100);
    const holder = (await ledger())?.startSlot?.holder ?? '';
    await client().workflow.getHandle(workflowIds.bringUp(t.node, 'hung')).terminate('test: a run that dies holding the start slot');
    await hung;
    const began = Date.now();
    const ra = await cli('serves', 'up', 'a');
    const l = await ledger();
    console.log(
      `  a exit ${ra.code} after ${Date.now() - began} ms; slot now ${JSON.stringify(l?.startSlot ?? null)}; a: ${ra.stdout.trim().split('\n').slice(0, 4).join(' | ')}`,
    );
    assert.equal(ra.code, 0, show(ra));
    assert.match(
      ra.stdout + ra.stderr,
      new RegExp(`start slot taken on dark-fast after \\d+ s \\(${holder.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} had ended holding it\\)`),
    );
    assert.equal(l?.startSlot, undefined);
    assert.equal(l?.reservations.find((r) => r.serve === 'a')?.phase, 'running');
  });
});
