// Workflow history as evidence, end to end: a real eviction on the simulated box (real dev
// server, reference router, fake nvidia-smi), started through the acquisition API; then
// `bin/gpures audit export | report | replay` as real processes. And the rule that tokens never
// enter history, checked on every workflow the box ran, with every payload decoded.
import { after, before, describe, test } from 'node:test';
import { randomBytes } from 'node:crypto';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildApi } from '../src/client/api';
import { serveDown, serveUp } from '../src/client/operations';
import { historyIdentity } from '../src/audit/events';
import type { HistoryJson } from '../src/audit/events';
import { historyProto, readHistoryFile } from '../src/audit/history';
import { buildReport, isActivityName, render } from '../src/audit/report';
import type { AuditReport } from '../src/audit/report';
import { workflowIds } from '../src/shared/messages';
import type { acquireWorkflow } from '../src/workflows/acquire';
import type { TestServe } from './support/box';
import { ROUTER_TOKEN, startSimTestBox } from './support/sim';
import type { SimTestBox } from './support/sim';
import { historyTexts } from './support/history-scan';
import { waitUntil } from './support/wait';
import { gpures as runGpures, show } from './support/cli';

const API_TOKEN = `api-token-${randomBytes(16).toString('hex')}`;
const HF_TOKEN = 'hf_auditTestSecretValue0123456789';

const GPU = { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 };
const SERVES: TestServe[] = [
  { name: 'fast', vram_mib: 14336, router_tier: 'fast-local' },
  { name: 'vision', vram_mib: 12288, class: 'evictable', served_model_name: 'qwen3-vl-4b-instruct', router_tier: 'vision-local' },
  { name: 'comfyui-sim', vram_mib: 8192, class: 'on-demand' },
  // A serve whose environment carries a credential, as a gated model's HF_TOKEN would.
  { name: 'gated', vram_mib: 1000, env: { HF_TOKEN } },
];

// dist/test/audit.test.js -> <repo>/test/histories (recorded by test/histories/record.ts)
const HISTORIES = join(__dirname, '..', '..', 'test', 'histories');

