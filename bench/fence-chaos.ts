// The fences' adversary: a seeded chaos run against one box, looking for over-commit, a container
// running with no reservation held for it, and a request answered by a serve evicted or being
// stopped.
//
// The box is the fence race's (test/fence-race.test.ts): a `gpures worker` process, fake-vLLM
// containers on the test dockerd, the reference router (in this process, its quiesced tiers kept in
// a state file, on a fixed port so a restarted router is where the worker reaches it), and `gpures
// api` as a process of its own, which the router's on-demand tier acquires through. For SECONDS, a
// few operators run a seeded mix as separate CLI processes (`serves up`, `up --evict`, `up --evict
// --lease`, `down`, `down --restore`) and POSTs to the API, while requests to the router's on-demand
// tier start acquisitions with an idle lease of a few seconds. Faults land at seeded moments: the
// worker SIGKILLed (and started again), SIGSTOPped past the activities' 10 s heartbeat timeout (then
// SIGCONT), the router closed and started again.
//
// Every 100 ms the box is sampled: the running containers of the node and the MiB their labels
// reserve, against the budget; every 500 ms the ledger's reservations (when its worker answers) and the router's
// tier states. A probe request to the evictable tier every 250 ms, with the tier's state read just
// before it is sent and just after it is answered. Findings:
//   over-budget     a sample whose running containers reserve more than the budget;
//   unreserved      a serve's container running while every answered ledger sample for more than
//                   UNRESERVED_WINDOW_MS says nothing is committed for it (the window covers a
//                   bring-up's compensation and a late create removed by its own step);
//   routed-evicted  a probe answered 200 by the evictable serve while the router said its tier was
//                   quiesced both before it was sent and after it was answered, and the ledger's
//                   latest answer had it evicting or evicted.
// Each is printed with the seed and the samples around it; at the end, the histories of the
// node's workflows are written to the run's directory (histories/) before the dev server goes.
//
// Too slow for CI (a minute or two per seed, plus start-up and the settle), so a bench script:
//   node dist/bench/fence-chaos.js [--seed N] [--seeds K] [--seconds S] [--operators N]   (scripts/lib.sh's export_test_env first)
// The exit code is the number of findings (0: none in any seed).
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import { intArg } from './args';
import { parse as parseToml, stringify as stringifyToml } from 'smol-toml';
import { LedgerClient } from '../src/adapters/ledger/ledger-client';
import { exportQuery } from '../src/audit/export';
import { committedMibOf, totals } from '../src/domain/ledger';
import type { LedgerState } from '../src/domain/ledger';
import { LABEL } from '../src/domain/serve';
import { startRouter } from '../src/router/server';
import type { RunningRouter } from '../src/router/server';
import { FAKE_NVIDIA_SMI, routerConfigFor } from '../src/sim/box';
import type { FakeNvidiaSmiState } from '../src/sim/fake-nvidia-smi';
import { taskQueueFor } from '../src/shared/messages';
import { docker, removeNodeContainers, renderManifest, uniqueNode, writeManifest } from '../test/support/box';
import type { TestServe } from '../test/support/box';
import { startApiProcess } from '../test/support/api-process';
import type { ApiProcess } from '../test/support/api-process';
import { gpures, startWorkerProcess } from '../test/support/cli';
import type { Run, WorkerProcess } from '../test/support/cli';
import { testTemporal } from '../test/support/temporal';
import type { TestTemporal } from '../test/support/temporal';
import { prng } from '../test/support/prng';

const GPU = { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 };
const BUDGET = GPU.capacity_mib - GPU.reserve_mib;
const EVICTABLE_TIER = 'vision-local';
const ON_DEMAND_TIER = 'od-local';
const SERVES: TestServe[] = [
  { name: 'b', vram_mib: 9000 },
  { name: 'o1', vram_mib: 12000, env: { FAKE_START_DELAY_S: '3' } },
  { name: 'vision', vram_mib: 12288, class: 'evictable', served_model_name: 'qwen3-vl-4b-instruct', router_tier: EVICTABLE_TIER },
  { name: 'e1', vram_mib: 6000, class: 'evictable' },
  { name: 'e2', vram_mib: 7000, class: 'evictable', env: { FAKE_START_DELAY_S: '2' } },
  { name: 'od', vram_mib: 8192, class: 'on-demand', router_tier: ON_DEMAND_TIER, idle_ttl_s: 4 },
  { name: 'od2', vram_mib: 12000, class: 'on-demand', env: { FAKE_START_DELAY_S: '2' } },
];
/** How often the ledger and the router are read (the box itself: every 100 ms). */
const LEDGER_EVERY_MS = 500;
/** How long a container may run with nothing committed for it before it is a finding. */
const UNRESERVED_WINDOW_MS = 15_000;

