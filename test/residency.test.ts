// The minimum residency as pure functions: the ledger's records, the victim planner's windows,
// the denial's words, and the manifest setting (a node default, a per-serve override, bounded).
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { stringify } from 'smol-toml';
import { parseManifest } from '../src/config/manifest';
import { applyAdmit, denialMessage, emptyLedger, withPhase } from '../src/domain/ledger';
import type { AdmitRequest, CameUpBy, LedgerState } from '../src/domain/ledger';
import { applyEvictionPlan, applyVictimReleased, planEviction, residencyWindow } from '../src/domain/eviction';
import type { EvictionPlan } from '../src/domain/eviction';
import { formatIssue } from '../src/domain/types';
import type { ManifestResult } from '../src/domain/types';
import { admission } from '../src/shared/wording';

const GPU = { role: 'dark-fast', uuid: 'GPU-1', capacityMib: 32607, reserveMib: 4608 };
/** The ledger's clock when the window-bearing serves below became running. */
const T0 = Date.UTC(2026, 6, 14, 9, 0, 0);

/** Admitted as `cameUpBy` would admit it, then marked running at `atMs`. */
function up(
  state: LedgerState,
  serve: string,
  vramMib: number,
  cameUpBy: CameUpBy,
  atMs: number,
  minResidencyS?: number,
  cls: 'evictable' | 'resident' = 'evictable',
) {
  const req: AdmitRequest = { serve, vramMib, class: cls, holder: `h/${serve}`, ...(minResidencyS !== undefined ? { minResidencyS } : {}) };
  return withPhase(applyAdmit(state, req, 'admitted', cameUpBy), serve, 'running', undefined, atMs);
}

/** T013 step 2's box: fast (resident) and vision (evictable), 1375 MiB free; comfyui-sim needs 8192. */
function box(visionBy: CameUpBy, minResidencyS?: number, atMs = T0): LedgerState {
  return up(up(emptyLedger('n', GPU), 'fast', 14336, 'bring-up', T0 - 600_000, 120, 'resident'), 'vision', 12288, visionBy, atMs, minResidencyS);
}

function resident(plan: EvictionPlan) {
  assert.equal(plan.kind, 'resident', JSON.stringify(plan));
  assert.ok(plan.kind === 'resident');
  return plan;
}

function victims(plan: EvictionPlan): string[] {
  assert.equal(plan.kind, 'evict', JSON.stringify(plan));
  return plan.kind === 'evict' ? plan.victims.map((v) => v.serve) : [];
}

describe('the ledger records how a serve came up and since when it runs', () => {
  test('an admission carrying minResidencyS records it, how it came up, and the first time it was marked running', () => {
    const l = box('restore', 60);
    const vision = l.reservations.find((r) => r.serve === 'vision');
    assert.deepEqual(
      { cameUpBy: vision?.cameUpBy, minResidencyS: vision?.minResidencyS, runningSinceMs: vision?.runningSinceMs },
      { cameUpBy: 'restore', minResidencyS: 60, runningSinceMs: T0 },
    );
    // A retried setPhase (or an eviction given up) does not restart the window.
    const again = withPhase(l, 'vision', 'running', undefined, T0 + 30_000).reservations.find((r) => r.serve === 'vision');
    assert.equal(again?.runningSinceMs, T0);
  });

  test('a request without minResidencyS (made before the setting existed) records none of it', () => {
    const l = box('restore', undefined);
    const vision = l.reservations.find((r) => r.serve === 'vision');
    assert.deepEqual(Object.keys(vision ?? {}).sort(), ['class', 'holder', 'phase', 'serve', 'vramMib']);
    assert.equal(planEviction(l, 8192, T0 + 1000).kind, 'evict');
  });

  test('an acquisition through its eviction: the acquirer is recorded as acquired, its window starts when it runs', () => {
    let l = box('bring-up', 60);
    const req: AdmitRequest = { serve: 'comfyui-sim', vramMib: 8192, class: 'on-demand', holder: 'acq', minResidencyS: 30 };
    const plan = planEviction(l, 8192, T0 + 1000);
    assert.deepEqual(victims(plan), ['vision'], 'a plain bring-up is not protected');
    l = applyEvictionPlan(l, req, plan.kind === 'evict' ? plan.victims : []);
    l = applyVictimReleased(l, 'vision', 'comfyui-sim');
    l = withPhase(l, 'comfyui-sim', 'running', undefined, T0 + 5000);
    const acquirer = l.reservations.find((r) => r.serve === 'comfyui-sim');
    assert.deepEqual([acquirer?.cameUpBy, acquirer?.minResidencyS, acquirer?.runningSinceMs], ['acquisition', 30, T0 + 5000]);
  });
});