describe('audit report of recorded histories, no server', () => {
  test('a recorded eviction by sleeping: the sleep after the drain with its figures, no stop, the residual kept; its restore by waking', () => {
    const text = render(buildReport(readHistoryFile(join(HISTORIES, 'sleep-eviction.json')), 'sleep-eviction'), 'text').join('\n');
    assert.match(text, /outcome: serves up comfyui-sim --evict: running, 8192 MiB committed on 'dark-fast'; put to sleep vision-sleeper/);
    assert.match(
      text,
      /victim vision-sleeper \(12288 MiB, tier sleeper-local\)\n {4}quiesce: 0 in flight at quiesce\n {4}drain: .*\n {4}sleep: level 1, issued \S+, \d+ ms; keeps 600 MiB asleep \(declared 600\)\n {4}stop: not stopped \(asleep\)\n {4}release: nvidia-smi: 11688 MiB back/,
    );
    assert.match(text, /vision-sleeper 12288 MiB \(evictable, sleeping at level 1 for comfyui-sim, 600 MiB held\)/);
    assert.match(text, /Patches: .*evict-by-sleep/);
    const wake = render(buildReport(readHistoryFile(join(HISTORIES, 'wake-restore-child-bring-up.json')), 'wake'), 'text').join('\n');
    assert.match(wake, /outcome: serves up vision-sleeper: restored by waking \(\d+ ms\)/);
    assert.match(wake, /wakeServe +completed: awake from level 1 after \d+ ms/);
    assert.match(wake, /ledgerAdmit +completed: admitted vision-sleeper 12288 MiB, free after 1375 MiB \(restoring a serve asleep at level 1\)/);
    assert.doesNotMatch(wake, /startServeContainer/);
  });

  test('a recorded eviction as JSON: its victim, the drain, the stop, the VRAM back, the result', () => {
    const h = readHistoryFile(join(HISTORIES, 'eviction.json'));
    const lines = render(buildReport(h, 'eviction'), 'json');
    const r = JSON.parse(lines.join('\n')) as AuditReport;
    assert.equal(r.workflow.type, 'acquireWorkflow');
    assert.equal(r.workflow.status, 'completed');
    assert.equal(r.operation, 'serves up comfyui-sim --evict');
    assert.match(r.outcome.message, /^serves up comfyui-sim --evict: running, 8192 MiB committed on 'dark-fast'; evicted vision$/);
    assert.equal(r.eviction?.shortfallMib, 6817);
    assert.equal(r.eviction?.victims.length, 1);
    const v = r.eviction?.victims[0];
    assert.deepEqual(
      { serve: v?.serve, vramMib: v?.vramMib, tier: v?.tier, quiesce: v?.inFlightAtQuiesce, stopped: v?.stopped, stop: v?.inFlightAtStop, stopResult: v?.stop },
      {
        serve: 'vision',
        vramMib: 12288,
        tier: 'vision-local',
        quiesce: 5,
        stopped: true,
        stop: 0,
        stopResult: 'container gpures-primary-node-vision: stopped, removed',
      },
    );
    assert.equal(v?.drain?.drained, true);
    assert.equal(v?.drain?.routerInFlightAtStart, 5);
    assert.equal(v?.drain?.routerInFlightAtEnd, 0);
    assert.equal(v?.vram?.releasedMib, 12288);
    assert.equal(v?.vram?.expectedMib, 12288);
    assert.deepEqual(
      r.steps.map((s) => s.step),
      ['plan', 'preflight', 'quiesce vision', 'drain vision', 'stop vision', 'release vision', 'start', 'health', 'identity', 'measure', 'running'],
    );
    // Recorded before an evicted entry kept whom it was evicted for: it reads plain 'evicted'.
    // A recorded run's result: the line as it was printed then, before ': not committed'.
    assert.ok(r.ledger.after?.includes('  vision 12288 MiB (evictable, evicted)'), JSON.stringify(r.ledger.after));
    assert.deepEqual(
      r.identity.map((i) => [i.serve, i.observed, i.ok]),
      [['comfyui-sim', ['comfyui-sim'], true]],
    );
    assert.equal(r.nvidiaSmi.measuredDelta?.deltaMib, 8192);
    // The JSON output is the model itself, whole: what `audit report --json` prints.
    assert.deepEqual(r, JSON.parse(JSON.stringify(buildReport(h, 'eviction'))));
  });

  test("the room checks' nvidia-smi readings and decisions: a bring-up's refused start, an acquisition refused before its eviction", () => {
    const bringUp = buildReport(readHistoryFile(join(HISTORIES, 'start-room-refused.json')), 'start-room-refused');
    const text = render(bringUp, 'text').join('\n');
    assert.match(text, /\n {2}\S+ +readStartRoom GPU-\S+: used 27824 MiB, free 4783 of 32607 MiB\n/);
    assert.match(
      text,
      /\n {2}room for vision at \S+: refused: ledger commits 26624 MiB on GPU-\S+ \(vision included\), processes outside the ledger hold 12288 MiB \(pid \d+ \S+ 12288 MiB\): 38912 MiB against the card's 32607 MiB, short by 6305 MiB\n/,
    );
    assert.deepEqual(
      bringUp.nvidiaSmi.rooms?.map((m) => [m.serve, m.allowed]),
      [['vision', false]],
    );
    const acquisition = render(buildReport(readHistoryFile(join(HISTORIES, 'eviction-room-refused.json')), 'eviction-room-refused'), 'markdown').join('\n');
    assert.match(acquisition, /\| readStartRoom \| GPU-\S+ \| 40112 \| 0 \| 32607 \|/);
    assert.match(
      acquisition,
      /room for comfyui-sim at \S+: refused: once vision is evicted \(12288 MiB freed\), ledger commits 22528 MiB .* short by 2209 MiB/,
    );
    // A recording from before the room check has none.
    const allowed = buildReport(readHistoryFile(join(HISTORIES, 'eviction.json')), 'eviction');
    assert.equal(allowed.nvidiaSmi.rooms, undefined);
  });

  test('every activity a recorded history schedules has its line in the typed table', () => {
    const files = readdirSync(HISTORIES).filter((f) => f.endsWith('.json'));
    assert.ok(files.length >= 9, files.join(', '));
    const seen = new Set<string>();
    for (const f of files) {
      const r = buildReport(readHistoryFile(join(HISTORIES, f)), f);
      for (const a of r.activities) {
        seen.add(a.type);
        assert.ok(isActivityName(a.type), `${f}: activity ${a.type} (event ${a.eventId}) has no entry in src/audit/report/activities.ts`);
      }
    }
    // The histories do exercise the table: bring-up, eviction, restore, ledger and promotion activities.
    for (const type of ['resolveServe', 'drainServe', 'stopServeContainer', 'reconcileLedger', 'promoteVerify']) assert.ok(seen.has(type), type);
    assert.equal(isActivityName('readmitTier'), false, 'an activity that no longer exists has no entry');
  });

  test("a child started to outlive its parent (an acquisition's lease) reads so, not 'running: running'; one merely not closed yet, as that", () => {
    const ev = (id: number, type: string, key: string, attrs: Record<string, unknown>) => ({
      eventId: String(id),
      eventTime: `2026-12-04T12:00:0${id}Z`,
      eventType: type,
      [key]: attrs,
    });
    const history = (policy: string) =>
      ({
        events: [
          ev(1, 'EVENT_TYPE_WORKFLOW_EXECUTION_STARTED', 'workflowExecutionStartedEventAttributes', {
            workflowType: { name: 'acquireWorkflow' },
            taskQueue: { name: 'gpures.n' },
          }),
          ev(2, 'EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED', 'startChildWorkflowExecutionInitiatedEventAttributes', {
            workflowId: 'lease/n/x',
            workflowType: { name: 'leaseWorkflow' },
            parentClosePolicy: policy,
          }),
          ev(3, 'EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED', 'childWorkflowExecutionStartedEventAttributes', {
            initiatedEventId: '2',
            workflowExecution: { workflowId: 'lease/n/x', runId: 'r1' },
            workflowType: { name: 'leaseWorkflow' },
          }),
        ],
      }) as unknown as HistoryJson;
    const lease = buildReport(history('PARENT_CLOSE_POLICY_ABANDON'), 'acquire/n/x').children[0];
    assert.deepEqual([lease?.status, lease?.summary], ['running', 'started to outlive this run (parent close policy abandon): its own history has the rest']);
    const child = buildReport(history('PARENT_CLOSE_POLICY_TERMINATE'), 'acquire/n/x').children[0];
    assert.deepEqual([child?.status, child?.summary], ['running', 'started; not closed in this history']);
  });
});

