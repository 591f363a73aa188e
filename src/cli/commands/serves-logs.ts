// gpures serves logs NAME: the serve's own output (vLLM's start-up, its errors), as `docker logs`
// prints a container's, without the operator knowing the container's name or Docker's socket.
//
// Read here, from the box, not through the worker: the command runs where `docker logs` would (on
// the node, or with DOCKER_HOST pointing at it), so reading needs exactly the access Docker's
// socket grants (root or the docker group) and no token or listener of ours. The worker's loopback
// endpoint answers any local user, and a serve's log holds what a token should guard (vLLM prints
// its arguments, and with request logging the prompts). It also reads when the worker is down,
// which is when the question is asked. Nothing crosses Temporal: no line reaches a history.
// The ledger is asked only when there is no container, to say why (down, evicted, asleep).
import { statSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ContainerLogs, ContainerRuntime, ContainerState } from '../../adapters/containers/port';
import { FailedStartFiles } from '../../adapters/failed-starts/files';
import { LOG_BOUNDS, NAME_PATTERN, NAME_RULE } from '../../domain/bounds';
import type { LedgerState } from '../../domain/ledger';
import { phaseLabel } from '../../domain/ledger';
import { droppedNote, failedStartNote, LastBytes, LogLines, logsOptions } from '../../domain/logs';
import type { FailedStartLog, LogsInput, LogsOptions } from '../../domain/logs';
import { findServe } from '../../domain/manifest';
import { containerName, LABEL } from '../../domain/serve';
import type { Manifest, ServeSpec } from '../../domain/types';
import { NODE_ANSWER_MS, workflowIds } from '../../shared/messages';
import type { CommandContext, Rendered } from '../command';
import { CliError, EXIT } from '../exit-codes';
import { fleetTarget } from '../fleet-target';
import { checkServes, loadManifest, manifestPath } from '../manifest';

export interface LogsOpts extends LogsInput {
  name: string;
  manifest?: string;
  node?: string;
  follow?: boolean;
  json?: boolean;
}

/** Where the containers are read: Docker (DOCKER_HOST) or the simulated box's directory (GPURES_SIM_BOX). */
interface Box {
  runtime: ContainerLogs & Pick<ContainerRuntime, 'list'>;
  /** `Docker at unix:///…` or `the simulated box at DIR`, for the operator's lines. */
  where: string;
}

async function openBox(ctx: CommandContext): Promise<Box> {
  const simBox = ctx.env.simBox;
  if (simBox !== undefined) {
    // SimRuntime makes a directory that is missing: a reader must not.
    if (!statSync(simBox, { throwIfNoEntry: false })?.isDirectory()) throw new CliError(`GPURES_SIM_BOX: no directory ${simBox}`, EXIT.badInput);
    const { SimRuntime } = await import('../../sim/runtime');
    const runtime = new SimRuntime({ stateDir: simBox });
    return { runtime, where: `the simulated box at ${runtime.stateDir} (GPURES_SIM_BOX)` };
  }
  const [{ default: Docker }, { DockerRuntime }, { DockerUnreachable, dockerHost, reachDocker }] = await Promise.all([
    import('dockerode'),
    import('../../adapters/containers/docker'),
    import('../../adapters/containers/docker-reach'),
  ]);
  const docker = new Docker();
  try {
    await reachDocker(docker);
  } catch (err) {
    if (err instanceof DockerUnreachable) throw new CliError(err.message, EXIT.unreachable);
    throw err;
  }
  return { runtime: new DockerRuntime(docker, { gpus: 'off' }), where: `Docker at ${dockerHost()} (DOCKER_HOST)` };
}

/** The serves of the node the box has containers of, running or not. */
async function servesOnBox(box: Box, node: string): Promise<string[]> {
  return (await box.runtime.list({ [LABEL.node]: node })).map((c) => c.labels[LABEL.serve] ?? '?');
}

/** The ledgers' words for the serve, or undefined when none of them holds it. */
function heldAs(ledgers: readonly LedgerState[], serve: string): string | undefined {
  for (const l of ledgers) {
    const r = l.reservations.find((x) => x.serve === serve);
    if (r) return `the ledger of gpu_role '${l.gpuRole}' holds it ${phaseLabel(l, r)}`;
  }
  return undefined;
}

/** A ledger's read that failed: the reason, in one line. */
function unread(err: unknown): string {
  return `what its ledger holds could not be read: ${err instanceof Error ? err.message : String(err)}`;
}

/** Why a declared serve has no container, as its GPU's ledger says (started nothing). */
async function declaredState(manifest: Manifest, serve: ServeSpec): Promise<string> {
  const [{ withClient }, { requirePoller }, { LedgerClient }] = await Promise.all([
    import('../temporal'),
    import('../../client/node-ledgers'),
    import('../../adapters/ledger/ledger-client'),
  ]);
  try {
    return await withClient(async (client) => {
      await requirePoller(client, manifest.node);
      const l = await new LedgerClient(client).running(manifest.node, serve.gpuRole, NODE_ANSWER_MS);
      if (!l) return `down: no ledger of gpu_role '${serve.gpuRole}' runs (no serve was brought up on it yet)`;
      return heldAs([l], serve.name) ?? downLine(l.gpuRole, manifest.node, serve.name);
    });
  } catch (err) {
    return unread(err);
  }
}

