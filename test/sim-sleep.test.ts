// vLLM's sleep mode on the simulated box (src/sim/sleep-mode.ts): the state machine's memory
// arithmetic on its own, then a sim serve as a process under SimRuntime, put to sleep and woken
// over HTTP, with the fake nvidia-smi (through the NvidiaSmi adapter) as the witness of what it
// draws: what a sleep frees, what it leaks, what level 1 keeps in host RAM, and that a sleep aborts
// what is in flight (why an eviction drains first).
import { after, afterEach, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NvidiaSmi } from '../src/adapters/gpu/nvidia-smi';
import { FAKE_NVIDIA_SMI } from '../src/sim/box';
import { SimRuntime } from '../src/sim/runtime';
import { envNumber, SIM_MS, SleepMode, SleepModeError, sleepModeFromEnv } from '../src/sim/sleep-mode';
import type { SleepModeOptions } from '../src/sim/sleep-mode';
import { contractServe, httpStatus, RUN_LABEL, uniqueRunId } from './support/runtime-contract';
import type { ContractServe } from './support/runtime-contract';
import { waitFor } from './support/wait';

const MEMORY = { vramMib: 12288, weightsMib: 8840, residualMib: 600, leakMib: 0 };
const OPTS: SleepModeOptions = { devMode: true, enabled: true, memory: MEMORY, sleepDelayMs: 0, wakeDelayMs: 0, reloadDelayMs: 0, wakeFails: false };

describe('SleepMode: what each state draws', () => {
  test('level 1: the residual on the GPU, the weights in host RAM; awake again: the whole reservation', async () => {
    const s = new SleepMode(OPTS);
    assert.deepEqual(s.draw(), { gpuMib: 12288, hostRamMib: 0, level: 0 });
    await s.sleep('1');
    assert.deepEqual(s.draw(), { gpuMib: 600, hostRamMib: 8840, level: 1 });
    assert.equal(s.serving(), false);
    await s.wakeUp([]);
    assert.deepEqual(s.draw(), { gpuMib: 12288, hostRamMib: 0, level: 0 });
    assert.equal(s.serving(), true);
  });

  test('level 2: no host RAM; woken, it serves only after the weights are reloaded; tags wake part of it', async () => {
    const s = new SleepMode(OPTS);
    await s.sleep('2');
    assert.deepEqual(s.draw(), { gpuMib: 600, hostRamMib: 0, level: 2 });
    await assert.rejects(s.reloadWeights(), /wake_up\?tags=weights first/);
    await s.wakeUp(['weights']);
    assert.deepEqual(s.draw(), { gpuMib: 600 + 8840, hostRamMib: 0, level: 2 });
    await s.reloadWeights();
    await s.wakeUp(['kv_cache']);
    assert.deepEqual(s.draw(), { gpuMib: 12288, hostRamMib: 0, level: 0 });
    assert.equal(s.serving(), true);
    const unloaded = new SleepMode(OPTS);
    await unloaded.sleep('2');
    await unloaded.wakeUp([]);
    assert.equal(unloaded.serving(), false, 'awake without a reload after level 2');
  });

  test('a leak keeps MiB on the GPU while asleep; a failing wake is a 500; without --enable-sleep-mode nothing sleeps', async () => {
    const leaky = new SleepMode({ ...OPTS, memory: { ...MEMORY, leakMib: 4000 } });
    await leaky.sleep(null);
    assert.equal(leaky.draw().gpuMib, 4600);
    const failing = new SleepMode({ ...OPTS, wakeFails: true });
    await failing.sleep('1');
    await assert.rejects(failing.wakeUp([]), (e) => e instanceof SleepModeError && e.status === 500);
    assert.equal(failing.sleeping(), true);
    const off = new SleepMode({ ...OPTS, enabled: false });
    await assert.rejects(off.sleep('1'), /--enable-sleep-mode/);
    await assert.rejects(off.sleep('3'), /level must be 1 or 2/);
  });
});

const SIM_IMAGE = 'gpures/sim-vllm:test';
const GPU_UUID = 'GPU-00000000-0000-0000-0000-00000000aaaa';

describe("the simulation's knobs are bounded", () => {
  test('a delay past an hour or a size past a TiB is refused by name; within them, taken', () => {
    const env = (extra: Record<string, string>) => ({ VLLM_SERVER_DEV_MODE: '1', SIM_VRAM_MIB: '12288', ...extra });
    assert.throws(
      () => sleepModeFromEnv(true, env({ SIM_WAKE_DELAY_MS: '3600001' })),
      /^Error: invalid SIM_WAKE_DELAY_MS: 3600001 \(milliseconds, 0\.\.3600000\)$/,
    );
    assert.throws(() => sleepModeFromEnv(true, env({ SIM_SLEEP_LEAK_MIB: '1e9' })), /^Error: invalid SIM_SLEEP_LEAK_MIB: 1e9 \(MiB, 0\.\.1048576\)$/);
    assert.throws(() => sleepModeFromEnv(true, env({ SIM_SLEEP_DELAY_MS: '-1' })), /invalid SIM_SLEEP_DELAY_MS/);
    assert.equal(envNumber({ SIM_WAKE_DELAY_MS: '3600000' }, 'SIM_WAKE_DELAY_MS', 300, SIM_MS), 3_600_000);
    assert.equal(envNumber({}, 'SIM_WAKE_DELAY_MS', 300, SIM_MS), 300);
  });
});

