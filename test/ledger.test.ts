// The ledger's arithmetic and victim planning, as pure functions.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { applyAdmit, decideAdmit, denialMessage, emptyLedger, formatLedger, setAsideBy, totals, withPhase } from '../src/domain/ledger';
import { bringDown } from '../src/shared/wording';
import type { AdmitRequest, LedgerState, Reservation } from '../src/domain/ledger';
import { carriedStartSlot, withRestoreLinks } from '../src/domain/reconcile';
import { applyEvictionAborted, applyEvictionPlan, applyVictimReleased, evictionOutlook, planEviction } from '../src/domain/eviction';
import type { ServeClass } from '../src/domain/types';
import { ledgerJson } from '../src/client/ledger-view';

const GPU = { role: 'dark-fast', uuid: 'GPU-1', capacityMib: 32607, reserveMib: 4608 };

function running(state: LedgerState, serve: string, vramMib: number, cls: ServeClass = 'resident'): LedgerState {
  const req: AdmitRequest = { serve, vramMib, class: cls, holder: `h/${serve}` };
  assert.equal(decideAdmit(state, req).decision, 'admitted');
  return withPhase(applyAdmit(state, req), serve, 'running');
}

describe('ledger arithmetic', () => {
  test('seed T011: full resident set leaves 1887 free and vision is 10401 short', () => {
    let l = emptyLedger('primary-node', GPU);
    for (const [s, m] of [
      ['fast', 14336],
      ['embeddings', 3200],
      ['reranker', 3456],
      ['ocr', 5120],
    ] as const)
      l = running(l, s, m);
    assert.deepEqual(totals(l), { budgetMib: 27999, committedMib: 26112, heldMib: 0, freeMib: 1887 });
    const d = decideAdmit(l, { serve: 'vision', vramMib: 12288, class: 'evictable', holder: 'x' });
    assert.equal(d.decision, 'denied');
    assert.ok(d.decision === 'denied');
    assert.equal(denialMessage(d), 'serves up vision denied: over budget by 10401 MiB, nothing started');
    assert.equal(formatLedger(l)[0], "gpu_role 'dark-fast': capacity 32607 MiB, reserve 4608 MiB, committed 26112 MiB, free 1887 MiB");
  });

  test('a serve already held is reported, not admitted twice', () => {
    const l = running(emptyLedger('n', GPU), 'fast', 14336);
    const d = decideAdmit(l, { serve: 'fast', vramMib: 14336, class: 'resident', holder: 'other' });
    assert.deepEqual(d, { decision: 'already-held', serve: 'fast', phase: 'running', holder: 'h/fast' });
  });
});

