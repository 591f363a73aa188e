// gpures demo on a machine where another demo (--keep) still holds the example's serve ports.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEMO_MANIFEST, DemoInputError, runDemo } from '../src/demo/demo';

test('a serve port held by another process is told before anything starts, naming the port and the serve', async () => {
  const holder = createServer();
  await new Promise<void>((resolve) => holder.listen({ host: '127.0.0.1', port: 0 }, resolve));
  const port = (holder.address() as AddressInfo).port;
  const dir = mkdtempSync(join(tmpdir(), 'gpures-demo-ports-'));
  const manifestPath = join(dir, 'serves.toml');
  // fast's port, 30001 in the example, is the one held.
  writeFileSync(manifestPath, readFileSync(DEMO_MANIFEST, 'utf8').replace(/^port = 30001$/m, `port = ${port}`));
  const lines: string[] = [];
  try {
    // An unreachable Temporal: were the ports not checked first, the demo would fail there instead.
    await assert.rejects(runDemo({ manifestPath, temporalAddress: '127.0.0.1:1', out: (l) => lines.push(l) }), (err: Error) => {
      assert.ok(err instanceof DemoInputError, `${err.name}: ${err.message}`);
      assert.match(err.message, new RegExp(`^${manifestPath}: the demo's serves listen on their manifest's ports, and .*\\b${port} \\(fast\\)`));
      assert.match(err.message, /in use by another process \(another `gpures demo --keep`\?\); nothing was started/);
      return true;
    });
    assert.deepEqual(lines, []);
  } finally {
    holder.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
