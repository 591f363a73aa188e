// Every run found by its search attributes however it was started, and the audit report naming
// who started it: a run started by the real `temporal workflow start`, a restore started by the
// real CLI and its child bring-up (src/workflows/run-tags.ts, src/audit/report/caller.ts).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import type { Client } from '@temporalio/client';
import { fetchHistoryJson } from '../src/audit/export';
import { eventAttributes, eventTypeName } from '../src/audit/events';
import type { HistoryJson } from '../src/audit/events';
import { buildReport, renderText } from '../src/audit/report';
import { callerOf } from '../src/audit/report/caller';
import { path } from '../src/audit/report/read';
import { literalMarkdown } from '../src/domain/markdown';
import { LEDGER_HANDLERS, OPERATION_HANDLERS } from '../src/shared/handler-descriptions';
import { taskQueueFor, workflowIds } from '../src/shared/messages';
import { runTags } from '../src/shared/run-tags';
import { gpures, show } from './support/cli';
import { startSimTestBox } from './support/sim';
import type { SimTestBox } from './support/sim';
import { temporalCliPath } from './support/temporal';
import { waitFor } from './support/wait';

const run = promisify(execFile);

/** Visibility is eventually consistent: the run ids the query lists, once it lists `runId`. */
async function listedBy(client: Client, query: string, runId: string): Promise<string[]> {
  return waitFor(
    `${query} to list run ${runId}`,
    async () => {
      const ids: string[] = [];
      for await (const w of client.workflow.list({ query })) ids.push(w.runId);
      return ids.includes(runId) ? ids : undefined;
    },
    15_000,
    200,
  );
}

function eventsOf(h: HistoryJson, type: string) {
  return h.events.filter((e) => eventTypeName(String(e.eventType)) === type).map(eventAttributes);
}

describe('runTags: the tags of a run from its type, task queue and input', () => {
  test('each workflow type, in the words the CLI uses', () => {
    const q = taskQueueFor('box-1');
    assert.deepEqual(runTags('bringUpWorkflow', q, { serve: 'vision' }), {
      node: 'box-1',
      serve: 'vision',
      operation: 'serves up',
      summary: 'serves up vision on box-1',
    });
    assert.deepEqual(runTags('acquireWorkflow', q, { serve: 'comfyui', evict: true }), {
      node: 'box-1',
      serve: 'comfyui',
      operation: 'serves up',
      summary: 'serves up comfyui --evict on box-1',
    });
    assert.equal(runTags('bringDownWorkflow', q, { serve: 'comfyui', restore: true }).summary, 'serves down comfyui --restore on box-1');
    assert.deepEqual(runTags('leaseWorkflow', q, { serve: 'comfyui', kind: 'idle', holder: 'acquire/box-1/comfyui/r1', seconds: 60 }), {
      node: 'box-1',
      serve: 'comfyui',
      operation: 'lease',
      summary: 'idle lease of comfyui for acquire/box-1/comfyui/r1 on box-1',
    });
    assert.deepEqual(runTags('promoteWorkflow', q, { router: 'router', image: 'r:2', validateOnly: true }), {
      node: 'box-1',
      serve: 'router',
      operation: 'router promote',
      summary: 'router promote router: r:2 (validate only) on box-1',
    });
    // A ledger is a GPU's, not a serve's: GpuresServe = 'vision' must not find it.
    assert.deepEqual(runTags('ledgerWorkflow', q, { node: 'box-1', gpu: { role: 'main' } }), {
      node: 'box-1',
      operation: 'ledger',
      summary: 'ledger of gpu_role main on box-1',
    });
  });

  test("a malformed input (the UI form's {}) still tags node and operation, and a queue that is not a node's tags no node", () => {
    assert.deepEqual(runTags('bringUpWorkflow', taskQueueFor('box-1'), {}), { node: 'box-1', operation: 'serves up', summary: 'serves up ? on box-1' });
    assert.deepEqual(runTags('bringUpWorkflow', 'elsewhere', 'vision'), { operation: 'serves up', summary: 'serves up ?' });
  });

  test('a value no manifest could name (over 2 KB, or with spaces) is not a tag: the server would refuse the upsert on every retry', () => {
    const long = 'v'.repeat(3000);
    assert.deepEqual(runTags('bringUpWorkflow', taskQueueFor('box-1'), { serve: long }), {
      node: 'box-1',
      operation: 'serves up',
      summary: 'serves up ? on box-1',
    });
    assert.equal(runTags('bringUpWorkflow', taskQueueFor('box-1'), { serve: 'a b' }).serve, undefined);
    // Summary-only text is kept, cut to a line.
    const lease = runTags('leaseWorkflow', taskQueueFor('box-1'), { serve: 'comfyui', holder: long });
    assert.equal(lease.serve, 'comfyui');
    assert.ok(lease.summary.length < 260, lease.summary);
  });
});

