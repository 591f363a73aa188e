// The files an operator names are read up to a size such a file can have: a path to something
// else (a log, a device, a pipe that never ends) is refused by that size, naming the file, and
// never read into memory past it.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readBounded } from '../src/config/bounded-read';
import { HistoryFileError, loadHistoryFile, MAX_HISTORY_BYTES } from '../src/audit/history';
import { loadConfig } from '../src/router/config-file';
import { MAX_MANIFEST_BYTES } from '../src/domain/manifest';
import { gpures, show } from './support/cli';

describe('bounded reads of the files an operator names', () => {
  test('a regular file within the bound is read whole; past it, refused by its size with the file and what it was read as', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'gpures-bounded-'));
    try {
      const small = join(dir, 'small.toml');
      writeFileSync(small, 'node = "x"\n');
      assert.equal(await readBounded(small, 'manifest', 11), 'node = "x"\n');
      await assert.rejects(readBounded(small, 'manifest', 10), { message: `${small}: manifest is 11 bytes, larger than the 10 bytes it may be` });
      // The file named once: node's own text ends with it again (`, open '…'`).
      await assert.rejects(readBounded(join(dir, 'none.toml'), 'manifest', 10), {
        message: `${join(dir, 'none.toml')}: cannot read manifest: ENOENT: no such file or directory`,
      });
      // A pipe has no size to stat: read one byte past the bound, then refused.
      const fifo = join(dir, 'fifo');
      execFileSync('mkfifo', [fifo]);
      // Written by another process, as a shell's <(…) is: the read blocks until a writer opens it.
      const writer = spawn(process.execPath, ['-e', "try { require('fs').writeFileSync(process.argv[1], 'y'.repeat(100)) } catch {}", fifo], {
        stdio: 'ignore',
      });
      const wrote = new Promise((r) => writer.on('close', r));
      await assert.rejects(readBounded(fifo, 'router config', 50), { message: `${fifo}: router config is more than the 50 bytes it may be` });
      await wrote;
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a device is refused, not read for ever: the manifest (gpures validate, exit 2, one line) and the router config', async () => {
    const r = await gpures(['validate', '--manifest', '/dev/zero'], {});
    assert.equal(r.code, 2, show(r));
    assert.equal(r.stderr, `/dev/zero: manifest is more than the ${MAX_MANIFEST_BYTES} bytes it may be\n`);
    await assert.rejects(loadConfig('/dev/zero'), (err: Error) =>
      err.message.includes(`/dev/zero: router config is more than the ${MAX_MANIFEST_BYTES} bytes it may be`),
    );
  });

  test('a history file past Temporal’s own history limit is refused before it is read; one not JSON, without quoting it', () => {
    const dir = mkdtempSync(join(tmpdir(), 'gpures-bounded-'));
    try {
      const big = join(dir, 'serves-up__x.json');
      writeFileSync(big, '');
      truncateSync(big, MAX_HISTORY_BYTES + 1);
      // A device yields past the bound: refused once read that far, not read for ever.
      assert.throws(
        () => loadHistoryFile('/dev/zero'),
        (err: unknown) => err instanceof HistoryFileError && err.message === `/dev/zero: a history file is more than the ${MAX_HISTORY_BYTES} bytes it may be`,
      );
      // A file given by mistake is refused as not JSON without quoting it: its start may be a secret.
      const key = join(dir, 'api-key.txt');
      writeFileSync(key, 'sk-live-0123456789abcdef');
      assert.throws(
        () => loadHistoryFile(key),
        (err: unknown) => err instanceof HistoryFileError && err.message === `${key}: not JSON: Unexpected token 's'`,
      );
      // Where it stops further in, V8 quotes the text around that place instead.
      writeFileSync(key, '[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, secretsecretsecret, 12]');
      assert.throws(
        () => loadHistoryFile(key),
        (err: unknown) => err instanceof HistoryFileError && err.message === `${key}: not JSON: Unexpected token 's'`,
      );
      assert.throws(
        () => loadHistoryFile(big),
        (err: unknown) =>
          err instanceof HistoryFileError &&
          err.message === `${big}: a history file is ${MAX_HISTORY_BYTES + 1} bytes, larger than the ${MAX_HISTORY_BYTES} bytes it may be`,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
