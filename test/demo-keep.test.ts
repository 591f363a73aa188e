// gpures demo --keep leaves a box up: it must say where each part is, the Temporal UI on the port
// its dev server got, and where the tokens are without printing one; the ledger page links there.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, statSync } from 'node:fs';
import { runDemo } from '../src/demo/demo';
import { httpGet } from './support/raw-http';

/** The first printed line's value after `label`, up to a space. */
function printed(lines: readonly string[], label: RegExp): string {
  for (const l of lines) {
    const m = new RegExp(`^\\s+${label.source}\\s+(\\S+)`).exec(l);
    if (m?.[1]) return m[1];
  }
  assert.fail(`no ${label.source} line in:\n${lines.join('\n')}`);
}

test('gpures demo --keep prints the UI, router and API URLs and a 0600 tokens file; the ledger page links the UI in use', async () => {
  const lines: string[] = [];
  let reached = false;
  const result = await runDemo({
    keep: true,
    ui: true,
    out: (l) => lines.push(l),
    keepUntil: async () => {
      const ui = printed(lines, /Temporal UI/);
      const router = printed(lines, /router/);
      const api = printed(lines, /acquisition API/);
      const tokensFile = printed(lines, /tokens/);
      // The demo's dev server: a free port, not the default UI's 8233.
      assert.match(ui, /^http:\/\/127\.0\.0\.1:\d+\/namespaces\/default\/workflows$/);
      assert.equal((await fetch(ui)).ok, true, ui);
      assert.equal(statSync(tokensFile).mode & 0o777, 0o600);
      const tokens = Object.fromEntries(
        readFileSync(tokensFile, 'utf8')
          .trim()
          .split('\n')
          .map((l) => l.split('=') as [string, string]),
      );
      assert.deepEqual(Object.keys(tokens).sort(), ['GPURES_API_TOKEN', 'GPURES_ROUTER_CLIENT_TOKEN', 'GPURES_ROUTER_TOKEN']);
      // No token in what was printed.
      for (const token of Object.values(tokens)) assert.ok(!lines.some((l) => l.includes(token)), 'a token was printed');
      // Each reached with what the file holds.
      const models = await fetch(`${router}/models`);
      assert.equal(models.status, 200);
      const ledger = await fetch(`${api}/v1/ledger`, { headers: { authorization: `Bearer ${tokens.GPURES_API_TOKEN}` } });
      assert.equal(ledger.status, 200, await ledger.clone().text());
      const page = (await ledger.json()) as { temporalUi: string };
      assert.equal(page.temporalUi, ui.replace(/\/namespaces\/.*$/, ''));
      // Bound to loopback with the guards of `gpures api` there: the page's read needs no token,
      // a rebound name is refused on every route, and /metrics has the process's own figures.
      const apiPort = Number(new URL(api).port);
      assert.equal((await httpGet(apiPort, '/v1/ledger', {})).status, 200);
      for (const path of ['/healthz', '/metrics', '/v1/ledger']) assert.equal((await httpGet(apiPort, path, { host: 'rebound.example' })).status, 421, path);
      assert.match((await httpGet(apiPort, '/metrics', {})).body, /^process_cpu_seconds_total /m);
      reached = true;
    },
  });
  assert.equal(reached, true);
  assert.equal(result.ok, true, lines.join('\n'));
});
