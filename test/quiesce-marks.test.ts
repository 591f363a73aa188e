// The quiesce marks a bring-down reads before its take: what cannot be read is said per serve (its
// tier then left quiesced), never a failure of the step that would stop the take from landing.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { MockActivityEnvironment } from '@temporalio/testing';
import { createEvictionActivities } from '../src/activities/eviction';
import type { ContainerRuntime } from '../src/adapters/containers/port';
import type { RouterAdmin } from '../src/adapters/router-admin/port';
import type { QuiesceMarks } from '../src/shared/contracts';

const manifestFile = join(__dirname, '..', '..', 'examples', 'primary-node', 'serves.toml');
const unused = () => Promise.reject(new Error('not used here'));

function marksWith(read: () => Promise<{ text: string; file: string }>, serves: string[]): Promise<QuiesceMarks> {
  const router: RouterAdmin = {
    tierState: (tier) => Promise.resolve({ tier, state: 'active', inFlight: 0, backend: 'b', modelIdentity: true, quiesceMark: `r1.${tier}` }),
    quiesce: unused,
    readmit: unused,
    reload: unused,
    healthz: unused,
  };
  const activities = createEvictionActivities({
    runtime: {} as ContainerRuntime,
    manifest: { read },
    probe: { health: unused, modelIds: unused, requestsRunning: unused },
    router,
  });
  return new MockActivityEnvironment().run(() => activities.quiesceMarks({ serves }));
}

test('a victim the manifest no longer names, or a manifest that no longer reads, is unread, not a failed take', async () => {
  const text = readFileSync(manifestFile, 'utf8');
  const marks = await marksWith(() => Promise.resolve({ text, file: manifestFile }), ['vision', 'gone-from-manifest']);
  assert.deepEqual(marks['vision'], { mark: 'r1.vision-local' });
  const gone = marks['gone-from-manifest'];
  assert.ok(gone && 'unread' in gone && /gone-from-manifest/.test(gone.unread), JSON.stringify(marks));

  const broken = await marksWith(() => Promise.resolve({ text: 'node = [', file: 'serves.toml' }), ['vision', 'fast']);
  for (const name of ['vision', 'fast']) {
    const m = broken[name];
    assert.ok(m && 'unread' in m && /serves\.toml/.test(m.unread), JSON.stringify(broken));
  }
});
