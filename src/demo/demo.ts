// `gpures demo`: the field report's T013 sequence on a simulated box, through the real workflows
// on a real Temporal dev server. Every step is checked against the report's figures; the exit
// code says whether all of them matched.
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import { DefaultLogger, NativeConnection, Runtime } from '@temporalio/worker';
import { ledgerSnapshots, serveAcquire, serveDown, serveUp } from '../client/operations';
import type { OperationOutcome } from '../client/operations';
import { startDevServer } from '../dev/dev-server';
import type { DevServer } from '../dev/dev-server';
import { formatLedger, totals } from '../domain/ledger';
import type { LedgerState } from '../domain/ledger';
import { manifestOrThrow, parseManifest } from '../config/manifest';
import { formatPhysical, physicalTruth } from '../domain/physical';
import { checkRouterAgainstManifest, parseRouterConfig, routerCheckErrors, routerConfigOrThrow } from '../config/router-config';
import type { Manifest } from '../domain/types';
import { formatIssue } from '../domain/types';
import { startSimBox } from '../sim/box';
import type { SimBox } from '../sim/box';
import { createGpuresWorker, fileManifest } from '../worker/worker';
import { taskQueueFor } from '../shared/messages';
import type { Worker } from '@temporalio/worker';

export const DEMO_MANIFEST = resolve(__dirname, '..', '..', '..', 'examples', 'primary-node', 'serves.toml');
export const DEMO_ROUTER_CONFIG = resolve(__dirname, '..', '..', '..', 'examples', 'primary-node', 'router.toml');

/** The field report's observed draw (Windows display + voice sidecars): ~5.7 GiB, above the reserve. */
const NON_LEDGER_DRAW_MIB = 5700;

export interface DemoOptions {
  keep?: boolean;
  manifestPath?: string;
  routerConfigPath?: string;
  /** Where to print; the CLI passes stdout. */
  out?: (line: string) => void;
  /** Temporal to use instead of starting a dev server (tests). */
  temporalAddress?: string;
  ui?: boolean;
}

export interface DemoCheck {
  step: number;
  what: string;
  expected: string;
  observed: string;
  ok: boolean;
}

export interface DemoResult {
  ok: boolean;
  checks: DemoCheck[];
  uiUrl?: string;
  workflowIds: string[];
}

interface DemoContext {
  client: Client;
  manifest: Manifest;
  box: SimBox;
  out: (line: string) => void;
  checks: DemoCheck[];
  workflowIds: string[];
  step: number;
  /** The Temporal UI, where the demo started the dev server itself. */
  uiUrl?: string;
}

function check(ctx: DemoContext, what: string, expected: string, observed: string): void {
  const ok = expected === observed;
  ctx.checks.push({ step: ctx.step, what, expected, observed, ok });
  ctx.out(`    ${ok ? 'ok  ' : 'FAIL'} ${what}: ${observed}${ok ? '' : ` (expected ${expected})`}`);
}

async function ledger(ctx: DemoContext): Promise<LedgerState> {
  const [l] = await ledgerSnapshots(ctx.client, ctx.manifest);
  if (!l) throw new Error('the manifest declares no GPU');
  return l;
}

async function printLedger(ctx: DemoContext): Promise<LedgerState> {
  const l = await ledger(ctx);
  for (const line of formatLedger(l)) ctx.out(`  ${line}`);
  const reading = (await ctx.box.gpu.readGpus()).find((g) => g.uuid === l.gpuUuid);
  if (reading) for (const line of formatPhysical(physicalTruth(l, reading))) ctx.out(`  ${line}`);
  return l;
}

async function op<R extends { message: string }>(ctx: DemoContext, cmd: string, run: () => Promise<OperationOutcome<R>>): Promise<OperationOutcome<R>> {
  ctx.out(`  $ gpures ${cmd}`);
  const o = await run();
  ctx.workflowIds.push(o.workflowId);
  ctx.out(`    ${o.ok ? o.result.message : `${o.message} [${o.failureType}]`}`);
  // The run itself, not the id: ids repeat across the sequence (vision is brought up three times).
  if (ctx.uiUrl) ctx.out(`    ${ctx.uiUrl}/namespaces/default/workflows/${encodeURIComponent(o.workflowId)}/${o.runId}/history`);
  return o;
}

