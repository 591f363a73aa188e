// The pure part of a cold start's physical check (src/domain/start-room.ts): which processes on the
// GPU are outside the ledger, the shortfall, which reading decides, and what the refusal says.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { noRoomMessage, roomLine, startRoom } from '../src/domain/start-room';
import type { RoomFacts } from '../src/domain/start-room';
import type { LedgerState, Reservation } from '../src/domain/ledger';

const GPU = 'GPU-aaaaaaaa-0000-0000-0000-000000000001';
const OTHER = 'GPU-aaaaaaaa-0000-0000-0000-000000000002';
const app = (pid: number, usedMib: number | null, gpuUuid = GPU) => ({ gpuUuid, pid, processName: 'python3', usedMib });
const r = (serve: string, vramMib: number, phase: Reservation['phase'] = 'running'): Reservation => ({
  serve,
  vramMib,
  phase,
  class: 'resident',
  holder: `h/${serve}`,
});
const ledger = (...reservations: Reservation[]): LedgerState => ({
  node: 'n',
  gpuRole: 'g',
  gpuUuid: GPU,
  capacityMib: 32607,
  reserveMib: 4608,
  reservations,
});
const facts = (f: Partial<RoomFacts>): RoomFacts => ({
  serve: 'vision',
  gpu: { uuid: GPU, totalMib: 32607, usedMib: 1200 },
  ledger: ledger(),
  apps: [],
  pids: {},
  ...f,
});

test('a foreign process holding more than the reserve: short, named with its pid, name and MiB', () => {
  const room = startRoom(
    facts({
      gpu: { uuid: GPU, totalMib: 32607, usedMib: 1200 + 14336 + 12288 },
      ledger: ledger(r('fast', 14336), r('vision', 12288, 'admitted')),
      apps: [app(100, 14336), app(4242, 12288), app(7, 900, OTHER)],
      pids: { fast: [99, 100], vision: [] },
    }),
  );
  assert.deepEqual(
    [room.committedMib, room.outsideMib, room.shortMib, room.reading],
    [26624, 12288, 6305, { by: 'processes', foreign: [{ pid: 4242, processName: 'python3', usedMib: 12288 }] }],
  );
  assert.equal(
    roomLine(room),
    `no room: ledger commits 26624 MiB on ${GPU} (vision included), processes outside the ledger hold 12288 MiB (pid 4242 python3 12288 MiB): ` +
      "38912 MiB against the card's 32607 MiB, short by 6305 MiB",
  );
  const message = noRoomMessage(room, 12288);
  assert.match(message, /^start of vision \(12288 MiB\) refused: the card cannot hold it: ledger commits 26624 MiB/);
  assert.match(
    message,
    /short by 6305 MiB; nothing was started\. To bring it up, stop that process, then bring it up again; if it is to stay, raise the GPU's reserve_mib by at least 6305 MiB/,
  );
});