interface BoxSample {
  at: number;
  running: { serve: string; mib: number }[];
  mib: number;
  /** The ledger's reservations as `serve phase committed`, or why it did not answer. */
  ledger: string[] | string;
  tiers: Record<string, string> | string;
}

interface Finding {
  kind: 'over-budget' | 'unreserved' | 'routed-evicted';
  at: number;
  what: string;
  serve?: string;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const stamp = (ms: number) => new Date(ms).toISOString().slice(11, 23);

class Chaos {
  samples: BoxSample[] = [];
  findings: Finding[] = [];
  ops: { at: number; op: string; run: Run }[] = [];
  faults: { at: number; fault: string }[] = [];
  probes = { sent: 0, ok: 0, other: 0 };
  private lastLedger: LedgerState | undefined;
  private unreservedSince = new Map<string, number>();
  private stopped = false;

  constructor(
    private readonly node: string,
    private readonly ledger: LedgerClient,
    private readonly tiers: () => Promise<Record<string, string>>,
    private readonly routerUrl: string,
    private readonly clientToken: string,
  ) {}

  stop(): void {
    this.stopped = true;
  }

  /** The box every 100 ms; the ledger and the router in a loop of their own (a stopped worker holds it up). */
  async sampleLoop(): Promise<void> {
    const ledgerLoop = (async () => {
      while (!this.stopped) {
        const began = Date.now();
        await this.readLedgerAndTiers();
        // Not every 100 ms: a query is a workflow task on the worker, and at 10 a second on two
        // shared cores they starved the worker (operations refused, exit 4, `no worker answered`).
        await sleep(Math.max(0, LEDGER_EVERY_MS - (Date.now() - began)));
      }
    })();
    while (!this.stopped) {
      const began = Date.now();
      await this.sample();
      await sleep(Math.max(0, 100 - (Date.now() - began)));
    }
    await ledgerLoop;
  }

  private ledgerSeen: { ledger: string[] | string; tiers: Record<string, string> | string } = { ledger: 'not read yet', tiers: 'not read yet' };

  async readLedgerAndTiers(): Promise<void> {
    const [ledger, tiers] = await Promise.all([
      this.ledger.answer(this.node, GPU.role, 1500).catch((err: unknown) => (err instanceof Error ? err.message.slice(0, 80) : String(err))),
      this.tiers().catch((err: unknown) => (err instanceof Error ? err.message.slice(0, 80) : String(err))),
    ]);
    this.ledgerSeen = {
      ledger: typeof ledger === 'string' ? ledger : ledger.reservations.map((r) => `${r.serve} ${r.phase} ${committedMibOf(r)}`),
      tiers,
    };
    if (typeof ledger === 'string' || ledger.reconciling) {
      this.ledgerUnanswered += 1;
      return;
    }
    this.ledgerAnswered += 1;
    this.lastLedger = ledger;
    this.lastLedgerAt = Date.now();
  }

  ledgerAnswered = 0;
  ledgerUnanswered = 0;
  private lastLedgerAt = 0;
  private checkedLedgerAt = 0;

