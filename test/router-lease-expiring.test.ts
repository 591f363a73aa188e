// The router's acquisition for held requests, racing the serve's own lease expiry. The serve is up
// under a lease that has already begun to expire: its bring-down is about to quiesce, drain and
// stop it. The router's POST then completes `already-running`, and only the result's
// leaseTermsNotApplied (`serveStays: false`) says the serve will not stay. Read as "ready", the
// held requests went to the serve the bring-down then stopped, and the next ones met the
// bring-down. Chosen behaviour (docs/on-demand.md, step 3): the tier stays quiesced and the queue
// held while the bring-down runs; the router acquires again once the serve is down, and releases
// the queue onto the serve started afresh. A real router process (main.js), the acquisition API,
// a worker on a real dev server, sim serves; the box is sampled: the containers running and the
// router's tier state, over time, and which container answered the held request.
// The h case: the router hears of its acquisition only after the lease has taken the serve down
// and run on as another caller's renewal (a lease that runs, not expiring, over a serve that is down).
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { leaseQuery, renewLeaseSignal, workflowIds } from '../src/shared/messages';
import type { AcquireResult, LeaseResult } from '../src/shared/operations';
import type { TestServe } from './support/box';
import { startOnDemandBox } from './support/on-demand-box';
import { stuckBringDown } from './support/acquisition-callers';
import type { OnDemandBox } from './support/on-demand-box';
import { StallingProxy } from './support/stalling-proxy';
import { sleep, waitUntil } from './support/wait';

const GPU = { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 };
// Declares an idle ttl: the router's POST carries its idle terms, and so hears what the lease answers them.
// f's tier holds a request 3 s only: its lease's bring-down outlasts that.
const SERVES: TestServe[] = [
  { name: 'e', vram_mib: 4096, class: 'on-demand', router_tier: 'e-local', idle_ttl_s: 600 },
  { name: 'f', vram_mib: 4096, class: 'on-demand', router_tier: 'f-local', idle_ttl_s: 600 },
  // Declares none: the router's POST carries no lease terms, and the acquisition's result says nothing of the lease.
  { name: 'g', vram_mib: 4096, class: 'on-demand', router_tier: 'g-local' },
  // As g; its lease runs on as a renewal once it has taken h down.
  { name: 'h', vram_mib: 4096, class: 'on-demand', router_tier: 'h-local' },
];

interface Sample {
  atMs: number;
  containers: string;
  tier: string;
}

/** The box every 100 ms: containers (name, id, running) and the router's tier, kept when they change. */
class BoxSampler {
  readonly samples: Sample[] = [];
  private stopped = false;
  private done: Promise<void> | undefined;

  constructor(
    private readonly box: OnDemandBox,
    private readonly t0: number,
    private readonly tier: string,
  ) {}

  start(): void {
    this.done = (async () => {
      while (!this.stopped) {
        const containers = (await this.box.runtime.list({}))
          .map((c) => `${c.name.replace(/^.*-/, '')}:${c.id.slice(0, 8)}:${c.running ? 'running' : 'exited'}`)
          .join(' ');
        const t = (await this.box.tiers()).find((x) => x.tier === this.tier);
        // What the router says of its acquisition: the serve going down, or being acquired.
        const phase = t?.acquisition ? (t.acquisition.serveGoingDown !== undefined ? ' going-down' : ' acquiring') : '';
        const tier = `${t?.state} queued ${t?.queued}${phase}`;
        const last = this.samples[this.samples.length - 1];
        if (!last || last.containers !== containers || last.tier !== tier) this.samples.push({ atMs: Date.now() - this.t0, containers, tier });
        await sleep(100);
      }
    })();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.done;
  }

  /** When `id` was first sampled not running (relative to t0). */
  stoppedAt(id: string): number | undefined {
    return this.samples.find((s) => s.containers.includes(`:${id.slice(0, 8)}:exited`) || !s.containers.includes(`:${id.slice(0, 8)}:`))?.atMs;
  }

