// gpures: the operator's CLI. One file registers every command; each command returns data that
// is printed as text or, with --json, as JSON only. Only this layer exits the process.
import { readFile } from 'node:fs/promises';
import { resolve as resolvePath } from 'node:path';
import { Command, Option } from 'commander';
import { formatLedger, totals } from '../domain/ledger';
import { formatPhysical, physicalTruth } from '../domain/physical';
import type { GpuReading } from '../activities/ports';
import type { LedgerState } from '../domain/ledger';
import { BOUNDS } from '../domain/bounds';
import { boundProblem } from '../domain/inputs';
import { parseManifest } from '../config/manifest';
import { findServe, isLoopback } from '../domain/manifest';
import { checkRouterAgainstManifest, parseRouterConfig, routerCheckErrors } from '../config/router-config';
import type { Manifest, ManifestIssue } from '../domain/types';
import { formatIssue } from '../domain/types';
import { ServiceError } from '@temporalio/client';
import type { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { taskQueueFor, workflowIds } from '../shared/messages';
import { DEFAULT_ROUTER } from '../shared/promotion';
import type { StepRecord } from '../shared/messages';
import { formatStep } from './follow';
import { connectClient } from './connection';
import { LedgerUnanswered } from './ledger-client';
import { ledgerSnapshots, serveAcquire, serveDown, serveUp } from './operations';
import type { OperationOutcome } from './operations';

/** Exit codes, documented in the README. */
export const EXIT = {
  ok: 0,
  failed: 1,
  badInput: 2,
  denied: 3,
  unreachable: 4,
  /** Ctrl-C: 128 + SIGINT, as a shell reports it. */
  interrupted: 130,
} as const;

class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number,
    readonly details?: unknown,
  ) {
    super(message);
  }
}

interface Rendered {
  /** What --json prints. */
  data: unknown;
  /** What a person reads. */
  text: string[];
  exitCode: number;
}

const DEFAULT_MANIFEST = 'serves.toml';

function manifestPath(opt: string | undefined): string {
  return opt ?? process.env['GPURES_MANIFEST'] ?? DEFAULT_MANIFEST;
}

async function readText(file: string, what: string): Promise<string> {
  try {
    return await readFile(file, 'utf8');
  } catch (err) {
    throw new CliError(`${file}: cannot read ${what}: ${(err as Error).message}`, EXIT.badInput);
  }
}

/**
 * The manifest, and with a router config ($GPURES_ROUTER_CONFIG or --router) the load-time rule
 * of field report T013: a tier backed by an evictable serve must declare model_identity, or it
 * could never be readmitted after an eviction. Checked before anything reaches the box.
 */
async function loadManifest(file: string, routerFile = process.env['GPURES_ROUTER_CONFIG']): Promise<{ manifest: Manifest; warnings: ManifestIssue[] }> {
  const result = parseManifest(await readText(file, 'manifest'), file);
  if (!result.ok) {
    throw new CliError(result.errors.map(formatIssue).join('\n'), EXIT.badInput, { errors: result.errors });
  }
  const warnings = [...result.warnings];
  if (routerFile) {
    const router = parseRouterConfig(await readText(routerFile, 'router config'), routerFile);
    if (!router.ok) throw new CliError(router.errors.map(formatIssue).join('\n'), EXIT.badInput, { errors: router.errors });
    const issues = checkRouterAgainstManifest(router.config, routerFile, result.manifest, file);
    const errors = routerCheckErrors(issues);
    if (errors.length) throw new CliError(errors.map(formatIssue).join('\n'), EXIT.badInput, { errors });
    warnings.push(...router.warnings, ...issues.filter((i) => i.severity !== 'error'));
  }
  for (const w of warnings) process.stderr.write(`warning: ${formatIssue(w)}\n`);
  return { manifest: result.manifest, warnings };
}

async function withClient<T>(fn: (client: Awaited<ReturnType<typeof connectClient>>['client']) => Promise<T>): Promise<T> {
  let conn: Awaited<ReturnType<typeof connectClient>>;
  try {
    conn = await connectClient();
  } catch (err) {
    throw new CliError(`cannot reach Temporal: ${(err as Error).message} (set TEMPORAL_ADDRESS or a temporal.toml profile)`, EXIT.unreachable);
  }
  try {
    return await fn(conn.client);
  } finally {
    await conn.connection.close();
  }
}

