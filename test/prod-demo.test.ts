// The main job on the production shape: `gpures demo --temporal-address` against the PostgreSQL-
// backed server, through the real CLI, on a namespace that lacks the search attributes at first.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ALL_SEARCH_ATTRIBUTES } from '../src/client/search-attributes';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { EXIT } from '../src/cli/exit-codes';
import { GPURES, gpures, ROOT, show } from './support/cli';
import type { Run } from './support/cli';
import { productionTemporal } from './support/prod-temporal';

/** `gpures demo --temporal-address ADDRESS --keep`, sent SIGINT once it says it stays up. */
function demoKeptUntilCtrlC(address: string): Promise<Run> {
  const started = Date.now();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [GPURES, 'demo', '--temporal-address', address, '--keep'], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    let interrupted = false;
    const timer = setTimeout(() => child.kill('SIGKILL'), 240_000);
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString();
      // Once: a second Ctrl-C would end the process mid-cleanup.
      if (!interrupted && stdout.includes('--keep: everything stays up')) {
        interrupted = true;
        child.kill('SIGINT');
      }
    });
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, ms: Date.now() - started });
    });
  });
}

test("an address that is one of the production-shaped server's other ports is told as that (exit 4), not blamed on a missing worker: its internal gRPC services, its HTTP API", async () => {
  const { ports } = await productionTemporal();
  const at = (port: number) => ({ TEMPORAL_ADDRESS: `127.0.0.1:${port}`, TEMPORAL_NAMESPACE: 'default' });
  const manifest = ['--manifest', join(ROOT, 'examples', 'primary-node', 'serves.toml')];
  const [ledger, up, worker, http] = await Promise.all([
    gpures(['ledger', ...manifest], at(ports.history)),
    gpures(['serves', 'up', 'embeddings', ...manifest], at(ports.matching)),
    gpures(['worker', ...manifest, '--gpus', 'off', '--metrics', 'off'], at(ports.history)),
    gpures(['ledger', ...manifest], at(ports.frontendHttp), 60_000),
  ]);
  const last = (r: Run) => r.stderr.trim().split('\n').pop() ?? '';
  for (const r of [ledger, up]) {
    assert.equal(r.code, EXIT.unreachable, show(r));
    assert.match(
      last(r),
      /^Temporal's frontend does not answer there \(12 UNIMPLEMENTED: unknown service temporal\.api\.workflowservice\.v1\.WorkflowService\): .*not its frontend/,
      show(r),
    );
    assert.doesNotMatch(r.stderr, /gpures worker/, show(r));
  }
  assert.equal(worker.code, EXIT.unreachable, show(worker));
  assert.match(
    last(worker),
    new RegExp(`^cannot reach Temporal at 127\\.0\\.0\\.1:${ports.history} .*unknown service temporal\\.api\\.workflowservice.*not its frontend`),
    show(worker),
  );
  assert.equal(http.code, EXIT.unreachable, show(http));
  assert.match(last(http), /^cannot reach Temporal at .*: the port is open but no gRPC handshake completed in time/, show(http));
});

test('gpures demo --temporal-address on the production-shaped server: registers the missing search attributes, then every check of T013 and the loop', async () => {
  const temporal = await productionTemporal();
  const { client, namespace } = temporal;
  const names = ALL_SEARCH_ATTRIBUTES.map((k) => k.name);
  try {
    await client.connection.operatorService.removeSearchAttributes({ namespace, searchAttributes: names });
    // With --keep, as an operator who looks around and then presses Ctrl-C.
    const run = await demoKeptUntilCtrlC(temporal.address);
    assert.equal(run.code, 0, show(run));
    assert.match(run.stdout, new RegExp(`registered search attributes ${names.join(', ')} in namespace ${namespace}`), show(run));
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
    // At Ctrl-C too: its worker is gone, and a ledger left running would be an unanswered node in every `ledger --all`.
    assert.equal(ledger.status.name, 'TERMINATED', 'the demo ends its own ledger, --keep or not');
    assert.equal(await count(`GpuresNode = '${node}' AND ExecutionStatus = 'Running'`), 0);
  } finally {
    await temporal.close();
  }
});