describe('eviction planning', () => {
  const seed4 = () => running(running(emptyLedger('n', GPU), 'fast', 14336), 'vision', 12288, 'evictable');

  test('seed T013 step 4: comfyui-sim 8192 evicts vision; committed 22528 after hand-over', () => {
    let l = seed4();
    assert.equal(totals(l).committedMib, 26624);
    const plan = planEviction(l, 8192);
    assert.equal(plan.kind, 'evict');
    assert.ok(plan.kind === 'evict');
    assert.deepEqual(plan.victims, [{ serve: 'vision', vramMib: 12288 }]);
    assert.equal(plan.shortfallMib, 8192 - 1375);
    const req: AdmitRequest = { serve: 'comfyui-sim', vramMib: 8192, class: 'on-demand', holder: 'acq' };
    l = applyEvictionPlan(l, req, plan.victims);
    // While vision drains its MiB still count and the acquirer's are held: nothing else fits.
    assert.deepEqual(totals(l), { budgetMib: 27999, committedMib: 26624, heldMib: 8192, freeMib: -6817 });
    assert.equal(decideAdmit(l, { serve: 'small', vramMib: 100, class: 'resident', holder: 's' }).decision, 'denied');
    // The text never shows the negative free: it says held for whom, and over budget until what.
    assert.deepEqual(formatLedger(l), [
      "gpu_role 'dark-fast': capacity 32607 MiB, reserve 4608 MiB, committed 26624 MiB, held 8192 MiB for comfyui-sim, free 0 MiB (over budget by 6817 MiB until vision stops)",
      '  fast 14336 MiB (resident, running)',
      '  vision 12288 MiB (evictable, evicting for comfyui-sim)',
      '  comfyui-sim 8192 MiB (on-demand, waiting for victims vision)',
    ]);
    // A rival's denial names the eviction that holds the MiB.
    const rival = evictionOutlook(l, 4096);
    assert.deepEqual(rival, { kind: 'short', evictableMib: 0, held: [{ serve: 'comfyui-sim', vramMib: 8192, holder: 'acq', victims: ['vision'] }] });
    l = applyVictimReleased(l, 'vision', 'comfyui-sim');
    l = withPhase(l, 'comfyui-sim', 'running');
    assert.deepEqual(formatLedger(l), [
      "gpu_role 'dark-fast': capacity 32607 MiB, reserve 4608 MiB, committed 22528 MiB, free 5471 MiB",
      '  fast 14336 MiB (resident, running)',
      '  vision 12288 MiB (evictable, evicted for comfyui-sim): not committed',
      '  comfyui-sim 8192 MiB (on-demand, running)',
    ]);
  });

  test('a budget shrunk under running serves (the reserve raised) is no eviction: the text says so', () => {
    const l = { ...seed4(), reserveMib: 10000 };
    assert.equal(
      formatLedger(l)[0],
      "gpu_role 'dark-fast': capacity 32607 MiB, reserve 10000 MiB, committed 26624 MiB, free 0 MiB (committed exceeds the budget by 4017 MiB)",
    );
  });

  test('a plain denial learns what --evict would evict', () => {
    const l = seed4();
    assert.deepEqual(evictionOutlook(l, 8192), { kind: 'would-evict', victims: [{ serve: 'vision', vramMib: 12288 }] });
    assert.deepEqual(evictionOutlook(l, 20000), { kind: 'short', evictableMib: 12288, held: [] });
  });

  test('fewest victims first, then least MiB, then most recent', () => {
    let l = emptyLedger('n', { ...GPU, capacityMib: 20000, reserveMib: 0 });
    l = running(l, 'a', 6000, 'evictable');
    l = running(l, 'b', 4000, 'evictable');
    l = running(l, 'c', 4000, 'evictable');
    l = running(l, 'r', 5000, 'resident');
    // free 1000; need 4000 → shortfall 3000: one victim suffices; b and c tie on MiB; c is newer.
    const p = planEviction(l, 4000);
    assert.ok(p.kind === 'evict');
    assert.deepEqual(
      p.victims.map((v) => v.serve),
      ['c'],
    );
    // need 9500 → shortfall 8500: two victims needed; {a,b} and {a,c} free 10000, {b,c} only 8000.
    const p2 = planEviction(l, 9500);
    assert.ok(p2.kind === 'evict');
    assert.deepEqual(p2.victims.map((v) => v.serve).sort(), ['a', 'c']);
  });

  test('a victim carries what nvidia-smi saw it take at bring-up, so its release is judged by that', () => {
    let l = running(emptyLedger('n', GPU), 'fast', 14336);
    const req: AdmitRequest = { serve: 'vision', vramMib: 12288, class: 'evictable', holder: 'h/vision' };
    l = withPhase(applyAdmit(l, req), 'vision', 'running', 11738);
    const p = planEviction(l, 8192);
    assert.ok(p.kind === 'evict');
    assert.deepEqual(p.victims, [{ serve: 'vision', vramMib: 12288, measuredMib: 11738 }]);
  });

  test('residents and on-demand serves are never victims; not enough evictable MiB is impossible', () => {
    const l = seed4();
    const p = planEviction(l, 20000);
    assert.deepEqual(p, { kind: 'impossible', shortfallMib: 20000 - 1375, evictableMib: 12288 });
  });

  test('an aborted eviction puts victims back to running and lets the held MiB go', () => {
    let l = seed4();
    const req: AdmitRequest = { serve: 'comfyui-sim', vramMib: 8192, class: 'on-demand', holder: 'acq' };
    l = applyEvictionPlan(l, req, [{ serve: 'vision', vramMib: 12288 }]);
    l = applyEvictionAborted(l, 'comfyui-sim');
    assert.deepEqual(totals(l), { budgetMib: 27999, committedMib: 26624, heldMib: 0, freeMib: 1375 });
    assert.deepEqual(
      l.reservations.map((r) => `${r.serve}:${r.phase}`),
      ['fast:running', 'vision:running'],
    );
  });

  test("an eviction given up after a victim's stop leaves it evicted, by that run: a bring-down that cancelled the run names it, not one evicted by an earlier run", () => {
    let l = running(seed4(), 'ocr', 1000, 'evictable');
    // An earlier acquisition of comfyui-sim stopped ocr, and comfyui-sim went down without --restore.
    l = applyVictimReleased(
      applyEvictionPlan(l, { serve: 'comfyui-sim', vramMib: 8192, class: 'on-demand', holder: 'acq/1' }, [{ serve: 'ocr', vramMib: 1000 }]),
      'ocr',
      'comfyui-sim',
    );
    l = { ...l, reservations: l.reservations.filter((r) => r.serve !== 'comfyui-sim') };
    const req: AdmitRequest = { serve: 'comfyui-sim', vramMib: 8192, class: 'on-demand', holder: 'acq/2' };
    l = applyVictimReleased(applyEvictionPlan(l, req, [{ serve: 'vision', vramMib: 12288 }]), 'vision', 'comfyui-sim');
    l = applyEvictionAborted(l, 'comfyui-sim', ['vision']);
    assert.deepEqual(
      l.reservations.map((r) => `${r.serve}:${r.phase}`),
      ['fast:running', 'vision:evicted', 'ocr:evicted'],
    );
    assert.deepEqual(
      setAsideBy(l, ['acq/2']).map((r) => r.serve),
      ['vision'],
    );
    assert.deepEqual(setAsideBy(l, ['serves-up/x']), []);
    assert.equal(bringDown.victimLeft('vision', false, false), 'vision, which it had stopped, stays evicted (`gpures serves up vision` brings it back)');
    assert.equal(bringDown.victimLeft('vision', true, false), 'vision, which it had put to sleep, stays asleep (`gpures serves up vision` wakes it)');
    assert.equal(bringDown.victimLeft('vision', false, true), 'vision, which it had stopped, runs again (restored)');
  });
});

