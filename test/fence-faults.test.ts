// Reservations fence their containers when a step fails or a run ends mid-step: a worker on a
// real dev server whose Docker runtime (the real one, on the test dockerd) is given one fault at
// a time, a removal dockerd refuses or a container create that lands late, with the box itself
// read after each (its running containers and the MiB they reserve), not only the ledger.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import { DockerRuntime } from '../src/adapters/containers/docker';
import type { ContainerSpec } from '../src/adapters/containers/port';
import { DelegatingRuntime } from './support/delegating-runtime';
import { serveDown, serveUp } from '../src/client/operations';
import { LedgerClient } from '../src/adapters/ledger/ledger-client';
import { findReservation, totals } from '../src/domain/ledger';
import { containerName, LABEL } from '../src/domain/serve';
import type { GpuSpec } from '../src/domain/types';
import { taskQueueFor, workflowIds } from '../src/shared/messages';
import { docker, removeNodeContainers, renderManifest, uniqueNode, writeManifest } from './support/box';
import type { TestServe } from './support/box';
import { testTemporal } from './support/temporal';
import { startTestWorker } from './support/worker';
import type { TestWorker } from './support/worker';
import type { TestTemporal } from './support/temporal';
import { waitUntil } from './support/wait';

const GPU = { role: 'dark-fast', capacity_mib: 30000, reserve_mib: 2000 };
const BUDGET = 30000 - 2000;
const SERVES: TestServe[] = [
  // Healthy, but reports another model: its bring-up fails at identity with its container running.
  { name: 'liar', vram_mib: 15000, env: { FAKE_MODEL_ID: 'someone-else' } },
  { name: 'slow', vram_mib: 15000 },
  { name: 'big', vram_mib: 15000 },
];

/** The real Docker runtime, with the faults a test asks for. */
class FaultyRuntime extends DelegatingRuntime {
  /** Containers whose stop and removal dockerd refuses (as a dockerd erroring past the retries). */
  readonly refuseRemoval = new Set<string>();
  /** Containers whose create lands this long after it is asked; `entered` and `landed` are told. */
  readonly late = new Map<string, { ms: number; entered: () => void; landed: () => void }>();
  constructor() {
    super(new DockerRuntime(docker(), { gpus: 'off' }));
  }

  override async ensureRunning(spec: ContainerSpec) {
    const late = this.late.get(spec.name);
    if (!late) return this.real.ensureRunning(spec);
    late.entered();
    await new Promise((r) => setTimeout(r, late.ms));
    try {
      return await this.real.ensureRunning(spec);
    } finally {
      late.landed();
    }
  }
  override stop(name: string, timeoutS: number, onlyId?: string) {
    if (this.refuseRemoval.has(name)) return Promise.reject(ApplicationFailure.nonRetryable(`injected: dockerd refused to stop ${name}`, 'InjectedFault'));
    return this.real.stop(name, timeoutS, onlyId);
  }
  override remove(name: string, onlyId?: string) {
    if (this.refuseRemoval.has(name)) return Promise.reject(ApplicationFailure.nonRetryable(`injected: dockerd refused to remove ${name}`, 'InjectedFault'));
    return this.real.remove(name, onlyId);
  }
}