function checkServes(manifest: Manifest, file: string, names: string[]): void {
  const unknown = names.filter((n) => !findServe(manifest, n));
  if (unknown.length) {
    const known = manifest.serves.map((s) => s.name).join(', ');
    throw new CliError(unknown.map((n) => `${file}: no serve named '${n}' (serves: ${known})`).join('\n'), EXIT.badInput);
  }
}

/** Failures where nothing was changed on the box: the ledger said no, or the serve is busy. */
const REFUSALS = ['AdmissionDenied', 'ServeBusy'];

function outcomeExit(outcomes: OperationOutcome<unknown>[]): number {
  if (outcomes.some((o) => !o.ok && !REFUSALS.includes(o.failureType))) return EXIT.failed;
  if (outcomes.some((o) => !o.ok)) return EXIT.denied;
  return EXIT.ok;
}

function renderOutcome(o: OperationOutcome<{ message: string; ledgerAfter: string[] }>): string[] {
  return o.ok ? [o.result.message] : [`${o.message} [${o.failureType}; workflow ${o.workflowId}]`];
}

interface ServeOpts {
  manifest?: string;
  evict?: boolean;
  force?: boolean;
  drainTimeout?: string;
  restore?: boolean;
}

async function serveOperation(verb: 'up' | 'down', names: string[], opts: ServeOpts): Promise<Rendered> {
  const file = manifestPath(opts.manifest);
  const { manifest } = await loadManifest(file);
  checkServes(manifest, file, names);
  return withClient(async (client) => {
    await warnWithoutWorker(client, manifest.node);
    const outcomes: OperationOutcome<{ message: string; ledgerAfter: string[] }>[] = [];
    // Progress goes to stderr as each step completes: stdout stays the result.
    const printStep = (step: StepRecord) => process.stderr.write(`${formatStep(step)}\n`);
    // Ctrl-C stops following, not the operation: it is a workflow, and goes on without this process.
    let current: { name: string; workflowId: string } | undefined;
    const onInterrupt = () => {
      if (current) {
        process.stderr.write(
          `\ninterrupted: serves ${verb} ${current.name} goes on in Temporal (workflow ${current.workflowId}); ` +
            `\`gpures serves status\` shows it; cancel it from the UI or with \`temporal workflow cancel --workflow-id ${current.workflowId}\`` +
            `${names.length > 1 ? `; not started: ${names.slice(names.indexOf(current.name) + 1).join(', ') || 'none'}` : ''}\n`,
        );
      }
      process.exit(EXIT.interrupted);
    };
    process.once('SIGINT', onInterrupt);
    // In the order given, as an operator reads the command line; one failure does not stop the rest.
    for (const name of names) {
      const node = manifest.node;
      const [workflowId, operate] =
        verb === 'down'
          ? [workflowIds.bringDown(node, name), () => serveDown(client, node, name, { restore: opts.restore, onStep: printStep })]
          : opts.evict
            ? [
                workflowIds.acquire(node, name),
                () => serveAcquire(client, node, { serve: name, evict: true, force: Boolean(opts.force), drainTimeoutS: opts.drainTimeout ? Number(opts.drainTimeout) : undefined }, printStep),
              ]
            : [workflowIds.bringUp(node, name), () => serveUp(client, node, name, printStep)];
      current = { name, workflowId };
      const o: OperationOutcome<{ message: string; ledgerAfter: string[] }> = await operate();
      outcomes.push(o);
      process.stderr.write(`${renderOutcome(o).join('\n')}\n`);
    }
    process.removeListener('SIGINT', onInterrupt);
    const ledgers = await readLedgers(client, manifest);
    return { data: { outcomes, ledgers: ledgers.map(ledgerJson) }, text: ledgers.flatMap(formatLedger), exitCode: outcomeExit(outcomes) };
  });
}