describe('eviction by sleeping: the residual stays committed', () => {
  const SLEEP = { level: 1 as const, residualMib: 600 };
  /** The seeds' box: fast resident, vision evictable and evicted by sleeping. */
  function box(): LedgerState {
    let l = running(emptyLedger('primary-node', GPU), 'fast', 14336);
    const req: AdmitRequest = { serve: 'vision', vramMib: 12288, class: 'evictable', holder: 'h/vision', sleep: SLEEP };
    l = withPhase(applyAdmit(l, req), 'vision', 'running');
    return l;
  }
  const acquirer: AdmitRequest = { serve: 'comfyui-sim', vramMib: 8192, class: 'on-demand', holder: 'acquire/n/comfyui-sim/r1' };

  test('the plan counts what a sleep gives back (12288 − 600), and says so', () => {
    const plan = planEviction(box(), 8192);
    assert.equal(plan.kind, 'evict');
    assert.ok(plan.kind === 'evict');
    assert.deepEqual(plan.victims, [{ serve: 'vision', vramMib: 12288, sleep: SLEEP }]);
    assert.match(plan.reason, /vision \(11688 of 12288 MiB by sleeping\)/);
    // 1375 free + 11688 from a sleep = 13063: a request of 13064 cannot be covered.
    assert.equal(planEviction(box(), 1375 + 11688).kind, 'evict');
    const short = planEviction(box(), 1375 + 11688 + 1);
    assert.deepEqual(short, { kind: 'impossible', shortfallMib: 11689, evictableMib: 11688 });
  });

  test('asleep: committed keeps the residual, the acquirer is admitted, the ledger says it', () => {
    let l = applyEvictionPlan(box(), acquirer, [{ serve: 'vision', vramMib: 12288, sleep: SLEEP }]);
    l = applyVictimReleased(l, 'vision', 'comfyui-sim', 1);
    const vision = l.reservations.find((r) => r.serve === 'vision');
    assert.equal(vision?.phase, 'sleeping');
    assert.equal(vision?.sleptAtLevel, 1);
    assert.equal(l.reservations.find((r) => r.serve === 'comfyui-sim')?.phase, 'admitted');
    // 14336 + 600 + 8192
    assert.deepEqual(totals(l), { budgetMib: 27999, committedMib: 23128, heldMib: 0, freeMib: 4871 });
    assert.ok(
      formatLedger(l).includes('  vision 12288 MiB (evictable, sleeping at level 1 for comfyui-sim, 600 MiB held): 600 MiB of it committed'),
      formatLedger(l).join('\n'),
    );
  });

  test('gpures ledger: the lines add up to committed, an evicted serve and a sleeping one beside running ones', () => {
    // The operator's sum: each line's MiB, or what its line says of it is committed.
    const committedOf = (line: string): number => {
      const m = /^ {2}\S+ (\d+) MiB \(.*\)(?:: (not committed|(\d+) MiB of it committed))?$/.exec(line);
      assert.ok(m, line);
      return m[2] === undefined ? Number(m[1]) : Number(m[3] ?? 0);
    };
    const evicted = withPhase(
      applyVictimReleased(applyEvictionPlan(box(), acquirer, [{ serve: 'vision', vramMib: 12288 }]), 'vision', 'comfyui-sim'),
      'comfyui-sim',
      'running',
    );
    const asleep = withPhase(
      applyVictimReleased(applyEvictionPlan(box(), acquirer, [{ serve: 'vision', vramMib: 12288, sleep: SLEEP }]), 'vision', 'comfyui-sim', 1),
      'comfyui-sim',
      'running',
    );
    for (const l of [evicted, asleep]) {
      const [header, ...lines] = formatLedger(l);
      const sum = lines.reduce((total, line) => total + committedOf(line), 0);
      assert.equal(sum, totals(l).committedMib, [header, ...lines].join('\n'));
      // --json: the fields it had, and each reservation's committedMib beside its declared vramMib.
      const json = ledgerJson(l);
      assert.equal(json.committedMib, totals(l).committedMib);
      assert.deepEqual(
        json.reservations.map((r) => [r.serve, r.vramMib, r.committedMib]),
        l.reservations.map((r) => [r.serve, r.vramMib, r.serve === 'vision' ? (r.phase === 'sleeping' ? 600 : 0) : r.vramMib]),
      );
    }
    assert.ok(formatLedger(evicted).includes('  vision 12288 MiB (evictable, evicted for comfyui-sim): not committed'), formatLedger(evicted).join('\n'));
  });

  test('waking needs only what the sleep gave back; the woken serve commits its whole reservation again', () => {
    let l = applyVictimReleased(applyEvictionPlan(box(), acquirer, [{ serve: 'vision', vramMib: 12288, sleep: SLEEP }]), 'vision', 'comfyui-sim', 2);
    l = withPhase(l, 'comfyui-sim', 'running');
    const wake: AdmitRequest = { serve: 'vision', vramMib: 12288, class: 'evictable', holder: 'serves-up/n/vision/r2', sleep: SLEEP };
    // Free 4871 while comfyui-sim runs: 11688 are needed, not 12288.
    assert.deepEqual(decideAdmit(l, wake), { decision: 'denied', serve: 'vision', vramMib: 12288, freeMib: 4871, shortfallMib: 6817 });
    const down = l.reservations.filter((r) => r.serve !== 'comfyui-sim');
    const after = { ...l, reservations: down };
    assert.deepEqual(decideAdmit(after, wake), { decision: 'admitted', serve: 'vision', vramMib: 12288, freeAfterMib: 13063 - 11688 });
    const woken = applyAdmit(after, wake);
    assert.equal(woken.reservations.filter((r) => r.serve === 'vision').length, 1);
    assert.deepEqual(totals(woken), { budgetMib: 27999, committedMib: 26624, heldMib: 0, freeMib: 1375 });
  });

  test('an eviction given up leaves a victim already asleep sleeping, the others running', () => {
    let l = box();
    const req: AdmitRequest = { serve: 'embeddings-2', vramMib: 3200, class: 'evictable', holder: 'h/e2' };
    l = withPhase(applyAdmit(l, req), 'embeddings-2', 'running');
    const victims = [
      { serve: 'vision', vramMib: 12288, sleep: SLEEP },
      { serve: 'embeddings-2', vramMib: 3200 },
    ];
    l = applyEvictionAborted(applyEvictionPlan(l, { ...acquirer, vramMib: 20000 }, victims), 'comfyui-sim', [], { vision: 2 });
    assert.deepEqual(
      l.reservations.map((r) => [r.serve, r.phase]),
      [
        ['fast', 'running'],
        ['vision', 'sleeping'],
        ['embeddings-2', 'running'],
      ],
    );
    assert.equal(l.reservations.find((r) => r.serve === 'vision')?.sleptAtLevel, 2);
    // A serve's name is looked up as the map's own key only: 'constructor' is a valid serve name.
    let c = withPhase(applyAdmit(emptyLedger('n', GPU), { serve: 'constructor', vramMib: 1000, class: 'evictable', holder: 'h/c' }), 'constructor', 'running');
    c = applyEvictionAborted(applyEvictionPlan(c, { ...acquirer, vramMib: 27000 }, [{ serve: 'constructor', vramMib: 1000 }]), 'comfyui-sim');
    assert.deepEqual(c.reservations, [{ serve: 'constructor', vramMib: 1000, class: 'evictable', phase: 'running', holder: 'h/c' }]);
  });

  test('an eviction given up holds a sleeper whose VRAM was not seen back at what it is said to hold, its reservation at most', () => {
    const asleep = (holding: Record<string, number>) => {
      const l = withPhase(
        applyAdmit(emptyLedger('n', GPU), { serve: 'vision', vramMib: 12288, class: 'evictable', holder: 'h/v', sleep: SLEEP }),
        'vision',
        'running',
      );
      const aborted = applyEvictionAborted(
        applyEvictionPlan(l, acquirer, [{ serve: 'vision', vramMib: 12288, sleep: SLEEP }]),
        'comfyui-sim',
        [],
        { vision: 2 },
        holding,
      );
      return totals(aborted).committedMib;
    };
    assert.equal(asleep({}), SLEEP.residualMib, 'its declared residual when nothing else is said');
    assert.equal(asleep({ vision: 12288 }), 12288, 'whole while its release is unconfirmed');
    assert.equal(asleep({ vision: 99999 }), 12288, 'never more than its reservation');
    assert.equal(asleep({ vision: 10 }), SLEEP.residualMib, 'never less than its declared residual');
  });

  test('a stopped victim commits nothing, as before: no sleep in the request, no residual', () => {
    let l = running(emptyLedger('n', GPU), 'vision', 12288, 'evictable');
    l = applyVictimReleased(applyEvictionPlan(l, acquirer, [{ serve: 'vision', vramMib: 12288 }]), 'vision', 'comfyui-sim');
    assert.equal(l.reservations.find((r) => r.serve === 'vision')?.phase, 'evicted');
    assert.equal(totals(l).committedMib, 8192, "the acquirer's alone");
  });
});

