// The ContainerRuntime contract every runtime must keep (the Docker one and the simulated box):
// what the activities rely on, run against a real runtime with a real serve behind it.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:net';
import type { ContainerRuntime, ContainerSpec } from '../../src/adapters/containers/port';
import { PermanentError } from '../../src/adapters/errors';
import { LABEL } from '../../src/domain/serve';
import { waitUntil } from './wait';

/** What a test wants of the serve; each runtime's image spells it in its own environment. */
export interface ServeBehaviour {
  /** Time until /health answers 200. */
  startDelayMs?: number;
  /** Id /v1/models reports instead of the served name. */
  modelId?: string;
}

export interface RuntimeContractOptions {
  env: (behaviour: ServeBehaviour) => Record<string, string>;
}

export const RUN_LABEL = 'gpures.test-run';
export const MISSING_IMAGE = 'gpures/not-built:none';

function tryListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/**
 * A free port below the kernel's ephemeral range (32768+ on Linux), so no client connection made
 * meanwhile can take it between this check and the serve binding it.
 */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = 20000 + Math.floor(Math.random() * 12000);
    if (await tryListen(port)) return port;
  }
  throw new Error('no free port found in 20000-31999');
}

/** Status of GET url, or undefined when nothing answers. */
export async function httpStatus(url: string): Promise<number | undefined> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
    await res.arrayBuffer();
    return res.status;
  } catch {
    return undefined;
  }
}

export async function modelIds(baseUrl: string): Promise<string[]> {
  const res = await fetch(`${baseUrl}/v1/models`, { signal: AbortSignal.timeout(2000) });
  assert.equal(res.status, 200);
  const body = (await res.json()) as { data: { id: string }[] };
  return body.data.map((m) => m.id);
}

export interface ContractServe {
  spec: ContainerSpec;
  baseUrl: string;
}

/** A spec shaped like the one bring-up derives from a manifest (vllmCommand's arguments). */
export async function contractServe(
  runId: string,
  suffix: string,
  image: string,
  env: Record<string, string>,
  extra: { servedModelName?: string; labels?: Record<string, string>; gpuUuid?: string } = {},
): Promise<ContractServe> {
  const hostPort = await freePort();
  const served = extra.servedModelName ?? `served-${suffix}`;
  const spec: ContainerSpec = {
    name: `gpures-contract-${runId}-${suffix}`,
    image,
    cmd: ['--model', `test/${suffix}`, '--served-model-name', served, '--host', '0.0.0.0', '--port', '8000'],
    env,
    labels: { [RUN_LABEL]: runId, [LABEL.serve]: suffix, [LABEL.vramMib]: '1234', ...extra.labels },
    bind: '127.0.0.1',
    hostPort,
    containerPort: 8000,
    ...(extra.gpuUuid ? { gpuUuid: extra.gpuUuid } : {}),
  };
  return { spec, baseUrl: `http://127.0.0.1:${hostPort}` };
}

export function uniqueRunId(): string {
  return `${Date.now().toString(36)}${randomBytes(3).toString('hex')}`;
}

