// The main job as a test: the T013 sequence on the simulated box must match every figure.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { runDemo } from '../src/demo/demo';
import { testTemporal } from './support/temporal';

test('gpures demo: every step of T013 matches the field report, and the closed loop runs after it', async () => {
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
    assert.equal(byWhat(3, 'eviction order'), 'quiesce vision → drain vision → stop vision → release vision');
    assert.equal(byWhat(3, 'committed'), '22528');
    assert.equal(byWhat(3, 'vision in the ledger'), 'vision 12288 MiB (evictable, evicted for comfyui-sim): not committed');
    assert.equal(byWhat(3, 'routed vision request while evicted'), '503');
    assert.equal(byWhat(4, 'observed_model after readmit'), 'qwen3-vl-4b-instruct');
    assert.equal(byWhat(4, 'routed vision request after restore'), '200');
    assert.equal(byWhat(4, 'committed/budget'), '26624/27999, free 1375');
    assert.equal(byWhat(5, 'committed/budget'), '26112/27999, free 1887');
    // The loop: three routed requests for chat-large while it is down → one acquisition evicting
    // vision, all answered; its idle lease then brings it down and vision back.
    assert.equal(byWhat(6, 'routed chat-large requests'), '200,200,200');
    assert.equal(byWhat(6, 'acquisitions the router started'), '1, by the API');
    assert.equal(byWhat(6, 'victims'), 'vision');
    assert.equal(byWhat(6, 'chat-large in the ledger'), 'chat-large 12288 MiB (on-demand, running)');
    assert.equal(byWhat(6, 'routed vision request while evicted'), '503, Retry-After 10');
    assert.equal(byWhat(6, 'lease outcome'), 'expired');
    assert.equal(byWhat(6, 'restored by the lease'), 'vision');
    assert.equal(byWhat(6, 'routed vision request after the lease'), '200');
    assert.equal(byWhat(6, 'committed/budget'), '26624/27999, free 1375');
    assert.equal(byWhat(6, 'chat-large in the ledger after the lease'), 'absent');
    assert.equal(result.ok, true, lines.join('\n'));
    assert.equal(result.checks.length, 24);
    assert.ok(
      lines.some((l) => l.trim() === '14 of 14 checks matched the field report, 10 of 10 of the closed loop'),
      lines.join('\n'),
    );
    // The report's ledger-0 … ledger-4, whole and in order (the demo prints a ledger after each step).
    const header = (committed: number, free: number) =>
      `  gpu_role 'dark-fast': capacity 32607 MiB, reserve 4608 MiB, committed ${committed} MiB, free ${free} MiB`;
    const fullResidentSet = [
      header(26112, 1887),
      '    fast 14336 MiB (resident, running)',
      '    embeddings 3200 MiB (resident, running)',
      '    reranker 3456 MiB (resident, running)',
      '    ocr 5120 MiB (resident, running)',
    ];
    const fastAndVision = [header(26624, 1375), '    fast 14336 MiB (resident, running)', '    vision 12288 MiB (evictable, running)'];
    const evicted = [
      header(22528, 5471),
      '    fast 14336 MiB (resident, running)',
      '    vision 12288 MiB (evictable, evicted for comfyui-sim): not committed',
      '    comfyui-sim 8192 MiB (on-demand, running)',
    ];
    const blocks: string[][] = [];
    lines.forEach((l, i) => {
      if (l.startsWith("  gpu_role 'dark-fast'"))
        blocks.push(lines.slice(i, i + 1 + lines.slice(i + 1).findIndex((x) => !x.startsWith('    ') || x.startsWith('    nvidia-smi'))));
    });
    const onDemand = [
      header(26624, 1375),
      '    fast 14336 MiB (resident, running)',
      '    vision 12288 MiB (evictable, evicted for chat-large): not committed',
      '    chat-large 12288 MiB (on-demand, running)',
    ];
    assert.deepEqual(blocks, [fullResidentSet, fastAndVision, evicted, fastAndVision, fullResidentSet, onDemand, fastAndVision], lines.join('\n'));
    assert.ok(lines.some((l) => /non-ledger draw 5700 MiB against a reserve of 4608 MiB/.test(l)));
  } finally {
    await temporal.close();
  }
});

test('gpures demo --sleep: vision is put to sleep and woken, not stopped and started; the wake restores it faster than its cold start', async () => {
  const temporal = await testTemporal();
  const lines: string[] = [];
  try {
    const result = await runDemo({ temporalAddress: temporal.address, out: (l) => lines.push(l), sleep: true });
    const byWhat = (step: number, what: string) => result.checks.find((c) => c.step === step && c.what === what)?.observed;
    assert.equal(byWhat(3, 'eviction order'), 'quiesce vision → drain vision → sleep vision → release vision');
    assert.equal(byWhat(3, 'committed'), '23128');
    assert.equal(byWhat(3, 'vision in the ledger'), 'vision 12288 MiB (evictable, sleeping at level 1 for comfyui-sim, 600 MiB held): 600 MiB of it committed');
    assert.equal(byWhat(4, 'restored by'), 'waking');
    assert.equal(byWhat(6, 'restored by the lease'), 'vision');
    assert.equal(byWhat(6, 'restored by the lease by'), 'waking');
    assert.equal(result.ok, true, lines.join('\n'));
    const figures = lines.map((l) => /restore of vision by waking: (\d+) ms .*; its cold start at step 2: (\d+) ms/.exec(l)).find(Boolean);
    assert.ok(figures, lines.join('\n'));
    // The cold start waits out the simulated 5.81 s load; the wake, 82 ms and the checks around it.
    assert.ok(Number(figures[2]) >= 5810, figures[0]);
    assert.ok(Number(figures[1]) < Number(figures[2]), figures[0]);
  } finally {
    await temporal.close();
  }
});
