// The one bearer check of every endpoint that changes the box (src/adapters/bearer.ts).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { bearerMatches, tokenDigest } from '../src/adapters/bearer';

test('a bearer token matches as given, a passphrase with inner spaces included; anything else does not', () => {
  for (const token of ['0123456789abcdef0123456789abcdef', 'correct horse battery staple, four words and more']) {
    const want = tokenDigest(token);
    assert.equal(bearerMatches(`Bearer ${token}`, want), true, token);
    assert.equal(bearerMatches(`bearer  ${token} `, want), true, 'the scheme in any case, outer spaces aside');
    assert.equal(bearerMatches(`Bearer ${token}x`, want), false);
    assert.equal(bearerMatches(`Bearer ${token.slice(1)}`, want), false);
    assert.equal(bearerMatches(token, want), false, 'no scheme');
    assert.equal(bearerMatches(`Basic ${token}`, want), false);
    assert.equal(bearerMatches(undefined, want), false);
    assert.equal(bearerMatches('Bearer ', want), false);
  }
  // An empty token is never one: a header without one does not match a server configured with ''.
  assert.equal(bearerMatches('Bearer ', tokenDigest('')), false);
});
