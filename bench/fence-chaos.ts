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
//                   LEDGER_BOX_WINDOW_MS says nothing is committed for it (the window covers a
//                   bring-up's compensation and a late create removed by its own step);
//   no-container    the reverse: every answered ledger sample for more than LEDGER_BOX_WINDOW_MS
//                   says a serve is running, and the box runs no container of it;
//   left-quiesced   a tier quiesced over its serve's running container, the ledger saying the serve
//                   is running (no operation holds it), on every answered sample for more than
//                   LEFT_QUIESCED_GRACE_MS;
//   routed-evicted  a probe answered 200 by the evictable serve while the router said its tier was
//                   quiesced both before it was sent and after it was answered, and the ledger's
//                   latest answer had it evicting or evicted;
//   ledger-box      once every operation has ended, the ledger's committed MiB differ from the MiB
//                   the box's running containers reserve.
// A condition still pending when the operations end is sampled until its window has passed.
// Each is printed with the seed and the samples around it (and around its start); at the end, the
// histories of the node's workflows are written to the run's directory (histories/) before the dev
// server goes.
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
/**
 * How long a container may run with nothing committed for it, or the ledger say a serve runs with
 * no container of it, before it is a finding. A ledger answer lags the box by its read (up to 2 s);
 * a serve is `running` only once its container is up and healthy, and is `stopping` or `evicting`
 * before its stop, so the ledger-says-running side needs no more; the other side's window covers a
 * bring-up's compensation and a late create removed by its own step. One window both ways.
 */
const LEDGER_BOX_WINDOW_MS = 15_000;
/**
 * How long a tier may stay quiesced over its serve's running container while the ledger says the
 * serve is running. An operation that quiesces a serve's tier holds the serve in another phase
 * first (an eviction `evicting`, a bring-down `stopping`, a bring-up `admitted` until after its
 * readmit), so only the router's own quiesce for an acquisition that finds the serve running holds
 * a running serve's tier: a second or two, held up by a SIGSTOPped worker (up to 16 s here) and the
 * 10 s after which its step is tried again, and a readmit by a router restart (up to 2.3 s): 30 s.
 */
const LEFT_QUIESCED_GRACE_MS = 30_000;
/** The router tier of each serve that has one. */
const TIER_OF = new Map(SERVES.flatMap((s) => (s.router_tier ? [[s.name, s.router_tier] as const] : [])));

interface BoxSample {
  at: number;
  running: { serve: string; mib: number }[];
  mib: number;
  /** The ledger's reservations as `serve phase committed`, or why it did not answer. */
  ledger: string[] | string;
  tiers: Record<string, string> | string;
}

interface Finding {
  kind: 'over-budget' | 'unreserved' | 'no-container' | 'left-quiesced' | 'routed-evicted' | 'ledger-box';
  at: number;
  what: string;
  serve?: string;
  /** When the condition began, for one that is a finding only once it has held for a window. */
  since?: number;
}

/**
 * A condition of a serve that is a finding only once it has held, on every sample judged, for
 * longer than its window: one finding per stretch, a stretch ended by a judged sample without it.
 */
class Persisting {
  private readonly since = new Map<string, number>();

  constructor(
    private readonly kind: Finding['kind'],
    private readonly windowMs: number,
  ) {}

  /** `holds`: each serve it holds for now, and what to say of it given how long it has held. */
  judge(at: number, holds: Map<string, (heldMs: number) => string>, findings: Finding[]): void {
    for (const serve of [...this.since.keys()]) if (!holds.has(serve)) this.since.delete(serve);
    for (const [serve, what] of holds) {
      const since = this.since.get(serve) ?? at;
      this.since.set(serve, since);
      if (at - since > this.windowMs && !findings.some((f) => f.kind === this.kind && f.serve === serve && f.at >= since))
        findings.push({ kind: this.kind, at, serve, since, what: what(at - since) });
    }
  }

