// Sleep-mode eviction against the fences, on a simulated box sampled itself: nvidia-smi's reading
// of the GPU less what the box draws outside the ledger, against the GPU's budget, beside what the
// ledger holds. vLLM's sleep leaks (#32714, #47654): a victim asleep holds all of its VRAM on paper
// until nvidia-smi has shown it back, whatever ends the acquisition meanwhile.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { formatLedger, totals } from '../src/domain/ledger';
import type { LedgerState } from '../src/domain/ledger';
import { serveBaseUrl } from '../src/domain/serve';
import { ledgerSnapshots, serveAcquire, serveDown, serveUp } from '../src/client/operations';
import { workflowIds } from '../src/shared/messages';
import { startSimTestBox } from './support/sim';
import type { SimTestBox } from './support/sim';
import { waitForPendingActivity } from './support/history-scan';

/** What the box's processes outside the ledger draw (startSimTestBox's nonLedgerDrawMib). */
const NON_LEDGER_MIB = 1200;
const GPU = { role: 'lk', capacity_mib: 32000, reserve_mib: 8000 };
const BUDGET_MIB = GPU.capacity_mib - GPU.reserve_mib;

describe('sleep-mode eviction and the fences', () => {
  let t: SimTestBox;
  before(async () => {
    t = await startSimTestBox(
      'sleep-fences',
      [GPU],
      [
        // Declares 600 MiB asleep and keeps 5000 more: its release check would fall back to a stop.
        {
          name: 'lky',
          vram_mib: 12000,
          class: 'evictable',
          router_tier: 'lky-local',
          sleep: { level: 2, residual_mib: 600 },
          env: { SIM_SLEEP_RESIDUAL_MIB: '600', SIM_SLEEP_LEAK_MIB: '5000' },
        },
        { name: 'tk', vram_mib: 20000, class: 'on-demand' },
        { name: 'big', vram_mib: 23000 },
      ],
    );
  });
  after(async () => {
    await t?.close();
  });
  const client = () => t.temporal.client;

  async function ledger(): Promise<LedgerState> {
    const [l] = await ledgerSnapshots(client(), t.manifest);
    assert.ok(l);
    return l;
  }
  /** nvidia-smi's own reading of the GPU, less the non-ledger draw: what the serves draw. */
  async function servesDrawMib(): Promise<number> {
    const reading = (await t.box.gpu.readGpus()).find((g) => g.uuid === t.manifest.gpus[0]?.uuid);
    assert.ok(reading);
    return reading.usedMib - NON_LEDGER_MIB;
  }
  async function asleep(serve: string): Promise<boolean> {
    const spec = t.manifest.serves.find((s) => s.name === serve);
    assert.ok(spec);
    const r = (await (await fetch(`${serveBaseUrl(spec)}/is_sleeping`, { signal: AbortSignal.timeout(2000) })).json()) as { is_sleeping: boolean };
    return r.is_sleeping;
  }

  test("an acquirer brought down while its leaky victim's release check runs: the victim stays asleep held whole, and nothing is admitted into the MiB it keeps", async () => {
    assert.ok((await serveUp(client(), t.node, 'lky')).ok);
    const acquisition = serveAcquire(client(), t.node, { serve: 'tk', evict: true, releaseTimeoutS: 20 });
    await waitForPendingActivity(client().workflow.getHandle(workflowIds.acquire(t.node, 'tk')), 'confirmVramReleased');
    assert.equal(await asleep('lky'), true);
    // The operator changes their mind: serves down of the acquirer cancels its acquisition.
    assert.ok((await serveDown(client(), t.node, 'tk')).ok);
    assert.ok(!(await acquisition).ok);
    assert.equal(await asleep('lky'), true, 'the victim stays asleep: only a restore wakes it');
    const l = await ledger();
    assert.deepEqual(formatLedger(l).slice(1), ['  lky 12000 MiB (evictable, sleeping at level 2 for tk, 12000 MiB held)']);
    // The box: lky keeps 5600 MiB asleep. A bring-up of 23000 MiB would run it past the budget.
    const up = await serveUp(client(), t.node, 'big');
    assert.ok(!up.ok && up.failureType === 'AdmissionDenied', up.ok ? up.result.message : up.message);
    const draw = await servesDrawMib();
    assert.ok(draw <= BUDGET_MIB && draw >= 5600, `serves draw ${draw} MiB on a ${BUDGET_MIB} MiB budget; ledger committed ${totals(l).committedMib} MiB`);
    assert.ok((await serveDown(client(), t.node, 'lky')).ok);
  });
});
