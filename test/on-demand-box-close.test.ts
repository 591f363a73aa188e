// The on-demand box closed right after a cold request's first byte, as bench/router-on-demand.ts
// does when a run fails: the acquisition's last local step (its `running`, a ledger Update) is then
// in flight. Stopped under it, the worker polls no workflow task, the ledger's included, so the
// Update is never answered and the shutdown waited for the step's five attempts of 30 s (166 s in
// the whole bench at ab4bd6d, and 3 of 3 times closing so).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { serveUp } from '../src/client/operations';
import type { TestServe } from './support/box';
import { startOnDemandBox } from './support/on-demand-box';

const GPU = { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 };
const SERVES: TestServe[] = [
  { name: 'fast', vram_mib: 14336, router_tier: 'fast-local' },
  { name: 'vision', vram_mib: 12288, class: 'evictable', served_model_name: 'qwen3-vl-4b-instruct', router_tier: 'vision-local', min_residency_s: 0 },
  { name: 'big', vram_mib: 8192, class: 'on-demand', router_tier: 'big-local' },
];

/** Far under the 166 s of a shutdown under a ledger Update, far over an acquisition's last steps (ms). */
const CLOSE_BOUND_MS = 30_000;

describe('the on-demand box closed under an acquisition', () => {
  test("closes once the acquisition's last steps have landed, not after its local step's attempts time out", { timeout: 240_000 }, async () => {
    const box = await startOnDemandBox({ prefix: 'od-close', gpu: GPU, serves: SERVES, onDemand: [{ tier: 'big-local', serve: 'big', evict: true }] });
    let closed = false;
    try {
      for (const s of ['fast', 'vision']) assert.ok((await serveUp(box.temporal.client, box.node, s)).ok, `serves up ${s}`);
      const res = await box.chat('big');
      // The first byte: the guarded readmit has let the tier back, the run's `running` is next.
      await res.body?.getReader().read();
      assert.equal(res.status, 200);
      const began = Date.now();
      await box.close();
      closed = true;
      const tookMs = Date.now() - began;
      assert.ok(tookMs < CLOSE_BOUND_MS, `the box took ${tookMs} ms to close`);
    } finally {
      if (!closed) await box.close();
    }
  });
});
