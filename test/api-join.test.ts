// The acquisition API's join (USE_EXISTING): a POST for a serve whose acquisition runs joins it,
// and a POST for a serve already running completes at once. Either way, a POST that asked for a
// lease and was answered 202 must leave the serve leased: a lease that silently is not there keeps
// the serve's VRAM (and its victims down) until someone runs serves down. Chosen behaviour
// (docs/acquisition-api.md): the terms are honoured, never shortening a lease that runs. Sim box,
// real dev server, two API instances (an operator's script and the router's, each its own server
// and connection), and `gpures` processes; what is read is Temporal's lease workflow, the box's
// containers, and what the caller was told: a lease that could not be applied (its lease already
// expiring, no run holding the serve) is said so in the result, and `serves up --lease` exits 5.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { WorkflowNotFoundError } from '@temporalio/client';
import { serveAcquire, serveDown, serveUp } from '../src/client/operations';
import { workflowIds } from '../src/shared/messages';
import type { AcquireResult, LeaseResult } from '../src/shared/operations';
import type { TestServe } from './support/box';
import { joinBox, stuckBringDown } from './support/acquisition-callers';
import { sleep, waitFor, waitUntil } from './support/wait';
import { gpures, show } from './support/cli';
import { containerName, serveCommand, serveLabels } from '../src/domain/serve';
import { Worker } from '@temporalio/worker';
import { UNCOUNTED_SINKS } from '../src/worker/workflow-code';
import { workflowBundle } from './support/temporal';

/** `gpures serves up --lease` whose lease could not be applied (README, Exit codes). */
const EXIT_NOT_LEASED = 5;

const GPU = { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 };
const SERVES: TestServe[] = [
  // Slow to start: the second POST lands while the first's acquisition runs.
  { name: 'slow', vram_mib: 512, class: 'on-demand', router_tier: 'slow-local', idle_ttl_s: 600, env: { SIM_START_DELAY_MS: '3000' } },
  // Brought up by a plain `serves up` (no acquisition, no lease).
  { name: 'plain', vram_mib: 512, class: 'on-demand', router_tier: 'plain-local' },
  // Brought up by hand, and declares an idle ttl: what a router's POST would ask an idle lease of.
  { name: 'handy', vram_mib: 512, class: 'on-demand', router_tier: 'handy-local', idle_ttl_s: 3 },
  // Acquired under a short lease whose expiry is held up: what a POST meets while its lease is expiring.
  { name: 'ending', vram_mib: 512, class: 'on-demand' },
  // A container with no holder label (an older gpures started it), found running by a ledger started afresh.
  { name: 'orphan', vram_mib: 512, class: 'on-demand' },
  // Brought up by an operator's acquisition without a lease (`serves up kept --evict`), slow to
  // start (the router's POST joins it), and declares an idle ttl.
  { name: 'kept', vram_mib: 512, class: 'on-demand', router_tier: 'kept-local', idle_ttl_s: 3, env: { SIM_START_DELAY_MS: '3000' } },
  // Brought up by an operator's acquisition without a lease, then found up by the router's POST.
  { name: 'owned', vram_mib: 512, class: 'on-demand', router_tier: 'owned-local', idle_ttl_s: 3 },
  // Leased, brought down by hand while its lease runs on, then acquired again without one.
  { name: 'relet', vram_mib: 512, class: 'on-demand', router_tier: 'relet-local', idle_ttl_s: 3 },
  // Acquired with lease_s through one API, then POSTed again with lease_s once that acquisition completed.
  { name: 'again', vram_mib: 512, class: 'on-demand' },
];

