// What a client may hold open on our HTTP servers (the reference router, the acquisition API).
// fastify's requestTimeout defaults to 0, which replaces Node's 300 s with no limit at all: a
// client that sent headers and never its body, or trickled it a byte at a time, kept its socket
// and its buffered body for as long as it liked, the router's 64 MiB of body included.
//
// Only receiving a request is bounded, never answering it: the router holds an on-demand request
// whose body has arrived for up to wait_timeout_s (3600 s at most) before it answers, in silence
// unless it streams, and a stream lasts as long as its generation. Node's requestTimeout ends when
// the request's last byte is parsed, so it leaves both alone; an idle-socket timeout (fastify's
// connectionTimeout) would not, and stays 0.
//
// What Node and fastify answer themselves, before any route's handler (a request past its bound, a
// header block too large, a request that is not HTTP, a request while the server closes), is
// answered here in OpenAI's error shape,
// `{"error":{"message","type","code"}}`, the shape of every other answer of our servers: fastify's
// own bodies (`{"error":"Request Timeout","message":"Client Timeout","statusCode":408}`) have a
// string for `error`, where OpenAI clients look for its message.
import Fastify from 'fastify';
import type { FastifyHttpOptions, FastifyInstance } from 'fastify';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';

export interface HttpBounds {
  /** From a request's first byte to its last, headers and body; and the silence allowed before a new connection's first byte. */
  requestTimeoutMs: number;
  /** Connections open at once; Node closes those beyond it as they arrive. */
  maxConnections: number;
}

/**
 * Node's own bound on headers alone (headersTimeout): a request whose body is a few hundred bytes
 * needs no more for all of it, and the router's 64 MiB within it is 1.1 MiB/s, a poor Wi-Fi link;
 * on loopback it takes well under a second.
 */
export const DEFAULT_REQUEST_TIMEOUT_MS = 60_000;

/**
 * How often Node looks for requests past their bound (its default, 30 s, would let a 60 s bound
 * run to 90 s). A walk over the open connections: cheap at this rate.
 */
const CHECK_EVERY_MS = 5_000;

/**
 * An idle connection between two requests: fastify's default, said here because capConnections
 * relies on it. Longer than the 60 s idle timeout of common proxies in front, so they close first
 * and never send on a connection closing under them.
 */
export const KEEP_ALIVE_MS = 72_000;

/** A client error's answer: its status, and the `type` and `code` of its body. */
function clientErrorAnswer(err: NodeJS.ErrnoException, requestTimeoutMs: number): { status: number; code: string; message: string } {
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    return {
      status: 408,
      code: 'request_timeout',
      message: `the request did not arrive whole within ${requestTimeoutMs / 1000} s of its first byte (this server's request timeout); the connection is closed, send it again`,
    };
  }
  if (err.code === 'HPE_HEADER_OVERFLOW') return { status: 431, code: 'headers_too_large', message: 'the request headers are over the 16 KiB Node allows' };
  return { status: 400, code: 'malformed_request', message: `the request is not valid HTTP/1.1 (${err.code ?? err.message})` };
}

/**
 * Node's 'clientError' (fastify's clientErrorHandler): the answer in OpenAI's shape, then the
 * socket closed. Nothing is written on a socket whose current request already has an answer under
 * way or sent (a 401 or a 421, or the router's 503 body_budget, given before the body came, which
 * then trickled past the bound), where fastify's own handler wrote a 408 after that answer.
 */
