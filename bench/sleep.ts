// Benchmark: eviction by sleeping against eviction by stopping, and the restore each makes.
//
// On the simulated box (sim serves as local processes with vLLM's sleep mode, the reference
// router, the fake nvidia-smi; a worker on a dev server), two GPUs alike but for how their
// evictable serve goes: `vision-stop` (eviction = "stop") and `vision-sleep` (eviction = "sleep",
// level 1). Both load cold in the time vLLM's sleep-mode post (Oct 2025, A100) gives for
// Phi-3-vision, 58.1 s, and the sleeper wakes from level 1 in its 0.82 s; both times are scaled by
// --scale (default 0.1: 5.81 s and 82 ms) so a run takes seconds, which keeps their ratio. N runs
// of, on each GPU: the evictable serve up, `serves up comfyui-* --evict` (the eviction: its wall
// time by the server's clock), `serves down comfyui-* --restore` (the restore: the child bring-up's
// wall time, a cold start or a wake). Printed: each median, and the ratios.
//
//   node dist/bench/sleep.js [--runs N] [--scale F]          (scripts/bench.sh sets the env up)
import { parseArgs } from 'node:util';
import { runWallMs, serveAcquire, serveDown, serveUp } from '../src/client/operations';
import { PHI3_VISION_A100 } from '../src/sim/sleep-mode';
import type { TestServe } from '../test/support/box';
import { startSimTestBox } from '../test/support/sim';
import { median } from './target';

const PUBLISHED = PHI3_VISION_A100;

interface Sample {
  evictionMs: number;
  restoreMs: number;
  restoredBy: string;
}

function ok<T extends { message: string }>(o: { ok: true; result: T } | { ok: false; message: string }, what: string): T {
  if (!o.ok) throw new Error(`${what}: ${o.message}`);
  return o.result;
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { runs: { type: 'string', default: '3' }, scale: { type: 'string', default: '0.1' }, 'poll-ms': { type: 'string' } },
  });
  const runs = Number(values.runs);
  const scale = Number(values.scale);
  if (!Number.isInteger(runs) || runs < 1 || runs > 50) throw new Error(`--runs: a whole number from 1 to 50 (got ${values.runs})`);
  if (!Number.isFinite(scale) || scale <= 0 || scale > 1) throw new Error(`--scale: a number above 0, at most 1 (got ${values.scale})`);
  const coldLoadMs = Math.round(PUBLISHED.coldLoadMs * scale);
  const wakeMs = Math.round(PUBLISHED.wakeLevel1Ms * scale);

  const gpu = (role: string) => ({ role, capacity_mib: 32607, reserve_mib: 4608 });
  const evictable = (name: string, role: string, sleep: boolean): TestServe => ({
    name,
    gpu_role: role,
    vram_mib: 12288,
    class: 'evictable',
    router_tier: `${name}-local`,
    min_residency_s: 0,
    start_timeout_s: Math.ceil(coldLoadMs / 1000) + 30,
    ...(sleep ? { sleep: { level: 1 as const, residual_mib: 600, host_ram_mib: PUBLISHED.weightsMib } } : {}),
    env: {
      SIM_START_DELAY_MS: String(coldLoadMs),
      SIM_WAKE_DELAY_MS: String(wakeMs),
      SIM_SLEEP_RESIDUAL_MIB: '600',
      SIM_WEIGHTS_MIB: String(PUBLISHED.weightsMib),
    },
  });
  const serves: TestServe[] = [
    { name: 'fast-a', gpu_role: 'stop-gpu', vram_mib: 14336 },
    evictable('vision-stop', 'stop-gpu', false),
    { name: 'comfyui-a', gpu_role: 'stop-gpu', vram_mib: 8192, class: 'on-demand' },
    { name: 'fast-b', gpu_role: 'sleep-gpu', vram_mib: 14336 },
    evictable('vision-sleep', 'sleep-gpu', true),
    { name: 'comfyui-b', gpu_role: 'sleep-gpu', vram_mib: 8192, class: 'on-demand' },
  ];
  process.stderr.write(`sleep bench: ${runs} run(s); cold load ${coldLoadMs} ms, wake ${wakeMs} ms (vLLM's published figures × ${scale})\n`);
  const t = await startSimTestBox('bench-sleep', [gpu('stop-gpu'), gpu('sleep-gpu')], serves);
  const client = t.temporal.client;
  const samples: { stop: Sample[]; sleep: Sample[] } = { stop: [], sleep: [] };
  try {
    for (const s of ['fast-a', 'fast-b', 'vision-stop', 'vision-sleep']) ok(await serveUp(client, t.node, s), `serves up ${s}`);
    for (let i = 0; i < runs; i++) {
      for (const [mode, victim, acquirer] of [
        ['stop', 'vision-stop', 'comfyui-a'],
        ['sleep', 'vision-sleep', 'comfyui-b'],
      ] as const) {
        const acq = await serveAcquire(client, t.node, { serve: acquirer, evict: true });
        const a = ok(acq, `serves up ${acquirer} --evict`);
        if (a.victims[0]?.serve !== victim || (mode === 'sleep') !== Boolean(a.victims[0].sleep && !a.victims[0].sleep.fellBack)) {
          throw new Error(`run ${i + 1}: ${a.message}`);
        }
        const evictionMs = await runWallMs(client, acq.workflowId, acq.runId);
        const down = ok(await serveDown(client, t.node, acquirer, { restore: true }), `serves down ${acquirer} --restore`);
        const restored = down.restored[0];
        if (!restored?.ok) throw new Error(`run ${i + 1}: ${victim} not restored: ${restored?.message ?? 'none'}`);
        const restoreMs = await runWallMs(client, restored.workflowId);
        const restoredBy = /by waking/.test(restored.message) ? 'wake' : 'cold start';
        samples[mode].push({ evictionMs, restoreMs, restoredBy });
        process.stderr.write(`  run ${i + 1} ${mode.padEnd(5)}: eviction ${evictionMs} ms, restore ${restoreMs} ms (${restoredBy})\n`);
      }
    }
  } finally {
    await t.close();
  }

  const med = (xs: Sample[], k: 'evictionMs' | 'restoreMs') => median(xs.map((x) => x[k]));
  const coldRestore = med(samples.stop, 'restoreMs');
  const wakeRestore = med(samples.sleep, 'restoreMs');
  const byStop = med(samples.stop, 'evictionMs');
  const bySleep = med(samples.sleep, 'evictionMs');
  const rows = [
    ['restore by cold start (stopped victim)', `${Math.round(coldRestore)} ms`, `its load ${coldLoadMs} ms`],
    ['restore by wake (sleeping victim)', `${Math.round(wakeRestore)} ms`, `its wake ${wakeMs} ms`],
    ['  cold start ÷ wake', `×${(coldRestore / wakeRestore).toFixed(1)}`, `published ×${(PUBLISHED.coldLoadMs / PUBLISHED.wakeLevel1Ms).toFixed(1)}`],
    ['eviction by stop (acquisition wall)', `${Math.round(byStop)} ms`, ''],
    ['eviction by sleep (acquisition wall)', `${Math.round(bySleep)} ms`, ''],
    ['  sleep ÷ stop', `×${(bySleep / byStop).toFixed(2)}`, ''],
  ];
  process.stdout.write(`\neviction by sleeping, medians of ${runs} run(s) on the simulated box:\n`);
  for (const [what, figure, note] of rows) process.stdout.write(`  ${(what ?? '').padEnd(40)} ${(figure ?? '').padStart(9)}  ${note ?? ''}\n`);
}

main().catch((err: unknown) => {
  process.stderr.write(`sleep bench: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
