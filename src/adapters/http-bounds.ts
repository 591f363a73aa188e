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
import Fastify from 'fastify';
import type { FastifyHttpOptions, FastifyInstance } from 'fastify';
import type { Server } from 'node:http';

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
 */
function capConnections(app: FastifyInstance, b: HttpBounds): void {
  const server = app.server;
  server.maxConnections = b.maxConnections;
  server.on('connection', (socket) => socket.setTimeout(b.requestTimeoutMs));
  server.on('request', (req) => req.socket.setTimeout(0));
}

/**
 * A fastify server with both bounds in place, the request's (DEFAULT_REQUEST_TIMEOUT_MS unless
 * given) and the connections': one call, so no server of ours has one without the other.
 */
export function boundedFastify(options: FastifyHttpOptions<Server>, b: { requestTimeoutMs?: number | undefined; maxConnections: number }): FastifyInstance {
  const bounds = { requestTimeoutMs: b.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS, maxConnections: b.maxConnections };
  const app = Fastify({ ...options, ...boundedServerOptions(bounds) });
  capConnections(app, bounds);
  return app;
}