describe('audit: workflow history as evidence', () => {
  let t: SimTestBox;
  let dir: string;
  let env: Record<string, string>;

  const gpures = (args: string[], timeoutMs = 60_000) => runGpures(args, env, timeoutMs);

  before(async () => {
    t = await startSimTestBox('audit', [GPU], SERVES);
    dir = mkdtempSync(join(tmpdir(), 'gpures-audit-'));
    env = { TEMPORAL_ADDRESS: t.temporal.address, TEMPORAL_NAMESPACE: 'default' };
    // Seed step 2 of T013: fast and vision up, 26624 committed.
    for (const s of ['fast', 'vision']) {
      const o = await serveUp(t.temporal.client, t.node, s);
      assert.ok(o.ok, !o.ok ? o.message : '');
    }
    // The eviction, triggered as the router would: through the acquisition API, with 3 requests in flight.
    const slow = Array.from({ length: 3 }, () => t.routed('vision', { sim_delay_ms: 2500 }));
    await waitUntil('3 in flight at vision-local', async () => (await t.box.routerAdmin.tierState('vision-local')).inFlight >= 3, 5000);
    const api = buildApi({ client: t.temporal.client, manifest: t.manifest, manifestFile: t.manifestPath, token: API_TOKEN });
    try {
      const res = await api.inject({
        method: 'POST',
        url: '/v1/acquisitions',
        headers: { authorization: `Bearer ${API_TOKEN}` },
        payload: { serve: 'comfyui-sim', evict: true },
      });
      assert.equal(res.statusCode, 202, res.body);
    } finally {
      await api.close();
    }
    await t.temporal.client.workflow.getHandle<typeof acquireWorkflow>(workflowIds.acquire(t.node, 'comfyui-sim')).result();
    assert.deepEqual(
      (await Promise.all(slow)).map((r) => r.status),
      [200, 200, 200],
    );
  });

  after(async () => {
    await t?.close();
  });

  test('export → report of a real eviction: victim, why, in-flight counts, ledger before/after, identity, nvidia-smi', async () => {
    const id = workflowIds.acquire(t.node, 'comfyui-sim');
    const file = join(dir, 'eviction.json');
    const exported = await gpures(['audit', 'export', id, '-o', file]);
    assert.equal(exported.code, 0, show(exported));
    assert.match(exported.stdout, /acquireWorkflow, \d+ events/);
    const h = readHistoryFile(file);
    assert.equal(historyIdentity(h).workflowId, id);
    assert.ok(historyProto(h).events?.length, 'loadable as a History for the replayer');

    const text = await gpures(['audit', 'report', file]);
    assert.equal(text.code, 0, show(text));
    const out = text.stdout;
    assert.match(out, /^serves up comfyui-sim --evict\n/);
    assert.match(out, /victim vision \(12288 MiB, tier vision-local\)/);
    assert.match(out, /why: short by 6817 MiB; vision \(12288 MiB\) is the smallest set of running evictable serves that covers it/);
    assert.match(out, /quiesce: 3 in flight at quiesce/);
    assert.match(out, /drain: drained after \d+ ms \(router in flight 3 → 0/);
    assert.match(out, /stop: 0 in flight at stop/);
    assert.match(
      out,
      /Ledger before\n {2}gpu_role 'dark-fast': capacity 32607 MiB, reserve 4608 MiB, committed 26624 MiB, free 1375 MiB\n {4}fast 14336 MiB \(resident, running\)\n {4}vision 12288 MiB \(evictable, running\)\n/,
    );
    assert.match(
      out,
      /Ledger after\n {2}gpu_role 'dark-fast': capacity 32607 MiB, reserve 4608 MiB, committed 22528 MiB, free 5471 MiB\n {4}fast 14336 MiB \(resident, running\)\n {4}vision 12288 MiB \(evictable, evicted for comfyui-sim\): not committed\n {4}comfyui-sim 8192 MiB \(on-demand, running\)\n/,
    );
    assert.match(out, /comfyui-sim: GET \/v1\/models observed 'comfyui-sim', expected 'comfyui-sim': ok/);
    assert.match(
      out,
      /release: nvidia-smi: 12288 MiB back on GPU-\S+ \((used \d+ → \d+ MiB, expected 12288 MiB|expected 12288 MiB; the whole GPU's used is not the evidence[^)]*)\)/,
    );
    assert.match(out, /measured delta: comfyui-sim \+8192 MiB/);

    // The same report straight from the server, as data.
    const json = await gpures(['audit', 'report', id, '--json']);
    assert.equal(json.code, 0, show(json));
    const r = JSON.parse(json.stdout) as AuditReport;
    assert.equal(r.workflow.status, 'completed');
    assert.equal(r.eviction?.shortfallMib, 6817);
    assert.deepEqual(
      r.eviction?.victims.map((v) => ({ serve: v.serve, quiesce: v.inFlightAtQuiesce, stop: v.inFlightAtStop, released: v.vram?.releasedMib })),
      [{ serve: 'vision', quiesce: 3, stop: 0, released: 12288 }],
    );
    assert.deepEqual(
      r.identity.map((i) => i.observed),
      [['comfyui-sim']],
    );
    assert.ok(
      r.steps.some((s) => s.step === 'stop vision' && s.at),
      'each step with its time',
    );

    const md = await gpures(['audit', 'report', file, '--markdown', '-o', join(dir, 'eviction.md')]);
    assert.equal(md.code, 0, show(md));
    const doc = readFileSync(join(dir, 'eviction.md'), 'utf8');
    assert.match(doc, /^# Evidence: serves up comfyui-sim --evict\n/);
    assert.match(doc, /\| status \| \*\*completed\*\* \|/);
    assert.match(doc, /## Eviction\n\nWhy: short by 6817 MiB/);
    assert.match(
      doc,
      /\| vision \| 12288 \| vision-local \| 3 \| drained after \d+ ms .* \| 0 \| 12288 MiB \((used \d+ → \d+ MiB|the whole GPU's used is not the evidence[^|]*)\) \|/,
    );
    assert.match(doc, /After:\n\n```\ngpu_role 'dark-fast': capacity 32607 MiB, reserve 4608 MiB, committed 22528 MiB, free 5471 MiB\n/);
  });

  test('restore: the child bring-up shows the identity the guarded readmit observed', async () => {
    const down = await serveDown(t.temporal.client, t.node, 'comfyui-sim', { restore: true });
    assert.ok(down.ok && down.result.restored[0]?.ok, JSON.stringify(down));
    const parent = await gpures(['audit', 'report', workflowIds.bringDown(t.node, 'comfyui-sim')]);
    assert.equal(parent.code, 0, show(parent));
    assert.match(parent.stdout, /^serves down comfyui-sim --restore\n/);
    assert.match(parent.stdout, /Child workflows\n {2}serves-up\/\S+\/vision \(bringUpWorkflow, run [0-9a-f-]{36}\): completed: serves up vision: restored/);
    const child = await gpures(['audit', 'report', workflowIds.bringUp(t.node, 'vision')]);
    assert.equal(child.code, 0, show(child));
    assert.match(child.stdout, /child of serves-down\/\S+\/comfyui-sim/);
    assert.match(child.stdout, /started by parent serves-down\/\S+\/comfyui-sim \(run [0-9a-f-]{36}\)/);
    assert.match(child.stdout, /tier vision-local: router readmit observed 'qwen3-vl-4b-instruct': ok/);
    assert.match(child.stdout, /vision: GET \/v1\/models observed 'qwen3-vl-4b-instruct', expected 'qwen3-vl-4b-instruct': ok/);
  });

  test("tokens never enter history: the router and API tokens appear in none of the box's workflows", async () => {
    const query = `TaskQueue = 'gpures.${t.node}'`;
    // Visibility lags completion slightly: wait until every workflow of this suite is listed.
    await waitUntil(
      '6 workflows of this suite listed',
      async () => {
        let n = 0;
        for await (const wf of t.temporal.client.workflow.list({ query })) if (wf.status.name !== 'RUNNING' || wf.type === 'ledgerWorkflow') n++;
        return n >= 6;
      },
      10_000,
      100,
    );
    const out = join(dir, 'all');
    const exported = await gpures(['audit', 'export', '--query', query, '-o', out, '--json']);
    assert.equal(exported.code, 0, show(exported));
    const files = readdirSync(out).sort();
    const types = new Set(files.map((f) => historyIdentity(readHistoryFile(join(out, f))).workflowType));
    for (const type of ['ledgerWorkflow', 'bringUpWorkflow', 'acquireWorkflow', 'bringDownWorkflow'])
      assert.ok(types.has(type), `${type} exported (${files.join(', ')})`);
    assert.ok(files.includes(`ledger__${t.node}__dark-fast.json`), files.join(', '));

    for (const f of files) {
      const h = readHistoryFile(join(out, f));
      const texts = historyTexts(h);
      // The scan sees inside payloads: the served model name is only ever in base64 payload data.
      if (f.startsWith('acquire'))
        assert.ok(
          texts.some((s) => s.includes('qwen3-vl-4b-instruct')),
          `${f}: payloads not decoded by the scan`,
        );
      for (const secret of [ROUTER_TOKEN, API_TOKEN]) {
        assert.ok(!texts.some((s) => s.includes(secret)), `${f}: contains a token`);
      }
      assert.ok(!readFileSync(join(out, f), 'utf8').includes(ROUTER_TOKEN));
    }
  });

  test("a serve's environment (HF_TOKEN) reaches the serve but never enters history", async () => {
    const o = await serveUp(t.temporal.client, t.node, 'gated');
    assert.ok(o.ok, !o.ok ? o.message : '');
    const record = JSON.parse(readFileSync(join(t.box.runtime.stateDir, `gpures-${t.node}-gated.json`), 'utf8')) as { env: Record<string, string> };
    assert.equal(record.env['HF_TOKEN'], HF_TOKEN, 'the serve did not get its environment');
    const file = join(dir, 'gated.json');
    const exported = await gpures(['audit', 'export', workflowIds.bringUp(t.node, 'gated'), '-o', file]);
    assert.equal(exported.code, 0, show(exported));
    await serveDown(t.temporal.client, t.node, 'gated');
    assert.ok(!historyTexts(readHistoryFile(file)).some((s) => s.includes(HF_TOKEN)), 'HF_TOKEN is in the history');
  });

  test('replay: the exported history passes; a tampered copy fails with exit 1, naming the workflow and the event', async () => {
    const file = join(dir, 'eviction.json');
    const ok = await gpures(['audit', 'replay', file]);
    assert.equal(ok.code, 0, show(ok));
    assert.match(ok.stdout, new RegExp(`^ok  acquire/${t.node}/comfyui-sim \\(acquireWorkflow, \\d+ events; [^)]+\\.json\\)\\n$`));

    // Rename one scheduled activity in a copy: the history no longer matches what the code does.
    const h = JSON.parse(readFileSync(file, 'utf8')) as HistoryJson;
    const quiesce = h.events.find(
      (e) => (e['activityTaskScheduledEventAttributes'] as { activityType?: { name?: string } } | undefined)?.activityType?.name === 'quiesceTier',
    );
    assert.ok(quiesce);
    (quiesce['activityTaskScheduledEventAttributes'] as { activityType: { name: string } }).activityType.name = 'quiesceTierV0';
    const tamperedDir = join(dir, 'tampered');
    const tampered = join(tamperedDir, 'eviction.json');
    mkdirSync(tamperedDir, { recursive: true });
    writeFileSync(tampered, JSON.stringify(h, null, 2));
    // An untouched history next to it still replays: one line per history.
    writeFileSync(join(tamperedDir, 'bring-up.json'), readFileSync(join(dir, 'all', `serves-up__${t.node}__vision.json`)));

    const bad = await gpures(['audit', 'replay', tamperedDir]);
    assert.equal(bad.code, 1, show(bad));
    const lines = bad.stdout.trim().split('\n');
    assert.equal(lines.length, 2, bad.stdout);
    assert.match(lines[0] ?? '', /^ok {2}serves-up\/\S+\/vision \(bringUpWorkflow, \d+ events; \S+\.json\)$/);
    assert.match(
      lines[1] ?? '',
      new RegExp(
        `^FAIL acquire/${t.node}/comfyui-sim: nondeterminism: .*'quiesceTierV0'.*'quiesceTier'.* \\[at event ${quiesce.eventId} ActivityTaskScheduled: activity quiesceTierV0 \\(id \\d+\\)\\]`,
      ),
    );

    const json = await gpures(['audit', 'replay', tampered, '--json']);
    assert.equal(json.code, 1, show(json));
    const data = JSON.parse(json.stdout) as { ok: boolean; outcomes: { ok: boolean; errorName?: string; event?: { id: number } }[] };
    assert.equal(data.ok, false);
    assert.equal(data.outcomes[0]?.errorName, 'DeterminismViolationError');
    assert.equal(data.outcomes[0]?.event?.id, Number(quiesce.eventId));
  });

  test('bad input: an unknown workflow, a file that is not a history, --query without -o', async () => {
    const unknown = await gpures(['audit', 'export', `acquire/${t.node}/nothing`, '--json']);
    assert.equal(unknown.code, 2, show(unknown));
    assert.match((JSON.parse(unknown.stdout) as { error: { message: string } }).error.message, /no workflow 'acquire\/\S+\/nothing'/);
    const notHistory = join(dir, 'not-history.json');
    writeFileSync(notHistory, '{"hello": 1}');
    const report = await gpures(['audit', 'report', notHistory]);
    assert.equal(report.code, 2, show(report));
    assert.match(report.stderr, /not a workflow history/);
    const noDir = await gpures(['audit', 'export', '--query', "WorkflowType = 'acquireWorkflow'"]);
    assert.equal(noDir.code, 2, show(noDir));
    // A query the server cannot parse is the operator's input: its own words, exit 2 (not 4, "Temporal refused the call").
    const badQuery = await gpures(['audit', 'export', '--query', 'bad query ===', '-o', join(dir, 'never')]);
    assert.equal(badQuery.code, 2, show(badQuery));
    assert.match(badQuery.stderr, /^audit export --query: invalid query: .*syntax error/m, show(badQuery));
  });
});