/** nvidia-smi on this box, if it has one: the ledger is printed either way. */
async function readDevices(): Promise<{ ok: true; gpus: GpuReading[] } | { ok: false; error: string }> {
  const { NvidiaSmi } = await import('../activities/nvidia-smi');
  try {
    return { ok: true, gpus: await new NvidiaSmi({ binary: process.env['GPURES_NVIDIA_SMI'] ?? 'nvidia-smi' }).readGpus() };
  } catch (err) {
    return { ok: false, error: `not available (${(err as Error).message})` };
  }
}

/**
 * How many workflow pollers the server saw on the node's task queue lately (its poller history
 * keeps a few minutes); undefined when it would not say. Zero means no worker can answer.
 */
async function workflowPollers(client: Client, node: string): Promise<number | undefined> {
  try {
    const { pollers } = await client.workflowService.describeTaskQueue({
      namespace: client.options.namespace,
      taskQueue: { name: taskQueueFor(node) },
      taskQueueType: temporal.api.enums.v1.TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
    });
    return pollers?.length ?? 0;
  } catch {
    // Only advice: the call that matters reports for itself.
    return undefined;
  }
}

/**
 * Workflows wait durably for a worker; an operator at a terminal should know one is missing
 * rather than watch a command that seems to hang.
 */
async function warnWithoutWorker(client: Client, node: string): Promise<void> {
  if ((await workflowPollers(client, node)) === 0) {
    process.stderr.write(`warning: no worker has polled task queue ${taskQueueFor(node)} recently; the operation waits until \`gpures worker\` runs for node '${node}'\n`);
  }
}

/** Operations under way on the node, by serve: what `serves status` shows beside the ledger. */
async function runningOperations(client: Client, node: string): Promise<Map<string, { workflowId: string; since: string }>> {
  const out = new Map<string, { workflowId: string; since: string }>();
  try {
    const query = `TaskQueue = '${taskQueueFor(node)}' AND ExecutionStatus = 'Running' AND WorkflowType != 'ledgerWorkflow'`;
    for await (const wf of client.workflow.list({ query })) {
      const serve = /^(?:serves-up|serves-down|acquire)\/[^/]+\/(.+)$/.exec(wf.workflowId)?.[1];
      if (serve) out.set(serve, { workflowId: wf.workflowId, since: wf.startTime.toISOString() });
    }
  } catch {
    // Visibility is advice here; the ledger is the answer.
  }
  return out;
}

/** A worker that has only just started may not have polled yet: look again for about a second. */
const POLLER_CHECKS = 3;
const POLLER_CHECK_INTERVAL_MS = 500;

/**
 * The ledger answers only through a running worker: say so in one line (exit 4) instead of a
 * stack trace. With no poller on the task queue that is known at once; a worker that died in
 * the last few minutes still counts as a poller, and then the query's own deadline tells.
 */
async function readLedgers(client: Client, manifest: Manifest): Promise<LedgerState[]> {
  const node = manifest.node;
  for (let check = 1; ; check++) {
    if ((await workflowPollers(client, node)) !== 0) break;
    if (check === POLLER_CHECKS) {
      throw new CliError(
        `node '${node}': no worker polls task queue ${taskQueueFor(node)}, so nothing can answer its ledger; start \`gpures worker\` for node '${node}'`,
        EXIT.unreachable,
      );
    }
    await new Promise((r) => setTimeout(r, POLLER_CHECK_INTERVAL_MS));
  }
  try {
    return await ledgerSnapshots(client, manifest);
  } catch (err) {
    if (err instanceof LedgerUnanswered) throw new CliError(err.message, EXIT.unreachable);
    if (err instanceof ServiceError) {
      throw new CliError(
        `node '${node}': the ledger did not answer (${err.message}); is \`gpures worker\` running for it (task queue ${taskQueueFor(node)})?`,
        EXIT.unreachable,
      );
    }
    throw err;
  }
}

function ledgerJson(l: LedgerState) {
  return { ...l, ...totals(l) };
}

function statusLines(manifest: Manifest, ledgers: LedgerState[]): { serve: string; gpuRole: string; class: string; vramMib: number; state: string }[] {
  return manifest.serves.map((s) => {
    const r = ledgers.find((l) => l.gpuRole === s.gpuRole)?.reservations.find((x) => x.serve === s.name);
    return { serve: s.name, gpuRole: s.gpuRole, class: s.class, vramMib: s.vramMib, state: r ? (r.phase === 'admitted' ? 'starting' : r.phase) : 'stopped' };
  });
}

