// How the installed worker stops: its local steps first, then the SDK's drain, within a bound.
//
// A stopping worker polls no workflow task, the ledgers' included (they run on the node's task
// queue). An operation's local step that waits on a ledger Update at that moment can therefore not
// end here: the Update is answered only once a worker serves the ledger again. Left to the SDK, the
// shutdown waited out the step's five attempts of 30 s (165 s; systemd SIGKILLs at 90 s). So on
// SIGINT or SIGTERM the worker first lets its workflows' local steps end while it still polls (they
// take milliseconds), then shuts down; and if it has not drained WORKER_STOP_MS after the signal,
// it exits naming what it left: a step's workflow task goes to the node's next worker, which runs
// the step again with the same update id (the server answers a repeat with the first outcome).
import type { Context } from '@temporalio/activity';
import type { ActivityInterceptorsFactory, Worker } from '@temporalio/worker';

/** From the signal to exit at most: in-flight workflow tasks take milliseconds, activities are asked to cancel at once. */
export const WORKER_STOP_MS = 10_000;
/** How long the worker may wait for its workflows' local steps to end before the shutdown begins anyway. */
export const LOCAL_STEPS_END_MS = 3_000;
/**
 * How long no local step and no workflow activation must be running before the shutdown begins: a
 * step's end is reported to its workflow, which may ask for its next local step (a ledger Update
 * that a stopping worker could not see answered) a few milliseconds later.
 */
const QUIET_MS = 150;
const QUIET_POLL_MS = 20;
/** The signals that stop the worker: the SDK's defaults, whose runtime is installed without its own handlers. */
export const STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGQUIT', 'SIGUSR2'] as const;

/** The local steps this worker runs now, by activity type and workflow id. */
export class LocalSteps {
  private readonly running = new Map<symbol, string>();
  /** When a local step last began or ended (ms since the epoch; 0 before the first). */
  lastChangeAt = 0;

  readonly interceptor: ActivityInterceptorsFactory = (ctx: Context) => ({
    inbound: {
      execute: async (input, next) => {
        if (!ctx.info.isLocal) return next(input);
        const key = Symbol();
        this.running.set(key, `${ctx.info.activityType} of ${ctx.info.workflowExecution?.workflowId ?? 'a workflow'}`);
        this.lastChangeAt = Date.now();
        try {
          return await next(input);
        } finally {
          this.running.delete(key);
          this.lastChangeAt = Date.now();
        }
      },
    },
  });

  get count(): number {
    return this.running.size;
  }

  inFlight(): string[] {
    return [...this.running.values()];
  }
}

/** The worker did not drain within WORKER_STOP_MS: what it left is its next one's to run. */
export class WorkerStopCut extends Error {
  override readonly name = 'WorkerStopCut';
  constructor(left: { localSteps: string[]; activities: number }) {
    const s = WORKER_STOP_MS / 1000;
    const parts: string[] = [];
    if (left.localSteps.length > 0) {
      parts.push(
        `local step(s) still in flight after ${s} s of stopping: ${left.localSteps.join(', ')} ` +
          `(a ledger Update is answered only by a worker polling the node's task queue, which a stopping one no longer does)`,
      );
    }
    if (left.activities > 0) {
      parts.push(
        `${left.activities} activit${left.activities === 1 ? 'y' : 'ies'} still running ${s} s after the signal (asked to cancel when the shutdown began)`,
      );
    }
    if (parts.length === 0) parts.push(`the SDK had not drained after ${s} s of stopping`);
    super(
      `worker: stopped with work left: ${parts.join('; ')}. Their workflows go on with the node's next worker ` +
        `(a local step runs again with the same update ids; an activity is retried after its heartbeat timeout)`,
    );
  }
}

/**
 * Resolves once no local step and no workflow activation has begun or ended for QUIET_MS (each
 * change timed as it happens, not sampled), after `boundMs`, or once `done()` says so (a second
 * signal, the run ended); with whether it was quiet.
 */
async function untilQuiet(worker: Worker, localSteps: LocalSteps, boundMs: number, done: () => boolean): Promise<boolean> {
  const until = Date.now() + boundMs;
  let activations = 0;
  let activationsChangedAt = Date.now();
  const watch = worker.numInFlightActivations$.subscribe((n) => {
    activations = n;
    activationsChangedAt = Date.now();
  });
  try {
    while (!done() && Date.now() < until) {
      const idle = localSteps.count === 0 && activations === 0;
      if (idle && Date.now() - Math.max(activationsChangedAt, localSteps.lastChangeAt) >= QUIET_MS) return true;
      await new Promise((r) => setTimeout(r, QUIET_POLL_MS));
    }
    return false;
  } finally {
    watch.unsubscribe();
  }
}

/**
 * Runs the worker until it has stopped; `started` is called once the stop signals are handled
 * (where the worker says it is up). At a stop signal: its workflows' local steps end first
 * (until quiet, up to LOCAL_STEPS_END_MS; a second signal does not wait), then the SDK's shutdown;
 * rejects with WorkerStopCut, naming what was left, if the worker has not stopped WORKER_STOP_MS
 * after the first signal, and the process is to exit. Not the SDK's shutdownForceTime: past it the
 * SDK disposes the workflow threads under the workflow still waiting on its local step, and run()
 * rejects with that disposal's IllegalStateError instead of saying what was cut.
 */
export async function stopWithin(worker: Worker, localSteps: LocalSteps, started: () => void = () => undefined): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  let ended = false;
  let signals = 0;
  let onSignal = (_signal: NodeJS.Signals): void => undefined;
  const shutdown = () => {
    // A runtime installed before ours keeps the SDK's own handlers, which may have begun it already.
    if (worker.getState() === 'RUNNING') worker.shutdown();
  };
  const cut = new Promise<never>((_, reject) => {
    onSignal = (signal: NodeJS.Signals) => {
      if (++signals > 1) return shutdown();
      const at = Date.now();
      timer = setTimeout(() => {
        reject(new WorkerStopCut({ localSteps: localSteps.inFlight(), activities: worker.getStatus().numInFlightNonLocalActivities }));
      }, WORKER_STOP_MS);
      void untilQuiet(worker, localSteps, LOCAL_STEPS_END_MS, () => ended || signals > 1).then((quiet) => {
        if (ended) return;
        const left = localSteps.inFlight();
        const why = quiet
          ? `no local step or workflow task for ${QUIET_MS} ms`
          : signals > 1
            ? 'a second signal'
            : `local steps still running after ${LOCAL_STEPS_END_MS / 1000} s${left.length ? `: ${left.join(', ')}` : ''}`;
        process.stderr.write(`worker: ${signal}: ${why}; shutting down (${Date.now() - at} ms after the signal)\n`);
        shutdown();
      });
    };
  });
  for (const signal of STOP_SIGNALS) process.on(signal, onSignal);
  try {
    // Not before: a signal between the two would find no handler and end the process at once.
    started();
    const running = worker.run();
    // Cut, the run's own end comes later or never; nobody waits for it then.
    running.catch(() => undefined);
    await Promise.race([running, cut]);
  } finally {
    ended = true;
    clearTimeout(timer);
    for (const signal of STOP_SIGNALS) process.removeListener(signal, onSignal);
  }
}
