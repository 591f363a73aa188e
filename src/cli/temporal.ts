// The CLI's side of Temporal: one connection per command, and the node's ledger read so that a
// missing worker is one line for the operator (exit 4) rather than a hang or a stack trace.
import { GrpcStatus } from '../adapters/grpc-status';
import { ServiceError } from '@temporalio/client';
import type { Client } from '@temporalio/client';
import type { LedgerState } from '../domain/ledger';
import type { Manifest } from '../domain/types';
import { NODE_ANSWER_MS, taskQueueFor } from '../shared/messages';
import { connectClient, TemporalUnreachable } from '../client/connection';
import { TemporalConfigError } from '../client/temporal-config';
import type { ClientRole } from '../client/connection';
import { LedgerClient, LedgerUnanswered } from '../adapters/ledger/ledger-client';
import { NodeUnanswered, readNodeLedgers, requirePoller } from '../client/node-ledgers';
import { CliError, EXIT } from './exit-codes';

/**
 * `fn`, with what goes wrong reaching Temporal said in one line: a configuration to fix (exit 2),
 * or a server that did not answer (exit 4). Commands that connect on their own (the worker, the
 * demo) run through it as the CLI's client does.
 */
export async function temporalOrExit<T>(fn: () => Promise<T>, hint = 'set TEMPORAL_ADDRESS or a temporal.toml profile'): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof TemporalConfigError) throw new CliError(err.message, EXIT.badInput);
    if (err instanceof TemporalUnreachable) throw new CliError(`${err.message} (${hint})`, EXIT.unreachable);
    throw err;
  }
}

/** A connection, or the one line that says why not. */
export function connectOrExit(role: ClientRole = 'cli'): Promise<Awaited<ReturnType<typeof connectClient>>> {
  return temporalOrExit(() => connectClient(role));
}

export async function withClient<T>(fn: (client: Client) => Promise<T>): Promise<T> {
  const conn = await connectOrExit();
  try {
    return await fn(conn.client);
  } finally {
    await conn.connection.close();
  }
}

/** A node no worker answers for is the operator's one line, exit 4. */
async function unreachableAsExit<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof NodeUnanswered) throw new CliError(err.message, EXIT.unreachable);
    throw err;
  }
}

/**
 * Before an operation starts: the node's worker must answer the running ledgers of the GPUs it
 * touches within NODE_ANSWER_MS, or the command refuses in one line (exit 4) and starts nothing. A
 * workflow would wait durably for a worker, and a worker killed a minute ago still counts as a
 * poller for minutes, so without this an operation for a dead node waits in silence. Where none
 * of those ledgers runs yet there is nothing to ask (the operation's admission starts them): the
 * poller the server saw is all there is, and `note` says so.
 */
export async function requireWorker(client: Client, manifest: Manifest, gpuRoles: readonly string[], note: (line: string) => void): Promise<void> {
  const node = manifest.node;
  await unreachableAsExit(() => requirePoller(client, node, true));
  const ledger = new LedgerClient(client);
  const roles = manifest.gpus.filter((g) => gpuRoles.includes(g.role)).map((g) => g.role);
  try {
    const answers = await Promise.all(roles.map((role) => ledger.probe(node, role, NODE_ANSWER_MS)));
    if (answers.length > 0 && answers.every((a) => a === 'no ledger')) {
      note(
        `node '${node}': no ledger of ${roles.map((r) => `gpu_role '${r}'`).join(', ')} runs yet, so its worker's answer cannot be checked first; ` +
          `a worker polled ${taskQueueFor(node)} lately, and the operation's admission starts the ledger (it waits for a worker if that one is gone)`,
      );
    }
  } catch (err) {
    if (!(err instanceof LedgerUnanswered)) throw err;
    throw new CliError(
      `node '${node}': no worker answered within ${NODE_ANSWER_MS / 1000} s on task queue ${taskQueueFor(node)}; nothing was started: ` +
        `is \`gpures worker\` running for node '${node}'?`,
      EXIT.unreachable,
    );
  }
}

/** The node's ledgers (src/client/node-ledgers.ts); no worker to answer them is exit 4. */
export function readLedgers(client: Client, manifest: Manifest): Promise<LedgerState[]> {
  return unreachableAsExit(() => readNodeLedgers(client, manifest));
}

/** fetchHistory lets the raw gRPC error through, with its status. */
export function notFound(err: unknown): boolean {
  return (
    (err instanceof Error && err.name === 'WorkflowNotFoundError') ||
    (err instanceof ServiceError && /not found/i.test(err.message)) ||
    (err instanceof Error && (err as { code?: unknown }).code === GrpcStatus.NOT_FOUND)
  );
}
