// How activities report failures that retrying cannot fix: a non-retryable ApplicationFailure
// whose type the workflows and the CLI name. Adapters throw PermanentError; this maps it.
import { ApplicationFailure } from '@temporalio/activity';
import { PermanentError } from '../adapters/errors';

export function nonRetryable(type: string, message: string, details?: unknown): ApplicationFailure {
  return ApplicationFailure.create({ type, message, nonRetryable: true, details: details === undefined ? [] : [details] });
}

/** A named failure that is retried: the next attempt may succeed, and the type says what this one met. */
export function transient(type: string, message: string, details?: unknown): ApplicationFailure {
  return ApplicationFailure.create({ type, message, nonRetryable: false, details: details === undefined ? [] : [details] });
}

export async function permanentAsFailure<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof PermanentError) throw nonRetryable(err.type, err.message);
    throw err;
  }
}
