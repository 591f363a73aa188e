// Temporal's environment configuration file (TEMPORAL_CONFIG_FILE, else temporal.toml in the
// user's config directory): a file that cannot be used is bad input naming the file, and what is
// said about it never quotes its text, which holds API keys.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TemporalConfigError, temporalConfig } from '../src/client/temporal-config';
import { gpures, ROOT, show } from './support/cli';

const SECRET = `tmprl_APIKEYSECRET${Math.random().toString(36).slice(2)}`;
const MANIFEST = join(ROOT, 'examples', 'primary-node', 'serves.toml');

/** A profile whose api_key line is not TOML (an unquoted value): the parser's error is on that line. */
function brokenConfig(): string {
  const file = join(mkdtempSync(join(tmpdir(), 'gpures-temporal-config-')), 'temporal.toml');
  writeFileSync(file, `[profile.default]\naddress = "127.0.0.1:7233"\napi_key = ${SECRET}\n`);
  return file;
}

describe("Temporal's environment configuration file", () => {
  test('a TOML syntax error names the file, line and column, and not the text around it', () => {
    const file = brokenConfig();
    assert.throws(
      () => temporalConfig({ TEMPORAL_CONFIG_FILE: file }),
      (err: Error) => {
        assert.ok(err instanceof TemporalConfigError, String(err));
        assert.equal(err.message, `${file}: Temporal's environment configuration cannot be used: not TOML at line 3, column 11`);
        return true;
      },
    );
  });

  test('gpures worker with that file exits 2 (bad input) and prints no part of the key', async () => {
    const file = brokenConfig();
    const r = await gpures(['worker', '--manifest', MANIFEST, '--gpus', 'off', '--metrics', 'off'], { TEMPORAL_CONFIG_FILE: file });
    assert.equal(r.code, 2, show(r));
    assert.match(r.stderr, new RegExp(`${file.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}: .*line 3, column 11`), show(r));
    assert.ok(!`${r.stdout}${r.stderr}`.includes('APIKEYSECRET'), show(r));
  });
});