describe('acquisition API: a POST that joins, or finds the serve up, and asked for a lease', () => {
  const j = joinBox({ prefix: 'api-join', gpu: GPU, serves: SERVES, onDemand: [] });
  const { post, leaseOf, running, resultOf } = j;

  test("an operator's POST with lease_s while another's acquisition runs: 202, joined; the run's lease is the joiner's", async () => {
    // The first POST asks no lease; the operator's script, through the other API a moment later,
    // asks `lease_s: 60` while slow starts.
    const first = await post(j.box.apiUrl, { serve: 'slow', trigger: 'operator' });
    assert.equal(first.status, 202);
    const joinedAt = Date.now();
    const joined = await post(j.secondUrl, { serve: 'slow', lease_s: 60 });
    assert.equal(joined.status, 202);
    assert.equal(joined.body.run_id, first.body.run_id, 'the second POST joined the first run');
    const result = await resultOf(first);
    console.log(`  acquisition: ${result.outcome}: ${result.message}`);
    assert.equal(result.outcome, 'started');
    const names = await running();
    assert.ok(
      names.some((n) => n.includes('slow')),
      `slow runs (${names.join(', ')})`,
    );
    const lease = await leaseOf('slow');
    console.log(`  running containers: ${names.join(', ')}; lease/${j.box.node}/slow: ${lease.status} ${JSON.stringify(lease.view)}`);
    assert.equal(lease.status, 'RUNNING', 'the operator asked lease_s: 60 and got 202, but slow runs with no lease');
    assert.equal(lease.view?.kind, 'fixed');
    assert.equal(lease.view?.holder, `${first.body.workflow_id}/${first.body.run_id}`, 'fenced to the run that holds slow');
    const left = (lease.view?.expiresAtEpochMs ?? 0) - joinedAt;
    assert.ok(left > 55_000 && left <= 61_000 + (Date.now() - joinedAt), `expires about 60 s after the join (${left} ms)`);
    assert.equal(result.lease?.workflowId, workflowIds.lease(j.box.node, 'slow'));
  });

  test('a POST with lease_s after the acquisition it signalled completed: one new run, started with the terms, no join signal, answered at once', async () => {
    const first = await post(j.secondUrl, { serve: 'again', lease_s: 60 });
    assert.equal(first.status, 202);
    assert.equal((await resultOf(first)).outcome, 'started');
    const askedAt = Date.now();
    const second = await post(j.secondUrl, { serve: 'again', lease_s: 120 });
    assert.equal(second.status, 202);
    assert.notEqual(second.body.run_id, first.body.run_id, 'a new run: the first had completed');
    assert.equal((await resultOf(second)).outcome, 'already-running');
    const client = j.box.temporal.client;
    const runs: string[] = [];
    for await (const w of client.workflow.list({ query: `WorkflowId = '${first.body.workflow_id}'` })) runs.push(w.runId);
    const events = (await client.workflow.getHandle(second.body.workflow_id, second.body.run_id).fetchHistory()).events ?? [];
    const signals = events.filter((e) => e.workflowExecutionSignaledEventAttributes).length;
    const lease = await leaseOf('again');
    const left = (lease.view?.expiresAtEpochMs ?? 0) - askedAt;
    console.log(
      `  runs of ${first.body.workflow_id}: ${runs.length}; the 202 named ${second.body.run_id}; its join signals: ${signals}; lease ${Math.round(left / 1000)} s left`,
    );
    assert.deepEqual(runs.sort(), [first.body.run_id, second.body.run_id].sort(), 'the first run and the one the 202 named, no other');
    assert.equal(signals, 0, 'the new run has the terms in its input: no join signal sent to it');
    assert.ok(left > 110_000, `the second POST's lease_s 120 taken (${left} ms left)`);
  });

  test('a POST with lease_s for a serve already running under a shorter lease: extended, never shortened (CLI too)', async () => {
    const before = await leaseOf('slow');
    assert.equal(before.status, 'RUNNING', 'the lease of the test before runs');
    const askedAt = Date.now();
    const r = await post(j.secondUrl, { serve: 'slow', lease_s: 600 });
    assert.equal(r.status, 202);
    const result = await resultOf(r);
    console.log(`  acquisition: ${result.outcome}: ${result.message}`);
    assert.equal(result.outcome, 'already-running');
    assert.equal(result.lease?.how, 'at-least');
    const longer = await waitFor('the lease moved to about 600 s', async () => {
      const l = await leaseOf('slow');
      return (l.view?.expiresAtEpochMs ?? 0) - askedAt > 590_000 ? l : undefined;
    });
    console.log(`  lease/${j.box.node}/slow: ${longer.status}, ${Math.round(((longer.view?.expiresAtEpochMs ?? 0) - Date.now()) / 1000)} s left`);
    assert.equal(longer.runId, before.runId, 'the same lease, not a new one');
    assert.equal(longer.view?.holder, before.view?.holder, 'still fenced to the acquisition that holds slow');
    assert.equal(longer.view?.kind, 'fixed');

    // The CLI's `serves up slow --lease 30s`, the same path: 30 s is less than what is left.
    const cli = await serveAcquire(j.box.temporal.client, j.box.node, { serve: 'slow', lease: { kind: 'fixed', seconds: 30 } });
    assert.ok(cli.ok, cli.ok ? '' : cli.message);
    console.log(`  serves up slow --lease 30s: ${cli.result.message}`);
    assert.equal(cli.result.outcome, 'already-running');
    // The lease answered the CLI's terms (its atLeastAnswered Update) before the acquisition
    // completed: taken, so an unchanged expiry now says "never shorter".
    assert.equal(cli.result.lease?.how, 'at-least', 'the lease took the terms');
    const after = await leaseOf('slow');
    assert.equal(after.view?.expiresAtEpochMs, longer.view?.expiresAtEpochMs, 'a shorter lease asked leaves the expiry as it was');
    assert.ok((await running()).some((n) => n.includes('slow')));
  });

  test('a POST with lease_s for a serve brought up without one: a lease fenced to its holder, which brings it down at expiry', async () => {
    const up = await serveUp(j.box.temporal.client, j.box.node, 'plain');
    assert.ok(up.ok, up.ok ? '' : up.message);
    assert.equal((await leaseOf('plain')).status, 'none', 'plain runs with no lease');
    const r = await post(j.box.apiUrl, { serve: 'plain', lease_s: 4 });
    assert.equal(r.status, 202);
    const result = await resultOf(r);
    console.log(`  acquisition: ${result.outcome}: ${result.message}`);
    assert.equal(result.outcome, 'already-running');
    assert.equal(result.lease?.how, 'started');
    const lease = await leaseOf('plain');
    // Already over (4 s) on a slow machine: its result then says what it did.
    if (lease.status === 'RUNNING') assert.equal(lease.view?.holder, `${up.workflowId}/${up.runId}`, 'fenced to the bring-up that holds plain');
    else assert.notEqual(lease.status, 'none', 'a lease was started');
    // The box: at the expiry, plain goes down, by the lease's own bring-down.
    await waitUntil('plain is down', async () => !(await running()).some((n) => n.includes('plain')), 60_000);
    const ended = (await j.box.temporal.client.workflow.getHandle(workflowIds.lease(j.box.node, 'plain')).result()) as LeaseResult;
    console.log(`  lease/${j.box.node}/plain: ${ended.outcome}: ${ended.message}`);
    assert.equal(ended.outcome, 'expired');
  });

  test("the router's POST (its idle lease, no lease_s) for a serve brought up by hand: no lease is put on it, and it stays up", async () => {
    const up = await serveUp(j.box.temporal.client, j.box.node, 'handy');
    assert.ok(up.ok, up.ok ? '' : up.message);
    const r = await post(j.box.apiUrl, { serve: 'handy', trigger: 'router' });
    assert.equal(r.status, 202);
    const result = await resultOf(r);
    console.log(`  acquisition: ${result.outcome}: ${result.message}`);
    assert.equal(result.outcome, 'already-running');
    assert.equal(result.lease, undefined, 'no lease on a serve an operator brought up');
    assert.match(result.leaseNotApplied?.[0] ?? '', /held by serves-up\/.*not by an acquisition/);
    // Were a 3 s idle lease started, its bring-down would have taken handy well within this.
    await sleep(15_000);
    assert.equal((await leaseOf('handy')).status, 'none');
    assert.ok(
      (await running()).some((n) => n.includes('handy')),
      'handy, brought up by hand, is still up',
    );
  });

  test('a POST with lease_s for a serve whose lease is expiring: the answer says the lease was not applied and the serve goes down', async () => {
    // A serves down under the CLI's id that nothing works on (another task queue): at its expiry
    // the lease finds it under way and waits it out, expiring, while ending still runs, held by
    // its acquisition. Started first, so the lease's expiry cannot come before it.
    const stuck = await stuckBringDown(j.box, 'ending');
    const first = await post(j.box.apiUrl, { serve: 'ending', lease_s: 2 });
    assert.equal(first.status, 202);
    assert.equal((await resultOf(first)).outcome, 'started');
    await waitUntil('the lease of ending is expiring', async () => (await leaseOf('ending')).view?.state === 'expiring', 30_000, 100);

    const r = await post(j.secondUrl, { serve: 'ending', lease_s: 600 });
    assert.equal(r.status, 202);
    const result = await resultOf(r);
    console.log(`  acquisition: ${result.outcome}: ${result.message}`);
    assert.equal(result.outcome, 'already-running');
    assert.doesNotMatch(result.message, /asked to last at least/, 'the lease did not take the terms: the answer must not say it did');
    assert.equal(result.lease, undefined, 'no lease was made to last 600 s');
    assert.match(result.leaseNotApplied?.[0] ?? '', /^lease of 10m not applied: lease\/.*\/ending is expiring \(expired at .*\): .*ending will not stay up/);
    assert.deepEqual(
      result.leaseTermsNotApplied?.map((t) => [t.asked, t.leaseState, t.serveStays]),
      [[{ kind: 'fixed', seconds: 600 }, 'expiring', false]],
    );
    // What the router or a script reads: the API's own answer.
    const got = await fetch(`${j.box.apiUrl}/v1/acquisitions/${encodeURIComponent(r.body.workflow_id)}`, {
      headers: { authorization: `Bearer ${j.box.apiToken}` },
    });
    const body = (await got.json()) as { status: string; result?: AcquireResult };
    assert.equal(body.status, 'completed');
    assert.deepEqual(body.result?.leaseTermsNotApplied?.[0]?.serveStays, false);

    // The operator's `serves up ending --lease 10m`, as a process: not 0, and says ending goes down.
    const cli = await gpures(
      ['serves', 'up', 'ending', '--lease', '10m', '--manifest', j.box.manifestPath],
      { TEMPORAL_ADDRESS: j.box.temporal.address },
      120_000,
    );
    console.log(`  gpures serves up ending --lease 10m: exit ${cli.code}; stderr: ${cli.stderr.trim().split('\n').slice(-2).join(' | ')}`);
    assert.equal(cli.code, EXIT_NOT_LEASED, show(cli));
    assert.match(cli.stderr, /ending is up but not leased, and is going down: lease of 10m not applied: lease\/.*\/ending is expiring/, show(cli));

    // The box: once the other serves down is out of the way, the lease brings ending down, as answered.
    await stuck.terminate('test over');
    const ended = (await j.box.temporal.client.workflow.getHandle(workflowIds.lease(j.box.node, 'ending')).result()) as LeaseResult;
    console.log(`  lease/${j.box.node}/ending: ${ended.outcome}: ${ended.message}`);
    assert.equal(ended.outcome, 'expired');
    await waitUntil('ending is down', async () => !(await running()).some((n) => n.includes('ending')), 60_000);
  });

  test('serves up --lease for a serve no run holds (its ledger started afresh found it running): exit 5, up but not leased, and it stays up', async () => {
    // A container an older gpures started (no holder label), running when its GPU's ledger is
    // started afresh: the ledger holds it as 'reconciled from container …', no run a lease could be fenced to.
    const spec = j.box.manifest.serves.find((s) => s.name === 'orphan');
    const gpu = j.box.manifest.gpus[0];
    assert.ok(spec && gpu);
    const name = containerName(j.box.node, 'orphan');
    await j.box.runtime.ensureRunning({
      name,
      image: spec.image,
      cmd: serveCommand(spec),
      env: spec.env,
      labels: serveLabels(j.box.node, spec, gpu, workflowIds.ledger(j.box.node, gpu.role)),
      bind: spec.bind,
      hostPort: spec.port,
      containerPort: spec.containerPort,
      gpuUuid: gpu.uuid,
    });
    // (None runs when this test runs alone: the acquisition then starts it afresh all the same.)
    await j.box.temporal.client.workflow
      .getHandle(workflowIds.ledger(j.box.node, gpu.role))
      .terminate('test: a ledger started afresh')
      .catch((err: unknown) => assert.ok(err instanceof WorkflowNotFoundError, String(err)));

    const cli = await gpures(
      ['serves', 'up', 'orphan', '--lease', '10m', '--manifest', j.box.manifestPath],
      { TEMPORAL_ADDRESS: j.box.temporal.address },
      120_000,
    );
    console.log(`  gpures serves up orphan --lease 10m: exit ${cli.code}; stderr: ${cli.stderr.trim().split('\n').slice(-2).join(' | ')}`);
    assert.equal(cli.code, EXIT_NOT_LEASED, show(cli));
    assert.match(
      cli.stderr,
      /orphan is up but not leased: lease of 10m not applied: orphan is held by 'reconciled from container .*', no run a lease's bring-down could be fenced to; it stays up, nothing undone, until serves down/,
      show(cli),
    );
    // --json: the same exit, and the terms not applied in the result a program reads.
    const json = await gpures(
      ['serves', 'up', 'orphan', '--lease', '10m', '--json', '--manifest', j.box.manifestPath],
      { TEMPORAL_ADDRESS: j.box.temporal.address },
      120_000,
    );
    assert.equal(json.code, EXIT_NOT_LEASED, show(json));
    const data = JSON.parse(json.stdout) as { outcomes: { ok: boolean; result?: AcquireResult }[] };
    assert.deepEqual(
      data.outcomes.map((o) => [o.ok, o.result?.outcome, o.result?.leaseTermsNotApplied?.map((t) => [t.asked, t.serveStays])]),
      [[true, 'already-running', [[{ kind: 'fixed', seconds: 600 }, true]]]],
    );
    // Nothing was undone: the box still runs it, and no lease was started.
    assert.equal((await j.box.runtime.inspect(name))?.running, true, 'orphan still runs');
    assert.equal((await leaseOf('orphan')).status, 'none');
  });

  test("the router's POST joining an operator's acquisition without a lease: no idle lease is put on the serve, it stays up, and serves up exits 0", async () => {
    // The operator's `serves up kept --evict`, no --lease: up until serves down (README, Leases); a process.
    const operator = gpures(
      ['serves', 'up', 'kept', '--evict', '--json', '--manifest', j.box.manifestPath],
      { TEMPORAL_ADDRESS: j.box.temporal.address },
      120_000,
    );
    const id = workflowIds.acquire(j.box.node, 'kept');
    await waitUntil(
      "the operator's acquisition runs",
      async () =>
        (
          await j.box.temporal.client.workflow
            .getHandle(id)
            .describe()
            .catch(() => undefined)
        )?.status.name === 'RUNNING',
      60_000,
      50,
    );
    // Requests for kept's tier meanwhile: the router's POST (its idle terms, no lease_s) joins the run.
    const joined = await post(j.box.apiUrl, { serve: 'kept', trigger: 'router' });
    assert.equal(joined.status, 202);
    const cli = await operator;
    console.log(`  gpures serves up kept --evict: exit ${cli.code}`);
    // The router's idle terms are not the command's --lease (it asked none): not exit 5.
    assert.equal(cli.code, 0, show(cli));
    const data = JSON.parse(cli.stdout) as { outcomes: { ok: boolean; workflowId: string; runId: string; result?: AcquireResult }[] };
    const op = data.outcomes[0];
    assert.ok(op?.ok && op.result, show(cli));
    assert.equal(joined.body.run_id, op.runId, "the router's POST joined the operator's run");
    console.log(`  joined: ${op.result.outcome}: ${op.result.message}`);
    // Were a 3 s idle lease started, its bring-down would have taken kept well within this.
    await sleep(15_000);
    const lease = await leaseOf('kept');
    const names = await running();
    console.log(`  after 15 s: lease/${j.box.node}/kept ${lease.status}; running: ${names.join(', ')}`);
    assert.ok(
      names.some((n) => n.includes('kept')),
      'kept, acquired by its operator without a lease, is still up',
    );
    assert.equal(lease.status, 'none', 'no lease was started for kept');
    assert.equal(op.result.outcome, 'started');
    assert.equal(op.result.lease, undefined);
    assert.match(op.result.leaseNotApplied?.[0] ?? '', /^idle lease not applied: no lease runs for kept/);
    assert.deepEqual(
      op.result.leaseTermsNotApplied?.map((t) => [t.asked, t.leaseState, t.serveStays]),
      [[{ kind: 'idle' }, 'none', true]],
    );
  });

  test("the router's POST finding up a serve an operator acquired without a lease: no idle lease is put on it, and it stays up", async () => {
    const op = await serveAcquire(j.box.temporal.client, j.box.node, { serve: 'owned', evict: true });
    assert.ok(op.ok, op.ok ? '' : op.message);
    assert.equal(op.result.lease, undefined);
    // Its backend refused a connection: the router's POST finds owned up, held by the operator's acquisition.
    const r = await post(j.box.apiUrl, { serve: 'owned', trigger: 'router' });
    assert.equal(r.status, 202);
    const found = await resultOf(r);
    console.log(`  already running: ${found.outcome}: ${found.message}`);
    await sleep(15_000);
    const lease = await leaseOf('owned');
    const names = await running();
    console.log(`  after 15 s: lease/${j.box.node}/owned ${lease.status}; running: ${names.join(', ')}`);
    assert.ok(
      names.some((n) => n.includes('owned')),
      'owned, acquired by its operator without a lease, is still up',
    );
    assert.equal(lease.status, 'none', 'no lease was started for owned');
    assert.equal(found.outcome, 'already-running');
    assert.equal(found.lease, undefined);
    assert.match(found.leaseNotApplied?.[0] ?? '', /^idle lease not applied: no lease runs for owned/);
    assert.deepEqual(
      found.leaseTermsNotApplied?.map((t) => [t.asked, t.leaseState, t.serveStays]),
      [[{ kind: 'idle' }, 'none', true]],
    );
  });

  test("the router's POST for a serve re-acquired without a lease while its old lease runs on: that lease is not moved to it, and it stays up", async () => {
    const first = await serveAcquire(j.box.temporal.client, j.box.node, { serve: 'relet', lease: { kind: 'fixed', seconds: 600 } });
    assert.ok(first.ok, first.ok ? '' : first.message);
    const down = await serveDown(j.box.temporal.client, j.box.node, 'relet');
    assert.ok(down.ok, down.ok ? '' : down.message);
    // The lease of the first acquisition runs on (its expiry will find relet no longer its own).
    const old = await leaseOf('relet');
    assert.equal(old.status, 'RUNNING');
    const again = await serveAcquire(j.box.temporal.client, j.box.node, { serve: 'relet', evict: true });
    assert.ok(again.ok, again.ok ? '' : again.message);
    assert.equal(again.result.outcome, 'started');
    const r = await post(j.box.apiUrl, { serve: 'relet', trigger: 'router' });
    assert.equal(r.status, 202);
    const found = await resultOf(r);
    console.log(`  already running: ${found.outcome}: ${found.message}`);
    await sleep(15_000);
    const lease = await leaseOf('relet');
    const names = await running();
    console.log(`  after 15 s: lease/${j.box.node}/relet ${lease.status} ${JSON.stringify(lease.view)}; running: ${names.join(', ')}`);
    assert.ok(
      names.some((n) => n.includes('relet')),
      'relet, acquired again by its operator without a lease, is still up',
    );
    assert.equal(lease.runId, old.runId, 'the same lease');
    assert.equal(lease.view?.holder, `${first.workflowId}/${first.runId}`, 'still held by the first acquisition, which no longer holds relet');
    assert.equal(lease.view?.kind, 'fixed');
    assert.equal(found.lease, undefined);
    assert.match(
      found.leaseNotApplied?.[0] ?? '',
      new RegExp(
        `^idle lease not applied: lease/.*/relet runs for another run \\(held by ${first.workflowId}/${first.runId}\\), not for ${again.workflowId}/${again.runId}`,
      ),
    );
    assert.deepEqual(
      found.leaseTermsNotApplied?.map((t) => [t.asked, t.leaseState, t.serveStays]),
      [[{ kind: 'idle' }, 'not-this-holder', true]],
    );
    // The runs that took the idle terms (joined, already running, the lease that answered them) replay against the bundle.
    const histories = [
      j.box.temporal.client.workflow.getHandle(workflowIds.acquire(j.box.node, 'kept')),
      j.box.temporal.client.workflow.getHandle(workflowIds.acquire(j.box.node, 'owned')),
      j.box.temporal.client.workflow.getHandle(r.body.workflow_id, r.body.run_id),
      j.box.temporal.client.workflow.getHandle(workflowIds.lease(j.box.node, 'relet')),
    ];
    for (const h of histories) {
      await Worker.runReplayHistory({ workflowBundle: await workflowBundle(), sinks: UNCOUNTED_SINKS }, await h.fetchHistory(), h.workflowId);
    }
  });
});