async function routedVision(ctx: DemoContext): Promise<string> {
  const res = await fetch(`${ctx.box.router.url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'vision', messages: [{ role: 'user', content: 'Describe the dashboard screenshot.' }] }),
  });
  const body = (await res.json()) as { choices?: { finish_reason?: string }[]; error?: { message?: string } };
  ctx.out(
    `    routed vision request: ` +
      `HTTP ${res.status}${res.status === 200 ? `, finish ${body.choices?.[0]?.finish_reason ?? '?'}` : `, ${body.error?.message ?? ''}`}`,
  );
  return String(res.status);
}

const committedFree = (l: LedgerState) => `${totals(l).committedMib}/${totals(l).budgetMib}, free ${totals(l).freeMib}`;

async function sequence(ctx: DemoContext): Promise<void> {
  const residents = ['fast', 'embeddings', 'reranker', 'ocr'];

  ctx.step = 1;
  ctx.out('\n(1) Honest denial: the full resident set is up; vision does not fit');
  for (const s of residents) await op(ctx, `serves up ${s}`, () => serveUp(ctx.client, ctx.manifest.node, s));
  let l = await printLedger(ctx);
  check(ctx, 'committed/budget', '26112/27999, free 1887', committedFree(l));
  const denied = await op(ctx, 'serves up vision', () => serveUp(ctx.client, ctx.manifest.node, 'vision'));
  check(ctx, 'denial', 'serves up vision denied: over budget by 10401 MiB, nothing started', denied.ok ? 'admitted' : denied.message);

  ctx.step = 2;
  ctx.out('\n(2) Bring-up: down ocr reranker embeddings, up vision');
  for (const s of ['ocr', 'reranker', 'embeddings']) await op(ctx, `serves down ${s}`, () => serveDown(ctx.client, ctx.manifest.node, s));
  const vision = await op(ctx, 'serves up vision', () => serveUp(ctx.client, ctx.manifest.node, 'vision'));
  check(ctx, 'vision identity', 'qwen3-vl-4b-instruct', vision.ok ? (vision.result.observedModels ?? []).join(',') : vision.message);
  l = await printLedger(ctx);
  check(ctx, 'committed/budget', '26624/27999, free 1375', committedFree(l));
  check(ctx, 'routed vision request', '200', await routedVision(ctx));

  ctx.step = 3;
  ctx.out("\n(3) Eviction: on-demand comfyui-sim takes vision's VRAM");
  const acq = await op(ctx, 'serves up comfyui-sim --evict', () => serveAcquire(ctx.client, ctx.manifest.node, { serve: 'comfyui-sim', evict: true }));
  const eviction = acq.ok ? acq.result.steps.filter((x) => /^(plan|preflight|quiesce|drain|stop|release)/.test(x.step)) : [];
  for (const s of eviction) ctx.out(`    - ${s.step}: ${s.outcome}`);
  check(ctx, 'victims', 'vision', acq.ok ? acq.result.victims.map((v) => v.serve).join(',') : acq.message);
  // The report's order: through the router's boundary (quiesce, drain) before the docker stop.
  check(
    ctx,
    'eviction order',
    'quiesce vision → drain vision → stop vision → release vision',
    acq.ok
      ? eviction
          .filter((s) => !/^(plan|preflight)$/.test(s.step))
          .map((s) => s.step)
          .join(' → ')
      : acq.message,
  );
  l = await printLedger(ctx);
  check(ctx, 'committed', '22528', String(totals(l).committedMib));
  check(
    ctx,
    'vision in the ledger',
    'vision 12288 MiB (evictable, evicted)',
    formatLedger(l)
      .find((x) => x.includes('vision'))
      ?.trim() ?? 'absent',
  );
  check(ctx, 'routed vision request while evicted', '503', await routedVision(ctx));

  ctx.step = 4;
  ctx.out('\n(4) Restore: down comfyui-sim, vision comes back through the guarded readmit');
  const down = await op(ctx, 'serves down comfyui-sim --restore', () => serveDown(ctx.client, ctx.manifest.node, 'comfyui-sim', { restore: true }));
  const restored = down.ok ? down.result.restored.find((r) => r.serve === 'vision') : undefined;
  check(
    ctx,
    'observed_model after readmit',
    'qwen3-vl-4b-instruct',
    restored?.ok ? (restored.observedModels ?? []).join(',') : (restored?.message ?? 'not restored'),
  );
  check(ctx, 'routed vision request after restore', '200', await routedVision(ctx));
  l = await printLedger(ctx);
  check(ctx, 'committed/budget', '26624/27999, free 1375', committedFree(l));

  ctx.step = 5;
  ctx.out('\n(5) Box restored: vision down, the resident set back');
  await op(ctx, 'serves down vision', () => serveDown(ctx.client, ctx.manifest.node, 'vision'));
  for (const s of ['embeddings', 'reranker', 'ocr']) await op(ctx, `serves up ${s}`, () => serveUp(ctx.client, ctx.manifest.node, s));
  l = await printLedger(ctx);
  check(ctx, 'committed/budget', '26112/27999, free 1887', committedFree(l));
}

/** Loads the demo's inputs and applies the load-time rule before anything starts. */
function loadInputs(manifestPath: string, routerConfigPath: string): { manifest: Manifest; manifestText: string; routerText: string } {
  const manifestText = readFileSync(manifestPath, 'utf8');
  const manifest = manifestOrThrow(parseManifest(manifestText, manifestPath));
  const routerText = readFileSync(routerConfigPath, 'utf8');
  const router = routerConfigOrThrow(parseRouterConfig(routerText, routerConfigPath));
  const errors = routerCheckErrors(checkRouterAgainstManifest(router, routerConfigPath, manifest, manifestPath));
  if (errors.length) throw new Error(errors.map(formatIssue).join('\n'));
  return { manifest, manifestText, routerText };
}

export async function runDemo(opts: DemoOptions = {}): Promise<DemoResult> {
  const out = opts.out ?? ((line: string) => process.stdout.write(`${line}\n`));
  const { manifest, manifestText, routerText } = loadInputs(opts.manifestPath ?? DEMO_MANIFEST, opts.routerConfigPath ?? DEMO_ROUTER_CONFIG);
  const dir = mkdtempSync(join(tmpdir(), 'gpures-demo-'));
  // The sim box reads the manifest the worker reads: keep them one file.
  const manifestPath = join(dir, 'serves.toml');
  writeFileSync(manifestPath, manifestText);
  const routerConfigPath = join(dir, 'router.toml');
  writeFileSync(routerConfigPath, routerText);

  const stops: (() => Promise<void>)[] = [];
  const ctx: Partial<DemoContext> = { out, checks: [], workflowIds: [], step: 0 };
  let server: DevServer | undefined;
  try {
    if (!opts.temporalAddress) {
      out('starting the Temporal dev server (with its UI) …');
      server = await startDevServer({ ui: opts.ui ?? true });
      stops.push(() => (server as DevServer).stop());
    }
    const address = opts.temporalAddress ?? (server as DevServer).address;
    const box = await startSimBox({
      manifest,
      stateDir: join(dir, 'box'),
      routerConfigPath,
      routerToken: randomToken(),
      nonLedgerDrawMib: NON_LEDGER_DRAW_MIB,
    });
    stops.push(() => box.close());
    const connection = await Connection.connect({ address });
    const nativeConnection = await NativeConnection.connect({ address });
    stops.push(async () => {
      await nativeConnection.close();
      await connection.close();
    });
    const client = new Client({ connection, namespace: 'default' });
    const worker: Worker = await createGpuresWorker({
      connection: nativeConnection,
      client,
      namespace: 'default',
      node: manifest.node,
      manifest: fileManifest(manifestPath),
      runtime: box.runtime,
      router: box.routerAdmin,
      gpu: box.gpu,
      pollIntervalMs: 200,
    });
    const running = worker.run();
    stops.push(async () => {
      worker.shutdown();
      await running;
    });
    out(`Temporal ${address}${server?.uiUrl ? `, UI ${server.uiUrl}/namespaces/default/workflows` : ''}`);
    out(`router ${box.router.url} (mapping_version ${box.router.state().mappingVersion}); simulated box in ${dir}`);
    out(
      `box: node ${manifest.node}, gpu_role ${manifest.gpus.map((g) => g.role).join(', ')}; ` +
        `non-ledger draw ${NON_LEDGER_DRAW_MIB} MiB (display, voice sidecars)`,
    );

    Object.assign(ctx, { client, manifest, box, uiUrl: server?.uiUrl });
    await sequence(ctx as DemoContext);

    const checks = ctx.checks ?? [];
    const failed = checks.filter((c) => !c.ok);
    out(
      `\n${checks.length - failed.length} of ${checks.length} checks matched the field report` +
        `${failed.length ? `; FAILED: ${failed.map((c) => `(${c.step}) ${c.what}`).join(', ')}` : ''}`,
    );
    if (server?.uiUrl) {
      out(
        `workflows: ${ctx.workflowIds?.length ?? 0} runs, each linked under its command; all of them: ` +
          `${server.uiUrl}/namespaces/default/workflows?query=${encodeURIComponent(`TaskQueue = '${taskQueueFor(manifest.node)}'`)}`,
      );
    }
    if (opts.keep) {
      out('--keep: everything stays up; Ctrl-C stops it');
      await new Promise<void>((r) => {
        process.once('SIGINT', r);
        process.once('SIGTERM', r);
      });
    }
    return { ok: failed.length === 0 && checks.length > 0, checks, uiUrl: server?.uiUrl, workflowIds: ctx.workflowIds ?? [] };
  } finally {
    for (const stop of stops.reverse()) {
      try {
        await stop();
      } catch (err) {
        out(`cleanup: ${(err as Error).message}`);
      }
    }
  }
}

function randomToken(): string {
  return randomBytes(24).toString('hex');
}

/** The demo's worker logs only errors: the printed steps are the story. */
export function quietRuntime(): void {
  Runtime.install({ logger: new DefaultLogger('ERROR') });
}