describe('victim planning with minimum residencies', () => {
  test('inside the window: no victim, the window and the seconds until it ends', () => {
    const plan = resident(planEviction(box('restore', 60), 8192, T0 + 12_000));
    assert.equal(plan.shortfallMib, 6817);
    assert.equal(plan.evictableMib, 12288);
    assert.deepEqual(plan.windows, [{ serve: 'vision', cameUpBy: 'restore', runningSinceMs: T0, minResidencyS: 60, runningForS: 12, evictableInS: 48 }]);
    assert.equal(plan.retryAfterS, 48);
    assert.equal(admission.resident(plan.windows[0]!), 'vision came back 12 s ago and stays resident for 60 s: it may be evicted in 48 s');
  });

  test('at the edge: a millisecond before the end it is kept (1 s to go); at the end it may be evicted', () => {
    const l = box('restore', 60);
    const last = resident(planEviction(l, 8192, T0 + 59_999));
    assert.deepEqual([last.windows[0]?.runningForS, last.windows[0]?.evictableInS, last.retryAfterS], [59, 1, 1]);
    assert.deepEqual(victims(planEviction(l, 8192, T0 + 60_000)), ['vision']);
  });

  test('outside the window, or with none: evicted as before', () => {
    assert.deepEqual(victims(planEviction(box('restore', 60), 8192, T0 + 61_000)), ['vision']);
    assert.deepEqual(victims(planEviction(box('acquisition', 0), 8192, T0)), ['vision'], 'min_residency_s = 0 turns it off');
    assert.deepEqual(victims(planEviction(box('bring-up', 60), 8192, T0 + 1)), ['vision'], 'a plain bring-up has no window');
    // Without the ledger's clock (a what-if), every window counts as ended.
    assert.deepEqual(victims(planEviction(box('restore', 60), 8192)), ['vision']);
  });

  test('an acquirer is protected as a restored serve is', () => {
    const plan = resident(planEviction(box('acquisition', 90), 8192, T0 + 30_000));
    assert.equal(admission.resident(plan.windows[0]!), 'vision was acquired 30 s ago and stays resident for 90 s: it may be evicted in 60 s');
  });

  test('several victims with different windows: retryAfterS is the first to end, every window is listed', () => {
    // Two evictables of 6000 MiB on a 20000 MiB card with a 5000 MiB resident: 12000 needs both.
    const card = { ...GPU, capacityMib: 20000, reserveMib: 2000 };
    let l = up(emptyLedger('n', card), 'resident-h', 5000, 'bring-up', T0 - 600_000, 120, 'resident');
    l = up(l, 'batch-b', 6000, 'acquisition', T0 + 10_000, 90);
    l = up(l, 'batch-a', 6000, 'restore', T0, 30);
    const plan = resident(planEviction(l, 12000, T0 + 20_000));
    assert.deepEqual(
      plan.windows.map((w) => [w.serve, w.runningForS, w.evictableInS]),
      [
        ['batch-a', 20, 10],
        ['batch-b', 10, 80],
      ],
    );
    assert.equal(plan.retryAfterS, 10);
    // Once batch-a's window ended, batch-b's still keeps both: the answer moves to batch-b's end.
    const later = resident(planEviction(l, 12000, T0 + 30_000));
    assert.deepEqual([later.windows.map((w) => w.serve), later.retryAfterS], [['batch-b'], 70]);
    assert.deepEqual(victims(planEviction(l, 12000, T0 + 100_000)).sort(), ['batch-a', 'batch-b']);
  });

  test('a serve inside its window is passed over for one outside it, even where the tie-break would pick it', () => {
    const card = { ...GPU, capacityMib: 20000, reserveMib: 2000 };
    // Without windows the tie-break takes the most recently admitted of two equal victims: batch-b.
    let l = up(emptyLedger('n', card), 'batch-a', 6000, 'bring-up', T0 - 60_000, 60);
    l = up(l, 'batch-b', 6000, 'restore', T0, 60);
    l = up(l, 'resident-h', 5000, 'bring-up', T0, 60, 'resident');
    assert.deepEqual(victims(planEviction(l, 4000)), ['batch-b']);
    const plan = planEviction(l, 4000, T0 + 1000);
    assert.deepEqual(victims(plan), ['batch-a']);
    assert.ok(plan.kind === 'evict');
    assert.match(plan.reason, /\(of 1 evictable\); batch-b kept: inside its minimum residency$/);
  });

  test('not enough evictable MiB even with every window ended: impossible, not a wait', () => {
    assert.equal(planEviction(box('restore', 60), 20000, T0 + 1000).kind, 'impossible');
  });

  test('residencyWindow: only an acquisition or a restore with both fields has one', () => {
    const [, vision] = box('restore', 60).reservations;
    assert.ok(vision);
    assert.equal(residencyWindow({ ...vision, cameUpBy: 'bring-up' }, T0), undefined);
    assert.equal(residencyWindow({ ...vision, runningSinceMs: undefined }, T0), undefined);
    assert.equal(residencyWindow(vision, T0)?.evictableInS, 60);
  });
});