  async sample(): Promise<void> {
    const at = Date.now();
    const containers = await docker().listContainers({ filters: { label: [`${LABEL.node}=${this.node}`], status: ['running'] } });
    const running = containers.map((c) => ({ serve: c.Labels[LABEL.serve] ?? '?', mib: Number(c.Labels[LABEL.vramMib] ?? 0) }));
    const mib = running.reduce((s, c) => s + c.mib, 0);
    this.samples.push({ at, running, mib, ...this.ledgerSeen });
    if (mib > BUDGET)
      this.findings.push({ kind: 'over-budget', at, what: `${mib} MiB running against ${BUDGET}: ${running.map((c) => `${c.serve} ${c.mib}`).join(', ')}` });
    // A container's reservation is judged only against a ledger answer newer than the last one judged.
    const ledger = this.lastLedger;
    if (!ledger || this.lastLedgerAt === this.checkedLedgerAt) return;
    this.checkedLedgerAt = this.lastLedgerAt;
    for (const c of running) {
      const r = ledger.reservations.find((x) => x.serve === c.serve);
      if (r && committedMibOf(r) > 0) {
        this.unreservedSince.delete(c.serve);
        continue;
      }
      const since = this.unreservedSince.get(c.serve) ?? at;
      this.unreservedSince.set(c.serve, since);
      if (at - since > UNRESERVED_WINDOW_MS && !this.findings.some((f) => f.kind === 'unreserved' && f.serve === c.serve && f.at >= since)) {
        this.findings.push({
          kind: 'unreserved',
          at,
          serve: c.serve,
          what: `${c.serve}'s container has run ${at - since} ms with the ledger holding ${r ? `${r.phase} ${committedMibOf(r)} MiB` : 'nothing'}`,
        });
      }
    }
    for (const serve of [...this.unreservedSince.keys()]) if (!running.some((c) => c.serve === serve)) this.unreservedSince.delete(serve);
  }

  /** The evictable tier, probed: 200 while the router says quiesced on both sides of it, and the ledger has it evicted, is a finding. */
  async probeLoop(): Promise<void> {
    while (!this.stopped) {
      await sleep(250);
      const before = await this.tiers().catch(() => undefined);
      const phaseBefore = this.lastLedger?.reservations.find((r) => r.serve === 'vision')?.phase;
      const sentAt = Date.now();
      this.probes.sent += 1;
      const status = await fetch(`${this.routerUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ model: 'vision', messages: [{ role: 'user', content: 'probe' }] }),
        signal: AbortSignal.timeout(10_000),
      }).then(
        async (res) => {
          await res.text();
          return res.status;
        },
        () => 0,
      );
      if (status !== 200) {
        this.probes.other += 1;
        continue;
      }
      this.probes.ok += 1;
      const after = await this.tiers().catch(() => undefined);
      const phaseAfter = this.lastLedger?.reservations.find((r) => r.serve === 'vision')?.phase;
      const evicted = (p: string | undefined) => p === 'evicting' || p === 'evicted' || p === 'stopping';
      if (before?.[EVICTABLE_TIER] === 'quiesced' && after?.[EVICTABLE_TIER] === 'quiesced' && (evicted(phaseBefore) || evicted(phaseAfter))) {
        this.findings.push({
          kind: 'routed-evicted',
          at: sentAt,
          serve: 'vision',
          what: `a request sent at ${stamp(sentAt)} was answered 200 by vision, the tier quiesced before and after, the ledger's vision ${phaseBefore} -> ${phaseAfter}`,
        });
      }
    }
  }

  /** The on-demand tier, asked now and then: each request may start an acquisition with an idle lease. */
  async onDemandLoop(rand: () => number): Promise<void> {
    while (!this.stopped) {
      await sleep(2000 + rand() * 6000);
      await fetch(`${this.routerUrl}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${this.clientToken}` },
        body: JSON.stringify({ model: 'od', messages: [{ role: 'user', content: 'on demand' }] }),
        signal: AbortSignal.timeout(30_000),
      }).then(
        (res) => res.text(),
        () => '',
      );
    }
  }
}

interface Args {
  seed: number;
  seeds: number;
  seconds: number;
  operators: number;
}