function answerClientErrors(requestTimeoutMs: number): { handle: (err: NodeJS.ErrnoException, socket: Duplex) => void; watch: (server: Server) => void } {
  const exchanges = new WeakMap<Duplex, { req: IncomingMessage; res: ServerResponse }>();
  return {
    watch: (server) => server.on('request', (req: IncomingMessage, res: ServerResponse) => exchanges.set(req.socket, { req, res })),
    handle: (err, socket) => {
      // A reset: nobody is left to answer.
      if (err.code === 'ECONNRESET' || socket.destroyed) return;
      const last = exchanges.get(socket);
      const answering = last !== undefined && last.res.headersSent && !(last.req.complete && last.res.writableFinished);
      if (socket.writable && !answering) {
        const a = clientErrorAnswer(err, requestTimeoutMs);
        const body = JSON.stringify({ error: { message: a.message, type: a.code, code: a.code } });
        socket.write(
          `HTTP/1.1 ${a.status} ${STATUS_CODES[a.status] ?? ''}\r\nContent-Type: application/json; charset=utf-8\r\n` +
            `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
        );
      }
      socket.destroy(err);
    },
  };
}

/** The fastify options that bound receiving a request. */
function boundedServerOptions(b: HttpBounds): Pick<FastifyHttpOptions<Server>, 'requestTimeout' | 'connectionTimeout' | 'keepAliveTimeout' | 'http'> {
  const headersTimeout = Math.min(60_000, b.requestTimeoutMs);
  return {
    requestTimeout: b.requestTimeoutMs,
    connectionTimeout: 0,
    keepAliveTimeout: KEEP_ALIVE_MS,
    http: {
      // Node checks at creation that headers get no longer than the whole request; fastify sets its
      // requestTimeout only after, so both are given here too.
      requestTimeout: b.requestTimeoutMs,
      headersTimeout,
      connectionsCheckingInterval: Math.max(10, Math.min(CHECK_EVERY_MS, Math.ceil(b.requestTimeoutMs / 4))),
    },
  };
}

/**
 * Caps the connections, and closes one that sends nothing within requestTimeoutMs of opening:
 * Node's bounds start at a request's first byte, so a silent socket would otherwise keep one of
 * the capped places for ever. Its first request lifts that timeout (a held request is silent too);
 * between requests KEEP_ALIVE_MS applies.
 *
 * A close destroys the connections that have not sent a byte yet. Node counts a new connection as
 * busy, not idle (its headers timeout runs from the connect), so fastify's close, which ends only
 * the idle ones, waited on it for the whole requestTimeoutMs: fetch (undici) opens a connection
 * again at once after a request is aborted, so a client that left a held request kept the
 * router's shutdown 60 s. A connection partway through its first request is left to finish it.
 */
function capConnections(app: FastifyInstance, b: HttpBounds): void {
  const server = app.server;
  server.maxConnections = b.maxConnections;
  const unasked = new Set<Socket>();
  server.on('connection', (socket: Socket) => {
    socket.setTimeout(b.requestTimeoutMs);
    unasked.add(socket);
    socket.once('close', () => unasked.delete(socket));
  });
  server.on('request', (req: IncomingMessage) => {
    req.socket.setTimeout(0);
    unasked.delete(req.socket);
  });
  app.addHook('preClose', (done) => {
    for (const socket of unasked) if (socket.bytesRead === 0) socket.destroy();
    done();
  });
}

/** A server's answer to a request that arrives while it closes: its body, in the server's error shape, and its Retry-After. */
export interface ClosingAnswer {
  retryAfterS: number;
  body: unknown;
}

/**
 * While the server closes (SIGTERM, a promotion's recreate), a request on a connection kept alive
 * gets 503 with Retry-After in the server's own shape, and the connection closed; fastify's own
 * 503 (return503OnClosing) has a string for `error` and no Retry-After. Requests already in flight
 * finish. An onRequest hook, registered first, so it answers before any other hook (a token).
 */
function refuseWhileClosing(app: FastifyInstance, answer: () => ClosingAnswer): void {
  let closing = false;
  app.addHook('preClose', (done) => {
    closing = true;
    done();
  });
  app.addHook('onRequest', (_req, reply, done) => {
    if (!closing) return done();
    const a = answer();
    void reply.code(503).header('connection', 'close').header('retry-after', String(a.retryAfterS)).send(a.body);
  });
}

/**
 * A fastify server with both bounds in place, the request's (DEFAULT_REQUEST_TIMEOUT_MS unless
 * given) and the connections', and its answer while closing: one call, so no server of ours has
 * one without the others.
 */
export function boundedFastify(
  options: FastifyHttpOptions<Server>,
  b: { requestTimeoutMs?: number | undefined; maxConnections: number; whileClosing: () => ClosingAnswer },
): FastifyInstance {
  const bounds = { requestTimeoutMs: b.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS, maxConnections: b.maxConnections };
  const clientErrors = answerClientErrors(bounds.requestTimeoutMs);
  const app = Fastify({ ...options, ...boundedServerOptions(bounds), return503OnClosing: false, clientErrorHandler: clientErrors.handle });
  clientErrors.watch(app.server);
  capConnections(app, bounds);
  refuseWhileClosing(app, b.whileClosing);
  return app;
}
