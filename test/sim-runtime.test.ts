// The simulated box: the runtime contract against SimRuntime (and the same contract against the
// Docker runtime on the private dockerd), plus what only the sim's model server promises.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Docker from 'dockerode';
import { DockerRuntime } from '../src/adapters/containers/docker';
import { PermanentError } from '../src/adapters/errors';
import { TEST_IMAGES } from '../src/dev/toolchain';
import { parseVllmArgs, simEmbedding } from '../src/sim/model-server';
import { rewriteListenArgs, SimRuntime } from '../src/sim/runtime';
import { listSimContainers } from '../src/sim/state-dir';
import type { ContractServe } from './support/runtime-contract';
import { contractServe, httpStatus, RUN_LABEL, runtimeContract, uniqueRunId } from './support/runtime-contract';
import { waitFor, waitUntil } from './support/wait';

const SIM_IMAGE = 'gpures/sim-vllm:test';
const DOCKER_IMAGE = process.env['GPURES_TEST_IMAGE'] ?? TEST_IMAGES.fakeVllm;

const simDirs: string[] = [];
function simStateDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'gpures-sim-'));
  simDirs.push(dir);
  return dir;
}

after(() => {
  // Every sim container is removed by its suite; what is left are files.
  for (const dir of simDirs) {
    assert.deepEqual(
      listSimContainers(dir)
        .filter((c) => c.running)
        .map((c) => c.record.name),
      [],
      `sim processes left running in ${dir}`,
    );
    rmSync(dir, { recursive: true, force: true });
  }
});

runtimeContract('SimRuntime', () => new SimRuntime({ stateDir: simStateDir(), knownImages: [SIM_IMAGE] }), SIM_IMAGE, {
  env: (b) => ({
    ...(b.startDelayMs !== undefined ? { SIM_START_DELAY_MS: String(b.startDelayMs) } : {}),
    ...(b.modelId !== undefined ? { SIM_MODEL_ID: b.modelId } : {}),
  }),
});

runtimeContract('DockerRuntime', () => new DockerRuntime(new Docker()), DOCKER_IMAGE, {
  env: (b) => ({
    ...(b.startDelayMs !== undefined ? { FAKE_START_DELAY_S: String(b.startDelayMs / 1000) } : {}),
    ...(b.modelId !== undefined ? { FAKE_MODEL_ID: b.modelId } : {}),
  }),
});

describe('sim model server arguments', () => {
  test('parseVllmArgs reads the arguments vllmCommand produces, in both spellings', () => {
    assert.deepEqual(
      parseVllmArgs([
        '--model',
        'Qwen/Qwen3-VL-4B-Instruct',
        '--revision',
        'ebb281e',
        '--served-model-name',
        'qwen3-vl-4b-instruct',
        '--host',
        '0.0.0.0',
        '--port',
        '30008',
        '--kv-cache-memory-bytes',
        '1342177280',
        '--enforce-eager',
      ]),
      {
        model: 'Qwen/Qwen3-VL-4B-Instruct',
        revision: 'ebb281e',
        servedModelName: 'qwen3-vl-4b-instruct',
        host: '0.0.0.0',
        port: 30008,
      },
    );
    assert.deepEqual(parseVllmArgs(['serve', 'org/m', '--port=9000']), { model: 'org/m', servedModelName: 'org/m', host: '127.0.0.1', port: 9000 });
    assert.throws(() => parseVllmArgs(['--port', 'http']), /invalid --port/);
    assert.throws(() => parseVllmArgs(['--model']), /--model needs a value/);
  });

  test('rewriteListenArgs moves the listener to bind:hostPort and keeps the rest', () => {
    assert.deepEqual(rewriteListenArgs(['--model', 'm', '--host', '0.0.0.0', '--port', '8000', '--x'], '127.0.0.1', 31234), [
      '--model',
      'm',
      '--host',
      '127.0.0.1',
      '--port',
      '31234',
      '--x',
    ]);
    assert.deepEqual(rewriteListenArgs(['--port=8000'], '127.0.0.1', 31234), ['--port=31234', '--host', '127.0.0.1']);
  });

  test('embeddings are deterministic unit vectors', () => {
    const v = simEmbedding('hello');
    assert.deepEqual(v, simEmbedding('hello'));
    assert.notDeepEqual(v, simEmbedding('world'));
    assert.ok(Math.abs(Math.hypot(...v) - 1) < 1e-5);
  });
});

interface Metrics {
  running: number;
  waiting: number;
}

async function metrics(baseUrl: string, model: string): Promise<Metrics> {
  const text = await (await fetch(`${baseUrl}/metrics`)).text();
  const value = (metric: string) => {
    const m = new RegExp(`^${metric}\\{model_name="${model}"\\} (\\d+)$`, 'm').exec(text);
    assert.ok(m, `${metric} for ${model} missing in:\n${text}`);
    return Number(m[1]);
  };
  return { running: value('vllm:num_requests_running'), waiting: value('vllm:num_requests_waiting') };
}

