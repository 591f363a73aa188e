// gpures audit export: a workflow history as the JSON every Temporal tool reads; --query: every match.
import { resolve as resolvePath } from 'node:path';
import { isGrpcServiceError, ServiceError } from '@temporalio/client';
import { grpcCode, GrpcStatus } from '../../adapters/grpc-status';
import type { CommandContext, Rendered } from '../command';
import { CliError, EXIT } from '../exit-codes';
import { notFound, withClient } from '../temporal';

export async function auditExport(input: { workflowId?: string; output?: string; runId?: string; query?: string }, _ctx: CommandContext): Promise<Rendered> {
  const { workflowId } = input;
  if (input.query !== undefined && workflowId !== undefined) throw new CliError('audit export: give a workflow id or --query, not both', EXIT.badInput);
  if (input.query === undefined && workflowId === undefined) throw new CliError('audit export: a workflow id or --query is required', EXIT.badInput);
  if (input.query !== undefined && !input.output) throw new CliError('audit export --query: -o DIR is required (one file per workflow)', EXIT.badInput);
  const { exportQuery, exportWorkflow } = await import('../../audit/export');
  return withClient(async (client) => {
    if (input.query !== undefined) {
      const query = input.query;
      const dir = resolvePath(input.output ?? '.');
      const exported = await exportQuery(client, query, dir).catch((err: unknown) => {
        // INVALID_ARGUMENT is the query: the server's words are in the gRPC cause ('Failed to list workflows' is the SDK's).
        if (err instanceof ServiceError && grpcCode(err) === GrpcStatus.INVALID_ARGUMENT) {
          throw new CliError(`audit export --query: ${isGrpcServiceError(err.cause) ? err.cause.details : err.message}`, EXIT.badInput);
        }
        if (err instanceof ServiceError && /invalid|syntax|unknown|not supported/i.test(err.message)) {
          throw new CliError(`audit export --query: ${err.message}`, EXIT.badInput);
        }
        throw err;
      });
      return {
        data: { query, dir, exported },
        text: [
          ...exported.map((e) => `${e.file ?? '?'}: ${e.workflowId} (${e.workflowType}, ${e.status ?? '?'}, ${e.events} events)`),
          `${exported.length} workflow(s) exported to ${dir}`,
        ],
        exitCode: EXIT.ok,
      };
    }
    const id = workflowId ?? '';
    const file = input.output ? resolvePath(input.output) : undefined;
    const { exported, history } = await exportWorkflow(client, id, { runId: input.runId, file }).catch((err: unknown) => {
      if (notFound(err)) throw new CliError(`audit export: no workflow '${id}'${input.runId ? ` run ${input.runId}` : ''} in this namespace`, EXIT.badInput);
      throw err;
    });
    // Without -o the history itself is the output, --json or not.
    if (!file) return { data: history, text: [JSON.stringify(history, null, 2)], exitCode: EXIT.ok };
    return { data: exported, text: [`${file}: ${exported.workflowId} (${exported.workflowType}, ${exported.events} events)`], exitCode: EXIT.ok };
  });
}
