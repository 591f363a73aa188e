// gpures: the operator's CLI. This file registers every command and its options; each command
// (commands/<name>.ts) takes its parsed options and returns data, which main.ts prints as text or,
// with --json, as JSON only.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Command, Option } from 'commander';
import { BOUNDS, LOG_BOUNDS } from '../domain/bounds';
import { DEFAULT_ROUTER } from '../domain/promotion';
import type { CommandContext, Rendered } from './command';
import { DEFAULT_MANIFEST } from '../domain/manifest';
import type { ServeOpts } from './serve-operations';
import type { FleetOpts } from './fleet-target';
import { NODE_ANSWER_MS } from '../shared/node-answer';
import { HISTORIES_PER_REPLAY_PROCESS, MAX_REPLAY_PROCESSES } from '../audit/replay-processes';
import type { ReportOpts } from './commands/audit-report';
import type { DemoOpts } from './commands/demo';
import type { LogsOpts } from './commands/serves-logs';
import type { PromoteOpts } from './commands/router-promote';

// Each command's module is loaded when it runs: `--help` and `validate` need neither the Temporal
// client, Docker, fastify nor the worker (issue 15: the CLI spent 370 ms loading modules before any work).
const commands = {
  api: () => import('./commands/api'),
  auditExport: () => import('./commands/audit-export'),
  auditReplay: () => import('./commands/audit-replay'),
  auditReport: () => import('./commands/audit-report'),
  demo: () => import('./commands/demo'),
  ledger: () => import('./commands/ledger'),
  routerPromote: () => import('./commands/router-promote'),
  servesDown: () => import('./commands/serves-down'),
  servesLease: () => import('./commands/serves-lease'),
  servesLogs: () => import('./commands/serves-logs'),
  servesStatus: () => import('./commands/serves-status'),
  servesUp: () => import('./commands/serves-up'),
  validate: () => import('./commands/validate'),
  worker: () => import('./commands/worker'),
};