  /** The router's phases of the tier in the order sampled, each once in a row: `going-down`, `acquiring`, `active`. */
  phases(): string[] {
    const named = this.samples.map((s) => (s.tier.startsWith('active') ? 'active' : (s.tier.match(/ (going-down|acquiring)$/)?.[1] ?? 'none')));
    return named.filter((p, i) => p !== named[i - 1]);
  }

  print(): void {
    for (const s of this.samples)
      console.log(`    +${String(s.atMs).padStart(6)} ms  ${this.tier} ${s.tier.padEnd(20)} containers: ${s.containers || '(none)'}`);
  }
}

describe("the router's held requests, racing the serve's lease expiry", () => {
  let box: OnDemandBox;
  // Between the router process and the API: holds the router's status GETs of its acquisitions when stalled.
  const proxy = new StallingProxy((method, url) => method === 'GET' && url.startsWith('/v1/acquisitions/'));

  before(async () => {
    box = await startOnDemandBox({
      prefix: 'router-lx',
      gpu: GPU,
      serves: SERVES,
      retryAfterS: 1,
      onDemand: [
        { tier: 'e-local', serve: 'e', wait_timeout_s: 120 },
        { tier: 'f-local', serve: 'f', wait_timeout_s: 3 },
        { tier: 'g-local', serve: 'g', wait_timeout_s: 120 },
        { tier: 'h-local', serve: 'h', wait_timeout_s: 120 },
      ],
      routerProcess: true,
      routerApiUrl: (apiUrl) => proxy.start(apiUrl),
    });
  });
  after(async () => {
    await box?.close();
    await proxy.close();
  });

  const chat = (model: string) => box.chat(model);
  const containerOf = async (serve: string) => (await box.runtime.list({})).find((c) => c.name.endsWith(`-${serve}`) && c.running);

  /**
   * `serve` up under a 2 s lease that is expiring, its bring-down not yet begun, and its tier
   * quiesced by the operator: a request to it is now held, and the router acquires the serve.
   */
  const expiringWhileQuiesced = async (serve: string) => {
    // A serves down under the CLI's id that nothing works on (another task queue): at its expiry
    // the lease finds it under way and waits it out, expiring, while the serve still runs, held by
    // its acquisition: the window between a lease's expiry and its bring-down taking the serve, held open.
    const stuck = await stuckBringDown(box, serve);
    // The operator's acquisition with a 2 s lease.
    const res = await fetch(`${box.apiUrl}/v1/acquisitions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${box.apiToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ serve, lease_s: 2 }),
    });
    const posted = (await res.json()) as { workflow_id: string; run_id: string };
    const acquired = (await box.temporal.client.workflow.getHandle(posted.workflow_id, posted.run_id).result()) as AcquireResult;
    assert.equal(acquired.outcome, 'started', acquired.message);
    const first = await containerOf(serve);
    assert.ok(first, `${serve} runs`);
    const lease = box.temporal.client.workflow.getHandle(workflowIds.lease(box.node, serve));
    await waitUntil(`the lease of ${serve} expiring`, async () => (await lease.query(leaseQuery)).state === 'expiring', 30_000, 100);
    await box.admin.quiesce(`${serve}-local`);
    return { stuck, posted, first, lease };
  };

  /** The router's acquisition of `serve`, the run after the operator's (`posted`), once it has completed. */
  const routersCompleted = async (serve: string, posted: { workflow_id: string; run_id: string }): Promise<AcquireResult> => {
    const acquisition = box.temporal.client.workflow.getHandle(posted.workflow_id);
    let routers: AcquireResult | undefined;
    await waitUntil(
      `the router's acquisition of ${serve} completed`,
      async () => {
        const d = await acquisition.describe();
        if (d.runId === posted.run_id || d.status.name !== 'COMPLETED') return false;
        routers = (await box.temporal.client.workflow.getHandle(posted.workflow_id, d.runId).result()) as AcquireResult;
        return true;
      },
      30_000,
      50,
    );
    assert.ok(routers);
    return routers;
  };

  const heldWhileExpiring = async (serve: 'e' | 'g') => {
    const { stuck, posted, first, lease } = await expiringWhileQuiesced(serve);
    const t0 = Date.now();
    const sampler = new BoxSampler(box, t0, `${serve}-local`);
    sampler.start();
    const held = chat(serve);
    const routers = await routersCompleted(serve, posted);
    const completedAt = Date.now() - t0;
    // Long enough for the router to hear it (it polls every 500 ms) and act on it.
    await sleep(2000);
    const tierBeforeDown = (await box.tiers()).find((t) => t.tier === `${serve}-local`);
    // Now the lease's bring-down goes ahead: it quiesces the tier, drains and stops the serve.
    await stuck.terminate(`test over: the lease takes ${serve} down`);
    const downAt = Date.now() - t0;

    const heldRes = await held;
    const heldAt = Date.now() - t0;
    const heldBody = (await heldRes.json()) as { sim_answered_at_ms?: number; error?: { code: string; message: string } };
    const ended = (await lease.result()) as LeaseResult;
    const next = await chat(serve);
    const nextBody = (await next.json()) as { sim_answered_at_ms?: number; error?: { code: string } };
    await sleep(300);
    await sampler.stop();
    const now = await containerOf(serve);
    const answeredAt = heldBody.sim_answered_at_ms !== undefined ? heldBody.sim_answered_at_ms - t0 : undefined;
    const firstStoppedAt = sampler.stoppedAt(first.id);

    console.log(`  router's acquisition (+${completedAt} ms): ${routers.outcome}; leaseTermsNotApplied ${JSON.stringify(routers.leaseTermsNotApplied)}`);
    console.log(
      `  ${serve}-local 2 s later, before the lease's bring-down goes ahead (+${downAt} ms): ${tierBeforeDown?.state}, queued ${tierBeforeDown?.queued}`,
    );
    console.log(
      `  held request: ${heldRes.status} at +${heldAt} ms, ${heldBody.error ? `${heldBody.error.code}: ${heldBody.error.message}` : `answered by ${serve} at +${answeredAt} ms (tier ${heldRes.headers.get('x-gpures-tier')})`}`,
    );
    console.log(`  ${serve}'s first container ${first.id.slice(0, 8)} stopped by +${firstStoppedAt} ms; ${serve} now ${now ? now.id.slice(0, 8) : 'down'}`);
    console.log(`  lease/${box.node}/${serve}: ${ended.outcome}: ${ended.message}`);
    console.log(`  next request: ${next.status}${nextBody.error ? ` ${nextBody.error.code}` : ''}`);
    console.log('  the box, sampled:');
    sampler.print();

    assert.equal(routers.outcome, 'already-running');
    assert.equal(ended.outcome, 'expired', `the lease's bring-down took ${serve} down`);
    assert.ok(firstStoppedAt !== undefined, `${serve}'s first container was stopped`);
    assert.equal(heldRes.status, 200, JSON.stringify(heldBody));
    assert.ok(
      answeredAt !== undefined && answeredAt > firstStoppedAt,
      `the held request was answered at +${answeredAt} ms by ${serve}'s container ${first.id.slice(0, 8)}, which the lease's bring-down stopped by +${firstStoppedAt} ms`,
    );
    assert.equal(tierBeforeDown?.state, 'quiesced', `the router readmitted ${serve}-local onto the ${serve} its expiring lease was taking down`);
    assert.ok(now && now.id !== first.id, `${serve} runs afresh, in a container of its own`);
    assert.equal(next.status, 200, `the next request is answered by ${serve} as it now runs`);
    assert.ok((nextBody.sim_answered_at_ms ?? 0) - t0 > firstStoppedAt);
    assert.equal((await containerOf(serve))?.id, now.id, 'no other acquisition since');
    // The admin state follows the acquisitions' answers: going down while they say so, then
    // acquiring and active; never going down once the serve runs afresh. The acquiring phase may
    // fall between two samples on a loaded host, so it is not required to be seen.
    const phases = sampler.phases();
    const seen = `${serve}-local's phases as sampled: ${phases.join(' → ')}`;
    assert.ok(phases.includes('going-down'), seen);
    const afterDown = phases.slice(phases.lastIndexOf('going-down') + 1);
    assert.ok(afterDown.includes('active'), seen);
    const runsAfresh = (s: Sample) =>
      s.containers.split(' ').some((c) => c.startsWith(`${serve}:`) && c.endsWith(':running') && !c.includes(first.id.slice(0, 8)));
    const stale = sampler.samples.filter((s) => s.tier.endsWith(' going-down') && runsAfresh(s)).map((s) => `+${s.atMs} ms ${s.tier} (${s.containers})`);
    assert.deepEqual(stale, [], `${serve}-local said going down while ${serve} ran afresh`);
    return routers;
  };

  test("a request held while e's lease expires is answered by e started afresh, not by the e its lease's bring-down stops", async () => {
    const routers = await heldWhileExpiring('e');
    // e declares an idle ttl: the router's POST carried idle terms, and the result says the lease did not take them.
    assert.deepEqual(
      routers.leaseTermsNotApplied?.map((t) => [t.leaseState, t.serveStays]),
      [['expiring', false]],
    );
  });

  test("the same for g, which declares no idle ttl: the router's POST carries no terms, yet it hears that g is going down", async () => {
    const routers = await heldWhileExpiring('g');
    assert.equal(routers.leaseTermsNotApplied, undefined, "the router's acquisition asked g's lease nothing");
  });

  test("a request held while f's lease expires, whose wait_timeout_s ends first: 503 wait_timeout saying f is going down, never answered by that f", async () => {
    const { stuck, first, lease } = await expiringWhileQuiesced('f');
    const t0 = Date.now();
    const sampler = new BoxSampler(box, t0, 'f-local');
    sampler.start();
    const res = await chat('f');
    const at = Date.now() - t0;
    const body = (await res.json()) as { error?: { code: string; message: string } };
    const f = (await box.tiers()).find((t) => t.tier === 'f-local');
    const stillRunning = (await containerOf('f'))?.id === first.id;
    await stuck.terminate('test over: the lease takes f down');
    const ended = (await lease.result()) as LeaseResult;
    // Nobody is held any more: the router stops asking once f is down, and starts nothing.
    await waitUntil("the router's acquisition of f over", async () => (await box.tiers()).find((t) => t.tier === 'f-local')?.acquisition === null, 30_000, 100);
    await sleep(1500);
    await sampler.stop();
    console.log(`  held request: ${res.status} at +${at} ms, Retry-After ${res.headers.get('retry-after')}: ${body.error?.code}: ${body.error?.message}`);
    console.log(`  then f-local ${f?.state}, its first container still running: ${stillRunning}; lease/${box.node}/f: ${ended.outcome}`);
    console.log('  the box, sampled:');
    sampler.print();
    assert.equal(res.status, 503, `the held request was answered ${res.status} by the f its lease was taking down`);
    assert.equal(res.headers.get('retry-after'), '1');
    assert.equal(body.error?.code, 'wait_timeout');
    assert.match(
      body.error?.message ?? '',
      /serve 'f' was up but going down \(idle lease not applied: .* is expiring .*\): the router waits for it to be down/,
    );
    assert.equal(f?.state, 'quiesced');
    assert.ok(stillRunning, 'f was still up when the request was refused');
    assert.equal(ended.outcome, 'expired');
    assert.equal(await containerOf('f'), undefined, 'f is down, and nobody held asked for it again');
  });

  test("a request held while h's lease takes h down and runs on as another caller's renewal: the router hears h went down, and h is started afresh", async () => {
    const { stuck, posted, first, lease } = await expiringWhileQuiesced('h');
    const t0 = Date.now();
    const sampler = new BoxSampler(box, t0, 'h-local');
    sampler.start();
    // The router hears of its acquisition only once the lease has run on (its API slow to answer).
    proxy.stall();
    const held = chat('h');
    const routers = await routersCompleted('h', posted);
    await waitUntil("the router's status GET held", () => proxy.held > 0, 10_000, 20);
    const endingRun = (await lease.describe()).runId;
    // Another caller's renewal while the lease is expiring: a holder that does not hold h when the
    // lease's bring-down takes it (the signal an acquisition's hand-over sends; the UI's Signal sends the same).
    const renewedFor = `${workflowIds.acquire(box.node, 'h')}/${randomUUID()}`;
    await lease.signal(renewLeaseSignal, { holder: renewedFor, kind: 'fixed', seconds: 3600 });
    await stuck.terminate('test over: the lease takes h down');
    await waitUntil(
      'the lease running on as the renewal',
      async () => {
        const d = await lease.describe();
        return d.runId !== endingRun && d.status.name === 'RUNNING';
      },
      90_000,
      200,
    );
    const renewedAt = Date.now() - t0;
    const view = await lease.query(leaseQuery);
    const hAfterRenewal = await containerOf('h');
    // What the router's GET is about to be answered, asked of the API directly.
    const status = (await (
      await fetch(`${box.apiUrl}/v1/acquisitions/${encodeURIComponent(posted.workflow_id)}`, { headers: { authorization: `Bearer ${box.apiToken}` } })
    ).json()) as { status: string; serve_going_down?: string };
    proxy.resume();

    const heldRes = await held;
    const heldAt = Date.now() - t0;
    const heldBody = (await heldRes.json()) as { sim_answered_at_ms?: number; error?: { code: string; message: string } };
    await sleep(300);
    await sampler.stop();
    const now = await containerOf('h');
    const answeredAt = heldBody.sim_answered_at_ms !== undefined ? heldBody.sim_answered_at_ms - t0 : undefined;
    const firstStoppedAt = sampler.stoppedAt(first.id);
    console.log(
      `  router's acquisition: ${routers.outcome}; lease ${view.state} for ${view.holder} from +${renewedAt} ms; h then ${hAfterRenewal ? 'running' : 'down'}`,
    );
    console.log(`  the API's answer then: ${status.status}; serve_going_down ${JSON.stringify(status.serve_going_down)}`);
    console.log(
      `  held request: ${heldRes.status} at +${heldAt} ms, ${heldBody.error ? `${heldBody.error.code}: ${heldBody.error.message}` : `answered by h at +${answeredAt} ms`}`,
    );
    console.log(`  h's first container ${first.id.slice(0, 8)} stopped by +${firstStoppedAt} ms; h now ${now ? now.id.slice(0, 8) : 'down'}`);
    console.log('  the box, sampled:');
    sampler.print();

    assert.equal(routers.outcome, 'already-running');
    assert.equal(view.state, 'running');
    assert.equal(view.holder, renewedFor);
    assert.equal(hAfterRenewal, undefined, "the lease's bring-down took h down before it ran on");
    assert.match(
      status.serve_going_down ?? '',
      /ended at .* and runs on as a renewal for another caller .*: its end brings h down, so h may be down already; ask again$/,
    );
    assert.equal(heldRes.status, 200, JSON.stringify(heldBody));
    assert.ok(now && now.id !== first.id, 'h runs afresh, in a container of its own');
    assert.ok(
      firstStoppedAt !== undefined && answeredAt !== undefined && answeredAt > firstStoppedAt,
      `answered at +${answeredAt} ms, h first stopped by +${firstStoppedAt} ms`,
    );
    // The router never let h-local back while no h ran.
    const activeOverNothing = sampler.samples
      .filter((s) => s.tier.startsWith('active') && !/(^| )h:[^ ]+:running/.test(s.containers))
      .map((s) => `+${s.atMs} ms`);
    assert.deepEqual(activeOverNothing, [], 'h-local active with no h running');
  });
});
