// What a fresh temporal-server lacks that the dev server has from its flags: the `default`
// namespace and our search attributes (src/client/search-attributes.ts). Both are registered only
// when missing, so a second start on the same store changes nothing.
import { Connection } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time';
import { temporal } from '@temporalio/proto';
import { SEARCH_ATTRIBUTES } from '../client/search-attributes';
import { PROD_TEMPORAL } from './toolchain';

const NOT_FOUND = 5;
const ALREADY_EXISTS = 6;
const grpcCode = (err: unknown) => (err as { code?: unknown } | undefined)?.code;

async function poll(what: string, timeoutMs: number, fn: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      if (await fn()) return;
    } catch (err) {
      last = err;
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`${what} not within ${timeoutMs / 1000} s${last instanceof Error ? `: ${last.message}` : ''}`);
}

/** Creates `namespace` and registers the Keyword attributes; says what it had to do. */
export async function ensureNamespace(address: string, namespace: string): Promise<string[]> {
  const connection = await Connection.connect({ address });
  const done: string[] = [];
  try {
    const { workflowService, operatorService } = connection;
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
    await poll(`namespace ${namespace} usable`, 30_000, async () => (await workflowService.countWorkflowExecutions({ namespace }), true));

    const listed = async () => (await operatorService.listSearchAttributes({ namespace })).customAttributes ?? {};
    const have = await listed();
    const missing = Object.values(SEARCH_ATTRIBUTES)
      .map((k) => k.name)
      .filter((name) => have[name] === undefined);
    if (missing.length > 0) {
      const keyword = temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD;
      await operatorService.addSearchAttributes({ namespace, searchAttributes: Object.fromEntries(missing.map((name) => [name, keyword])) });
      await poll(`search attributes ${missing.join(', ')} listed`, 30_000, async () => {
        const now = await listed();
        return missing.every((name) => now[name] !== undefined);
      });
      done.push(`search attributes ${missing.join(', ')} registered (Keyword)`);
    }
  } finally {
    await connection.close();
  }
  return done;
}