describe('reservations fence their containers through faults: a removal that fails, a create that lands after its run ended', () => {
  let node: string;
  let gpu: GpuSpec;
  let temporal: TestTemporal | undefined;
  let worker: TestWorker | undefined;
  const runtime = new FaultyRuntime();

  before(async () => {
    node = uniqueNode('fence-faults');
    const { manifestPath, manifest } = writeManifest(mkdtempSync(join(tmpdir(), 'gpures-fence-faults-')), renderManifest(node, [GPU], SERVES));
    gpu = manifest.gpus[0]!;
    temporal = await testTemporal();
    worker = await startTestWorker({ temporal, node, manifest: manifestPath, runtime, pollIntervalMs: 100 });
  });

  after(async () => {
    await worker?.stop();
    if (node) await removeNodeContainers(node);
    await temporal?.close();
  });

  const client = () => {
    assert.ok(temporal);
    return temporal.client;
  };

  /** The box's own figure: the serves whose containers run now, and the MiB their labels reserve. */
  async function box(): Promise<{ serves: string[]; mib: number }> {
    const up = await docker().listContainers({ filters: { label: [`${LABEL.node}=${node}`], status: ['running'] } });
    return { serves: up.map((c) => c.Labels[LABEL.serve] ?? '?').sort(), mib: up.reduce((s, c) => s + Number(c.Labels[LABEL.vramMib] ?? 0), 0) };
  }

  const ledger = () => new LedgerClient(client()).snapshot(node, gpu);

  test('a bring-up whose container removal fails keeps its MiB reserved: the next serve is denied, never admitted over the running container', async () => {
    runtime.refuseRemoval.add(containerName(node, 'liar'));
    const up = await serveUp(client(), node, 'liar');
    assert.equal(up.ok, false);
    assert.ok(!up.ok);
    assert.equal(up.failureType, 'IdentityMismatch');
    assert.match(
      up.message,
      /compensated: .*; not undone: remove container \(injected: dockerd refused to stop .*\); release reservation \(liar's MiB stay reserved: its container \S+ still runs \(its removal failed: injected: dockerd refused to stop \S+\); `gpures serves down liar` takes the hold over, stops it and gives them back\)/,
    );
    assert.deepEqual(await box(), { serves: ['liar'], mib: 15000 });
    assert.equal(findReservation(await ledger(), 'liar')?.vramMib, 15000, 'the ledger still holds what runs');

    // Before the fix the release went ahead: big was admitted beside the running liar, 30000 MiB on a 28000 budget.
    const big = await serveUp(client(), node, 'big');
    assert.ok(!big.ok);
    assert.equal(big.failureType, 'AdmissionDenied');
    assert.match(big.message, /over budget by 2000 MiB/);
    const onBox = await box();
    assert.deepEqual(onBox.serves, ['liar']);
    assert.ok(onBox.mib <= BUDGET);

    // dockerd answers again: serves down takes the ended run's hold over, stops the container, gives the MiB back.
    runtime.refuseRemoval.clear();
    const down = await serveDown(client(), node, 'liar');
    assert.ok(down.ok, !down.ok ? down.message : '');
    assert.match(
      down.result.message,
      /took over the hold of serves-up\/\S+\/liar\/\S+, which had ended FAILED without giving it back; stopped, 15000 MiB released/,
    );
    assert.deepEqual(await box(), { serves: [], mib: 0 });
    assert.equal(totals(await ledger()).committedMib, 0);
  });

  test('a bring-up terminated while its container is being created, then serves down: the container that lands late is removed by its own step, never left running unreserved', async () => {
    let entered!: () => void;
    let landed!: () => void;
    const inCreate = new Promise<void>((r) => (entered = r));
    const created = new Promise<void>((r) => (landed = r));
    runtime.late.set(containerName(node, 'slow'), { ms: 4000, entered, landed });
    try {
      const handle = await client().workflow.start('bringUpWorkflow', {
        workflowId: workflowIds.bringUp(node, 'slow'),
        taskQueue: taskQueueFor(node),
        args: [{ serve: 'slow' }],
      });
      // The run ending first (denied, failed) would leave nothing to wait for: said, not hung on.
      const ended = handle.result().then(
        (r) => `ended before its create: ${JSON.stringify(r)}`,
        (err: unknown) => `ended before its create: ${String(err)}`,
      );
      const first = await Promise.race([inCreate.then(() => undefined), ended]);
      assert.equal(first, undefined);
      // Terminated, a run compensates nothing: its container, still on its way, has no remover but its own step.
      await handle.terminate('test: terminated mid-start');
      const down = await serveDown(client(), node, 'slow');
      assert.ok(down.ok, !down.ok ? down.message : '');
      assert.match(down.result.message, /took over the hold of serves-up\/\S+\/slow\/\S+, which had ended TERMINATED/);
      assert.equal(totals(await ledger()).committedMib, 0);

      // big takes the MiB slow gave back, while slow's create has yet to land.
      const big = await serveUp(client(), node, 'big');
      assert.ok(big.ok, !big.ok ? big.message : '');
      await created;
      // The late container may run for moments, until its step's fence refuses (or its cancel is seen) and it removes it.
      await waitUntil('the late slow container removed by its own step', async () => !(await box()).serves.includes('slow'), 15_000, 100);
      assert.deepEqual(await box(), { serves: ['big'], mib: 15000 });
      assert.deepEqual(
        (await ledger()).reservations.map((r) => `${r.serve} ${r.phase}`),
        ['big running'],
      );
      // And it stays gone: no retry of the ended run's step brings it back.
      await new Promise((r) => setTimeout(r, 3000));
      assert.deepEqual((await box()).serves, ['big']);
    } finally {
      runtime.late.clear();
    }
    const down = await serveDown(client(), node, 'big');
    assert.ok(down.ok, !down.ok ? down.message : '');
  });
});
