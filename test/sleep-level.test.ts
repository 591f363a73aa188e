// Which level a victim evicted by sleeping sleeps at, and what it is seen to keep asleep: pure.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { admittedSleep, levelOneSleepers, residualHeldAfresh, residualSeen, sleepLevelFor } from '../src/domain/sleep';
import { applyAdmit, emptyLedger, withPhase } from '../src/domain/ledger';
import { applyVictimReleased } from '../src/domain/eviction';
import type { LedgerState } from '../src/domain/ledger';

const GPU = { role: 'g', uuid: 'GPU-1', capacityMib: 32000, reserveMib: 0 };

function withSleeper(l: LedgerState, serve: string, level: 1 | 2, sleptAtLevel: 1 | 2 | undefined): LedgerState {
  const admitted = withPhase(applyAdmit(l, { serve, vramMib: 8000, class: 'evictable', holder: 'h/r', sleep: { level, residualMib: 500 } }), serve, 'sleeping');
  return { ...admitted, reservations: admitted.reservations.map((r) => (r.serve === serve && sleptAtLevel ? { ...r, sleptAtLevel } : r)) };
}

describe('the level a victim sleeps at', () => {
  test('level 2, or no host-RAM budget: the declared level', () => {
    assert.deepEqual(sleepLevelFor({ level: 2, residualMib: 500 }, [], 1000), { level: 2 });
    assert.deepEqual(sleepLevelFor({ level: 1, residualMib: 500, hostRamMib: 90000 }, [], undefined), { level: 1 });
  });

  test('level 1 within the budget beside the serves asleep at level 1: level 1, to the MiB', () => {
    assert.deepEqual(sleepLevelFor({ level: 1, residualMib: 500, hostRamMib: 8000 }, [{ serve: 'a', hostRamMib: 8000 }], 16000), { level: 1 });
  });

  test('level 1 past the budget falls back to level 2, saying by how much and beside whom', () => {
    const plan = sleepLevelFor({ level: 1, residualMib: 500, hostRamMib: 8000 }, [{ serve: 'a', hostRamMib: 8001 }], 16000);
    assert.equal(plan.level, 2);
    assert.equal(
      plan.fellBack,
      "level 1 would take 8000 MiB of host RAM beside a (8001 MiB): 16001 MiB, over the node's host_ram_budget_mib of 16000; sleeping at level 2",
    );
  });

  test('another victim being evicted now that declares level 1 counts as asleep already; the victim planned does not count itself', () => {
    let l = emptyLedger('n', GPU);
    for (const serve of ['a', 'b'])
      l = withPhase(applyAdmit(l, { serve, vramMib: 8000, class: 'evictable', holder: 'h/r', sleep: { level: 1, residualMib: 500 } }), serve, 'evicting');
    assert.deepEqual(
      levelOneSleepers([l], () => 7000, 'a'),
      [{ serve: 'b', hostRamMib: 7000 }],
    );
  });

  test('only serves asleep at level 1 hold host RAM: one that fell back to level 2 does not, whatever it declared', () => {
    let l = emptyLedger('n', GPU);
    l = withSleeper(l, 'a', 1, 1);
    l = withSleeper(l, 'b', 1, 2);
    l = withSleeper(l, 'c', 2, undefined);
    l = withPhase(applyAdmit(l, { serve: 'd', vramMib: 1000, class: 'evictable', holder: 'h/r', sleep: { level: 1, residualMib: 1 } }), 'd', 'running');
    assert.deepEqual(
      levelOneSleepers([l], (s) => ({ a: 7000, b: 6000, d: 5000 })[s]),
      [{ serve: 'a', hostRamMib: 7000 }],
    );
  });
});

describe('what a sleeper keeps', () => {
  test('what it took less what its sleep gave back; above the declaration is flagged', () => {
    assert.deepEqual(residualSeen(12288, 11688, 600), { mib: 600, aboveDeclared: false });
    assert.deepEqual(residualSeen(12288, 11000, 600), { mib: 1288, aboveDeclared: true });
    assert.deepEqual(residualSeen(12288, 13000, 600), { mib: 0, aboveDeclared: false });
  });

  test('an admission carries the level and residual of a serve evicted by sleeping, and nothing for one stopped', () => {
    assert.deepEqual(admittedSleep({ sleep: { level: 1, residualMib: 600, hostRamMib: 9000 } }), { sleep: { level: 1, residualMib: 600 } });
    assert.deepEqual(admittedSleep({}), {});
  });

  describe('by a ledger started afresh, found asleep on the box', () => {
    const l = emptyLedger('n', GPU);
    const heldAs = (r: Partial<LedgerState['reservations'][number]>): LedgerState => ({
      ...l,
      reservations: [{ serve: 's', vramMib: 8000, class: 'evictable', phase: 'running', holder: 'h/r', sleep: { level: 2, residualMib: 500 }, ...r }],
    });
    test('what the lost ledger held it asleep at: the residual seen above the declared one, or the declared one', () => {
      const evicting = heldAs({ phase: 'evicting', evictedFor: 'big', evictedBy: 'a/r' });
      assert.equal(residualHeldAfresh('s', 8000, 500, applyVictimReleased(evicting, 's', 'big', 2, 900)), 900);
      assert.equal(residualHeldAfresh('s', 8000, 500, applyVictimReleased(evicting, 's', 'big', 2)), 500);
      // The manifest's declaration raised since: the more of the two.
      assert.equal(residualHeldAfresh('s', 8000, 1200, applyVictimReleased(evicting, 's', 'big', 2, 900)), 1200);
    });
    test('whole while its release was never confirmed (still evicting), as a bring-down or a waking acquisition held it', () => {
      assert.equal(residualHeldAfresh('s', 8000, 500, heldAs({ phase: 'evicting', evictedFor: 'big', evictedBy: 'a/r' })), 8000);
      assert.equal(residualHeldAfresh('s', 8000, 500, heldAs({ phase: 'stopping', vramMib: 900 })), 900);
      assert.equal(residualHeldAfresh('s', 8000, 500, heldAs({ phase: 'pending', admittedFrom: { evicted: true, asleepAt: 1, asleepHeldMib: 900 } })), 900);
      assert.equal(residualHeldAfresh('s', 8000, 500, heldAs({ phase: 'admitted', admittedFrom: { evicted: true, asleepAt: 1, asleepHeldMib: 700 } })), 700);
    });
    test('whole, never past its reservation, where the lost ledger cannot be read or did not hold it asleep', () => {
      assert.equal(residualHeldAfresh('s', 8000, 500, undefined), 8000);
      assert.equal(residualHeldAfresh('s', 8000, 500, l), 8000);
      assert.equal(residualHeldAfresh('s', 8000, 500, heldAs({ phase: 'running' })), 8000);
      assert.equal(residualHeldAfresh('s', 8000, 500, heldAs({ phase: 'evicted' })), 8000);
      assert.equal(residualHeldAfresh('s', 6000, 500, heldAs({ phase: 'sleeping', sleep: { level: 2, residualMib: 7000 } })), 6000);
    });
  });
});
