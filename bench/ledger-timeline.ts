// Where in a round of bench/ledger-callers.ts its slow decisions fell (--timeline): second by
// second, the decisions due, their p50, p99 and max, against what the ledger's histories say of
// the same second (runs started by continue-as-new, the longest workflow task, from scheduled to
// completed, by the server's clock, which this machine shares) and what this process saw (the
// main thread's garbage collections, the CPU of the dev server and of the worker's threads), and
// the backlog at each second's end: decisions due by then and not yet answered. A backlog that
// grows second after second is a ledger answering fewer than are offered; its wait is every later
// decision's. Then the continue-as-new gaps (the old run's last event to the new run's first
// completed task) and the workflow tasks' times, by the server's clock.
import type { Client } from '@temporalio/client';
import { tsToMs } from '@temporalio/common/lib/time';
import type { CpuMs } from './cpu-split';

/** One decision: when it was due (epoch ms) and how long its caller waited from then. */
export interface Sample {
  dueEpochMs: number;
  ms: number;
}

/** A run of the ledger: its first event, its continue-as-new event (none for the open one), its first completed task, its workflow tasks. */
export interface LedgerRun {
  startedEpochMs: number;
  firstTaskDoneEpochMs: number;
  closedEpochMs?: number;
  /** From WorkflowTaskScheduled to WorkflowTaskCompleted, epoch ms. */
  tasks: { scheduled: number; started: number; completed: number }[];
}

/** A pause of the main thread's collector, epoch ms. */
export interface Pause {
  atEpochMs: number;
  ms: number;
}

/** The CPU of the process's groups at a moment (bench/cpu-split.ts), for the CPU a second. */
export interface CpuTick {
  atEpochMs: number;
  cpu: CpuMs;
}

/** Every run of the ledger workflow, oldest first. */
export async function ledgerRuns(client: Client, workflowId: string): Promise<LedgerRun[]> {
  const runs: LedgerRun[] = [];
  for await (const run of client.workflow.list({ query: `WorkflowId = '${workflowId}'` })) {
    const history = await client.workflow.getHandle(workflowId, run.runId).fetchHistory();
    const events = history.events ?? [];
    const at = (i: number) => tsToMs(events[i]?.eventTime);
    const scheduled = new Map<string, number>();
    const started = new Map<string, number>();
    const out: LedgerRun = { startedEpochMs: at(0), firstTaskDoneEpochMs: NaN, tasks: [] };
    events.forEach((e, i) => {
      if (e.workflowTaskScheduledEventAttributes) scheduled.set(String(e.eventId), at(i));
      const s = e.workflowTaskStartedEventAttributes;
      if (s) started.set(String(e.eventId), at(i));
      const c = e.workflowTaskCompletedEventAttributes;
      if (c) {
        const task = { scheduled: scheduled.get(String(c.scheduledEventId)) ?? NaN, started: started.get(String(c.startedEventId)) ?? NaN, completed: at(i) };
        out.tasks.push(task);
        if (Number.isNaN(out.firstTaskDoneEpochMs)) out.firstTaskDoneEpochMs = task.completed;
      }
      if (e.workflowExecutionContinuedAsNewEventAttributes) out.closedEpochMs = at(i);
    });
    runs.push(out);
  }
  return runs.sort((a, b) => a.startedEpochMs - b.startedEpochMs);
}

function quantile(sorted: number[], q: number): number {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? NaN;
}

/** The lines --timeline prints for a round whose counted part began at `fromEpochMs`. */
export function timelineLines(samples: Sample[], runs: LedgerRun[], pauses: Pause[], ticks: CpuTick[], fromEpochMs: number, bucketMs = 1000): string[] {
  const lines = [
    `  timeline, ${bucketMs} ms a row from the first counted decision (due times; server clock for the ledger's events):`,
    '    at s   due   p50 ms   p99 ms   max ms  backlog  new runs  longest task ms  tasks  main gc ms  cpu ms: server  main  workflow',
  ];
  const end = Math.max(...samples.map((s) => s.dueEpochMs + s.ms), fromEpochMs);
  // A continue-as-new's gap: from the old run's last event to the new run's first completed task.
  const gaps = runs.slice(1).map((r, i) => ({ from: runs[i]?.closedEpochMs ?? r.startedEpochMs, to: r.firstTaskDoneEpochMs }));
  const tasks = runs.flatMap((r) => r.tasks);
  const cpuAt = (t: number): CpuMs | undefined => ticks.filter((k) => k.atEpochMs <= t).at(-1)?.cpu;
  for (let t = fromEpochMs; t < end; t += bucketMs) {
    const inB = (x: number) => x >= t && x < t + bucketMs;
    const lat = samples
      .filter((s) => inB(s.dueEpochMs))
      .map((s) => s.ms)
      .sort((a, b) => a - b);
    const backlog = samples.filter((s) => s.dueEpochMs < t + bucketMs && s.dueEpochMs + s.ms >= t + bucketMs).length;
    const newRuns = runs.filter((r) => inB(r.startedEpochMs)).length;
    const its = tasks.filter((k) => inB(k.completed));
    const longest = Math.max(0, ...its.map((k) => k.completed - k.scheduled));
    const gc = pauses.filter((p) => inB(p.atEpochMs)).reduce((s, p) => s + p.ms, 0);
    const c0 = cpuAt(t);
    const c1 = cpuAt(t + bucketMs);
    const cpu = (g: keyof CpuMs) => (c0 && c1 ? String(Math.round(c1[g] - c0[g])) : '-');
    lines.push(
      [
        `    ${((t - fromEpochMs) / 1000).toFixed(0).padStart(4)}`,
        String(lat.length).padStart(5),
        quantile(lat, 0.5).toFixed(0).padStart(8),
        quantile(lat, 0.99).toFixed(0).padStart(8),
        (lat.at(-1) ?? NaN).toFixed(0).padStart(8),
        String(backlog).padStart(8),
        String(newRuns).padStart(9),
        longest.toFixed(0).padStart(16),
        String(its.length).padStart(6),
        gc.toFixed(0).padStart(11),
        cpu('server').padStart(15),
        cpu('main').padStart(5),
        cpu('workflow').padStart(9),
      ].join(' '),
    );
  }
  const gapMs = gaps.map((g) => g.to - g.from).sort((a, b) => a - b);
  lines.push(
    `  continue-as-new gaps (old run's last event to the new run's first completed task): ${gapMs.length}, median ${quantile(gapMs, 0.5).toFixed(0)} ms, max ${(gapMs.at(-1) ?? NaN).toFixed(0)} ms`,
    `  workflow tasks: ${tasks.length}, scheduled to completed p50 ${quantile(
      tasks.map((k) => k.completed - k.scheduled).sort((a, b) => a - b),
      0.5,
    ).toFixed(0)} ms, p99 ${quantile(
      tasks.map((k) => k.completed - k.scheduled).sort((a, b) => a - b),
      0.99,
    ).toFixed(
      0,
    )} ms; main-thread gc pauses ${pauses.length}, ${pauses.reduce((s, p) => s + p.ms, 0).toFixed(0)} ms, ${pauses.filter((p) => p.ms >= 10).length} of 10 ms or more`,
  );
  return lines;
}