function chat(baseUrl: string, body: Record<string, unknown>): Promise<Response> {
  return fetch(`${baseUrl}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: 'describe the dashboard' }], ...body }),
  });
}

describe('SimRuntime and its model server', () => {
  const runId = uniqueRunId();
  let stateDir: string;
  let runtime: SimRuntime;

  before(() => {
    stateDir = simStateDir();
    runtime = new SimRuntime({ stateDir });
  });

  after(async () => {
    for (const c of await runtime.list({ [RUN_LABEL]: runId })) await runtime.remove(c.name);
  });

  async function started(suffix: string, env: Record<string, string> = {}): Promise<ContractServe> {
    const serve = await contractServe(runId, suffix, SIM_IMAGE, { SIM_START_DELAY_MS: '0', ...env }, { gpuUuid: 'GPU-00000000-0000-0000-0000-000000000000' });
    await runtime.ensureRunning(serve.spec);
    await waitFor(`${suffix} /health 200`, async () => {
      const state = await runtime.inspect(serve.spec.name);
      if (!state?.running) throw new Error(`${suffix} exited (${state?.exitCode}): ${await runtime.logsTail(serve.spec.name, 5)}`);
      return (await httpStatus(`${serve.baseUrl}/health`)) === 200 ? true : undefined;
    });
    return serve;
  }

  test('the state file records the spec, the rewritten command and the GPU; another runtime on the dir sees the same box', async () => {
    const serve = await started('state');
    const [entry] = listSimContainers(stateDir).filter((c) => c.record.name === serve.spec.name);
    assert.ok(entry);
    assert.equal(entry.running, true);
    assert.equal(entry.record.gpuUuid, 'GPU-00000000-0000-0000-0000-000000000000');
    assert.equal(entry.record.hostPort, serve.spec.hostPort);
    assert.equal(entry.record.bind, '127.0.0.1');
    assert.equal(entry.record.image, SIM_IMAGE);
    assert.deepEqual(entry.record.cmd.slice(-4), ['--host', '127.0.0.1', '--port', String(serve.spec.hostPort)]);
    assert.deepEqual(entry.record.env, serve.spec.env);
    const other = new SimRuntime({ stateDir });
    assert.equal((await other.inspect(serve.spec.name))?.id, entry.record.id);
    assert.equal((await other.ensureRunning(serve.spec)).created, false);
    assert.match(await runtime.logsTail(serve.spec.name, 50), /served-model-name=served-state/);
    assert.equal(await other.remove(serve.spec.name), 'removed');
    assert.equal(await runtime.inspect(serve.spec.name), undefined);
  });

  test('concurrent ensureRunning of one name starts one process', async () => {
    const serve = await contractServe(runId, 'race', SIM_IMAGE, { SIM_START_DELAY_MS: '0' });
    const results = await Promise.all([
      runtime.ensureRunning(serve.spec),
      new SimRuntime({ stateDir }).ensureRunning(serve.spec),
      runtime.ensureRunning(serve.spec),
    ]);
    assert.equal(results.filter((r) => r.created).length, 1);
    assert.equal(new Set(results.map((r) => r.id)).size, 1);
    assert.ok(results.every((r) => !r.gpuPinned));
    assert.equal(await runtime.remove(serve.spec.name), 'removed');
  });

  test('/metrics counts a slow request while it is answered', async () => {
    const serve = await started('metrics');
    assert.deepEqual(await metrics(serve.baseUrl, 'served-metrics'), { running: 0, waiting: 0 });
    // The delay is the window in which the count must show: wide enough for a loaded machine.
    const slow = chat(serve.baseUrl, { sim_delay_ms: 3000 });
    await waitUntil('running = 1', async () => (await metrics(serve.baseUrl, 'served-metrics')).running === 1, 2500, 50);
    const res = await slow;
    assert.equal(res.status, 200);
    const body = (await res.json()) as { choices: { finish_reason: string; message: { content: string } }[] };
    assert.equal(body.choices[0]?.finish_reason, 'stop');
    assert.equal(body.choices[0]?.message.content, '[served-metrics] echo: describe the dashboard');
    assert.deepEqual(await metrics(serve.baseUrl, 'served-metrics'), { running: 0, waiting: 0 });
    assert.equal(await runtime.remove(serve.spec.name), 'removed');
  });

  test('streaming and embeddings answer in the OpenAI shapes', async () => {
    const serve = await started('shapes');
    const res = await chat(serve.baseUrl, { model: 'served-shapes', stream: true });
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^text\/event-stream/);
    const events = (await res.text()).split('\n\n').filter(Boolean);
    assert.equal(events[events.length - 1], 'data: [DONE]');
    const chunks = events
      .slice(0, -1)
      .map((e) => JSON.parse(e.replace(/^data: /, '')) as { choices: { delta: { content?: string }; finish_reason: string | null }[] });
    assert.equal(chunks.map((c) => c.choices[0]?.delta.content ?? '').join(''), '[served-shapes] echo: describe the dashboard');
    assert.equal(chunks[chunks.length - 1]?.choices[0]?.finish_reason, 'stop');

    const emb = await fetch(`${serve.baseUrl}/v1/embeddings`, { method: 'POST', body: JSON.stringify({ model: 'served-shapes', input: ['a', 'b'] }) });
    const embBody = (await emb.json()) as { data: { index: number; embedding: number[] }[] };
    assert.deepEqual(
      embBody.data.map((d) => d.index),
      [0, 1],
    );
    assert.deepEqual(embBody.data[0]?.embedding, simEmbedding('a'));

    assert.equal((await chat(serve.baseUrl, { model: 'not-this-one' })).status, 404);
    assert.equal(await runtime.remove(serve.spec.name), 'removed');
  });

  test('SIGTERM (stop) refuses new connections but lets an in-flight slow request finish; exit code 0', async () => {
    const serve = await started('drain');
    const slow = chat(serve.baseUrl, { sim_delay_ms: 4000 });
    await waitUntil('request in flight', async () => (await metrics(serve.baseUrl, 'served-drain')).running === 1, 3000, 50);
    const stopping = runtime.stop(serve.spec.name, 10);
    // Closed while the request (4 s) is still being answered.
    await waitUntil('listener closed', async () => (await httpStatus(`${serve.baseUrl}/health`)) === undefined, 3000, 50);
    const res = await slow;
    assert.equal(res.status, 200);
    const body = (await res.json()) as { choices: { finish_reason: string }[] };
    assert.equal(body.choices[0]?.finish_reason, 'stop');
    assert.equal(await stopping, 'stopped');
    const state = await runtime.inspect(serve.spec.name);
    assert.deepEqual([state?.running, state?.status, state?.exitCode], [false, 'exited', 0]);
    assert.match(await runtime.logsTail(serve.spec.name, 3), /drained; exiting/);
    assert.equal(await runtime.remove(serve.spec.name), 'removed');
  });

  test('a stop timeout ends in SIGKILL: the request is cut off and the exit code is 137', async () => {
    const serve = await started('kill');
    const slow = chat(serve.baseUrl, { sim_delay_ms: 30_000 }).then(
      (r) => r.status,
      () => 'cut off',
    );
    await waitUntil('request in flight', async () => (await metrics(serve.baseUrl, 'served-kill')).running === 1, 5000, 50);
    const t0 = Date.now();
    assert.equal(await runtime.stop(serve.spec.name, 1), 'stopped');
    assert.ok(Date.now() - t0 < 5000);
    assert.equal(await slow, 'cut off');
    const state = await runtime.inspect(serve.spec.name);
    assert.deepEqual([state?.running, state?.exitCode], [false, 137]);
    assert.equal(await runtime.remove(serve.spec.name), 'removed');
  });

  test('a crash at start-up shows as exited with its code and its last output', async () => {
    const serve = await contractServe(runId, 'crash', SIM_IMAGE, { SIM_EXIT_AT_START: '1' });
    await runtime.ensureRunning(serve.spec);
    const state = await waitFor('exited', async () => {
      const s = await runtime.inspect(serve.spec.name);
      return s && !s.running ? s : undefined;
    });
    assert.equal(state.exitCode, 3);
    assert.match(await runtime.logsTail(serve.spec.name, 5), /SIM_EXIT_AT_START/);
    assert.equal(await runtime.stop(serve.spec.name, 1), 'already-stopped');
    assert.equal(await runtime.remove(serve.spec.name), 'removed');
  });

  test('ensureRunning returns once the port is bound; a port already taken shows as exited with the reason', async () => {
    const serve = await started('holder');
    const conn = await fetch(`${serve.baseUrl}/metrics`);
    assert.equal(conn.status, 200);
    await conn.text();
    const clash = await contractServe(runId, 'clash', SIM_IMAGE, {});
    const spec = { ...clash.spec, hostPort: serve.spec.hostPort };
    assert.equal((await runtime.ensureRunning(spec)).created, true);
    const state = await waitFor('clash exited', async () => {
      const st = await runtime.inspect(spec.name);
      return st && !st.running ? st : undefined;
    });
    assert.equal(state.exitCode, 1);
    assert.match(await runtime.logsTail(spec.name, 5), /EADDRINUSE/);
    assert.equal(await runtime.remove(spec.name), 'removed');
    assert.equal(await runtime.remove(serve.spec.name), 'removed');
  });

  test('a bad name is refused before anything starts', async () => {
    const serve = await contractServe(runId, 'bad', SIM_IMAGE, {});
    await assert.rejects(
      runtime.ensureRunning({ ...serve.spec, name: '../escape' }),
      (err: unknown) => err instanceof PermanentError && err.type === 'InvalidContainerName',
    );
    assert.equal(await runtime.inspect('../escape'), undefined);
  });
});