describe("a fresh ledger's restore links (withRestoreLinks)", () => {
  /** b, vision and sleepy running (and ocr, with `ocr`), then ondemand's eviction of all but b planned: each victim evicting. */
  function evictionPlanned(ocr = false): LedgerState {
    let l = running(emptyLedger('n', GPU), 'b', 9000);
    l = running(l, 'vision', 12288, 'evictable');
    l = running(l, 'sleepy', 4000, 'evictable');
    if (ocr) l = running(l, 'ocr', 2000, 'evictable');
    const od: AdmitRequest = { serve: 'ondemand', vramMib: 14000, class: 'on-demand', holder: 'acquire/od-run' };
    return applyEvictionPlan(l, od, [
      { serve: 'vision', vramMib: 12288 },
      { serve: 'sleepy', vramMib: 4000, sleep: { level: 1, residualMib: 500 } },
      ...(ocr ? [{ serve: 'ocr', vramMib: 2000 }] : []),
    ]);
  }
  /** ondemand acquired by evicting vision (stopped) and sleepy (asleep): the lost run's last state. */
  function lostRun(): LedgerState {
    const l = applyVictimReleased(evictionPlanned(), 'vision', 'ondemand');
    return withPhase(applyVictimReleased(l, 'sleepy', 'ondemand', 1), 'ondemand', 'running');
  }
  const found = (serve: string, phase: 'running' | 'sleeping', vramMib: number): Reservation => ({
    serve,
    vramMib,
    class: 'evictable',
    phase,
    holder: `h/${serve}`,
  });

  test("the lost run's evicted entry comes back, and a sleeper found takes the acquirer it sleeps for", () => {
    const carried = withRestoreLinks([found('b', 'running', 9000), found('ondemand', 'running', 14000), found('sleepy', 'sleeping', 4000)], lostRun());
    assert.deepEqual(
      carried.map((r) => `${r.serve} ${r.phase}${r.evictedFor ? ` for ${r.evictedFor} by ${r.evictedBy ?? '?'}` : ''}`),
      ['b running', 'ondemand running', 'sleepy sleeping for ondemand by acquire/od-run', 'vision evicted for ondemand by acquire/od-run'],
    );
  });

  test('its acquirer gone from the box, the evicted entry is kept, for it; one the box shows running is taken from the box', () => {
    const carried = withRestoreLinks([found('b', 'running', 9000), found('vision', 'running', 12288)], lostRun());
    assert.deepEqual(
      carried.map((r) => `${r.serve} ${r.phase}${r.evictedFor ? ` for ${r.evictedFor}` : ''}`),
      ['b running', 'vision running'],
    );
    assert.deepEqual(
      withRestoreLinks([found('b', 'running', 9000)], lostRun()).map((r) => `${r.serve} ${r.phase} ${r.evictedFor ?? ''}`),
      ['b running ', 'vision evicted ondemand'],
    );
  });

  test("victims the lost run still held evicting: set aside for the acquirer where the box shows them so, the box's where it shows them running; the acquirer's hold not carried", () => {
    const l = evictionPlanned(true);
    // Each still evicting when the ledger was lost: vision's stop and sleepy's sleep landed meanwhile, ocr still drains.
    const carried = withRestoreLinks([found('b', 'running', 9000), found('ocr', 'running', 2000), found('sleepy', 'sleeping', 4000)], l);
    assert.deepEqual(
      carried.map((r) => `${r.serve} ${r.phase}${r.evictedFor ? ` for ${r.evictedFor} by ${r.evictedBy ?? '?'}` : ''}`),
      ['b running', 'ocr running', 'sleepy sleeping for ondemand by acquire/od-run', 'vision evicted for ondemand by acquire/od-run'],
    );
    // Set aside, vision commits nothing: its container is gone (b and ocr run; sleepy, found with no residual declared, holds none).
    assert.equal(totals({ ...l, reservations: carried }).committedMib, 9000 + 2000);
  });

  test('without the lost run (Temporal could not say), what was found, in the order of their names', () => {
    const f = [found('sleepy', 'sleeping', 4000), found('b', 'running', 9000)];
    assert.deepEqual(withRestoreLinks(f, undefined), [f[1], f[0]]);
  });

  test("the lost run's start slot: carried, its since kept, while its holder runs or Temporal cannot say; dropped once the holder has ended", () => {
    const startSlot = { serve: 'ocr', holder: 'serves-up/n/ocr/run-1', sinceMs: 1_000, startTimeoutS: 600 };
    const l = { ...lostRun(), startSlot };
    assert.deepEqual(carriedStartSlot(l, true), { startSlot });
    assert.deepEqual(carriedStartSlot(l, 'unknown'), { startSlot });
    assert.deepEqual(carriedStartSlot(l, false), {});
    assert.deepEqual(carriedStartSlot(lostRun(), true), {});
    assert.deepEqual(carriedStartSlot(undefined, true), {});
  });
});