  /** When the last stretch still under way would pass its window (epoch ms), if any is. */
  pendingUntil(findings: Finding[]): number | undefined {
    const open = [...this.since.entries()].filter(([serve, since]) => !findings.some((f) => f.kind === this.kind && f.serve === serve && f.at >= since));
    return open.length ? Math.max(...open.map(([, since]) => since + this.windowMs)) : undefined;
  }
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
  /** The router's tiers as read with lastLedger, when they answered. */
  private lastTiers: Record<string, string> | undefined;
  private readonly unreserved = new Persisting('unreserved', LEDGER_BOX_WINDOW_MS);
  private readonly noContainer = new Persisting('no-container', LEDGER_BOX_WINDOW_MS);
  private readonly leftQuiesced = new Persisting('left-quiesced', LEFT_QUIESCED_GRACE_MS);
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
    this.lastTiers = typeof tiers === 'string' ? undefined : tiers;
    this.lastLedgerAt = Date.now();
  }

  /** When the last condition still under way would pass its window, if any is: the run samples until then. */
  pendingUntil(): number | undefined {
    const until = [this.unreserved, this.noContainer, this.leftQuiesced].map((p) => p.pendingUntil(this.findings)).filter((t) => t !== undefined);
    return until.length ? Math.max(...until) : undefined;
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
    // The box is judged only against a ledger answer newer than the last one judged.
    const ledger = this.lastLedger;
    if (!ledger || this.lastLedgerAt === this.checkedLedgerAt) return;
    this.checkedLedgerAt = this.lastLedgerAt;
    const runs = (serve: string) => running.some((c) => c.serve === serve);
    const unreserved = new Map<string, (ms: number) => string>();
    for (const c of running) {
      const r = ledger.reservations.find((x) => x.serve === c.serve);
      if (!r || committedMibOf(r) === 0)
        unreserved.set(
          c.serve,
          (ms) => `${c.serve}'s container has run ${ms} ms with the ledger holding ${r ? `${r.phase} ${committedMibOf(r)} MiB` : 'nothing'}`,
        );
    }
    this.unreserved.judge(at, unreserved, this.findings);
    const saysRunning = ledger.reservations.filter((r) => r.phase === 'running');
    const noContainer = new Map<string, (ms: number) => string>();
    for (const r of saysRunning.filter((x) => !runs(x.serve)))
      noContainer.set(
        r.serve,
        (ms) => `the ledger has said ${r.serve} is running (${r.vramMib} MiB, held by ${r.holder}) for ${ms} ms, and the box runs no container of it`,
      );
    this.noContainer.judge(at, noContainer, this.findings);
    // Judged only on tiers read with that ledger answer: the router restarting leaves the last ones standing.
    const tiers = this.lastTiers;
    if (!tiers) return;
    const leftQuiesced = new Map<string, (ms: number) => string>();
    for (const r of saysRunning) {
      const tier = TIER_OF.get(r.serve);
      if (tier && tiers[tier] === 'quiesced' && runs(r.serve))
        leftQuiesced.set(
          r.serve,
          (ms) =>
            `tier ${tier} has been quiesced for ${ms} ms over ${r.serve}'s running container, the ledger saying ${r.serve} is running (held by ${r.holder})`,
        );
    }
    this.leftQuiesced.judge(at, leftQuiesced, this.findings);
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
    const openOperations = async (): Promise<string[]> => {
      const open: string[] = [];
      for await (const w of temporal.client.workflow.list({ query: `TaskQueue = '${taskQueueFor(node)}' AND ExecutionStatus = 'Running'` })) {
        if (!w.workflowId.startsWith('ledger/') && !w.workflowId.startsWith('lease/')) open.push(w.workflowId);
      }
      return open;
    };
    const settleUntil = Date.now() + 90_000;
    for (;;) {
      const open = await openOperations();
      if (open.length === 0 || Date.now() > settleUntil) {
        if (open.length > 0) console.log(`  still open after the settle: ${open.join(', ')}`);
        break;
      }
      await sleep(1000);
    }
    await sleep(1000);
    // A stretch under way now (a tier left quiesced, the ledger and the box apart) is sampled until its window has passed.
    const pending = chaos.pendingUntil();
    if (pending !== undefined) {
      const waitMs = Math.max(0, pending + 1000 - Date.now());
      console.log(`  sampling ${(waitMs / 1000).toFixed(1)} s more: a condition under way at the end has not yet held for its window`);
      await sleep(waitMs);
    }
    chaos.stop();
    await Promise.all(loops);
    await chaos.sample();

    const codes = new Map<string, number>();
    for (const o of chaos.ops)
      codes.set(`${o.op.split(' ').slice(0, 2).join(' ')} -> ${o.run.code}`, (codes.get(`${o.op.split(' ').slice(0, 2).join(' ')} -> ${o.run.code}`) ?? 0) + 1);
    const last = chaos.samples[chaos.samples.length - 1];
    // Settled, the ledger's committed MiB are the box's: judged only with no operation open (a lease may have begun a bring-down since).
    const settled = await chaos['ledger'].answer(node, GPU.role, 5000).catch((err: unknown) => (err instanceof Error ? err.message : String(err)));
    const openAtEnd = await openOperations();
    if (typeof settled === 'string' || !last) console.log(`  the ledger at the end: not read (${typeof settled === 'string' ? settled : 'no sample'})`);
    else if (openAtEnd.length > 0) console.log(`  the ledger at the end: not judged, ${openAtEnd.join(', ')} open`);
    else if (totals(settled).committedMib !== last.mib) {
      chaos.findings.push({
        kind: 'ledger-box',
        at: last.at,
        what:
          `with every operation ended, the ledger commits ${totals(settled).committedMib} MiB ` +
          `(${settled.reservations.map((r) => `${r.serve} ${r.phase} ${committedMibOf(r)}`).join(', ')}) and the box runs ${last.mib} MiB ` +
          `(${last.running.map((c) => `${c.serve} ${c.mib}`).join(', ') || 'nothing'})`,
      });
    }
    const maxMib = Math.max(...chaos.samples.map((s) => s.mib));
    const unanswered = `${chaos.ledgerAnswered} ledger answers, ${chaos.ledgerUnanswered} unanswered`;
    const kinds = new Map<string, number>();
    for (const f of chaos.findings) kinds.set(f.kind, (kinds.get(f.kind) ?? 0) + 1);
    console.log(
      `seed ${seed}: ${chaos.ops.length} operations in ${((Date.now() - started) / 1000).toFixed(0)} s (${JSON.stringify(Object.fromEntries(codes))}); ` +
        `faults ${chaos.faults.map((f) => f.fault).join(',')}; ${chaos.samples.length} box samples (${unanswered}), max ${maxMib} MiB against ${BUDGET}; ` +
        `probes ${chaos.probes.sent} (${chaos.probes.ok} answered 200); ${chaos.findings.length} findings${kinds.size ? ` ${JSON.stringify(Object.fromEntries(kinds))}` : ''}`,
    );
    console.log(`  at the end: running ${JSON.stringify(last?.running)}, ledger ${JSON.stringify(last?.ledger)}, tiers ${JSON.stringify(last?.tiers)}`);
    for (const o of chaos.ops) {
      const lastLine = (o.run.stderr || o.run.stdout).split('\n').filter(Boolean).slice(-1)[0] ?? '';
      console.log(`  op ${stamp(o.at)} +${o.run.ms} ms exit ${o.run.code}: ${o.op}: ${lastLine.slice(0, 160)}`);
    }
    for (const f of chaos.findings.slice(0, 20)) {
      console.log(`FINDING seed ${seed} ${f.kind} at ${stamp(f.at)}${f.since !== undefined ? ` (since ${stamp(f.since)})` : ''}: ${f.what}`);
      const near = (x: BoxSample) => Math.abs(x.at - f.at) < 1500 || (f.since !== undefined && Math.abs(x.at - f.since) < 1500);
      for (const s of chaos.samples.filter(near)) {
        console.log(
          `    ${stamp(s.at)} ${s.mib} MiB [${s.running.map((c) => c.serve).join(' ')}] ledger ${JSON.stringify(s.ledger)} tiers ${JSON.stringify(s.tiers)}`,
        );
      }
      for (const o of chaos.ops.filter((o) => (!f.serve || o.op.includes(` ${f.serve}`)) && o.at < f.at && o.at + o.run.ms > (f.since ?? f.at) - 20_000)) {
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