export function buildProgram(out: (r: Rendered, json: boolean) => void): Command {
  const program = new Command('gpures')
    .description('GPU reservations for a self-hosted LLM box, as durable Temporal workflows')
    .showHelpAfterError()
    .exitOverride();
  const manifestOpt = () => new Option('-m, --manifest <file>', `serves manifest (default: $GPURES_MANIFEST or ./${DEFAULT_MANIFEST})`);
  const jsonOpt = () => new Option('--json', 'print only the result, as JSON');
  const run = (fn: (...a: never[]) => Promise<Rendered>) => async (...args: unknown[]) => {
    const cmd = args[args.length - 1] as Command;
    out(await (fn as (...a: unknown[]) => Promise<Rendered>)(...args), Boolean(cmd.opts<{ json?: boolean }>().json));
  };

  program
    .command('validate')
    .description('check a manifest offline: every problem as file: field: message')
    .argument('[file]', 'manifest to check')
    .option('--router <file>', 'also check a router config against it (default: $GPURES_ROUTER_CONFIG)')
    .addOption(jsonOpt())
    .action(
      run(async (file: string | undefined, opts: { router?: string }) => {
        const path = manifestPath(file);
        const { manifest, warnings } = await loadManifest(path, opts.router ?? process.env['GPURES_ROUTER_CONFIG']);
        return {
          data: { file: path, ok: true, node: manifest.node, gpus: manifest.gpus.length, serves: manifest.serves.length, warnings },
          text: [`${path}: ok (node ${manifest.node}, ${manifest.gpus.length} gpu, ${manifest.serves.length} serves)`],
          exitCode: EXIT.ok,
        };
      }),
    );

  const serves = program.command('serves').description('bring serves up or down through the ledger');
  serves
    .command('up')
    .description('admit, start, wait healthy, verify identity; denied honestly when it does not fit')
    .argument('<names...>')
    .addOption(manifestOpt())
    .option('--evict', 'when it does not fit, evict evictable serves on the same GPU (quiesce, drain, stop)')
    .option('--force', 'with --evict: stop victims even if their drain times out')
    .option('--drain-timeout <seconds>', `with --evict: how long each victim may drain (default 120, at most ${BOUNDS.drainTimeoutS.max})`)
    .addOption(jsonOpt())
    .action(
      run((names: string[], opts: ServeOpts) => {
        if (opts.force && !opts.evict) throw new CliError('--force applies only with --evict', EXIT.badInput);
        const drainProblem = opts.drainTimeout === undefined ? undefined : boundProblem('drainTimeoutS', /^\d+$/.test(opts.drainTimeout) ? Number(opts.drainTimeout) : NaN);
        if (drainProblem) throw new CliError(`--drain-timeout: ${drainProblem} (got '${opts.drainTimeout}')`, EXIT.badInput);
        return serveOperation('up', names, opts);
      }),
    );
  serves
    .command('down')
    .description('stop gracefully, then release the reservation')
    .argument('<names...>')
    .addOption(manifestOpt())
    .option('--restore', 'then bring back the serves evicted for it (health, identity, guarded readmit)')
    .addOption(jsonOpt())
    .action(run((names: string[], opts: ServeOpts) => serveOperation('down', names, opts)));
  serves
    .command('status')
    .description("each declared serve with its ledger state")
    .addOption(manifestOpt())
    .addOption(jsonOpt())
    .action(
      run(async (opts: { manifest?: string }) => {
        const { manifest } = await loadManifest(manifestPath(opts.manifest));
        const [ledgers, running] = await withClient((client) => Promise.all([readLedgers(client, manifest), runningOperations(client, manifest.node)]));
        const rows = statusLines(manifest, ledgers).map((r) => ({ ...r, operation: running.get(r.serve) ?? null }));
        return {
          data: rows,
          text: rows.map(
            (r) =>
              `${r.serve.padEnd(16)} ${String(r.vramMib).padStart(6)} MiB  ${r.class.padEnd(9)}  ${r.gpuRole.padEnd(10)}  ${r.state}` +
              (r.operation ? `  (${r.operation.workflowId} running since ${r.operation.since})` : ''),
          ),
          exitCode: EXIT.ok,
        };
      }),
    );

  program
    .command('ledger')
    .description('the per-GPU ledger: capacity, reserve, committed, free, and each reservation')
    .addOption(manifestOpt())
    .addOption(jsonOpt())
    .action(
      run(async (opts: { manifest?: string }) => {
        const { manifest } = await loadManifest(manifestPath(opts.manifest));
        const ledgers = await withClient((client) => readLedgers(client, manifest));
        const readings = await readDevices();
        // The ledger's own lines stay exactly the field report's shape; a missing probe is a note.
        if (!readings.ok) process.stderr.write(`nvidia-smi: ${readings.error}\n`);
        const rows = ledgers.map((l) => {
          const reading = readings.ok ? readings.gpus.find((g) => g.uuid === l.gpuUuid) : undefined;
          return { ledger: l, physical: reading ? physicalTruth(l, reading) : undefined };
        });
        return {
          data: rows.map((r) => ({ ...ledgerJson(r.ledger), physical: r.physical ?? null })),
          text: rows.flatMap((r) => [
            ...formatLedger(r.ledger),
            ...(r.physical ? formatPhysical(r.physical) : []),
          ]),
          exitCode: EXIT.ok,
        };
      }),
    );

  program
    .command('demo')
    .description("the field report's T013 sequence on a simulated box (no GPU, no Docker), through the real workflows")
    .option('--keep', 'leave the dev server, worker, router and serves up afterwards')
    .option('--no-ui', 'start the dev server without its web UI')
    .option('--manifest <file>', 'the box to simulate (default: examples/primary-node/serves.toml)')
    .option('--router-config <file>', 'its router config (default: examples/primary-node/router.toml)')
    .action(
      run(async (opts: { keep?: boolean; ui: boolean; manifest?: string; routerConfig?: string }) => {
        const { runDemo, quietRuntime } = await import('../demo/demo');
        quietRuntime();
        const result = await runDemo({ keep: opts.keep, ui: opts.ui, manifestPath: opts.manifest, routerConfigPath: opts.routerConfig });
        return { data: result, text: [], exitCode: result.ok ? EXIT.ok : EXIT.failed };
      }),
    );

  program
    .command('api')
    .description('serve the acquisition API the router calls (POST /v1/acquisitions); token from $GPURES_API_TOKEN')
    .addOption(manifestOpt())
    .option('--host <addr>', 'address to bind', '127.0.0.1')
    .option('--port <port>', 'port to listen on', '8420')
    .option('--allow-non-loopback', 'allow --host beyond loopback (the API can change the box)')
    .action(
      run(async (opts: { manifest?: string; host: string; port: string; allowNonLoopback?: boolean }) => {
        if (!isLoopback(opts.host) && !opts.allowNonLoopback) {
          throw new CliError(`--host ${opts.host} is not a loopback address: the API can evict serves; add --allow-non-loopback to expose it beyond this host`, EXIT.badInput);
        }
        const port = Number(opts.port);
        if (!/^\d+$/.test(opts.port) || port > 65535) throw new CliError(`--port: an integer in 0..65535 (got '${opts.port}')`, EXIT.badInput);
        const file = manifestPath(opts.manifest);
        const { manifest } = await loadManifest(file);
        const { apiTokenProblem, boundAddresses, buildApi } = await import('./api');
        const token = process.env['GPURES_API_TOKEN'] ?? '';
        const problem = apiTokenProblem(token);
        if (problem) throw new CliError(problem, EXIT.badInput);
        const conn = await connectClient().catch((err: Error) => {
          throw new CliError(`cannot reach Temporal: ${err.message}`, EXIT.unreachable);
        });
        const app = buildApi({ client: conn.client, manifest, manifestFile: file, token });
        await app.listen({ host: opts.host, port });
        process.stderr.write(`acquisition API for node '${manifest.node}' listening on ${boundAddresses(app).join(', ')}\n`);
        await new Promise<void>((resolve) => {
          process.once('SIGINT', resolve);
          process.once('SIGTERM', resolve);
        });
        await app.close();
        await conn.connection.close();
        return { data: { stopped: true }, text: ['api stopped'], exitCode: EXIT.ok };
      }),
    );

  program
    .command('worker')
    .description("run this node's worker: the ledger, bring-up and bring-down workflows and their activities")
    .addOption(manifestOpt())
    .addOption(new Option('--gpus <mode>', 'pin GPUs by UUID through Docker device requests').choices(['auto', 'on', 'off']).default('auto'))
    .action(
      run(async (opts: { manifest?: string; gpus: 'auto' | 'on' | 'off' }) => {
        const file = manifestPath(opts.manifest);
        const { manifest } = await loadManifest(file);
        // Loaded lazily: the worker pulls in webpack and the native bridge, which other commands never need.
        const { runWorker } = await import('../worker/main');
        await runWorker({ manifestPath: file, node: manifest.node, gpus: opts.gpus });
        return { data: { stopped: true }, text: ['worker stopped'], exitCode: EXIT.ok };
      }),
    );

  // router promote (docs/promotion.md): one promotion at a time per router; a second is refused.
  program
    .command('router')
    .description('the router in front of the serves')
    .command('promote')
    .description('promote a router config and image: validate-only run, backup, atomic write, reload or recreate, crash-loop verify; rolled back on failure')
    .requiredOption('--config <file>', 'the router config to promote')
    .requiredOption('--image <image>', 'the router image to validate it with and to run')
    .option('--profile <file>', 'promotion profile, recorded with the promotion')
    .option('--validate-only', 'stop after the validate-only run: nothing is changed')
    .option('--router <name>', "router deployment name, as the worker's GPURES_ROUTER_NAME", DEFAULT_ROUTER)
    .addOption(manifestOpt())
    .addOption(jsonOpt())
    .action(
      run(async (opts: { config: string; image: string; profile?: string; validateOnly?: boolean; router: string; manifest?: string }) => {
        const { manifest } = await loadManifest(manifestPath(opts.manifest));
        const content = await readText(opts.config, 'router config');
        // A candidate in our router format must keep the T013 rule: a promotion must not strand an
        // evictable tier. Another router's format is the target image's validate-only run to judge.
        const candidate = parseRouterConfig(content, opts.config);
        if (candidate.ok) {
          const ruleErrors = routerCheckErrors(checkRouterAgainstManifest(candidate.config, opts.config, manifest, manifestPath(opts.manifest)));
          if (ruleErrors.length) throw new CliError(ruleErrors.map(formatIssue).join('\n'), EXIT.badInput, { errors: ruleErrors });
        }
        const profile = opts.profile === undefined ? undefined : resolvePath(opts.profile);
        if (profile) await readFile(profile).catch((err: Error) => {
          throw new CliError(`${profile}: cannot read promotion profile: ${err.message}`, EXIT.badInput);
        });
        const { followPromotion, formatStep, PromotionRefused, startPromotion } = await import('./promote');
        const input = { router: opts.router, config: { content }, image: opts.image, ...(profile ? { profile } : {}), ...(opts.validateOnly ? { validateOnly: true } : {}) };
        return withClient(async (client) => {
          const handle = await startPromotion(client, manifest.node, input).catch((err: unknown) => {
            if (err instanceof PromotionRefused) throw new CliError(err.message, EXIT.denied, { workflowId: err.workflowId, runId: err.runningRunId, step: err.runningStep });
            throw err;
          });
          process.stderr.write(`router promote ${opts.router}: workflow ${handle.workflowId} (run ${handle.firstExecutionRunId})\n`);
          const outcome = await followPromotion(handle, (s) => process.stderr.write(`${formatStep(s)}\n`));
          return outcome.ok
            ? { data: outcome, text: [outcome.result.message], exitCode: EXIT.ok }
            : { data: outcome, text: [`${outcome.message} [${outcome.failureType}; workflow ${outcome.workflowId}]`], exitCode: EXIT.failed };
        });
      }),
    );

  // audit (README "Audit"): workflow history as evidence. Export it as the JSON every Temporal
  // tool reads, replay it against the current workflow code (no server), render what it proves.
  const audit = program.command('audit').description('workflow history as evidence: export, replay against the current workflow code, report');
  // fetchHistory lets the raw gRPC error through: status 5 is NOT_FOUND.
  const notFound = (err: unknown): boolean =>
    (err instanceof Error && err.name === 'WorkflowNotFoundError') ||
    (err instanceof ServiceError && /not found/i.test(err.message)) ||
    (err instanceof Error && (err as { code?: unknown }).code === 5);
  audit
    .command('export')
    .description('write a workflow history as JSON (loadable by historyFromJSON and Worker.runReplayHistories); --query: every match into a directory')
    .argument('[workflowId]', 'the workflow to export (its latest run unless --run-id)')
    .option('-o, --output <path>', 'file to write (default: stdout); with --query, the directory (required)')
    .option('--run-id <id>', 'a particular run')
    .option('--query <query>', "a visibility query, e.g. \"WorkflowType = 'acquireWorkflow'\" or \"TaskQueue = 'gpures.primary-node'\"")
    .addOption(jsonOpt())
    .action(
      run(async (workflowId: string | undefined, opts: { output?: string; runId?: string; query?: string }) => {
        if (opts.query !== undefined && workflowId !== undefined) throw new CliError('audit export: give a workflow id or --query, not both', EXIT.badInput);
        if (opts.query === undefined && workflowId === undefined) throw new CliError('audit export: a workflow id or --query is required', EXIT.badInput);
        if (opts.query !== undefined && !opts.output) throw new CliError('audit export --query: -o DIR is required (one file per workflow)', EXIT.badInput);
        const { exportQuery, exportWorkflow } = await import('../audit/export');
        return withClient(async (client) => {
          if (opts.query !== undefined) {
            const query = opts.query;
            const dir = resolvePath(opts.output ?? '.');
            const exported = await exportQuery(client, query, dir).catch((err: unknown) => {
              if (err instanceof ServiceError && /invalid|syntax|unknown|not supported/i.test(err.message)) throw new CliError(`audit export --query: ${err.message}`, EXIT.badInput);
              throw err;
            });
            return {
              data: { query, dir, exported },
              text: [...exported.map((e) => `${e.file ?? '?'}: ${e.workflowId} (${e.workflowType}, ${e.status ?? '?'}, ${e.events} events)`), `${exported.length} workflow(s) exported to ${dir}`],
              exitCode: EXIT.ok,
            };
          }
          const id = workflowId ?? '';
          const file = opts.output ? resolvePath(opts.output) : undefined;
          const { exported, history } = await exportWorkflow(client, id, { runId: opts.runId, file }).catch((err: unknown) => {
            if (notFound(err)) throw new CliError(`audit export: no workflow '${id}'${opts.runId ? ` run ${opts.runId}` : ''} in this namespace`, EXIT.badInput);
            throw err;
          });
          // Without -o the history itself is the output, --json or not.
          if (!file) return { data: history, text: [JSON.stringify(history, null, 2)], exitCode: EXIT.ok };
          return { data: exported, text: [`${file}: ${exported.workflowId} (${exported.workflowType}, ${exported.events} events)`], exitCode: EXIT.ok };
        });
      }),
    );
  audit
    .command('replay')
    .description('replay recorded histories against the current workflow code (no server); non-zero exit on any nondeterminism')
    .argument('<paths...>', 'history files, or directories of *.json')
    .addOption(jsonOpt())
    .action(
      run(async (paths: string[]) => {
        const { HistoryFileError } = await import('../audit/history');
        const { formatReplayOutcome, quietReplayRuntime, replayHistoryFiles } = await import('../audit/replay');
        quietReplayRuntime();
        const outcomes = await replayHistoryFiles(paths).catch((err: unknown) => {
          if (err instanceof HistoryFileError) throw new CliError(err.message, EXIT.badInput);
          throw err;
        });
        if (!outcomes.length) throw new CliError(`audit replay: no *.json history in ${paths.join(', ')}`, EXIT.badInput);
        const failed = outcomes.filter((o) => !o.ok);
        const exitCode = failed.some((o) => o.errorName !== 'HistoryFileError') ? EXIT.failed : failed.length ? EXIT.badInput : EXIT.ok;
        return { data: { ok: failed.length === 0, outcomes }, text: outcomes.map(formatReplayOutcome), exitCode };
      }),
    );
  audit
    .command('report')
    .description('the evidence of one operation, from its history alone: steps, ledger before/after, victims and why, in-flight counts, identity, nvidia-smi, promotion')
    .argument('<workflowIdOrFile>', 'a workflow id (fetched from Temporal) or a history file written by audit export')
    .option('--markdown', 'render an evidence file in Markdown')
    .option('--run-id <id>', 'a particular run (with a workflow id)')
    .option('-o, --output <file>', 'write the text or Markdown there instead of stdout')
    .addOption(jsonOpt())
    .action(
      run(async (target: string, opts: { markdown?: boolean; runId?: string; output?: string; json?: boolean }) => {
        if (opts.markdown && opts.json) throw new CliError('audit report: --markdown or --json, not both', EXIT.badInput);
        const { existsSync, statSync, writeFileSync } = await import('node:fs');
        const { HistoryFileError, idFromFileName, readHistoryFile } = await import('../audit/history');
        const { buildReport, renderMarkdown, renderText } = await import('../audit/report');
        let history;
        let fallbackId = target;
        if (existsSync(target) && statSync(target).isFile()) {
          try {
            history = readHistoryFile(target);
          } catch (err) {
            if (err instanceof HistoryFileError) throw new CliError(err.message, EXIT.badInput);
            throw err;
          }
          fallbackId = idFromFileName(target);
        } else {
          const { fetchHistoryJson } = await import('../audit/export');
          history = await withClient((client) =>
            fetchHistoryJson(client, target, opts.runId).catch((err: unknown) => {
              if (notFound(err)) throw new CliError(`audit report: '${target}' is neither a history file nor a workflow in this namespace`, EXIT.badInput);
              throw err;
            }),
          );
        }
        const report = buildReport(history, fallbackId);
        const lines = opts.markdown ? renderMarkdown(report) : renderText(report);
        if (opts.output) {
          const file = resolvePath(opts.output);
          writeFileSync(file, opts.json ? `${JSON.stringify(report, null, 2)}\n` : `${lines.join('\n')}\n`);
          return { data: { file, workflowId: report.workflow.workflowId }, text: [`${file}: ${report.operation} (${report.workflow.workflowId})`], exitCode: EXIT.ok };
        }
        return { data: report, text: lines, exitCode: EXIT.ok };
      }),
    );

  return program;
}

