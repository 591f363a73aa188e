// Errors of the ports, thrown by adapters and read by activities: both sides import them from
// here, so an activity can tell them apart without importing an adapter.
import { Failure } from '../shared/failures';

/** Thrown by adapters for failures that retrying cannot fix; activities map them to failure types. */
export class PermanentError extends Error {
  constructor(
    readonly type: string,
    message: string,
  ) {
    super(message);
    this.name = type;
  }
}

export function imageMissing(image: string): PermanentError {
  return new PermanentError(Failure.ImageMissing, `image '${image}' is not on this Docker host; pull or load it first`);
}

/**
 * Nothing answered at a serve's URL: the connection was refused, reset or timed out. `code` is
 * the system's (ECONNREFUSED, ECONNRESET, UND_ERR_SOCKET, TIMEOUT, …): whether the container is
 * gone is for the caller to find out.
 */
export class ServeUnreachable extends Error {
  constructor(
    readonly url: string,
    readonly code: string,
    detail: string,
  ) {
    super(`${url}: ${code}${detail && detail !== code ? ` (${detail})` : ''}`);
    this.name = 'ServeUnreachable';
  }
}

/**
 * fetch's "fetch failed" names nothing; its cause holds the system's code (an AggregateError of
 * one per address tried, for a name that resolves to several), a timeout is a TimeoutError.
 */
export function unreachable(url: string, err: unknown): ServeUnreachable {
  const e = err as { name?: string; message?: string; cause?: { code?: unknown; message?: unknown; errors?: { code?: unknown }[] } };
  if (e.name === 'TimeoutError' || e.name === 'AbortError') return new ServeUnreachable(url, 'TIMEOUT', e.message ?? '');
  const code = e.cause?.code ?? e.cause?.errors?.find((x) => typeof x.code === 'string')?.code;
  const detail = typeof e.cause?.message === 'string' ? e.cause.message : (e.message ?? String(err));
  return new ServeUnreachable(url, typeof code === 'string' ? code : 'UNREACHABLE', detail);
}

/** A sleep-mode endpoint of a serve answered, but not with success: its status and what it said. */
export class SleepEndpointError extends Error {
  constructor(
    readonly url: string,
    readonly status: number,
    detail: string,
  ) {
    super(`${url} answered ${status}${detail ? `: ${detail}` : ''}`);
    this.name = 'SleepEndpointError';
  }
}
