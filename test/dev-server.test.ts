// The dev server the tests and the demo start: a port taken before it binds ends its start-up at
// once as ServerExitedError, which is what startDevServer starts again on other ports.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { ServerExitedError, startDevServer } from '../src/dev/dev-server';

test('a port another process holds: the server exits during start-up (ServerExitedError), and a given port is not chosen again', async () => {
  // Whatever connects (the start-up's probes of the frontend) is hung up on, so the holder can close.
  const holder = createServer((socket) => socket.destroy());
  await new Promise<void>((r) => holder.listen(0, '127.0.0.1', () => r()));
  const addr = holder.address();
  const port = typeof addr === 'object' && addr ? addr.port : 0;
  try {
    const t0 = Date.now();
    await assert.rejects(startDevServer({ port }), (err: unknown) => err instanceof ServerExitedError && /exited .* during start-up/.test(err.message));
    assert.ok(Date.now() - t0 < 30_000, 'refused at once, not after the 60 s start-up wait');
  } finally {
    holder.close();
  }
});

test('on ports it chooses, it starts and answers', async () => {
  const server = await startDevServer();
  try {
    assert.match(server.address, /^127\.0\.0\.1:\d+$/);
  } finally {
    await server.stop();
  }
});
