// GPU pinning on Docker, as far as a machine without a GPU can show it: the device request is
// `docker run --gpus device=<uuid>`'s, the real daemon receives it as a request for the nvidia
// driver, and a daemon without the NVIDIA Container Toolkit is a clear, permanent failure.
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import Docker from 'dockerode';
import { createOptions, DockerRuntime } from '../src/adapters/containers/docker';
import { PermanentError } from '../src/adapters/errors';
import { contractServe, RUN_LABEL, uniqueRunId } from './support/runtime-contract';
import { TEST_IMAGE } from './support/box';

const UUID = 'GPU-5a1f0c3e-8d2b-4c7a-9e6f-1b3d5c7e9a02';

describe('GPU pinning on Docker', () => {
  const runId = uniqueRunId();
  const docker = new Docker();

  after(async () => {
    for (const c of await docker.listContainers({ all: true, filters: { label: [`${RUN_LABEL}=${runId}`] } }))
      await docker.getContainer(c.Id).remove({ force: true });
  });

  test('the create options carry the device request of --gpus device=UUID only when pinned', async () => {
    const { spec } = await contractServe(runId, 'opts', TEST_IMAGE, {}, { gpuUuid: UUID });
    const pinned = createOptions(spec, true);
    assert.deepEqual(pinned.HostConfig?.DeviceRequests, [{ Driver: 'nvidia', DeviceIDs: [UUID], Capabilities: [['gpu']] }]);
    assert.deepEqual(pinned.HostConfig?.PortBindings, { '8000/tcp': [{ HostIp: '127.0.0.1', HostPort: String(spec.hostPort) }] });
    assert.equal(createOptions(spec, false).HostConfig?.DeviceRequests, undefined);
  });

  test('--gpus on, on a daemon without the nvidia driver: GpuRuntimeMissing naming the GPU, no container left', async () => {
    assert.equal(
      Boolean(((await docker.info()) as { Runtimes?: Record<string, unknown> }).Runtimes?.['nvidia']),
      false,
      'this test needs a daemon without the nvidia runtime',
    );
    const { spec } = await contractServe(runId, 'pinned', TEST_IMAGE, {}, { gpuUuid: UUID });
    await assert.rejects(new DockerRuntime(docker, { gpus: 'on' }).ensureRunning(spec), (err: unknown) => {
      assert.ok(err instanceof PermanentError, String(err));
      assert.equal(err.type, 'GpuRuntimeMissing');
      // The daemon's own words: it was asked for the nvidia driver with the gpu capability.
      assert.match(
        err.message,
        new RegExp(`Docker cannot give ${spec.name} GPU ${UUID}: .*could not select device driver "nvidia" with capabilities: \\[\\[gpu\\]\\]`),
      );
      assert.match(err.message, /install the NVIDIA Container Toolkit, or run the worker with --gpus auto$/);
      return true;
    });
    assert.equal(await new DockerRuntime(docker).inspect(spec.name), undefined);
  });

  test('--gpus auto on that daemon: not pinned, and the serve runs', async () => {
    const { spec } = await contractServe(runId, 'auto', TEST_IMAGE, {}, { gpuUuid: UUID });
    const runtime = new DockerRuntime(docker, { gpus: 'auto' });
    const started = await runtime.ensureRunning(spec);
    assert.equal(started.gpuPinned, false);
    assert.equal((await runtime.inspect(spec.name))?.running, true);
    assert.equal(await runtime.remove(spec.name), 'removed');
  });
});
