// The worker's log: the SDK's, except that an honest denial is one info line. The SDK writes each
// failed run as a WARN with the error's stack; a denial is the ledger doing its job, and a box that
// denies often would bury its real warnings under them.
//
// A failure the project named (an ApplicationFailure of a src/shared/failures.ts type, an image not
// on the box, a health timeout) is one WARN line per attempt and per run: the SDK wrote each as a
// WARN of some 15 lines (its metadata, the task token, a stack that says where the code threw, not
// why), about 30 for one `serves up` of a missing image. An error of no named type (a bug) keeps
// its stack.
import type { LogLevel, LogMetadata, Logger } from '@temporalio/worker';
import { LogTimestamp } from '@temporalio/worker';
import { FAILURE_TYPE_LOG_ATTRIBUTE, OUTCOME_LOG_ATTRIBUTE } from '../shared/operation-metrics';
import { Failure } from '../shared/failures';

const NAMED: ReadonlySet<string> = new Set(Object.values(Failure));

interface LoggedError {
  message?: unknown;
  type?: unknown;
  cause?: unknown;
}

/** The innermost named failure of a logged error (a run's failure wraps its activity's), if it has one. */
function namedFailure(error: unknown): { type: string; message: string } | undefined {
  let named: { type: string; message: string } | undefined;
  for (let e = error as LoggedError | undefined, depth = 0; e && typeof e === 'object' && depth < 8; e = e.cause as LoggedError | undefined, depth++) {
    if (typeof e.type === 'string' && NAMED.has(e.type) && typeof e.message === 'string') named = { type: e.type, message: e.message };
  }
  return named;
}

const oneLine = (s: string): string => s.replace(/\s*\n\s*/g, ' ');

/**
 * One line for a failed attempt of a named failure, or a run failed by one: whose, and its own
 * words; undefined for any other line. A run's error reaches the logger by structured clone from
 * the workflow thread, which drops its type: the run's type comes as a log attribute
 * (src/workflows/operation-metrics.ts). A run failed by anything else keeps the SDK's line and its
 * stack: the sagas fail a run with an error of workflow code (a TypeError in a step) as well as
 * with the project's own failures, and a developer needs that stack.
 */
export function namedFailureLine(level: LogLevel, message: string, meta: LogMetadata | undefined): string | undefined {
  if (level !== 'WARN' || !meta) return undefined;
  const run = `${String(meta['workflowType'] ?? 'workflow')} ${String(meta['workflowId'] ?? '?')}`;
  if (message === 'Activity failed') {
    const named = namedFailure(meta['error']);
    return (
      named &&
      `activity ${String(meta['activityType'] ?? '?')} of ${run}, attempt ${String(meta['attempt'] ?? '?')} failed: ${named.type}: ${oneLine(named.message)}`
    );
  }
  if (message !== 'Workflow failed' || meta[OUTCOME_LOG_ATTRIBUTE] !== 'failed') return undefined;
  const runType: unknown = meta[FAILURE_TYPE_LOG_ATTRIBUTE];
  if (typeof runType !== 'string' || !NAMED.has(runType)) return undefined;
  const error = meta['error'] as LoggedError | undefined;
  const named = namedFailure(error);
  const said = named ? `${named.type}: ${named.message}` : typeof error?.message === 'string' ? error.message : '';
  return `${run} failed: ${oneLine(said)}`;
}

/** The one line for a denied run: which operation, and the ledger's words. */
export function denialLine(meta: LogMetadata): string {
  const error = meta['error'] as { message?: unknown } | undefined;
  const said = typeof error?.message === 'string' ? error.message.replace(/\s*\n\s*/g, ' ') : '';
  // The ledger's message says 'denied' itself (denialMessage); anything else is said to be one.
  return `${String(meta['workflowType'] ?? 'workflow')} ${String(meta['workflowId'] ?? '?')}: ${said.includes('denied') ? said : `denied: ${said}`}`;
}

export function isDenialLog(level: LogLevel, message: string, meta: LogMetadata | undefined): meta is LogMetadata {
  return level === 'WARN' && message === 'Workflow failed' && meta?.[OUTCOME_LOG_ATTRIBUTE] === 'denied';
}

/** `inner` with each denied run's WARN and stack trace written as one INFO line. */
export function denialsAsInfo(inner: Logger): Logger {
  const log = (level: LogLevel, message: string, meta?: LogMetadata): void => {
    // The run's own time kept: the line says when the denial happened, not when it was written.
    if (isDenialLog(level, message, meta)) inner.log('INFO', denialLine(meta), { [LogTimestamp]: meta[LogTimestamp] as unknown });
    else {
      const named = namedFailureLine(level, message, meta);
      if (named) inner.log('WARN', named, { [LogTimestamp]: meta?.[LogTimestamp] as unknown });
      else inner.log(level, message, meta);
    }
  };
  return {
    log,
    trace: (m, meta) => log('TRACE', m, meta),
    debug: (m, meta) => log('DEBUG', m, meta),
    info: (m, meta) => log('INFO', m, meta),
    warn: (m, meta) => log('WARN', m, meta),
    error: (m, meta) => log('ERROR', m, meta),
  };
}