describe('a sim serve put to sleep and woken over HTTP, measured by the fake nvidia-smi', () => {
  const runId = uniqueRunId();
  let dir: string;
  let runtime: SimRuntime;
  let smi: NvidiaSmi;

  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'gpures-sim-sleep-'));
    runtime = new SimRuntime({ stateDir: join(dir, 'serves') });
    const state = join(dir, 'nvidia-smi.json');
    writeFileSync(
      state,
      JSON.stringify({
        gpus: [{ index: 0, uuid: GPU_UUID, name: 'NVIDIA GeForce RTX 5090', totalMib: 32607, baseUsedMib: 1200 }],
        simStateDir: join(dir, 'serves'),
      }),
    );
    smi = new NvidiaSmi({ binary: FAKE_NVIDIA_SMI, env: { FAKE_NVIDIA_SMI_STATE: state } });
  });

  after(async () => {
    for (const c of await runtime.list({ [RUN_LABEL]: runId })) await runtime.remove(c.name);
    rmSync(dir, { recursive: true, force: true });
  });

  async function used(): Promise<number> {
    const [gpu] = await smi.readGpus();
    assert.ok(gpu);
    return gpu.usedMib;
  }

  /** Each test's serves are removed at its end, so nvidia-smi sees only the test's own. */
  const mine: string[] = [];
  afterEach(async () => {
    for (const name of mine.splice(0)) await runtime.remove(name);
  });

  async function started(suffix: string, env: Record<string, string>, sleepFlag = true): Promise<ContractServe> {
    const serve = await contractServe(
      runId,
      suffix,
      SIM_IMAGE,
      { SIM_START_DELAY_MS: '0', ...env },
      { gpuUuid: GPU_UUID, labels: { 'gpures.vram_mib': '12288' } },
    );
    if (sleepFlag) serve.spec.cmd.push('--enable-sleep-mode');
    await runtime.ensureRunning(serve.spec);
    mine.push(serve.spec.name);
    await waitFor(`${suffix} /health 200`, async () => ((await httpStatus(`${serve.baseUrl}/health`)) === 200 ? true : undefined));
    return serve;
  }

  const post = (url: string, body?: unknown) =>
    fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, ...(body ? { body: JSON.stringify(body) } : {}) });
  const chat = (base: string, delayMs = 0) =>
    post(`${base}/v1/chat/completions`, { messages: [{ role: 'user', content: 'hello' }], sim_delay_ms: delayMs }).then(
      (r) => r.status,
      () => 'aborted',
    );
  const isSleeping = async (base: string) => ((await (await fetch(`${base}/is_sleeping`)).json()) as { is_sleeping: boolean }).is_sleeping;

  test('level 1: nvidia-smi sees 12288 − 600 MiB freed; the request in flight is aborted; 503 while asleep; awake it answers', async () => {
    const serve = await started('one', { VLLM_SERVER_DEV_MODE: '1', SIM_SLEEP_RESIDUAL_MIB: '600', SIM_WEIGHTS_MIB: '8840', SIM_WAKE_DELAY_MS: '200' });
    assert.equal(await used(), 1200 + 12288);
    assert.equal(await isSleeping(serve.baseUrl), false);
    const inFlight = chat(serve.baseUrl, 30_000);
    await waitFor('the request running', async () => ((await (await fetch(`${serve.baseUrl}/metrics`)).text()).includes('} 1\n') ? true : undefined));
    assert.equal((await post(`${serve.baseUrl}/sleep?level=1`)).status, 200);
    assert.equal(await inFlight, 'aborted');
    assert.equal(await isSleeping(serve.baseUrl), true);
    assert.equal(await used(), 1200 + 600);
    assert.equal(await chat(serve.baseUrl), 503);
    assert.equal(await httpStatus(`${serve.baseUrl}/health`), 200, 'the process lives while it sleeps');
    const wakeStarted = Date.now();
    assert.equal((await post(`${serve.baseUrl}/wake_up`)).status, 200);
    assert.ok(Date.now() - wakeStarted >= 200, 'the wake took its configured time');
    assert.equal(await used(), 1200 + 12288);
    assert.equal(await chat(serve.baseUrl), 200);
  });

  test('level 2 with a leak: nvidia-smi sees the leak; woken, 503 until the weights are reloaded', async () => {
    const serve = await started('two', { VLLM_SERVER_DEV_MODE: '1', SIM_SLEEP_RESIDUAL_MIB: '600', SIM_SLEEP_LEAK_MIB: '5000' });
    assert.equal((await post(`${serve.baseUrl}/sleep?level=2`)).status, 200);
    assert.equal(await used(), 1200 + 600 + 5000);
    assert.equal((await post(`${serve.baseUrl}/wake_up?tags=weights`)).status, 200);
    assert.equal((await post(`${serve.baseUrl}/collective_rpc`, { method: 'reload_weights' })).status, 200);
    assert.equal(await chat(serve.baseUrl), 503, 'the KV cache is not back yet');
    assert.equal((await post(`${serve.baseUrl}/wake_up?tags=kv_cache`)).status, 200);
    assert.equal(await used(), 1200 + 12288);
    assert.equal(await chat(serve.baseUrl), 200);
  });

  test('without VLLM_SERVER_DEV_MODE=1 the endpoints do not exist; without --enable-sleep-mode a sleep fails and frees nothing', async () => {
    const plain = await started('plain', {});
    assert.equal((await post(`${plain.baseUrl}/sleep?level=1`)).status, 404);
    const noFlag = await started('noflag', { VLLM_SERVER_DEV_MODE: '1' }, false);
    const r = await post(`${noFlag.baseUrl}/sleep?level=1`);
    assert.equal(r.status, 500);
    assert.match(await r.text(), /--enable-sleep-mode/);
    assert.equal(await used(), 1200 + 2 * 12288, 'both serves, awake, draw their whole reservations');
  });
});