describe('callerOf: who started a run, from its started event', () => {
  test('each identity the callers send', () => {
    assert.equal(callerOf({ identity: 'gpures-cli/42@box' }).caller, 'CLI');
    assert.equal(callerOf({ identity: 'gpures-api/42@box' }).caller, 'API');
    assert.equal(callerOf({ identity: 'gpures-worker/42@box' }).caller, 'worker');
    assert.equal(callerOf({ identity: 'temporal-cli:ops@box' }).caller, 'temporal CLI');
    assert.equal(callerOf({ identity: '20008@vm@' }).caller, 'temporal CLI');
    assert.equal(callerOf({}).caller, 'UI');
    assert.equal(callerOf({ identity: '19708@vm' }).caller, 'SDK client');
    assert.deepEqual(callerOf({ identity: '', parentWorkflowExecution: { workflowId: 'p', runId: 'r' } }), {
      caller: 'parent',
      identity: '',
      parent: { workflowId: 'p', runId: 'r' },
    });
    assert.deepEqual(callerOf({ identity: 'gpures-worker/1@b', continuedExecutionRunId: 'r0', initiator: 'CONTINUE_AS_NEW_INITIATOR_WORKFLOW' }), {
      caller: 'continue-as-new',
      identity: 'gpures-worker/1@b',
      continuedFrom: 'r0',
    });
  });
});