/** package.json's version, read where the build runs from (dist/src/cli/ -> the root); a file not there reads as unknown. */
function packageVersion(): string {
  try {
    return (JSON.parse(readFileSync(join(__dirname, '..', '..', '..', 'package.json'), 'utf8')) as { version?: string }).version ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

export function buildProgram(ctx: CommandContext, out: (r: Rendered, json: boolean) => void): Command {
  const program = new Command('gpures')
    .description('GPU reservations for a self-hosted LLM box, as durable Temporal workflows')
    .version(packageVersion(), '-V, --version', "gpures' version (package.json's)")
    .showHelpAfterError()
    .exitOverride();
  const manifestOpt = () => new Option('-m, --manifest <file>', `serves manifest (default: $GPURES_MANIFEST or ./${DEFAULT_MANIFEST})`);
  const jsonOpt = () => new Option('--json', 'print only the result, as JSON');
  // commander hands an action its arguments, its options, then the command itself.
  const run =
    (fn: (...a: never[]) => Promise<Rendered>) =>
    async (...args: unknown[]) => {
      const cmd = args[args.length - 1] as Command;
      await ctx.prepare?.();
      out(await (fn as (...a: unknown[]) => Promise<Rendered>)(...args), Boolean(cmd.opts<{ json?: boolean }>().json));
    };

  program
    .command('validate')
    .description('check a manifest offline: every problem as file: field: message')
    .argument('[file]', 'manifest to check (or --manifest FILE, as every other command takes it)')
    .addOption(manifestOpt())
    .option('--router <file>', 'also check a router config against it (default: $GPURES_ROUTER_CONFIG)')
    .addOption(jsonOpt())
    .action(
      run((file: string | undefined, opts: { router?: string; manifest?: string }) => commands.validate().then((c) => c.validate({ ...opts, file }, ctx))),
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
    .option('--lease <duration>', 'once running, bring it down again after this long (90s, 30m, 2h; at most 7d), restoring what it evicted')
    .addOption(jsonOpt())
    .action(run((names: string[], opts: ServeOpts & { lease?: string }) => commands.servesUp().then((c) => c.servesUp({ ...opts, names }, ctx))));
  serves
    .command('down')
    .description('stop gracefully, then release the reservation')
    .argument('<names...>')
    .addOption(manifestOpt())
    .option('--restore', 'then bring back the serves evicted for it (health, identity, guarded readmit)')
    .addOption(jsonOpt())
    .action(run((names: string[], opts: ServeOpts) => commands.servesDown().then((c) => c.servesDown({ ...opts, names }, ctx))));
  serves
    .command('extend')
    .description("move a running lease's expiry on: by DURATION past it (90s, 30m, 2h), or to --until TIME; at most 7d from now")
    .argument('<name>')
    .argument('[duration]')
    .option('--until <time>', 'the new expiry, e.g. 2026-12-01T18:00:00Z')
    .addOption(manifestOpt())
    .addOption(jsonOpt())
    // A negative DURATION (-5m) reaches servesExtend, which says why a lease is not shortened; it refuses any other unknown option itself.
    .allowUnknownOption()
    .action(
      run((name: string, duration: string | undefined, opts: { until?: string; manifest?: string }) =>
        commands.servesLease().then((c) => c.servesExtend({ ...opts, name, duration }, ctx)),
      ),
    );
  serves
    .command('release')
    .description('expire a running lease now: the serve goes down and what it evicted comes back (as serves down --restore)')
    .argument('<name>')
    .addOption(manifestOpt())
    .addOption(jsonOpt())
    .action(run((name: string, opts: { manifest?: string }) => commands.servesLease().then((c) => c.servesRelease({ ...opts, name }, ctx))));
  // Reading is safe from anywhere: --all and --node need no manifest. Operations are not: they take
  // the node's manifest, so the serve names are checked before anything starts (README, Fleet).
  const allOpt = () =>
    new Option('--all', `every node with a ledger running in Temporal, by node (no manifest); a node unanswered within ${NODE_ANSWER_MS / 1000} s: exit 4`);
  const nodeOpt = () => new Option('--node <name>', "that node's, found from Temporal (no manifest)");
  serves
    .command('status')
    .description('each declared serve with its ledger state; with --all or --node, no manifest: only what the ledgers and running operations know')
    .addOption(manifestOpt())
    .addOption(allOpt())
    .addOption(nodeOpt())
    .addOption(jsonOpt())
    .action(run((opts: FleetOpts) => commands.servesStatus().then((c) => c.servesStatus(opts, ctx))));
  serves
    .command('logs')
    .description("the serve's own output (stdout and stderr of its container, as docker logs), read from Docker or the simulated box where this runs")
    .argument('<name>')
    .option('--tail <lines>', `the last lines to print (default ${LOG_BOUNDS.tail.default}, at most ${LOG_BOUNDS.tail.max})`)
    .option('--since <duration>', 'only what was written in the last DURATION (90s, 30m, 2h, 1d; at most 30d)')
    .option('-f, --follow', 'then print each line as it comes, until Ctrl-C or the container stops or is removed')
    .addOption(manifestOpt())
    .addOption(new Option('--node <name>', "that node's container, without a manifest (the serve known from its ledgers or its containers)"))
    .addOption(jsonOpt())
    .action(run((name: string, opts: Omit<LogsOpts, 'name'>) => commands.servesLogs().then((c) => c.servesLogs({ ...opts, name }, ctx))));

  program
    .command('ledger')
    .description('the per-GPU ledger: capacity, reserve, committed, free, and each reservation')
    .addOption(manifestOpt())
    .addOption(allOpt())
    .addOption(nodeOpt())
    .addOption(jsonOpt())
    .action(run((opts: FleetOpts) => commands.ledger().then((c) => c.ledger(opts, ctx))));

  program
    .command('demo')
    .description("the field report's T013 sequence on a simulated box (no GPU, no Docker), through the real workflows")
    .option('--keep', 'leave the dev server, worker, router and serves up afterwards')
    .option('--no-ui', 'start the dev server without its web UI')
    .option('--manifest <file>', 'the box to simulate (default: examples/primary-node/serves.toml)')
    .option('--router-config <file>', 'its router config (default: examples/primary-node/router.toml)')
    .option('--sleep', "evict vision by vLLM's sleep mode and restore it by waking, its load and wake times set from vLLM's published figures")
    .option(
      '--temporal-address <host:port>',
      'run on this existing server instead (namespace, TLS and API key from the Temporal environment; search attributes registered when missing)',
    )
    .action(run((opts: DemoOpts) => commands.demo().then((c) => c.demo(opts, ctx))));

  program
    .command('api')
    .description('serve the acquisition API the router calls (POST /v1/acquisitions); token from $GPURES_API_TOKEN')
    .addOption(manifestOpt())
    .option('--host <addr>', 'address to bind', '127.0.0.1')
    .option('--port <port>', 'port to listen on', '8420')
    .option('--allow-non-loopback', 'allow --host beyond loopback (the API can change the box)')
    .action(run((opts: { manifest?: string; host: string; port: string; allowNonLoopback?: boolean }) => commands.api().then((c) => c.api(opts, ctx))));

  program
    .command('worker')
    .description("run this node's worker: the ledger, bring-up and bring-down workflows and their activities")
    .addOption(manifestOpt())
    .addOption(new Option('--gpus <mode>', 'pin GPUs by UUID through Docker device requests').choices(['auto', 'on', 'off']).default('auto'))
    .option('--metrics <host:port>', "where GET /metrics listens, or 'off' (default $GPURES_METRICS_ADDR, else 127.0.0.1:9475; docs/metrics.md)")
    .option('--allow-second-worker', "start even though another worker polls this node's task queue (a deliberate pair on one box)")
    .action(
      run((opts: { manifest?: string; gpus: 'auto' | 'on' | 'off'; metrics?: string; allowSecondWorker?: boolean }) =>
        commands.worker().then((c) => c.worker(opts, ctx)),
      ),
    );

  program
    .command('router')
    .description('promote a config and image to the router deployment in front of the serves')
    .command('promote')
    .description('promote a router config and image: validate-only run, backup, atomic write, reload or recreate, crash-loop verify; rolled back on failure')
    .requiredOption('--config <file>', 'the router config to promote')
    .requiredOption('--image <image>', 'the router image to validate it with and to run')
    .option('--profile <file>', 'promotion profile, recorded with the promotion')
    .option('--validate-only', 'stop after the validate-only run: nothing is changed')
    .option('--router <name>', "router deployment name, as the worker's GPURES_ROUTER_NAME", DEFAULT_ROUTER)
    .addOption(manifestOpt())
    .addOption(jsonOpt())
    .action(run((opts: PromoteOpts) => commands.routerPromote().then((c) => c.routerPromote(opts, ctx))));

  // audit (README "Audit"): workflow history as evidence. Export it as the JSON every Temporal
  // tool reads, replay it against the current workflow code (no server), render what it proves.
  const audit = program.command('audit').description('workflow history as evidence: export, replay against the current workflow code, report');
  audit
    .command('export')
    .description('write a workflow history as JSON (loadable by historyFromJSON and Worker.runReplayHistories); --query: every match into a directory')
    .argument('[workflowId]', 'the workflow to export (its latest run unless --run-id)')
    .option('-o, --output <path>', 'file to write (default: stdout); with --query, the directory (required)')
    .option('--run-id <id>', 'a particular run')
    .option('--query <query>', 'a visibility query, e.g. "WorkflowType = \'acquireWorkflow\'" or "TaskQueue = \'gpures.primary-node\'"')
    .addOption(jsonOpt())
    .action(
      run((workflowId: string | undefined, opts: { output?: string; runId?: string; query?: string }) =>
        commands.auditExport().then((c) => c.auditExport({ ...opts, workflowId }, ctx)),
      ),
    );
  audit
    .command('replay')
    .description('replay recorded histories against the current workflow code (no server); non-zero exit on any nondeterminism')
    .argument('<paths...>', 'history files, or directories of *.json')
    .option(
      '--processes <n>',
      `processes that replay: 1 is this one; 2 or more are replayer processes it starts and hands the histories to (default: one per ${HISTORIES_PER_REPLAY_PROCESS} histories, at most the cores and 4; at most ${MAX_REPLAY_PROCESSES})`,
    )
    .addOption(jsonOpt())
    .action(run((paths: string[], opts: { processes?: string }) => commands.auditReplay().then((c) => c.auditReplay({ paths, ...opts }, ctx))));
  audit
    .command('report')
    .description(
      'the evidence of one operation, from its history alone: steps, ledger before/after, victims and why, in-flight counts, identity, nvidia-smi, promotion',
    )
    .argument('<workflowIdOrFile>', 'a workflow id (fetched from Temporal) or a history file written by audit export')
    .option('--markdown', 'render an evidence file in Markdown')
    .option('--run-id <id>', 'a particular run (with a workflow id)')
    .option('--at <time>', "a ledger's history: what it held at this instant (ISO 8601), and which runs held and evicted each serve")
    .option('-o, --output <file>', 'write the text or Markdown there instead of stdout')
    .addOption(jsonOpt())
    .action(run((target: string, opts: Omit<ReportOpts, 'target'>) => commands.auditReport().then((c) => c.auditReport({ ...opts, target }, ctx))));

  return program;
}