async function runSeed(seed: number, seconds: number, operatorCount: number, temporal: TestTemporal): Promise<number> {
  const rand = prng(seed);
  const node = uniqueNode('chaos');
  const dir = mkdtempSync(join(tmpdir(), 'gpures-chaos-'));
  const text = renderManifest(node, [GPU], SERVES).replace(/^uuid = "GPU-[^"]*"$/m, `uuid = "GPU-${randomUUID()}"`);
  const { manifestPath, manifest } = writeManifest(dir, text);
  const env = { TEMPORAL_ADDRESS: temporal.address };

  const apiToken = `api-token-${randomUUID()}-${randomUUID()}`;
  const api: ApiProcess = await startApiProcess(manifestPath, [], { ...env, GPURES_API_TOKEN: apiToken });
  // Whatever ends the seed, nothing it started is left running.
  let worker: WorkerProcess | undefined;
  let router: RunningRouter | undefined;
  try {
    return await chaosOn();
  } finally {
    if (worker?.child.signalCode === null) worker.child.kill('SIGCONT');
    await worker?.stop();
    await router?.close();
    await api.stop();
    await removeNodeContainers(node);
  }

  async function chaosOn(): Promise<number> {
    const apiUrl = `http://127.0.0.1:${api.port}`;

    const doc = parseToml(routerConfigFor(manifest, `chaos.${node}`)) as { tiers: Record<string, unknown>[] };
    for (const tier of doc.tiers) {
      tier['backend'] = `${String(tier['backend'])}/cgi-bin/vllm`;
      if (tier['name'] === ON_DEMAND_TIER) tier['on_demand'] = { serve: 'od', evict: true, wait_timeout_s: 25 };
    }
    const routerConfigPath = join(dir, 'router.toml');
    writeFileSync(routerConfigPath, stringifyToml(doc));
    const routerToken = `router-token-${randomUUID()}`;
    const clientToken = `client-token-${randomUUID()}`;
    const routerOpts = {
      configPath: routerConfigPath,
      adminToken: routerToken,
      stateFile: join(dir, 'router-state.json'),
      acquisitions: { url: apiUrl, token: apiToken },
      clientToken,
      acquisitionPollMs: 200,
    };
    router = await startRouter({ ...routerOpts, port: 0 });
    const routerUrl = router.url;
    const routerPort = Number(new URL(routerUrl).port);

    const smiState: FakeNvidiaSmiState = {
      gpus: manifest.gpus.map((g, index) => ({ index, uuid: g.uuid, name: 'NVIDIA GeForce RTX 5090', totalMib: g.capacityMib, baseUsedMib: 1200 })),
      docker: true,
    };
    const smiStatePath = join(dir, 'nvidia-smi.json');
    writeFileSync(smiStatePath, JSON.stringify(smiState));
    const workerEnv = {
      ...env,
      GPURES_ROUTER_URL: routerUrl,
      GPURES_ROUTER_TOKEN: routerToken,
      GPURES_NVIDIA_SMI: FAKE_NVIDIA_SMI,
      FAKE_NVIDIA_SMI_STATE: smiStatePath,
    };
    const startWorker = () => startWorkerProcess(['--manifest', manifestPath, '--gpus', 'off'], workerEnv);
    worker = await startWorker();

    const tiers = async (): Promise<Record<string, string>> => {
      const res = await fetch(`${routerUrl}/admin/tiers`, { headers: { authorization: `Bearer ${routerToken}` }, signal: AbortSignal.timeout(2000) });
      const body = (await res.json()) as { tiers: { tier: string; state: string }[] };
      return Object.fromEntries(body.tiers.map((t) => [t.tier, t.state]));
    };
    const chaos = new Chaos(node, new LedgerClient(temporal.client), tiers, routerUrl, clientToken);
    const cli = (args: string[], timeoutMs = 120_000) => gpures([...args, '--manifest', manifestPath], env, timeoutMs);

    // As the fence race: the operator's first down puts the evictable tier where gpures keeps it.
    await cli(['serves', 'down', 'vision']);

    const pool = ['b', 'o1', 'vision', 'vision', 'e1', 'e2', 'od', 'od2', 'od2'];
    const pick = () => pool[Math.floor(rand() * pool.length)]!;
    const nextOp = (): string[] | { api: string; leaseS: number } => {
      const roll = rand();
      if (roll < 0.25) return ['serves', 'down', pick()];
      if (roll < 0.35) return ['serves', 'down', pick(), '--restore'];
      if (roll < 0.6) return ['serves', 'up', pick(), '--evict', '--drain-timeout', '5'];
      if (roll < 0.7) return ['serves', 'up', pick(), '--evict', '--drain-timeout', '5', '--lease', `${3 + Math.floor(rand() * 8)}s`];
      if (roll < 0.85) return { api: rand() < 0.5 ? 'od' : 'od2', leaseS: 3 + Math.floor(rand() * 8) };
      return ['serves', 'up', pick()];
    };
    // The schedule is drawn up front from the seed: what runs does not depend on how fast it ran.
    const endAt = Date.now() + seconds * 1000;
    const faultPlan: { afterMs: number; fault: 'kill' | 'stop' | 'router'; pauseMs: number }[] = [];
    for (let t = 8000 + rand() * 8000; t < seconds * 1000 - 10_000; t += 15_000 + rand() * 15_000) {
      const r = rand();
      const fault = r < 0.4 ? 'kill' : r < 0.75 ? 'stop' : 'router';
      // A stop lasts past the activities' 10 s heartbeat timeout; a kill or a router restart is out for a moment.
      faultPlan.push({ afterMs: Math.round(t), fault, pauseMs: Math.round(fault === 'stop' ? 12_000 + rand() * 4000 : 300 + rand() * 2000) });
    }
    const opPlan = Array.from({ length: 400 }, () => ({ op: nextOp(), pauseMs: Math.round(200 + rand() * 1500) }));
    const odRand = prng(seed ^ 0x5eed);
    console.log(`seed ${seed}: node ${node}, ${seconds} s, faults ${faultPlan.map((f) => `${f.fault}@${(f.afterMs / 1000).toFixed(1)}s`).join(' ')}`);

    const started = Date.now();
    const loops = [chaos.sampleLoop(), chaos.probeLoop(), chaos.onDemandLoop(odRand)];
    let nextIndex = 0;
    const operators = Array.from({ length: operatorCount }, async () => {
      while (Date.now() < endAt) {
        const i = nextIndex++;
        const { op, pauseMs } = opPlan[i % opPlan.length]!;
        await sleep(pauseMs);
        const at = Date.now();
        if (Array.isArray(op)) {
          chaos.ops.push({ at, op: op.join(' '), run: await cli(op, Math.max(5000, endAt + 60_000 - Date.now())) });
        } else {
          const res = await fetch(`${apiUrl}/v1/acquisitions`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', authorization: `Bearer ${apiToken}` },
            body: JSON.stringify({ serve: op.api, evict: true, drain_timeout_s: 5, lease_s: op.leaseS }),
            signal: AbortSignal.timeout(10_000),
          }).then(
            async (r) => `${r.status} ${(await r.text()).slice(0, 100)}`,
            (err: unknown) => String(err),
          );
          chaos.ops.push({
            at,
            op: `POST /v1/acquisitions ${op.api}`,
            run: { code: res.startsWith('202') ? 0 : 3, stdout: res, stderr: '', ms: Date.now() - at },
          });
        }
      }
    });
    const faults = (async () => {
      for (const f of faultPlan) {
        await sleep(Math.max(0, started + f.afterMs - Date.now()));
        chaos.faults.push({ at: Date.now(), fault: f.fault });
        if (f.fault === 'kill') {
          worker.child.kill('SIGKILL');
          const dying = worker.child;
          await new Promise((r) => (dying.exitCode !== null || dying.signalCode !== null ? r(undefined) : dying.once('exit', r)));
          await sleep(f.pauseMs);
          worker = await startWorker();
        } else if (f.fault === 'stop') {
          worker.child.kill('SIGSTOP');
          await sleep(f.pauseMs);
          worker.child.kill('SIGCONT');
        } else {
          await router.close();
          await sleep(f.pauseMs);
          router = await startRouter({ ...routerOpts, port: routerPort });
        }
        console.log(`  ${stamp(Date.now())} fault ${f.fault} done`);
      }
    })();
    await Promise.all([...operators, faults]);

    // Settle: every operation ends (a lease's expiry included), then the ledger must equal the box.
    const settleUntil = Date.now() + 90_000;
    for (;;) {
      const open: string[] = [];
      for await (const w of temporal.client.workflow.list({ query: `TaskQueue = '${taskQueueFor(node)}' AND ExecutionStatus = 'Running'` })) {
        if (!w.workflowId.startsWith('ledger/') && !w.workflowId.startsWith('lease/')) open.push(w.workflowId);
      }
      if (open.length === 0 || Date.now() > settleUntil) {
        if (open.length > 0) console.log(`  still open after the settle: ${open.join(', ')}`);
        break;
      }
      await sleep(1000);
    }
    await sleep(1000);
    chaos.stop();
    await Promise.all(loops);
    await chaos.sample();

    const codes = new Map<string, number>();
    for (const o of chaos.ops)
      codes.set(`${o.op.split(' ').slice(0, 2).join(' ')} -> ${o.run.code}`, (codes.get(`${o.op.split(' ').slice(0, 2).join(' ')} -> ${o.run.code}`) ?? 0) + 1);
    const maxMib = Math.max(...chaos.samples.map((s) => s.mib));
    const unanswered = `${chaos.ledgerAnswered} ledger answers, ${chaos.ledgerUnanswered} unanswered`;
    const last = chaos.samples[chaos.samples.length - 1];
    console.log(
      `seed ${seed}: ${chaos.ops.length} operations in ${((Date.now() - started) / 1000).toFixed(0)} s (${JSON.stringify(Object.fromEntries(codes))}); ` +
        `faults ${chaos.faults.map((f) => f.fault).join(',')}; ${chaos.samples.length} box samples (${unanswered}), max ${maxMib} MiB against ${BUDGET}; ` +
        `probes ${chaos.probes.sent} (${chaos.probes.ok} answered 200); ${chaos.findings.length} findings`,
    );
    console.log(`  at the end: running ${JSON.stringify(last?.running)}, ledger ${JSON.stringify(last?.ledger)}, tiers ${JSON.stringify(last?.tiers)}`);
    if (typeof last?.ledger !== 'string' && last) {
      const l = await chaos['ledger'].answer(node, GPU.role, 5000).catch(() => undefined);
      if (l && totals(l).committedMib !== last.mib) console.log(`  ledger committed ${totals(l).committedMib} MiB, the box runs ${last.mib}`);
    }
    for (const o of chaos.ops) {
      const lastLine = (o.run.stderr || o.run.stdout).split('\n').filter(Boolean).slice(-1)[0] ?? '';
      console.log(`  op ${stamp(o.at)} +${o.run.ms} ms exit ${o.run.code}: ${o.op}: ${lastLine.slice(0, 160)}`);
    }
    for (const f of chaos.findings.slice(0, 20)) {
      console.log(`FINDING seed ${seed} ${f.kind} at ${stamp(f.at)}: ${f.what}`);
      for (const s of chaos.samples.filter((x) => Math.abs(x.at - f.at) < 1500)) {
        console.log(
          `    ${stamp(s.at)} ${s.mib} MiB [${s.running.map((c) => c.serve).join(' ')}] ledger ${JSON.stringify(s.ledger)} tiers ${JSON.stringify(s.tiers)}`,
        );
      }
      for (const o of chaos.ops.filter((o) => (!f.serve || o.op.includes(` ${f.serve}`)) && o.at < f.at && o.at + o.run.ms > f.at - 20_000)) {
        console.log(
          `    op at ${stamp(o.at)} (${o.run.ms} ms, exit ${o.run.code}): ${o.op}: ${(o.run.stderr || o.run.stdout).split('\n').filter(Boolean).slice(-1)[0] ?? ''}`,
        );
      }
    }
    if (chaos.findings.length > 0) {
      // The dev server goes with the run: the node's histories are written out while it still answers.
      const histories = join(dir, 'histories');
      const exported = await exportQuery(temporal.client, `TaskQueue = '${taskQueueFor(node)}'`, histories);
      console.log(`  histories: ${exported.length} workflows of ${node} in ${histories} (gpures audit report FILE reads one)`);
    }

    return chaos.findings.length;
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      seed: { type: 'string' },
      seeds: { type: 'string', default: '1' },
      seconds: { type: 'string', default: '90' },
      operators: { type: 'string', default: '4' },
    },
  });
  const args: Args = {
    seed: values.seed !== undefined ? intArg('seed', values.seed, 0, 2 ** 31 - 1) : Math.floor(Math.random() * 2 ** 31),
    seeds: intArg('seeds', values.seeds, 1, 100),
    seconds: intArg('seconds', values.seconds, 10, 3600),
    operators: intArg('operators', values.operators, 1, 16),
  };
  const temporal = await testTemporal();
  let findings = 0;
  try {
    for (let i = 0; i < args.seeds; i++) findings += await runSeed(args.seed + i, args.seconds, args.operators, temporal);
  } finally {
    await temporal.close();
  }
  console.log(`${args.seeds} seed(s) from ${args.seed}, ${args.seconds} s each: ${findings} findings`);
  process.exitCode = Math.min(findings, 100);
}

void main();