describe('runs tagged however started (sim box, dev server with the attributes registered)', () => {
  let t: SimTestBox;
  let env: Record<string, string>;
  before(async () => {
    t = await startSimTestBox(
      'tags',
      [{ role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 }],
      [
        { name: 'fast', vram_mib: 14336, router_tier: 'fast-local' },
        // Evicted by two tests in turn: no minimum residency between them.
        { name: 'vision', vram_mib: 12288, class: 'evictable', served_model_name: 'qwen3-vl-4b-instruct', router_tier: 'vision-local', min_residency_s: 0 },
        { name: 'comfyui-sim', vram_mib: 8192, class: 'on-demand' },
      ],
    );
    env = { TEMPORAL_ADDRESS: t.temporal.address, TEMPORAL_NAMESPACE: 'default' };
  });
  after(async () => {
    await t?.close();
  });
  /** fast and vision up, then comfyui-sim by the CLI, which has room only by evicting vision. */
  async function upEvictingVision(): Promise<void> {
    for (const args of [
      ['serves', 'up', 'fast'],
      ['serves', 'up', 'vision'],
      ['serves', 'up', 'comfyui-sim', '--evict'],
    ]) {
      const r = await gpures([...args, '--manifest', t.manifestPath], env);
      assert.equal(r.code, 0, show(r));
    }
  }

  test('`temporal workflow start` of a bring-up: found by GpuresServe, GpuresNode and GpuresOperation; current details in words; caller temporal CLI', async () => {
    const workflowId = workflowIds.bringUp(t.node, 'fast');
    const { stdout } = await run(temporalCliPath(), [
      'workflow',
      'start',
      '--address',
      t.temporal.address,
      '--task-queue',
      taskQueueFor(t.node),
      '--type',
      'bringUpWorkflow',
      '--workflow-id',
      workflowId,
      '--input',
      '{"serve":"fast"}',
      '--output',
      'json',
    ]);
    const runId = (JSON.parse(stdout) as { runId: string }).runId;
    const handle = t.temporal.client.workflow.getHandle(workflowId, runId);
    const result = (await handle.result()) as { outcome: string };
    assert.equal(result.outcome, 'started');

    for (const query of [
      `GpuresServe = 'fast'`,
      `GpuresNode = '${t.node}'`,
      `GpuresOperation = 'serves up' AND GpuresNode = '${t.node}' AND GpuresServe = 'fast'`,
    ]) {
      await listedBy(t.temporal.client, query, runId);
    }
    type Described = { name: string; description?: string }[];
    const metadata = await handle.query<{ currentDetails?: string; definition?: { queryDefinitions?: Described } }>('__temporal_workflow_metadata');
    // The UI's Queries tab lists each handler with its line in the operator's words.
    const queries = Object.fromEntries((metadata.definition?.queryDefinitions ?? []).map((q) => [q.name, q.description]));
    assert.equal(queries['progress'], OPERATION_HANDLERS.progress);
    assert.equal(queries['liveProgress'], OPERATION_HANDLERS.liveProgress);
    const ledger = t.temporal.client.workflow.getHandle(workflowIds.ledger(t.node, 'dark-fast'));
    const ledgerMeta = await ledger.query<{ definition?: { queryDefinitions?: Described; updateDefinitions?: Described } }>('__temporal_workflow_metadata');
    const ledgers = [...(ledgerMeta.definition?.queryDefinitions ?? []), ...(ledgerMeta.definition?.updateDefinitions ?? [])].filter(
      (d) => !d.name.startsWith('__'),
    );
    assert.deepEqual(Object.fromEntries(ledgers.map((d) => [d.name, d.description])), LEDGER_HANDLERS);
    // The operator's line first, then the steps the run did (src/workflows/step-log.ts).
    const [line, ...steps] = (metadata.currentDetails ?? '').split('\n\n');
    assert.equal(line, literalMarkdown(`serves up fast on ${t.node}`));
    assert.match(steps.join('\n'), /^done \d\d:\d\d:\d\d: admit: admitted 14336 MiB/);
    assert.ok(!steps.some((s) => s.startsWith('under way')), steps.join('\n'));

    const h = await fetchHistoryJson(t.temporal.client, workflowId, runId);
    // patched() upserts TemporalChangeVersion on its own; ours is the one upsert of our attributes.
    const ours = eventsOf(h, 'UpsertWorkflowSearchAttributes').map((a) =>
      Object.keys((path(a, 'searchAttributes', 'indexedFields') as object | undefined) ?? {}),
    );
    assert.deepEqual(
      ours.filter((keys) => !keys.includes('TemporalChangeVersion')).map((keys) => keys.sort()),
      [['GpuresNode', 'GpuresOperation', 'GpuresServe']],
    );
    const report = buildReport(h);
    assert.equal(report.workflow.startedBy.caller, 'temporal CLI', JSON.stringify(report.workflow.startedBy));
    assert.ok(report.patches.includes('run-tags'), report.patches.join(', '));
    assert.ok((await gpures(['serves', 'down', 'fast', '--manifest', t.manifestPath], env)).code === 0);
  });

  test('an eviction found by the serve it evicted (GpuresVictims), and not by GpuresServe: that is the serve it brings up', async () => {
    await upEvictingVision();
    const workflowId = workflowIds.acquire(t.node, 'comfyui-sim');
    const { runId } = await t.temporal.client.workflow.getHandle(workflowId).describe();
    const listed = await listedBy(t.temporal.client, `GpuresVictims = 'vision' AND GpuresNode = '${t.node}'`, runId);
    assert.deepEqual(listed, [runId]);
    await listedBy(t.temporal.client, `GpuresServe = 'comfyui-sim' AND GpuresOperation = 'serves up'`, runId);
    const visionsOwn: string[] = [];
    for await (const w of t.temporal.client.workflow.list({ query: `GpuresServe = 'vision'` })) visionsOwn.push(w.runId);
    assert.ok(!visionsOwn.includes(runId), visionsOwn.join(', '));

    const h = await fetchHistoryJson(t.temporal.client, workflowId, runId);
    const upserted = eventsOf(h, 'UpsertWorkflowSearchAttributes').flatMap((a) =>
      Object.keys((path(a, 'searchAttributes', 'indexedFields') as object | undefined) ?? {}),
    );
    assert.ok(upserted.includes('GpuresVictims'), upserted.join(', '));
    assert.ok(buildReport(h).patches.includes('victims-tagged'));
    for (const s of ['comfyui-sim', 'fast']) assert.equal((await gpures(['serves', 'down', s, '--manifest', t.manifestPath], env)).code, 0);
  });

  test("a restore by the CLI: its child bring-up found by its attributes; the report names the CLI, the child's parent, and the child's run id", async () => {
    await upEvictingVision();
    const down = await gpures(['serves', 'down', 'comfyui-sim', '--restore', '--manifest', t.manifestPath, '--json'], env);
    assert.equal(down.code, 0, show(down));
    const parentId = workflowIds.bringDown(t.node, 'comfyui-sim');
    const parent = await fetchHistoryJson(t.temporal.client, parentId);
    const parentReport = buildReport(parent);
    const parentRunId = parentReport.workflow.runId ?? '';
    assert.equal(parentReport.workflow.startedBy.caller, 'CLI');
    assert.match(parentReport.workflow.startedBy.identity, /^gpures-cli\/\d+@/);
    const started = eventsOf(parent, 'ChildWorkflowExecutionStarted');
    assert.equal(started.length, 1);
    const childRunId = String((started[0]?.['workflowExecution'] as { runId?: string } | undefined)?.runId);
    assert.deepEqual(
      parentReport.children.map((c) => [c.workflowId, c.runId, c.status]),
      [[workflowIds.bringUp(t.node, 'vision'), childRunId, 'completed']],
    );
    const text = renderText(parentReport).join('\n');
    assert.match(text, /started by CLI \(gpures-cli\/\d+@/);
    assert.ok(text.includes(`run ${childRunId}`), text);

    // The child was started by the bring-down with no attributes of its own: the interceptor tagged it.
    await listedBy(t.temporal.client, `GpuresServe = 'vision' AND GpuresNode = '${t.node}' AND GpuresOperation = 'serves up'`, childRunId);
    const child = buildReport(await fetchHistoryJson(t.temporal.client, workflowIds.bringUp(t.node, 'vision'), childRunId));
    assert.deepEqual(child.workflow.startedBy, { caller: 'parent', identity: '', parent: { workflowId: parentId, runId: parentRunId } });
    assert.match(renderText(child).join('\n'), new RegExp(`started by parent ${parentId} \\(run ${parentRunId}\\)`));

    // `gpures audit report` prints the same for the operator.
    const cli = await gpures(['audit', 'report', parentId], env);
    assert.equal(cli.code, 0, show(cli));
    assert.match(cli.stdout, /started by CLI \(gpures-cli\/\d+@/);
    for (const s of ['vision', 'fast']) assert.equal((await gpures(['serves', 'down', s, '--manifest', t.manifestPath], env)).code, 0);
  });
});
