// The worker's log: the SDK's, except that an honest denial is one info line. The SDK writes each
// failed run as a WARN with the error's stack; a denial is the ledger doing its job, and a box that
// denies often would bury its real warnings under them.
import type { LogLevel, LogMetadata, Logger } from '@temporalio/worker';
import { LogTimestamp } from '@temporalio/worker';
import { OUTCOME_LOG_ATTRIBUTE } from '../shared/operation-metrics';

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
    else inner.log(level, message, meta);
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
