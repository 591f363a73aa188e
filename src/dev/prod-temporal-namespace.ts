// What a fresh temporal-server lacks that the dev server has from its flags: the `default`
// namespace and our search attributes (registerSearchAttributes). Both are registered only
// when missing, so a second start on the same store changes nothing.
import { Client, Connection } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time';
import { pollUntil } from '../client/poll';
import { registerSearchAttributes } from '../client/search-attributes';
import { PROD_TEMPORAL } from './toolchain';

const NOT_FOUND = 5;
const ALREADY_EXISTS = 6;
const grpcCode = (err: unknown) => (err as { code?: unknown } | undefined)?.code;

/** Creates `namespace` and registers our search attributes; says what it had to do. */
export async function ensureNamespace(address: string, namespace: string): Promise<string[]> {
  const connection = await Connection.connect({ address });
  const done: string[] = [];
  try {
    const { workflowService } = connection;
    try {
      await workflowService.describeNamespace({ namespace });
    } catch (err) {
      if (grpcCode(err) !== NOT_FOUND) throw err;
      try {
        await workflowService.registerNamespace({ namespace, workflowExecutionRetentionPeriod: msToTs(`${PROD_TEMPORAL.namespaceRetentionHours}h`) });
        done.push(`namespace ${namespace} created (retention ${PROD_TEMPORAL.namespaceRetentionHours} h)`);
      } catch (e) {
        if (grpcCode(e) !== ALREADY_EXISTS) throw e;
      }
    }
    // The frontend learns of a new namespace on its next registry refresh (2 s by default).
    await pollUntil(`namespace ${namespace} usable`, 30_000, async () => (await workflowService.countWorkflowExecutions({ namespace }), true));

    const added = await registerSearchAttributes(new Client({ connection, namespace }));
    if (added.length > 0) done.push(`search attributes ${added.join(', ')} registered`);
  } finally {
    await connection.close();
  }
  return done;
}
