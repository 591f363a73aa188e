// The worker's log for one failed operation, as an operator tails it: `serves up` of a serve whose
// image is not on the box. A real `gpures worker` process on real Docker; its stderr's lines counted.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EXIT } from '../src/cli/exit-codes';
import { removeNodeContainers, renderManifest, uniqueNode } from './support/box';
import { gpures, show, startWorkerProcess } from './support/cli';
import type { WorkerProcess } from './support/cli';
import { MISSING_IMAGE } from './support/runtime-contract';
import { testTemporal } from './support/temporal';
import { waitFor } from './support/wait';

const node = uniqueNode('worker-log');
const escape = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
let worker: WorkerProcess | undefined;

before(() => testTemporal());
after(async () => {
  await worker?.stop();
  await removeNodeContainers(node);
  // The dev server and both connections: left open, they keep this test's process from exiting.
  await (await testTemporal()).close();
});

test(
  'serves up of a missing image: one WARN line for the start attempt and one for the run, naming the image; no stack, no task token',
  { timeout: 180_000 },
  async () => {
    const temporal = await testTemporal();
    const dir = mkdtempSync(join(tmpdir(), 'gpures-worker-log-'));
    const manifest = join(dir, 'serves.toml');
    writeFileSync(
      manifest,
      renderManifest(node, [{ role: 'main', capacity_mib: 24576, reserve_mib: 1024 }], [{ name: 'gone', vram_mib: 1000, image: MISSING_IMAGE }]),
    );
    const env = { TEMPORAL_ADDRESS: temporal.address };
    worker = await startWorkerProcess(['--manifest', manifest, '--gpus', 'off', '--metrics', 'off'], env);
    const before = worker.stderr().length;
    const up = await gpures(['serves', 'up', 'gone', '--manifest', manifest], env, 120_000);
    assert.equal(up.code, EXIT.failed, show(up));
    assert.match(up.stderr + up.stdout, /is not on this Docker host/, show(up));
    const w = worker;
    // The run's own line comes as its failure is written, right after the CLI heard it.
    const logged = () =>
      w
        .stderr()
        .slice(before)
        .split('\n')
        .filter((l) => l.trim() !== '');
    await waitFor(
      "the run's failure in the worker log",
      () => Promise.resolve(logged().some((l) => /bringUpWorkflow .* failed|Workflow failed/.test(l)) ? true : undefined),
      30_000,
      200,
    );
    // Whatever the SDK writes of the failure, after its first line.
    await new Promise((r) => setTimeout(r, 1500));
    // From the operation's first failure line: the worker's own start lines may come after the CLI's start.
    const all = logged();
    const lines = all.slice(all.findIndex((l) => /Activity failed|Workflow failed|\] (activity \w+ of )?bringUpWorkflow /.test(l)));
    assert.equal(lines.length, 2, `${lines.length} lines for one operation:\n${lines.join('\n')}`);
    const warns = lines.filter((l) => /\[WARN\]/.test(l));
    const said = `ImageMissing: image '${MISSING_IMAGE}' is not on this Docker host; pull or load it first`;
    assert.equal(warns.length, 2, lines.join('\n'));
    assert.match(
      warns[0] ?? '',
      new RegExp(`\\[WARN\\] activity \\w+ of bringUpWorkflow serves-up/${node}/gone, attempt 1 failed: ${escape(said)}$`),
      lines.join('\n'),
    );
    // The run's error crosses from the workflow thread without its type: its own words name the image.
    const runSaid = `serves up gone failed at start: ${said.replace('ImageMissing: ', '')}`;
    assert.match(warns[1] ?? '', new RegExp(`\\[WARN\\] bringUpWorkflow serves-up/${node}/gone failed: ${escape(runSaid)}`), lines.join('\n'));
    assert.ok(!lines.some((l) => /taskToken|^\s+at /.test(l)), lines.join('\n'));
    // The installed worker (bin/gpures, the CLI's bundle) started its workflow thread with the lazy
    // stack-trace hook (src/worker/workflow-threads.ts): a thread without it says so in a warning.
    assert.doesNotMatch(w.stderr(), /stack traces are formatted as each promise is made/);
  },
);