function downLine(gpuRole: string, node: string, serve: string): string {
  return (
    `down: the ledger of gpu_role '${gpuRole}' holds nothing for it (not brought up, or brought down; a start that failed ` +
    `removed its container, and \`gpures audit report ${workflowIds.bringUp(node, serve)}\`, or \`gpures audit report ${workflowIds.acquire(node, serve)}\` for one with --evict or --lease, has the failure)`
  );
}

/** --node without a manifest: the serve is known when the node's ledgers hold it; undefined when they do not. */
async function nodeState(node: string, serve: string): Promise<{ state: string | undefined; ledgerServes: string[] }> {
  const [{ withClient }, { ledgerNodes, readNodeLedgers }] = await Promise.all([import('../temporal'), import('../../client/fleet')]);
  try {
    return await withClient(async (client) => {
      const roles = (await ledgerNodes(client, node)).get(node) ?? [];
      const read = roles.length ? await readNodeLedgers(client, node, roles) : undefined;
      if (read && !read.answered) return { state: unread(new Error(read.error)), ledgerServes: [] };
      const ledgers = read?.ledgers ?? [];
      return { state: heldAs(ledgers, serve), ledgerServes: ledgers.flatMap((l) => l.reservations.map((r) => r.serve)) };
    });
  } catch (err) {
    return { state: unread(err), ledgerServes: [] };
  }
}

/** The serve the command reads: its node, its spec where a manifest declares it (for redaction), and why it has no container. */
interface Target {
  node: string;
  serve?: ServeSpec;
  whyNoContainer(box: Box): Promise<string>;
}

async function target(input: LogsOpts, ctx: CommandContext): Promise<Target> {
  const node = fleetTarget({ node: input.node, manifest: input.manifest });
  if (node) {
    // No manifest checks the name: it becomes part of a container name, so it must be one a manifest could declare.
    if (!NAME_PATTERN.test(input.name)) throw new CliError(`serve name: ${NAME_RULE} (got '${input.name}')`, EXIT.badInput);
    return {
      node,
      async whyNoContainer(box) {
        const { state, ledgerServes } = await nodeState(node, input.name);
        if (state) return state;
        const known = [...new Set([...ledgerServes, ...(await servesOnBox(box, node))])].sort();
        throw new CliError(
          `--node ${node}: no serve named '${input.name}' in the node's ledgers nor on ${box.where} (serves: ${known.join(', ') || 'none'})`,
          EXIT.badInput,
        );
      },
    };
  }
  const file = manifestPath(input.manifest, ctx.env);
  const { manifest } = await loadManifest(ctx, file);
  checkServes(manifest, file, [input.name]);
  const serve = findServe(manifest, input.name) as ServeSpec;
  return { node: manifest.node, serve, whyNoContainer: () => declaredState(manifest, serve) };
}

/** How often --follow looks for a container that does not exist yet. */
const APPEAR_POLL_MS = 250;

/**
 * --follow before the container exists (`serves up X & serves logs X --follow`): waits, bounded,
 * for it to appear. Undefined when it did not within `waitS`; 'interrupted' on Ctrl-C.
 */
async function appeared(box: Box, name: string, waitS: number, ctx: CommandContext): Promise<ContainerState | undefined | 'interrupted'> {
  ctx.note(`container ${name} does not exist yet on ${box.where}: waiting up to ${waitS} s for it to appear (Ctrl-C stops)`);
  let interrupted = false;
  void ctx.stopped().then(() => (interrupted = true));
  const deadline = Date.now() + waitS * 1000;
  while (Date.now() < deadline) {
    await sleep(APPEAR_POLL_MS);
    if (interrupted) {
      ctx.note(`stopped waiting for container ${name} (Ctrl-C)`);
      return 'interrupted';
    }
    const now = await box.runtime.inspect(name);
    if (now) return now;
  }
  return undefined;
}

/** A failed start's kept lines for the container, if the worker kept some; one that cannot be read is said so. */
function keptLog(ctx: CommandContext, name: string): FailedStartLog | undefined {
  try {
    return new FailedStartFiles(ctx.env.failedStartsDir).read(name);
  } catch (err) {
    ctx.note(`a failed start's kept lines could not be read: ${err instanceof Error ? err.message : String(err)}`);
    return undefined;
  }
}

/** The kept lines of the start that failed, under --tail and --since, with a note saying whose and when. */
function keptAnswer(kept: FailedStartLog, opts: LogsOptions, serve: string, t: Target, ctx: CommandContext): Rendered {
  const text = new LogLines(t.serve).push(Buffer.from(kept.text.endsWith('\n') ? kept.text : `${kept.text}\n`));
  const all = text ? text.slice(0, -1).split('\n') : [];
  const before = opts.sinceS !== undefined && kept.atEpochMs < Date.now() - opts.sinceS * 1000;
  const lines = before ? [] : all.slice(-opts.tail);
  ctx.note(failedStartNote(kept, lines.length));
  if (before) ctx.note(`that start failed before --since: none of its lines is printed`);
  const keptFrom = { workflowId: kept.workflowId, runId: kept.runId, failedAt: new Date(kept.atEpochMs).toISOString(), end: kept.end };
  return {
    data: { serve, node: t.node, container: kept.container, running: false, status: 'removed', keptFrom, lines },
    text: lines,
    exitCode: EXIT.ok,
  };
}

