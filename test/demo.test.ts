// The main job as a test: the T013 sequence on the simulated box must match every figure.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runDemo } from '../src/demo/demo';
import { testTemporal } from './support/temporal';

test('gpures demo: every step of T013 matches the field report', async () => {
  const temporal = await testTemporal();
  const lines: string[] = [];
  try {
    const result = await runDemo({ temporalAddress: temporal.address, out: (l) => lines.push(l) });
    const byWhat = (step: number, what: string) => result.checks.find((c) => c.step === step && c.what === what)?.observed;
    assert.equal(byWhat(1, 'committed/budget'), '26112/27999, free 1887');
    assert.equal(byWhat(1, 'denial'), 'serves up vision denied: over budget by 10401 MiB, nothing started');
    assert.equal(byWhat(2, 'committed/budget'), '26624/27999, free 1375');
    assert.equal(byWhat(2, 'routed vision request'), '200');
    assert.equal(byWhat(3, 'victims'), 'vision');
    assert.equal(byWhat(3, 'committed'), '22528');
    assert.equal(byWhat(3, 'vision in the ledger'), 'vision 12288 MiB (evictable, evicted)');
    assert.equal(byWhat(3, 'routed vision request while evicted'), '503');
    assert.equal(byWhat(4, 'observed_model after readmit'), 'qwen3-vl-4b-instruct');
    assert.equal(byWhat(4, 'routed vision request after restore'), '200');
    assert.equal(byWhat(5, 'committed/budget'), '26112/27999, free 1887');
    assert.equal(result.ok, true, lines.join('\n'));
    assert.ok(lines.includes("  gpu_role 'dark-fast': capacity 32607 MiB, reserve 4608 MiB, committed 22528 MiB, free 5471 MiB"));
    assert.ok(lines.some((l) => /non-ledger draw 5700 MiB against a reserve of 4608 MiB/.test(l)));
  } finally {
    await temporal.close();
  }
});