test('a serve of the ledger still loading (its pids listed, at any phase) is not foreign: no false refusal', () => {
  // a is starting (admitted, its container drawing), b's baseline is read now: both fit the budget.
  const room = startRoom(
    facts({
      serve: 'b',
      gpu: { uuid: GPU, totalMib: 32607, usedMib: 1200 + 14000 },
      ledger: ledger(r('a', 14000, 'admitted'), r('b', 13000, 'admitted')),
      apps: [app(300, 14000)],
      pids: { a: [300], b: [] },
    }),
  );
  assert.deepEqual([room.shortMib, room.outsideMib, room.reading.by], [0, 0, 'processes']);
  assert.match(roomLine(room), /^ledger commits 27000 MiB .*no process outside the ledger holds any: 27000 of the card's 32607 MiB$/);
  // A victim still evicting and a sleeper's residual are the ledger's too.
  const evicting = startRoom(
    facts({
      ledger: ledger(r('vision', 12288, 'evicting'), { ...r('s', 8000, 'sleeping'), sleep: { level: 1, residualMib: 600 } }, r('od', 8192, 'admitted')),
      serve: 'od',
      apps: [app(1, 12288), app(2, 600)],
      pids: { vision: [1], s: [2], od: [] },
    }),
  );
  assert.deepEqual([evicting.committedMib, evicting.outsideMib, evicting.shortMib], [12288 + 600 + 8192, 0, 0]);
});

test('processes that cannot say fall back to the whole GPU, which says why', () => {
  const base = { ledger: ledger(r('fast', 14336), r('vision', 12288, 'admitted')), gpu: { uuid: GPU, totalMib: 32607, usedMib: 1200 + 14336 + 12288 } };
  const cases: [Partial<RoomFacts>, RegExp][] = [
    [{ apps: { unread: 'Failed to query compute applications: Not Supported' } }, /did not list its compute processes \(Failed to query/],
    [{ apps: [], pids: { fast: [100], vision: [] } }, /lists no compute process on GPU-\S+ \(processes hidden/],
    [{ apps: [app(5, 14336), app(6, 12288)], pids: { fast: [100], vision: [] } }, /lists none of the ledger's serves' 1 pids .*other pids/],
    [
      { apps: [app(100, 14336), app(6, 12288)], pids: { fast: { unread: 'docker top did not answer within 5 s' }, vision: [] } },
      /processes of fast could not be read \(docker top/,
    ],
    [{ apps: [app(100, 14336), app(6, null)], pids: { fast: [100], vision: [] } }, /\[N\/A\]/],
  ];
  for (const [f, why] of cases) {
    const room = startRoom(facts({ ...base, ...f }));
    assert.equal(room.reading.by, 'whole-gpu', JSON.stringify(f));
    assert.match(room.reading.by === 'whole-gpu' ? room.reading.why : '', why);
    // used 27824 less the other reservations whole (fast 14336): 13488 outside, over the card by 6305 + 1200.
    assert.deepEqual([room.outsideMib, room.shortMib], [13488, 7505]);
    assert.match(
      noRoomMessage(room, 12288),
      /13488 MiB are held outside the ledger by the whole GPU's reading \(used 27824 MiB, 14336 MiB of it at most the other serves'; its processes could not say which: /,
    );
    assert.match(noRoomMessage(room, 12288), /find what holds the GPU outside the ledger \(nvidia-smi\) and stop it/);
  }
});

test('the whole GPU cannot refuse a start the budget and the reserve account for, whatever the others have drawn yet', () => {
  // Outside the ledger at most the reserve (4608): any set of reservations within the budget passes,
  // each other serve having drawn anything from none to all of its MiB.
  const budget = 32607 - 4608;
  for (const drawn of [0, 0.3, 1]) {
    for (const outside of [0, 1200, 4608]) {
      const others = [r('a', 9000), r('b', 7000, 'admitted')];
      const used = outside + Math.round(drawn * 16000);
      const room = startRoom(
        facts({
          serve: 'c',
          gpu: { uuid: GPU, totalMib: 32607, usedMib: used },
          ledger: ledger(...others, r('c', budget - 16000, 'admitted')),
          apps: { unread: 'x' },
        }),
      );
      assert.equal(room.shortMib, 0, `drawn ${drawn}, outside ${outside}: ${roomLine(room)}`);
    }
  }
  // Past the reserve by more than the free room, it refuses.
  const over = startRoom(
    facts({ serve: 'c', gpu: { uuid: GPU, totalMib: 32607, usedMib: 4608 + 700 }, ledger: ledger(r('c', budget, 'admitted')), apps: { unread: 'x' } }),
  );
  assert.equal(over.shortMib, 700);
});

test('an empty card but for foreign processes: the processes decide (no serve of the ledger runs to be mistaken)', () => {
  const room = startRoom(facts({ ledger: ledger(r('vision', 12288, 'admitted')), apps: [app(4242, 22000)], pids: { vision: [] } }));
  assert.deepEqual([room.reading.by, room.outsideMib, room.shortMib], ['processes', 22000, 1681]);
});

test("before an acquisition's evictions: its victims counted as given back (a sleeper keeps its residual), the acquirer whole", () => {
  const victim = (serve: string, vramMib: number, more: Partial<Reservation> = {}): Reservation => ({
    ...r(serve, vramMib, 'evicting'),
    class: 'evictable',
    evictedFor: 'comfyui-sim',
    ...more,
  });
  const state = ledger(
    r('fast', 14336),
    victim('vision', 12288),
    victim('sleeper', 6000, { sleep: { level: 1, residualMib: 600 } }),
    r('comfyui-sim', 16384, 'pending'),
  );
  const evicting = [
    { serve: 'vision', vramMib: 12288 },
    { serve: 'sleeper', vramMib: 6000, sleep: { level: 1 as const, residualMib: 600 } },
  ];
  const used = 1200 + 14336 + 12288 + 6000 + 4096;
  const byProcesses = startRoom(
    facts({
      serve: 'comfyui-sim',
      gpu: { uuid: GPU, totalMib: 32607, usedMib: used },
      ledger: state,
      apps: [app(100, 14336), app(200, 12288), app(300, 6000), app(4242, 4096)],
      pids: { fast: [100], vision: [200], sleeper: [300], 'comfyui-sim': [] },
      evicting,
    }),
  );
  // fast 14336 + sleeper's residual 600 + comfyui-sim 16384 = 31320, + 4096 outside: 35416, 2809 past the card.
  assert.deepEqual([byProcesses.committedMib, byProcesses.outsideMib, byProcesses.shortMib], [31320, 4096, 2809]);
  assert.deepEqual(byProcesses.onceEvicted, { victims: ['vision', 'sleeper'], freedMib: 17688 });
  assert.match(roomLine(byProcesses), /^no room: once vision and sleeper are evicted \(17688 MiB freed\), ledger commits 31320 MiB .* short by 2809 MiB$/);
  assert.match(
    noRoomMessage(byProcesses, 16384),
    /^comfyui-sim \(16384 MiB\) refused before any eviction: the card cannot hold it even once vision and sleeper are evicted \(17688 MiB freed\): .*; no serve was evicted, nothing was started\. To bring it up, stop that process/,
  );
  // Without the plan (the start's check, victims still committed, the acquirer only held) the figures are today's.
  const now = startRoom(facts({ serve: 'comfyui-sim', gpu: { uuid: GPU, totalMib: 32607, usedMib: used }, ledger: state, apps: [app(4242, 4096)], pids: {} }));
  assert.equal(now.committedMib, 14336 + 12288 + 6000);
  assert.equal(now.onceEvicted, undefined);

  // The whole GPU deciding: vision measured at 10000 MiB of its 12288 gives back 10000, the sleeper 5400.
  const measured = evicting.map((v) => (v.serve === 'vision' ? { ...v, measuredMib: 10000 } : v));
  const byGpu = startRoom(
    facts({
      serve: 'comfyui-sim',
      gpu: { uuid: GPU, totalMib: 32607, usedMib: 1200 + 14336 + 10000 + 6000 },
      ledger: state,
      apps: { unread: 'Not Supported' },
      pids: {},
      evicting: measured,
    }),
  );
  // used 31536 - 15400 given back - 14936 of the others once evicted (fast, the residual) = 1200 outside.
  assert.deepEqual([byGpu.outsideMib, byGpu.shortMib], [1200, 0]);
  assert.deepEqual(byGpu.reading, {
    by: 'whole-gpu',
    why: 'nvidia-smi did not list its compute processes (Not Supported)',
    othersCommittedMib: 14936,
    victimsGiveMib: 15400,
  });
  assert.match(
    roomLine(byGpu),
    /^once vision and sleeper are evicted \(17688 MiB freed\), ledger commits 31320 MiB .*\(used 31536 MiB, 15400 MiB of it the victims' to give back, 14936 MiB of it at most the other serves'/,
  );
});
