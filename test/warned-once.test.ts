// A manifest's warnings once, not on every command; `gpures validate` every time.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { notShownBefore } from '../src/cli/warned-once';
import { gpures } from './support/cli';

test('the same lines once; changed lines again; an unwritable stamp dir shows them every time', () => {
  const env = { XDG_CACHE_HOME: mkdtempSync(join(tmpdir(), 'gpures-warned-')) };
  assert.deepEqual(notShownBefore(['warning: a'], env), ['warning: a']);
  assert.deepEqual(notShownBefore(['warning: a'], env), []);
  assert.deepEqual(notShownBefore(['warning: a', 'warning: b'], env), ['warning: a', 'warning: b']);
  assert.deepEqual(notShownBefore([], env), []);
  const file = join(env.XDG_CACHE_HOME, 'a-file');
  writeFileSync(file, '');
  const unwritable = { XDG_CACHE_HOME: file };
  assert.deepEqual(notShownBefore(['warning: a'], unwritable), ['warning: a']);
  assert.deepEqual(notShownBefore(['warning: a'], unwritable), ['warning: a']);
});

test('a command warns once for a manifest; validate warns every time', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'gpures-warned-'));
  const example = resolve(__dirname, '..', '..', 'examples', 'primary-node', 'serves.toml');
  const manifest = join(dir, 'serves.toml');
  // embeddings without its memory flag: vLLM would take 0.9 of the card.
  const text = readFileSync(example, 'utf8').replace('args = ["--gpu-memory-utilization", "0.0981"]', 'args = []');
  assert.notEqual(text, readFileSync(example, 'utf8'));
  writeFileSync(manifest, text);
  const env = { XDG_CACHE_HOME: join(dir, 'cache'), TEMPORAL_ADDRESS: '127.0.0.1:1', GPURES_ROUTER_CONFIG: '' };
  const warned = (stderr: string) => stderr.split('\n').filter((l) => l.includes("serve 'embeddings' (serves[1].args): no --gpu-memory-utilization")).length;
  // `ledger` stops at the unreachable Temporal (exit 4), after the manifest is read.
  const first = await gpures(['ledger', '--manifest', manifest], env);
  assert.equal(first.code, 4, first.stderr);
  assert.equal(warned(first.stderr), 1, first.stderr);
  const second = await gpures(['ledger', '--manifest', manifest], env);
  assert.equal(second.code, 4, second.stderr);
  assert.equal(warned(second.stderr), 0, second.stderr);
  for (let i = 0; i < 2; i++) {
    const v = await gpures(['validate', manifest], env);
    assert.equal(v.code, 0, v.stderr);
    assert.equal(warned(v.stderr), 1, v.stderr);
  }
});
