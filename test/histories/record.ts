// Records the histories test/replay.test.ts replays: each workflow kind driven for real (a fresh
// Temporal dev server, the simulated box of the field report, and the test dockerd with the fake
// router for promotions), then exported with `gpures audit export`'s own code.
//
//   npm run record-histories            (scripts/record-histories.sh: setup, build, this)
//   node dist/test/histories/record.js [--only name,name] [--no-promotion]
//
// Re-record after an intentional incompatible change to a workflow (and put the change behind
// patched() for the workflows already running): see README.md, "Audit".
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { bundleWorkflowCode, DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import type { Worker } from '@temporalio/worker';
import { exportWorkflow } from '../../src/audit/export';
import { ledgerSnapshots, serveAcquire, serveDown, serveUp } from '../../src/client/operations';
import type { OperationOutcome } from '../../src/client/operations';
import { followPromotion, startPromotion } from '../../src/client/promote';
import type { PromotionOutcome } from '../../src/client/promote';
import { startDevServer } from '../../src/dev/dev-server';
import { formatLedger, totals } from '../../src/domain/ledger';
import { progressQuery, taskQueueFor, workflowIds } from '../../src/shared/messages';
import { promoteWorkflowId } from '../../src/shared/promotion';
import type { PromoteInput } from '../../src/shared/promotion';
import { routerConfigFor, startSimBox } from '../../src/sim/box';
import type { SimBox } from '../../src/sim/box';
import { createGpuresWorker, fileManifest } from '../../src/worker/worker';
import { workflowCodeOptions } from '../../src/worker/workflow-code';
import { docker, renderManifest, writeManifest } from '../support/box';
import type { TestServe } from '../support/box';
import { deployTestRouter, makeVariantImage, removeTestArtifacts, ROUTER_IMAGE, routerConfig } from '../support/router';
import { ROUTER_TOKEN } from '../support/sim';

// dist/test/histories/record.js -> <repo>/test/histories
export const HISTORIES_DIR = join(__dirname, '..', '..', '..', 'test', 'histories');
const NODE = 'primary-node';
const GPU = { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 };
const SERVES: TestServe[] = [
  { name: 'fast', vram_mib: 14336, router_tier: 'fast-local' },
  { name: 'embeddings', vram_mib: 3200 },
  { name: 'reranker', vram_mib: 3456 },
  { name: 'ocr', vram_mib: 5120 },
  { name: 'vision', vram_mib: 12288, class: 'evictable', served_model_name: 'qwen3-vl-4b-instruct', router_tier: 'vision-local' },
  { name: 'comfyui-sim', vram_mib: 8192, class: 'on-demand' },
  // Evicted by sleeping (vLLM's sleep mode): the sim keeps the residual it declares.
  {
    name: 'vision-sleeper',
    vram_mib: 12288,
    class: 'evictable',
    router_tier: 'sleeper-local',
    sleep: { level: 1, residual_mib: 600, host_ram_mib: 8000 },
    env: { SIM_SLEEP_RESIDUAL_MIB: '600' },
  },
];

interface Recorded {
  kind: string;
  file: string;
  workflowId: string;
  workflowType: string;
  events: number;
}

function say(line: string): void {
  process.stderr.write(`${line}\n`);
}

function expect(cond: boolean, what: string): void {
  if (!cond) throw new Error(`recording aborted: ${what}`);
}

function describeOutcome(o: OperationOutcome<{ message: string }> | PromotionOutcome): string {
  return o.ok ? o.result.message : `${o.failureType}: ${o.message}`;
}

async function routed(box: SimBox, preset: string, body: Record<string, unknown> = {}): Promise<number> {
  const res = await fetch(`${box.router.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: preset, messages: [{ role: 'user', content: 'describe the screenshot' }], ...body }),
  });
  await res.text();
  return res.status;
}

async function until(what: string, check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`recording aborted: ${what} did not happen within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const onlyArg = args.indexOf('--only');
  const only = onlyArg >= 0 ? new Set((args[onlyArg + 1] ?? '').split(',').filter(Boolean)) : undefined;
  const withPromotion = !args.includes('--no-promotion');
  const want = (kind: string) => !only || only.has(kind);

  Runtime.install({ logger: new DefaultLogger('ERROR') });
  mkdirSync(HISTORIES_DIR, { recursive: true });
  const recorded: Recorded[] = [];
  const cleanups: (() => Promise<void>)[] = [];

  say('starting a fresh Temporal dev server');
  const server = await startDevServer();
  cleanups.push(() => server.stop());
  try {
    const connection = await Connection.connect({ address: server.address });
    cleanups.push(() => connection.close());
    const client = new Client({ connection, namespace: 'default' });
    const native = await NativeConnection.connect({ address: server.address });
    cleanups.push(() => native.close());

    async function record(kind: string, workflowId: string): Promise<void> {
      if (!want(kind)) return;
      const file = join(HISTORIES_DIR, `${kind}.json`);
      const { exported } = await exportWorkflow(client, workflowId, { file });
      recorded.push({ kind, file, workflowId, workflowType: exported.workflowType, events: exported.events });
      say(`  recorded ${kind}: ${workflowId} (${exported.workflowType}, ${exported.events} events) -> ${relative(process.cwd(), file)}`);
    }

    // ---- the box: the field report's dark-fast GPU, simulated ----------------------------------
    const dir = mkdtempSync(join(tmpdir(), 'gpures-record-'));
    cleanups.push(() => Promise.resolve(rmSync(dir, { recursive: true, force: true })));
    const text = renderManifest(NODE, [GPU], SERVES);
    const { manifestPath, manifest } = writeManifest(dir, text);
    const routerConfigPath = join(dir, 'router.toml');
    writeFileSync(routerConfigPath, routerConfigFor(manifest, `record.${NODE}`));
    const box = await startSimBox({ manifest, stateDir: join(dir, 'box'), routerConfigPath, routerToken: ROUTER_TOKEN, nonLedgerDrawMib: 1200 });
    cleanups.push(() => box.close());

    // ---- a router on the test dockerd, for the promotions ----------------------------------------
    const d = docker();
    const run = `rec${Date.now().toString(36)}`;
    const images: string[] = [];
    let target: Awaited<ReturnType<typeof deployTestRouter>> | undefined;
    let v2 = '';
    if (withPromotion && (want('promote-success') || want('promote-rollback'))) {
      await d.ping().catch((err: Error) => {
        throw new Error(
          `no dockerd at DOCKER_HOST=${process.env['DOCKER_HOST'] ?? '(default)'}: ${err.message}; run through npm run record-histories, or pass --no-promotion`,
        );
      });
      cleanups.push(() => removeTestArtifacts(d, run, images));
      v2 = await makeVariantImage(d, run, `record-v2-${run}`);
      images.push(v2);
      target = await deployTestRouter(d, { name: 'router', run, config: routerConfig('2026-07-13.primary-node-t011-ocr-fp8-fast') });
      cleanups.push(() => Promise.resolve(rmSync(join(target?.configPath ?? dir, '..'), { recursive: true, force: true })));
    }

    // The worker's own bundle: its interceptor modules and its source map.
    const bundle = await bundleWorkflowCode(
      workflowCodeOptions({ log: () => undefined, trace: () => undefined, debug: () => undefined, info: () => undefined, warn: say, error: say }),
    );
    const worker: Worker = await createGpuresWorker({
      connection: native,
      client,
      namespace: 'default',
      node: NODE,
      manifest: fileManifest(manifestPath),
      runtime: box.runtime,
      router: box.routerAdmin,
      gpu: box.gpu,
      pollIntervalMs: 100,
      routerTargets: target ? [target] : [],
      workflowBundle: bundle,
    });
    const running = worker.run();
    cleanups.push(async () => {
      worker.shutdown();
      await running;
    });

    const ledger = async () => {
      const [l] = await ledgerSnapshots(client, manifest);
      if (!l) throw new Error('no ledger');
      return l;
    };
    const step = async <R extends { message: string }>(what: string, o: Promise<OperationOutcome<R>>, ok: boolean): Promise<OperationOutcome<R>> => {
      const out = await o;
      say(`  ${what}: ${describeOutcome(out)}`);
      expect(out.ok === ok, `${what} was expected to ${ok ? 'succeed' : 'fail'}`);
      return out;
    };

    // (1) honest denial: the full resident set is up, vision does not fit.
    say('(1) full resident set, then vision: denied');
    for (const s of ['fast', 'embeddings', 'reranker', 'ocr']) await step(`serves up ${s}`, serveUp(client, NODE, s), true);
    expect(totals(await ledger()).committedMib === 26112, 'committed 26112 with the resident set');
    const denied = await step('serves up vision', serveUp(client, NODE, 'vision'), false);
    expect(!denied.ok && denied.failureType === 'AdmissionDenied', 'vision denied by the ledger');
    await record('denial', workflowIds.bringUp(NODE, 'vision'));
    // ocr's, with no router tier: its admission takes the start slot, its `running` gives it back.
    await record('bring-up-slot-with-admit', workflowIds.bringUp(NODE, 'ocr'));

    // (2) bring-up: room made, vision admitted, healthy, identity verified.
    say('(2) three residents down, vision up');
    for (const s of ['ocr', 'reranker', 'embeddings']) await step(`serves down ${s}`, serveDown(client, NODE, s), true);
    await step('serves up vision', serveUp(client, NODE, 'vision'), true);
    expect(totals(await ledger()).committedMib === 26624, 'committed 26624 with fast and vision');
    await record('bring-up', workflowIds.bringUp(NODE, 'vision'));
    await record('bring-up-local-steps', workflowIds.bringUp(NODE, 'vision'));

    // (3) drain timeout: a request outlives the 1 s drain; compensated, vision stays up.
    say('(3) comfyui-sim --evict with a 1 s drain and a 4 s request in flight: DrainTimeout');
    const slow = routed(box, 'vision', { sim_delay_ms: 4000 });
    await until('a vision request in flight', async () => (await box.routerAdmin.tierState('vision-local')).inFlight >= 1);
    const timedOut = await step(
      'serves up comfyui-sim --evict --drain-timeout 1',
      serveAcquire(client, NODE, { serve: 'comfyui-sim', evict: true, drainTimeoutS: 1 }),
      false,
    );
    expect(!timedOut.ok && timedOut.failureType === 'DrainTimeout', 'the drain timed out');
    await record('drain-timeout', workflowIds.acquire(NODE, 'comfyui-sim'));
    expect((await slow) === 200, 'the slow request finished 200');

    // (4) eviction: five requests in flight at quiesce, all finish, then stop, release, admit.
    say('(4) comfyui-sim --evict with 5 requests in flight: vision evicted');
    const five = Array.from({ length: 5 }, () => routed(box, 'vision', { sim_delay_ms: 1500 }));
    await until('5 vision requests in flight', async () => (await box.routerAdmin.tierState('vision-local')).inFlight >= 5);
    const evicted = await step('serves up comfyui-sim --evict', serveAcquire(client, NODE, { serve: 'comfyui-sim', evict: true }), true);
    expect(
      evicted.ok && evicted.result.victims.length === 1 && evicted.result.victims[0]?.inFlightAtQuiesce === 5,
      'vision evicted with 5 in flight at quiesce',
    );
    expect(
      (await Promise.all(five)).every((s) => s === 200),
      'every in-flight request finished 200',
    );
    expect(totals(await ledger()).committedMib === 22528, 'committed 22528 after the eviction');
    await record('eviction', workflowIds.acquire(NODE, 'comfyui-sim'));
    await record('eviction-local-steps', workflowIds.acquire(NODE, 'comfyui-sim'));

    // (5) restore: comfyui-sim down, vision back through a child bring-up and the guarded readmit.
    say('(5) comfyui-sim down --restore');
    const restored = await step('serves down comfyui-sim --restore', serveDown(client, NODE, 'comfyui-sim', { restore: true }), true);
    expect(restored.ok && restored.result.restored.length === 1 && restored.result.restored[0]?.ok === true, 'vision restored');
    await record('restore', workflowIds.bringDown(NODE, 'comfyui-sim'));
    await record('restore-child-bring-up', workflowIds.bringUp(NODE, 'vision'));
    await record('restore-local-steps', workflowIds.bringDown(NODE, 'comfyui-sim'));
    await record('restore-local-steps-child-bring-up', workflowIds.bringUp(NODE, 'vision'));
    expect((await routed(box, 'vision')) === 200, 'vision routed again after the restore');
    say(`  ${formatLedger(await ledger()).join('\n  ')}`);

    // The ledger entity itself: every admission, acquisition, hand-over and release as an update.
    await record('ledger', workflowIds.ledger(NODE, GPU.role));

    // (8) eviction by sleeping, then the restore by waking.
    say('(8) vision down, vision-sleeper up; comfyui-sim --evict puts it to sleep; comfyui-sim down --restore wakes it');
    await step('serves down vision', serveDown(client, NODE, 'vision'), true);
    await step('serves up vision-sleeper', serveUp(client, NODE, 'vision-sleeper'), true);
    const slept = await step('serves up comfyui-sim --evict', serveAcquire(client, NODE, { serve: 'comfyui-sim', evict: true }), true);
    expect(slept.ok && slept.result.victims[0]?.sleep?.level === 1 && !slept.result.victims[0].sleep.fellBack, 'vision-sleeper put to sleep at level 1');
    expect(totals(await ledger()).committedMib === 14336 + 600 + 8192, 'committed 23128 with vision-sleeper asleep');
    await record('sleep-eviction', workflowIds.acquire(NODE, 'comfyui-sim'));
    const woken = await step('serves down comfyui-sim --restore', serveDown(client, NODE, 'comfyui-sim', { restore: true }), true);
    expect(woken.ok && /restored by waking/.test(woken.result.restored[0]?.message ?? ''), 'vision-sleeper restored by waking');
    await record('wake-restore', workflowIds.bringDown(NODE, 'comfyui-sim'));
    await record('wake-restore-child-bring-up', workflowIds.bringUp(NODE, 'vision-sleeper'));

    // (9) an acquisition terminated while it drains its victim: serves down takes its hold over and
    // readmits the victim, which still runs (bringDownWorkflow's take-over with victims running).
    say('(9) vision up; comfyui-sim --evict terminated mid-drain; serves down comfyui-sim takes it over');
    await step('serves down vision-sleeper', serveDown(client, NODE, 'vision-sleeper'), true);
    await step('serves up vision', serveUp(client, NODE, 'vision'), true);
    const draining = routed(box, 'vision', { sim_delay_ms: 4000 });
    await until('a vision request in flight', async () => (await box.routerAdmin.tierState('vision-local')).inFlight >= 1);
    const acquiring = serveAcquire(client, NODE, { serve: 'comfyui-sim', evict: true });
    const acquisition = client.workflow.getHandle(workflowIds.acquire(NODE, 'comfyui-sim'));
    await until('the acquisition draining vision', async () => (await acquisition.query(progressQuery)).some((st) => st.step === 'quiesce vision'));
    await acquisition.terminate('record: a worker lost for good');
    await acquiring.catch(() => undefined);
    const tookOver = await step('serves down comfyui-sim', serveDown(client, NODE, 'comfyui-sim'), true);
    expect(tookOver.ok && /took over the hold/.test(tookOver.result.message), 'the hold of the terminated acquisition taken over');
    await record('take-over-victims', workflowIds.bringDown(NODE, 'comfyui-sim'));
    expect((await draining) === 200, 'the request in flight finished 200');
    expect((await routed(box, 'vision')) === 200, 'vision routed again after the take-over');

    // (10) a restore cancelled while its bring-up of vision is under way: the stop has
    // landed, so the restore is seen through (patch restore-whole) and the run completes saying so.
    say('(10) comfyui-sim --evict again; comfyui-sim down --restore cancelled mid-restore');
    await step('serves up comfyui-sim --evict', serveAcquire(client, NODE, { serve: 'comfyui-sim', evict: true }), true);
    const whole = await client.workflow.start('bringDownWorkflow', {
      workflowId: workflowIds.bringDown(NODE, 'comfyui-sim'),
      taskQueue: taskQueueFor(NODE),
      args: [{ serve: 'comfyui-sim', restore: true }],
    });
    const visionBack = client.workflow.getHandle(workflowIds.bringUp(NODE, 'vision'));
    await until(
      "the restore's bring-up of vision under way",
      async () => (await visionBack.describe().catch(() => undefined))?.status.name === 'RUNNING' && (await visionBack.query(progressQuery)).length > 0,
      30_000,
    );
    await whole.cancel();
    const wholeEnd = (await whole.result()) as { message: string };
    say(`  ${wholeEnd.message}`);
    expect(/restore: vision restored; cancel asked after the stop/.test(wholeEnd.message), 'the cancelled restore seen through');
    await record('restore-whole', workflowIds.bringDown(NODE, 'comfyui-sim'));
    await record('restore-whole-child-bring-up', workflowIds.bringUp(NODE, 'vision'));
    expect((await routed(box, 'vision')) === 200, 'vision routed again after the cancelled restore');

    // (6) promotions: a new release that holds, then one that crash-loops and is rolled back.
    if (target) {
      const promote = async (what: string, input: PromoteInput, ok: boolean): Promise<void> => {
        const out = await followPromotion(await startPromotion(client, NODE, input), (s) => say(`    ${s.step}: ${s.outcome}`), 200);
        say(`  ${what}: ${describeOutcome(out)}`);
        expect(out.ok === ok, `${what} was expected to ${ok ? 'succeed' : 'fail'}`);
      };
      say('(6) router promote: a new image and mapping, verified');
      await promote(
        'router promote (success)',
        {
          router: 'router',
          config: { content: routerConfig('2026-07-13.primary-node-t013-vision') },
          image: v2,
          profile: 'promotion-profile.json',
          verify: { windowS: 2 },
        },
        true,
      );
      await record('promote-success', promoteWorkflowId(NODE, 'router'));
      say('(7) router promote: a crash-looping release, rolled back');
      await promote(
        'router promote (crash loop)',
        {
          router: 'router',
          config: { content: routerConfig('2026-07-14.crashes', ['', '# fake-router: crash = true']) },
          image: ROUTER_IMAGE,
          verify: { windowS: 2 },
        },
        false,
      );
      await record('promote-rollback', promoteWorkflowId(NODE, 'router'));
    } else if (withPromotion) {
      say('(6) promotions: not selected');
    } else {
      say('(6) promotions: skipped (--no-promotion); test/histories/promote-*.json left as they were');
    }
  } finally {
    for (const c of cleanups.reverse()) await c().catch((err: unknown) => say(`cleanup: ${String(err)}`));
  }

  process.stdout.write(
    `${recorded.map((r) => `${r.kind.padEnd(24)} ${relative(process.cwd(), r.file).padEnd(44)} ${String(r.events).padStart(4)} events  ${r.workflowType} ${r.workflowId}`).join('\n')}\n`,
  );
}

main().catch((err: unknown) => {
  process.stderr.write(`record: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exit(1);
});
