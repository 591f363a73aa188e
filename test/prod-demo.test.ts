// The main job on the production shape: `gpures demo --temporal-address` against the PostgreSQL-
// backed server, through the real CLI, on a namespace that lacks the search attributes at first.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SEARCH_ATTRIBUTES } from '../src/client/search-attributes';
import { gpures, show } from './support/cli';
import { productionTemporal } from './support/prod-temporal';

test('gpures demo --temporal-address on the production-shaped server: registers the missing search attributes, then every check of T013 and the loop', async () => {
  const temporal = await productionTemporal();
  const { client, namespace } = temporal;
  const names = Object.values(SEARCH_ATTRIBUTES).map((k) => k.name);
  try {
    await client.connection.operatorService.removeSearchAttributes({ namespace, searchAttributes: names });
    const run = await gpures(['demo', '--temporal-address', temporal.address], {}, 240_000);
    assert.equal(run.code, 0, show(run));
    assert.match(run.stdout, new RegExp(`registered search attributes ${names.join(', ')} \\(Keyword\\) in namespace ${namespace}`), show(run));
    assert.ok(run.stdout.includes('14 of 14 checks matched the field report, 10 of 10 of the closed loop'), show(run));
    const node = /box: node (primary-node-demo-[0-9a-f]{6}),/.exec(run.stdout)?.[1];
    assert.ok(node, show(run));
    // The runs are in the SQL store's visibility, tagged, and the demo's node left nothing running.
    const count = async (query: string) => Number((await client.workflowService.countWorkflowExecutions({ namespace, query })).count ?? 0);
    const tagged = await count(`GpuresNode = '${node}'`);
    const vision = await count(`GpuresNode = '${node}' AND GpuresServe = 'vision'`);
    const ledger = await client.workflow.getHandle(`ledger/${node}/dark-fast`).describe();
    console.log(`demo on ${temporal.address}: ${tagged} tagged runs, ${vision} of vision; ${run.ms} ms`);
    assert.ok(tagged >= 15, `tagged runs: ${tagged}`);
    assert.ok(vision >= 4, `vision runs: ${vision}`);
    assert.equal(ledger.status.name, 'TERMINATED', 'the demo ends its own ledger');
  } finally {
    await temporal.close();
  }
});
