// The request bodies the router holds at once, all requests together. Each body is bounded
// (bodyLimitBytes, 64 MiB) and so are the connections (1024), but their product is 64 GiB: any
// client that reaches the router could open a few dozen connections and send each a body just
// under the limit, slowly, and the router would keep every byte until it had them all. A body
// counts from its first byte until its response has ended (or the client went away): received, it
// is parsed, re-serialized for the backend and kept until the answer is done (a held on-demand
// request for up to wait_timeout_s, a stream for its generation), so that is how long the bytes
// are the router's. The on-demand queues' own bound (heldBytesLimit) is a part of this one.
//
// A request that would pass the budget is answered 503 with Retry-After before its body is read
// when it says its Content-Length: Node then reads the rest off the socket and drops it, within
// the request bound, and the connection serves on (so does the 413 of a body over the limit,
// server.ts). Not closed after the answer, as fastify closes it after its own 413: a client still
// sending then gets a reset, which on a body of megabytes can reach
// it before the answer does (14 of 16 test clients saw a reset, not the 503 and its Retry-After).
// A chunked body is refused with the chunk that would pass the budget (fastify closes that one).
import { Transform } from 'node:stream';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { errorBody } from './errors';

/**
 * Eight bodies at the 64 MiB limit, twice the on-demand queues' 256 MiB, or thousands of chat
 * turns (a 128k-token context is about 0.5 MiB of JSON). A parsed body costs the heap about three
 * times its bytes (the text, the parsed object, the payload sent on), so 512 MiB of bodies stays
 * well inside Node's default heap limit (4 GiB on a 64-bit host with 16 GiB or more).
 */
export const DEFAULT_BODY_BUDGET_BYTES = 512 * 1024 * 1024;

const mib = (n: number) => (n / 1024 / 1024).toFixed(2);

/** The bytes counted against the budget now, and its size. */
export class BodyBudget {
  private used = 0;

  constructor(readonly limitBytes: number) {}

  get inFlightBytes(): number {
    return this.used;
  }

  /** Counts n more bytes if they fit. */
  take(n: number): boolean {
    if (this.used + n > this.limitBytes) return false;
    this.used += n;
    return true;
  }

  give(n: number): void {
    this.used -= n;
  }

  /** Why a body of `bytes` (so far) is refused: the figures an operator compares with the budget. */
  refusalMessage(bytes: number): string {
    return (
      `the router holds ${mib(this.used)} MiB of request bodies being received or answered, and this request's body ` +
      `(${mib(bytes)} MiB) would take it past its budget of ${mib(this.limitBytes)} MiB for all requests together; retry later`
    );
  }
}

/** A chunked body's chunk that did not fit: the error handler answers it as the budget's 503. */
export class BodyBudgetExceeded extends Error {
  readonly statusCode = 503;
  constructor(message: string) {
    super(message);
    this.name = 'BodyBudgetExceeded';
  }
}

/** The 503 of a request the budget refuses; nothing of it reached a tier, so it names none. */
export function refuseOverBudget(reply: FastifyReply, message: string, retryAfterS: number): FastifyReply {
  return reply
    .code(503)
    .header('retry-after', String(retryAfterS))
    .send(errorBody(message, 'server_busy', { code: 'body_budget', reason: 'body_budget', retry_after_s: retryAfterS }));
}

export interface BodyBudgetHooks {
  budget: BodyBudget;
  /** A body above it is the router's 413 (server.ts), not counted: it is refused without being read either. */
  bodyLimitBytes: number;
  /** Retry-After of the refusal: the config's, read when refusing (a reload may change it). */
  retryAfterS: () => number;
  /** Told of each refusal (the metrics). */
  onRefused: () => void;
}

/** Counts every request's body against the budget, from its first byte until its response has ended. */
export function budgetBodies(app: FastifyInstance, h: BodyBudgetHooks): void {
  const counted = new WeakMap<FastifyRequest, { bytes: number }>();
  const account = (req: FastifyRequest, reply: FastifyReply) => {
    const a = { bytes: 0 };
    counted.set(req, a);
    // 'close' comes once per response, finished or not (the client gone, a hijacked stream).
    reply.raw.once('close', () => {
      h.budget.give(a.bytes);
      a.bytes = 0;
    });
    return a;
  };

  app.addHook('onRequest', (req, reply, done) => {
    const declared = req.headers['content-length'];
    const length = declared !== undefined && /^\d+$/.test(declared) ? Number(declared) : undefined;
    if (length === undefined || length === 0 || length > h.bodyLimitBytes) return done();
    if (!h.budget.take(length)) {
      h.onRefused();
      refuseOverBudget(reply, h.budget.refusalMessage(length), h.retryAfterS());
      return;
    }
    account(req, reply).bytes = length;
    done();
  });

  // A body without Content-Length (chunked) is counted as its chunks arrive.
  app.addHook('preParsing', (req, reply, payload, done) => {
    if (counted.has(req) || req.headers['transfer-encoding'] === undefined) return done(null, payload);
    const a = account(req, reply);
    let seen = 0;
    const counting = new Transform({
      transform(chunk: Buffer, _encoding, callback) {
        seen += chunk.length;
        // Past the body limit fastify answers 413 on this very chunk: nothing more to count.
        if (seen > h.bodyLimitBytes) return callback(null, chunk);
        if (!h.budget.take(chunk.length)) {
          h.onRefused();
          // What else arrives before the connection closes is read off the socket and dropped.
          payload.unpipe(counting);
          payload.resume();
          return callback(new BodyBudgetExceeded(h.budget.refusalMessage(seen)));
        }
        a.bytes += chunk.length;
        callback(null, chunk);
      },
    });
    payload.once('error', (err) => counting.destroy(err));
    done(null, payload.pipe(counting));
  });
}