describe("the residency denial's words", () => {
  test('the acquisition\'s message: the ledger\'s own "over budget by N MiB", then which serve, since when, and when', () => {
    const plan = resident(planEviction(box('restore', 60), 8192, T0 + 12_000));
    const denied = { decision: 'denied' as const, serve: 'comfyui-sim', vramMib: 8192, freeMib: 1375, shortfallMib: 6817 };
    assert.equal(
      `${denialMessage(denied)}${admission.evictionHint('dark-fast', { kind: 'resident', windows: plan.windows }, true)}`,
      'serves up comfyui-sim denied: over budget by 6817 MiB, nothing started; vision came back 12 s ago and stays resident for 60 s: it may be evicted in 48 s',
    );
    // The other hints.
    assert.equal(
      admission.evictionHint('dark-fast', { kind: 'short', evictableMib: 12288, held: [] }, true),
      "; evictable serves on 'dark-fast' hold only 12288 MiB",
    );
    assert.equal(
      admission.evictionHint('dark-fast', { kind: 'would-evict', victims: [{ serve: 'vision', vramMib: 12288 }] }, false),
      ' (with --evict it would evict vision: 12288 MiB)',
    );
    assert.equal(admission.evictionHint('dark-fast', { kind: 'would-evict', victims: [{ serve: 'vision', vramMib: 12288 }] }, true), '');
    assert.equal(
      admission.evictionHint(
        'dark-fast',
        {
          kind: 'short',
          evictableMib: 0,
          held: [{ serve: 'comfyui-sim', vramMib: 8192, holder: 'acquire/primary-node/comfyui-sim/run-1', victims: ['vision'] }],
        },
        true,
      ),
      "; evictable serves on 'dark-fast' hold only 0 MiB; 8192 MiB are held for comfyui-sim while vision is being evicted for it (acquire/primary-node/comfyui-sim)",
    );
  });
});

describe('min_residency_s in the manifest', () => {
  const gpu = { role: 'dark-fast', uuid: 'GPU-00000000-1111-2222-3333-444444444444', capacity_mib: 32607, reserve_mib: 4608 };
  const serve = (name: string, port: number, extra: Record<string, unknown> = {}) => ({
    name,
    gpu_role: 'dark-fast',
    class: 'evictable',
    vram_mib: 1024,
    image: 'example/server:1',
    model: `org/${name}`,
    served_model_name: name,
    port,
    ...extra,
  });
  const parse = (node: Record<string, unknown>, serves: Record<string, unknown>[]): ManifestResult =>
    parseManifest(stringify({ node: { name: 'n', ...node }, gpus: [gpu], serves }), 'serves.toml');
  const issues = (r: ManifestResult) => (r.ok ? r.warnings : [...r.errors, ...r.warnings]).map(formatIssue);

  test('default 120 s; [node] min_residency_s sets every serve; a serve may set its own', () => {
    const plain = parse({}, [serve('a', 31001)]);
    assert.ok(plain.ok, issues(plain).join('\n'));
    assert.deepEqual([plain.manifest.minResidencyS, plain.manifest.serves[0]?.minResidencyS], [120, 120]);

    const set = parse({ min_residency_s: 300 }, [serve('a', 31001), serve('b', 31002, { min_residency_s: 5 }), serve('c', 31003, { min_residency_s: 0 })]);
    assert.ok(set.ok, issues(set).join('\n'));
    assert.deepEqual(set.warnings, []);
    assert.equal(set.manifest.minResidencyS, 300);
    assert.deepEqual(
      set.manifest.serves.map((s) => [s.name, s.minResidencyS]),
      [
        ['a', 300],
        ['b', 5],
        ['c', 0],
      ],
    );
  });

  test('bounded: a whole number of seconds in 0..3600, the error names the field', () => {
    const node = parse({ min_residency_s: 3601 }, [serve('a', 31001)]);
    assert.deepEqual(issues(node), ['serves.toml: node.min_residency_s: must be a whole number of seconds in 0..3600 (got 3601)']);
    const own = parse({}, [serve('a', 31001, { min_residency_s: -1 }), serve('b', 31002, { min_residency_s: 1.5 })]);
    assert.deepEqual(issues(own), [
      "serves.toml: serve 'a' (serves[0].min_residency_s): must be a whole number of seconds in 0..3600 (got -1)",
      "serves.toml: serve 'b' (serves[1].min_residency_s): must be a whole number of seconds in 0..3600 (got 1.5)",
    ]);
    assert.ok(parse({ min_residency_s: 3600 }, [serve('a', 31001, { min_residency_s: 0 })]).ok);
  });

  test('set on a serve that is never evicted: a warning that it has no effect', () => {
    const r = parse({}, [serve('a', 31001, { class: 'resident', min_residency_s: 60 }), serve('b', 31002, { class: 'on-demand' })]);
    assert.ok(r.ok);
    assert.deepEqual(issues(r), [
      "serves.toml: serve 'a' (serves[0].min_residency_s): has no effect on a resident serve: only evictable serves are evicted, " +
        'so only they need time before they may be evicted again',
    ]);
  });
});
