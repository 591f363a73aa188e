// Temporal's environment configuration file (TEMPORAL_CONFIG_FILE, else temporal.toml in the
// user's config directory): a file that cannot be used is bad input naming the file, and what is
// said about it never quotes its text, which holds API keys. It is read up to a bound, and the
// file TEMPORAL_CONFIG_FILE names must exist; the default one need not.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { defaultConfigFile, MAX_TEMPORAL_CONFIG_BYTES, TemporalConfigError, temporalConfig } from '../src/client/temporal-config';
import { gpures, ROOT, show } from './support/cli';

const SECRET = `tmprl_APIKEYSECRET${Math.random().toString(36).slice(2)}`;
const MANIFEST = join(ROOT, 'examples', 'primary-node', 'serves.toml');

const tmp = () => mkdtempSync(join(tmpdir(), 'gpures-temporal-config-'));

/** temporalConfig's refusal, its message, for assert.throws. */
function refused(message: string | RegExp) {
  return (err: Error) => {
    assert.ok(err instanceof TemporalConfigError, String(err));
    if (typeof message === 'string') assert.equal(err.message, message);
    else assert.match(err.message, message);
    return true;
  };
}

/** A profile whose api_key line is not TOML (an unquoted value): the parser's error is on that line. */
function brokenConfig(): string {
  const file = join(tmp(), 'temporal.toml');
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

  test('a file past the bound is refused by it, naming TEMPORAL_CONFIG_FILE, not read into memory whole', () => {
    assert.throws(
      () => temporalConfig({ TEMPORAL_CONFIG_FILE: '/dev/zero' }),
      refused(`/dev/zero: Temporal's config file is more than the ${MAX_TEMPORAL_CONFIG_BYTES} bytes it may be (TEMPORAL_CONFIG_FILE)`),
    );
  });

  test('the file TEMPORAL_CONFIG_FILE names must exist; the default one need not, unless TEMPORAL_PROFILE names a profile in it', () => {
    const missing = join(tmp(), 'no-such-temporal.toml');
    assert.throws(
      () => temporalConfig({ TEMPORAL_CONFIG_FILE: missing }),
      refused(new RegExp(`^${missing}: cannot read Temporal's config file: ENOENT.*\\(TEMPORAL_CONFIG_FILE\\)$`)),
    );
    const empty = { XDG_CONFIG_HOME: tmp() };
    // Empty is unset, as `TEMPORAL_CONFIG_FILE= gpures …` means it.
    assert.equal(temporalConfig({ ...empty, TEMPORAL_CONFIG_FILE: '' }).connectionOptions.address, '127.0.0.1:7233');
    const config = temporalConfig({ ...empty, TEMPORAL_ADDRESS: '127.0.0.1:7299' });
    assert.equal(config.connectionOptions.address, '127.0.0.1:7299');
    assert.equal(config.connectionOptions.apiKey, undefined);
    assert.throws(
      () => temporalConfig({ ...empty, TEMPORAL_PROFILE: 'prod' }),
      refused(
        `${join(empty.XDG_CONFIG_HOME, 'temporalio', 'temporal.toml')}: no [profile.prod] (TEMPORAL_PROFILE=prod), and there is no such file: set TEMPORAL_CONFIG_FILE, or unset TEMPORAL_PROFILE`,
      ),
    );
  });

  test("the default file is the SDK's, and is read when present", () => {
    const home = tmp();
    assert.equal(defaultConfigFile({ HOME: home }, 'linux'), join(home, '.config', 'temporalio', 'temporal.toml'));
    assert.equal(defaultConfigFile({ HOME: home, XDG_CONFIG_HOME: 'relative' }, 'linux'), undefined);
    assert.equal(defaultConfigFile({ HOME: home }, 'darwin'), join(home, 'Library', 'Application Support', 'temporalio', 'temporal.toml'));
    assert.equal(defaultConfigFile({}, 'linux'), undefined);
    mkdirSync(join(home, '.config', 'temporalio'), { recursive: true });
    writeFileSync(join(home, '.config', 'temporalio', 'temporal.toml'), '[profile.default]\naddress = "127.0.0.1:7288"\nnamespace = "ops"\n');
    const config = temporalConfig({ HOME: home });
    assert.equal(config.connectionOptions.address, '127.0.0.1:7288');
    assert.equal(config.namespace, 'ops');
  });

  test('gpures worker with a TEMPORAL_CONFIG_FILE that does not exist exits 2 naming it, before it starts', async () => {
    const missing = join(tmp(), 'no-such-temporal.toml');
    const r = await gpures(['worker', '--manifest', MANIFEST, '--gpus', 'off', '--metrics', 'off'], { TEMPORAL_CONFIG_FILE: missing });
    assert.equal(r.code, 2, show(r));
    assert.match(
      r.stderr.trim().split('\n').pop() ?? '',
      new RegExp(`^${missing}: cannot read Temporal's config file: ENOENT.*\\(TEMPORAL_CONFIG_FILE\\)$`),
      show(r),
    );
  });
});