export async function main(argv: string[]): Promise<number> {
  let json = argv.includes('--json');
  let exitCode: number = EXIT.ok;
  const program = buildProgram((r, j) => {
    json = j;
    exitCode = r.exitCode;
    process.stdout.write(j ? `${JSON.stringify(r.data, null, 2)}\n` : r.text.map((l) => `${l}\n`).join(''));
  });
  try {
    await program.parseAsync(argv);
    return exitCode;
  } catch (err) {
    if (err instanceof CliError) {
      if (json) process.stdout.write(`${JSON.stringify({ error: { message: err.message, exitCode: err.exitCode, details: err.details } }, null, 2)}\n`);
      else process.stderr.write(`${err.message}\n`);
      return err.exitCode;
    }
    // commander's own usage errors and --help
    if (err instanceof Error && 'exitCode' in err && typeof (err as { exitCode: unknown }).exitCode === 'number') {
      const code = (err as { code?: string }).code;
      return code === 'commander.helpDisplayed' || code === 'commander.version' || code === 'commander.help' ? EXIT.ok : EXIT.badInput;
    }
    // Temporal refusing or dropping a call mid-command: the same audience as "unreachable".
    const exitCode = err instanceof ServiceError ? EXIT.unreachable : EXIT.failed;
    const message = err instanceof ServiceError ? `Temporal refused the call: ${err.message}` : `gpures: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`;
    if (json) process.stdout.write(`${JSON.stringify({ error: { message: err instanceof Error ? err.message : String(err), exitCode } }, null, 2)}\n`);
    else process.stderr.write(`${message}\n`);
    return exitCode;
  }
}

if (require.main === module) {
  main(process.argv).then(
    (code) => process.exit(code),
    (err: unknown) => {
      process.stderr.write(`gpures: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exit(EXIT.failed);
    },
  );
}
