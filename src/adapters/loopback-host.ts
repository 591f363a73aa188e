// A server bound to loopback (the acquisition API, the reference router) answers only requests
// addressed to a loopback name. A web page on a name the attacker controls can resolve that name
// to 127.0.0.1 after it loaded (DNS rebinding) and then reach the server as its own origin: it
// must get nothing there, not even the ledger page (whose token form would hand the token to that
// origin's sessionStorage), nor a router's on-demand preset (whose request acquires a serve with
// the router's own API token, evicting others).
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { isLoopback } from '../domain/manifest';
import { httpUrl } from '../domain/serve';

/** Whether a Host header names this host by a loopback name: `127.0.0.1:8090`, `[::1]:8090`, `localhost`. */
export function loopbackHost(host: string | undefined): boolean {
  if (!host) return false;
  const name = host.startsWith('[') ? host.slice(1, host.indexOf(']')) : host.replace(/:\d+$/, '');
  return isLoopback(name);
}

/** The loopback URL the request reached: the socket's own address, else 127.0.0.1 on the Host's port. */
function reachedUrl(req: FastifyRequest): string {
  const port = req.socket.localPort ?? Number(/:(\d+)$/.exec(req.headers.host ?? '')?.[1] ?? 80);
  const address = req.socket.localAddress?.replace(/^::ffff:/, '') ?? '127.0.0.1';
  return httpUrl(address, port);
}

/**
 * Every route, before the token is looked at: a Host that is not a loopback name is answered 421
 * (Misdirected Request) with the URL to open instead, as plain text. `what` names the server in
 * that answer.
 */
export function refuseForeignHosts(app: FastifyInstance, what: 'API' | 'router' = 'API'): void {
  app.addHook('onRequest', async (req, reply) => {
    if (loopbackHost(req.headers.host)) return undefined;
    const path = req.url.split('?')[0] ?? '/';
    return reply
      .code(421)
      .header('cache-control', 'no-store')
      .header('x-content-type-options', 'nosniff')
      .type('text/plain; charset=utf-8')
      .send(`This ${what} listens on loopback only and answers only to a loopback name (127.0.0.1, ::1, localhost): open ${reachedUrl(req)}${path}\n`);
  });
}