export function runtimeContract(
  name: string,
  makeRuntime: () => ContainerRuntime | Promise<ContainerRuntime>,
  image: string,
  options: RuntimeContractOptions,
): void {
  describe(`ContainerRuntime contract: ${name}`, () => {
    let runtime: ContainerRuntime;
    const runId = uniqueRunId();
    let main: ContractServe;
    let firstId = '';

    before(async () => {
      runtime = await makeRuntime();
      main = await contractServe(runId, 'main', image, options.env({ startDelayMs: 0 }), { labels: { 'gpures.contract': 'main' } });
    });

    after(async () => {
      if (!runtime) return;
      for (const c of await runtime.list({ [RUN_LABEL]: runId })) await runtime.remove(c.name);
      assert.deepEqual(await runtime.list({ [RUN_LABEL]: runId }), []);
    });

    test('ensureRunning creates the container, and again returns the running one (same id, created false)', async () => {
      const first = await runtime.ensureRunning(main.spec);
      assert.equal(first.created, true);
      assert.ok(first.id.length > 0);
      firstId = first.id;
      const again = await runtime.ensureRunning(main.spec);
      assert.deepEqual(again, { ...first, created: false });
    });

    test('the serve answers /health 200 and /v1/models with the served name on bind:hostPort', async () => {
      await waitUntil('/health 200', async () => (await httpStatus(`${main.baseUrl}/health`)) === 200, 10_000, 100);
      assert.deepEqual(await modelIds(main.baseUrl), ['served-main']);
    });

    test('inspect reports it running; list(labels) finds it with its labels', async () => {
      const state = await runtime.inspect(main.spec.name);
      assert.ok(state);
      assert.equal(state.id, firstId);
      assert.equal(state.name, main.spec.name);
      assert.equal(state.running, true);
      assert.equal(state.status, 'running');
      assert.equal(state.labels[LABEL.vramMib], '1234');
      const listed = await runtime.list({ [RUN_LABEL]: runId, 'gpures.contract': 'main' });
      assert.equal(listed.length, 1);
      assert.equal(listed[0]?.name, main.spec.name);
      assert.equal(listed[0]?.running, true);
      assert.deepEqual(listed[0]?.labels, { ...listed[0]?.labels, ...main.spec.labels });
      assert.deepEqual(await runtime.list({ [RUN_LABEL]: runId, 'gpures.contract': 'nothing-has-this' }), []);
    });

    test('logsTail returns a string; an absent container has empty logs', async () => {
      const tail = await runtime.logsTail(main.spec.name, 5);
      assert.equal(typeof tail, 'string');
      assert.ok(tail.split('\n').filter(Boolean).length <= 5);
      assert.equal(await runtime.logsTail(`gpures-contract-${runId}-never-created`, 5), '');
    });

    test('stop stops it; a second stop is fine (already-stopped or absent)', async () => {
      assert.equal(await runtime.stop(main.spec.name, 10), 'stopped');
      const state = await runtime.inspect(main.spec.name);
      assert.ok(state);
      assert.equal(state.running, false);
      assert.ok(['already-stopped', 'absent'].includes(await runtime.stop(main.spec.name, 10)));
      assert.equal(await httpStatus(`${main.baseUrl}/health`), undefined);
      const listed = await runtime.list({ [RUN_LABEL]: runId, 'gpures.contract': 'main' });
      assert.equal(listed[0]?.running, false);
    });

    test('ensureRunning over a stopped leftover starts a fresh container', async () => {
      const next = await runtime.ensureRunning(main.spec);
      assert.equal(next.created, true);
      assert.notEqual(next.id, firstId);
      assert.equal((await runtime.inspect(main.spec.name))?.running, true);
      await waitUntil('/health 200 again', async () => (await httpStatus(`${main.baseUrl}/health`)) === 200, 10_000, 100);
    });

    test("remove by id leaves a container that has since taken the name (another run's): absent; by its own id it goes", async () => {
      const current = await runtime.inspect(main.spec.name);
      assert.ok(current?.running);
      assert.equal(await runtime.remove(main.spec.name, firstId), 'absent', 'the first container, gone since, is not the one under the name now');
      assert.equal((await runtime.inspect(main.spec.name))?.running, true);
      assert.equal(await runtime.remove(main.spec.name, current.id), 'removed');
      assert.equal(await runtime.inspect(main.spec.name), undefined);
      assert.equal((await runtime.ensureRunning(main.spec)).created, true);
    });

    test("stop by id leaves a container that has since taken the name (another run's) running: absent; by its own id it stops", async () => {
      const current = await runtime.inspect(main.spec.name);
      assert.ok(current?.running);
      assert.equal(await runtime.stop(main.spec.name, 1, firstId), 'absent');
      assert.equal((await runtime.inspect(main.spec.name))?.running, true);
      assert.equal(await runtime.stop(main.spec.name, 10, current.id), 'stopped');
      assert.equal((await runtime.inspect(main.spec.name))?.running, false);
      assert.equal((await runtime.ensureRunning(main.spec)).created, true);
    });

    test('remove removes even a running container; remove and stop again say absent', async () => {
      assert.equal(await runtime.remove(main.spec.name), 'removed');
      assert.equal(await runtime.inspect(main.spec.name), undefined);
      assert.equal(await runtime.remove(main.spec.name), 'absent');
      assert.equal(await runtime.stop(main.spec.name, 1), 'absent');
      assert.deepEqual(await runtime.list({ [RUN_LABEL]: runId, 'gpures.contract': 'main' }), []);
      assert.equal(await httpStatus(`${main.baseUrl}/health`), undefined);
    });

    test('an unknown image is a PermanentError ImageMissing, and nothing is created', async () => {
      const missing = await contractServe(runId, 'missing', MISSING_IMAGE, options.env({}));
      await assert.rejects(runtime.ensureRunning(missing.spec), (err: unknown) => {
        assert.ok(err instanceof PermanentError, String(err));
        assert.equal(err.type, 'ImageMissing');
        assert.match(err.message, new RegExp(`image '${MISSING_IMAGE}'`));
        return true;
      });
      assert.equal(await runtime.inspect(missing.spec.name), undefined);
      // The same answer up front, for checks made before anything is touched.
      assert.equal(await runtime.hasImage(MISSING_IMAGE), false);
      assert.equal(await runtime.hasImage(image), true);
    });

    test('a serve still loading is not healthy until its start delay has passed', async () => {
      const slow = await contractServe(runId, 'slow', image, options.env({ startDelayMs: 2000 }));
      const started = Date.now();
      await runtime.ensureRunning(slow.spec);
      const early = await httpStatus(`${slow.baseUrl}/health`);
      assert.notEqual(early, 200, 'healthy before its start delay');
      await waitUntil('/health 200 after the delay', async () => (await httpStatus(`${slow.baseUrl}/health`)) === 200, 10_000, 100);
      assert.ok(Date.now() - started >= 1500, `healthy after ${Date.now() - started} ms`);
      assert.equal(await runtime.remove(slow.spec.name), 'removed');
    });

    test('an identity override makes /v1/models report another id', async () => {
      const impostor = await contractServe(runId, 'impostor', image, options.env({ startDelayMs: 0, modelId: 'someone-else' }));
      await runtime.ensureRunning(impostor.spec);
      await waitUntil('/health 200', async () => (await httpStatus(`${impostor.baseUrl}/health`)) === 200, 10_000, 100);
      assert.deepEqual(await modelIds(impostor.baseUrl), ['someone-else']);
      assert.equal(await runtime.remove(impostor.spec.name), 'removed');
    });
  });
}
