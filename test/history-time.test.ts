// bench/bring-up.ts reads where a workflow run's time went from its history: every interval
// between two events charged once, to a workflow task, an activity, its dispatch, a wait or the client.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { readHistoryFile } from '../src/audit/history';
import type { HistoryEventJson, HistoryJson } from '../src/audit/events';
import { historyTime, medianShares, runTotals } from '../bench/history-time';

// dist/test/history-time.test.js -> <repo>/test/histories
const HISTORIES = join(__dirname, '..', '..', 'test', 'histories');

test('a recorded bring-up: each task named by its local activities, each activity, and every millisecond charged once', () => {
  const h = readHistoryFile(join(HISTORIES, 'bring-up-local-steps.json'));
  const start = Date.parse(h.events[0]?.eventTime ?? '') - 3;
  const end = Date.parse(h.events.at(-1)?.eventTime ?? '') + 5;
  const shares = historyTime(h, start, end);
  assert.deepEqual(
    shares.map((s) => s.label),
    [
      'client to start',
      'task 1 [resolveServe, ledgerAdmit, measureGpu]',
      'dispatch',
      'startServeContainer',
      'task 2',
      'waitHealthy',
      'task 3',
      'verifyIdentity',
      'task 4 [measureGpu]',
      'readmitIfQuiesced',
      'task 5 [ledgerSetPhase]',
      'close to client',
    ],
  );
  assert.equal(shares[0]?.ms, 3);
  assert.equal(shares.at(-1)?.ms, 5);
  const total = shares.reduce((n, s) => n + s.ms, 0);
  assert.ok(Math.abs(total - (end - start)) < 1e-6, `${total} ms charged of ${end - start}`);
  const t = runTotals(shares);
  assert.ok(Math.abs(t.temporalMs + t.activitiesMs + t.waitMs - (end - start)) < 1e-6);
  assert.equal(t.waitMs, 0);
});

function event(id: number, atMs: number, type: string, attributes: Record<string, unknown> = {}): HistoryEventJson {
  const key = `${type[0]?.toLowerCase()}${type.slice(1)}EventAttributes`;
  return { eventId: String(id), eventTime: new Date(atMs).toISOString(), eventType: type, [key]: attributes };
}

test("a retried activity's earlier attempts are the activity's, a timer and an Update's arrival are waits, a failed task is a task", () => {
  const t0 = Date.parse('2026-12-03T00:00:00Z');
  const h: HistoryJson = {
    events: [
      event(1, t0, 'WorkflowExecutionStarted'),
      event(2, t0, 'WorkflowTaskScheduled'),
      event(3, t0 + 2, 'WorkflowTaskStarted'),
      event(4, t0 + 10, 'WorkflowTaskFailed'),
      event(5, t0 + 10, 'WorkflowTaskScheduled'),
      event(6, t0 + 12, 'WorkflowTaskStarted'),
      event(7, t0 + 20, 'WorkflowTaskCompleted'),
      event(8, t0 + 20, 'ActivityTaskScheduled', { activityType: { name: 'stopServeContainer' } }),
      // Started is recorded at the third attempt: the first two and their backoffs are before it.
      event(9, t0 + 1520, 'ActivityTaskStarted', { scheduledEventId: '8', attempt: 3 }),
      event(10, t0 + 1600, 'ActivityTaskCompleted', { scheduledEventId: '8' }),
      event(11, t0 + 1600, 'WorkflowTaskScheduled'),
      event(12, t0 + 1602, 'WorkflowTaskStarted'),
      event(13, t0 + 1610, 'WorkflowTaskCompleted'),
      event(14, t0 + 1610, 'TimerStarted'),
      event(15, t0 + 2610, 'TimerFired'),
      event(16, t0 + 2610, 'WorkflowTaskScheduled'),
      event(17, t0 + 2612, 'WorkflowTaskStarted'),
      event(18, t0 + 2620, 'WorkflowTaskCompleted'),
      // Nothing in the run scheduled this one: an Update arrived.
      event(19, t0 + 3620, 'WorkflowTaskScheduled'),
      event(20, t0 + 3621, 'WorkflowTaskStarted'),
      event(21, t0 + 3625, 'WorkflowTaskCompleted'),
      event(22, t0 + 3625, 'WorkflowExecutionCompleted'),
    ],
  };
  const shares = historyTime(h, t0, t0 + 3625);
  const ms = Object.fromEntries(shares.map((s) => [s.label, s.ms]));
  assert.deepEqual(ms, {
    'client to start': 0,
    'task 1': 20,
    stopServeContainer: 1580,
    'task 2': 10,
    'wait for a timer': 1000,
    'task 3': 10,
    waiting: 1000,
    'task 4': 5,
    'close to client': 0,
  });
  assert.deepEqual(runTotals(shares), { temporalMs: 45, activitiesMs: 1580, waitMs: 2000 });
});

test('medians per share say how many runs had another shape', () => {
  const run = (ms: number, extra = false) => [
    { label: 'task 1', kind: 'task' as const, ms },
    ...(extra ? [{ label: 'inspectServe', kind: 'activity' as const, ms: 5 }] : []),
  ];
  const { shares, otherShapes } = medianShares([run(10), run(30), run(20, true)]);
  assert.deepEqual(shares, [{ label: 'task 1', kind: 'task', ms: 20 }]);
  assert.equal(otherShapes, 1);
});
