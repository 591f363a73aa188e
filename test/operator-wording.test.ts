// Sentences a newcomer operator read and could not act on, or that contradicted themselves: each
// must say what to do, or say only what its figures show.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readHistoryFile } from '../src/audit/history';
import { buildReport, summarizeActivity } from '../src/audit/report';
import { eviction, start } from '../src/shared/wording';

const STUCK = { drained: false, waitedMs: 5000, routerInFlightAtStart: 2, routerInFlightAtEnd: 1, vllmRunningAtEnd: 1 };

describe('operator wording', () => {
  test("a drain timeout names the operator's options: a longer --drain-timeout, or --force", () => {
    const m = eviction.drainTimeout('vision', STUCK, 5);
    assert.match(m, /^vision did not drain within 5 s \(1 in flight at the router, 1 running in vLLM\)/);
    assert.match(m, /--drain-timeout S \(drain_timeout_s\)/);
    assert.match(m, /--force \(force\)/);
  });
});

describe('a MIG instance declared as the GPU', () => {
  test("the room check says why it is not read (nvidia-smi's --query-gpu lists whole GPUs) and what to do, not that no nvidia-smi reads it", () => {
    const m = start.roomNotChecked('MIG-4b5e2b1c-3d4e-5f60-8a9b-0c1d2e3f4a5b');
    console.log(`  ${m}`);
    assert.doesNotMatch(m, /no nvidia-smi on this worker/);
    assert.match(m, /^not checked: MIG-4b5e2b1c-\S+ is a MIG instance, and nvidia-smi's --query-gpu lists whole GPUs only/);
    assert.match(m, /declare the instance's own memory there/);
    assert.match(m, /with MIG mode off, declare the whole GPU by its GPU-<uuid>/);
    assert.equal(start.roomNotChecked('GPU-1'), 'not checked: no nvidia-smi on this worker reads GPU-1');
  });
});

describe("a victim's release beside the whole GPU's reading", () => {
  // The stream's latest reading, up to 250 ms old, taken before the stop: used unchanged.
  const stale = { releasedMib: 12288, usedBeforeMib: 32324, usedAfterMib: 32324 };
  const own = { by: 'own-processes' as const, pids: [4242], heldBeforeMib: 12288, heldNowMib: 0 };

  test('confirmed by its own processes: their figures, and the GPU named as not the evidence, never its stale used', () => {
    for (const line of [
      eviction.vramBack({ ...stale, reading: own }, 'GPU-1'),
      summarizeActivity('confirmVramReleased', {}, { ...stale, gpuUuid: 'GPU-1', expectedMib: 12288, waitedMs: 40, reading: own }),
    ]) {
      assert.doesNotMatch(line, /32324/, line);
      assert.match(line, /12288 MiB back on GPU-1 \(.*the whole GPU's used is not the evidence.*\).*by its own processes: pid 4242, 12288 → 0 MiB/, line);
    }
  });

  test("not released by its own processes: the GPU's used is called now only when read at the failure", () => {
    const held = { ...stale, releasedMib: 0, gpuUuid: 'GPU-1', expectedMib: 12288, reading: { ...own, heldNowMib: 12288 } };
    const dated = eviction.vramHeld('vision', held, 0, 30, false);
    assert.doesNotMatch(dated, /32324 MiB now/, dated);
    assert.match(dated, /12288 MiB still held by its own processes after 30 s \(.*the whole GPU's used is not the evidence/, dated);
    const fresh = eviction.vramHeld('vision', { ...held, usedAfterMib: 32100 }, 0, 30, true);
    assert.match(fresh, /after 30 s \(used 32324 MiB before the stop, 32100 MiB now\)/, fresh);
  });

  test('confirmed by the whole GPU: its used before and after are the evidence and stay', () => {
    const gpu = { releasedMib: 12288, usedBeforeMib: 32324, usedAfterMib: 20036, reading: { by: 'whole-gpu' as const, why: 'no pids' } };
    assert.match(eviction.vramBack(gpu, 'GPU-1'), /12288 MiB back on GPU-1 \(used 32324 → 20036 MiB\), by the whole GPU/);
  });
});

describe("a lease's report", () => {
  const history = () => readHistoryFile('test/histories/lease-expiry-continued-run2.json');

  test("ledger after is its bring-down's, not its own read from before the bring-down", () => {
    const r = buildReport(history());
    const child = r.children.find((c) => c.status === 'completed');
    const after = (child?.result as { ledgerAfter?: string[] } | undefined)?.ledgerAfter;
    assert.ok(after?.length, 'the recording has a completed bring-down with its ledger after');
    assert.deepEqual(r.ledger.after, after);
    assert.ok(r.ledger.before?.some((l) => l.includes('comfyui-sim')));
    assert.ok(!r.ledger.after?.some((l) => l.includes('comfyui-sim')), r.ledger.after?.join('\n'));
  });

  test('its header gives the term as it ended: granted, and extended to', () => {
    const h = history();
    assert.match(buildReport(h).operation, /^lease of comfyui-sim \(2 s\)$/);
    // The same run, its clock carried with an expiry moved on by an extension to 35 minutes.
    const attrs = h.events[0]?.['workflowExecutionStartedEventAttributes'] as { input: { payloads: { data: string }[] } };
    const p = attrs.input.payloads[0];
    assert.ok(p);
    const input = JSON.parse(Buffer.from(p.data, 'base64').toString()) as { clock: { startedAtEpochMs: number; notBeforeEpochMs: number } };
    input.clock.notBeforeEpochMs = input.clock.startedAtEpochMs + 35 * 60_000;
    p.data = Buffer.from(JSON.stringify(input)).toString('base64');
    assert.match(buildReport(h).operation, /^lease of comfyui-sim \(granted 2 s, extended to 2100 s \(35m\), until \S+Z\)$/);
  });
});