/** What the container's end says to a follower: why no more lines come. */
async function endedLine(logs: ContainerLogs, name: string, id: string): Promise<string> {
  const now = await logs.inspect(name);
  if (!now || now.id !== id) return `container ${name} was removed: no more lines`;
  if (now.running) return `container ${name}: its log stream ended while it runs (dockerd restarted?): no more lines`;
  return `container ${name} ${now.status} with exit code ${now.exitCode}: no more lines`;
}

/** Everything the container wrote within the bounds, the last maxBytes of it. */
async function answer(logs: ContainerLogs, name: string, opts: LogsOptions, serve: ServeSpec | undefined, ctx: CommandContext) {
  const lines = new LogLines(serve);
  const kept = new LastBytes();
  const stream = await logs.logs(name, { tail: opts.tail, ...since(opts), follow: false, signal: new AbortController().signal });
  for await (const chunk of stream ?? []) kept.push(lines.push(chunk));
  kept.push(lines.flush());
  if (kept.dropped > 0) ctx.note(droppedNote(kept.dropped, opts.tail));
  return kept.text();
}

function since(opts: LogsOptions): { sinceEpochMs?: number } {
  return opts.sinceS === undefined ? {} : { sinceEpochMs: Date.now() - opts.sinceS * 1000 };
}

/** The last lines, then each line as it comes until Ctrl-C or the container's end, which stderr says. */
async function follow(logs: ContainerLogs, name: string, id: string, opts: LogsOptions, serve: ServeSpec | undefined, ctx: CommandContext): Promise<void> {
  const write = ctx.write;
  if (!write) throw new Error('--follow needs a context that writes as it goes');
  const abort = new AbortController();
  let interrupted = false;
  void ctx.stopped().then(() => {
    interrupted = true;
    abort.abort();
  });
  const lines = new LogLines(serve);
  // Ctrl-C before dockerd answered aborts the request itself: that is the end asked for, not a failure.
  const stream = await logs.logs(name, { tail: opts.tail, ...since(opts), follow: true, signal: abort.signal }).catch((err: unknown) => {
    if (abort.signal.aborted) return undefined;
    throw err;
  });
  for await (const chunk of stream ?? []) {
    const text = lines.push(chunk);
    if (text) await write(text);
    if (interrupted) break;
  }
  const rest = lines.flush();
  if (rest) await write(`${rest}\n`);
  ctx.note(interrupted ? `stopped following container ${name} (Ctrl-C); it goes on` : await endedLine(logs, name, id));
}

export async function servesLogs(input: LogsOpts, ctx: CommandContext): Promise<Rendered> {
  const checked = logsOptions(input);
  if (!checked.ok) throw new CliError(checked.problems.join('\n'), EXIT.badInput);
  if (input.follow && input.json) throw new CliError('--follow prints lines as they come, --json one answer: give one of them', EXIT.badInput);
  const opts = checked.options;
  const t = await target(input, ctx);
  const box = await openBox(ctx);
  const name = containerName(t.node, input.name);
  let found = await box.runtime.inspect(name);
  const waitS = t.serve?.startTimeoutS ?? LOG_BOUNDS.followWaitS;
  if (!found && input.follow) {
    const came = await appeared(box, name, waitS, ctx);
    if (came === 'interrupted') return { data: null, text: [], exitCode: EXIT.ok };
    found = came;
  }
  if (!found) {
    const kept = input.follow ? undefined : keptLog(ctx, name);
    if (kept) return keptAnswer(kept, opts, input.name, t, ctx);
    const why = await t.whyNoContainer(box);
    const waited = input.follow ? `no container appeared within ${waitS} s: ` : '';
    throw new CliError(`${waited}${input.name} has no container (${name}) on ${box.where}: ${why}`, EXIT.failed, { container: name, state: why });
  }
  if (!t.serve) ctx.note(`--node: no manifest, so ${input.name}'s secrets are not known here and its lines are printed as they are`);
  if (input.follow) {
    await follow(box.runtime, name, found.id, opts, t.serve, ctx);
    return { data: null, text: [], exitCode: EXIT.ok };
  }
  if (!found.running) ctx.note(`container ${name} ${found.status} with exit code ${found.exitCode}; its last lines:`);
  const text = await answer(box.runtime, name, opts, t.serve, ctx);
  const lines = text.endsWith('\n') ? text.slice(0, -1).split('\n') : text ? text.split('\n') : [];
  return {
    data: { serve: input.name, node: t.node, container: name, running: found.running, status: found.status, exitCode: found.exitCode, lines },
    text: lines,
    exitCode: EXIT.ok,
  };
}
