// Two nodes against one Temporal, as an operator runs them: two manifests, two worker processes
// (task queues gpures.<node>), each in a network namespace of its own whose only way out is a veth
// to a forwarder to Temporal, its serves (simulated vLLM processes) on its own loopback. Through
// the real CLI: `ledger --all`, `serves status --all` and `--node` find both nodes from Temporal;
// after kill -9 of node B's worker node A still works, B is reported unanswered and `serves up` on
// B is refused within seconds, starting nothing; B's worker restarted, B works again. The boxes
// themselves (the serve processes, their reserved MiB, their namespace) are sampled throughout.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WorkflowNotFoundError } from '@temporalio/client';
import { LABEL } from '../src/domain/serve';
import { NODE_ANSWER_MS, workflowIds } from '../src/shared/messages';
import { FAKE_NVIDIA_SMI } from '../src/sim/box';
import { SimRuntime } from '../src/sim/runtime';
import { processAlive } from '../src/adapters/host-process';
import { listSimContainers } from '../src/sim/state-dir';
import { renderManifest, uniqueNode } from './support/box';
import type { TestServe } from './support/box';
import { gpures, ROOT, show, startWorkerProcess } from './support/cli';
import type { Run, WorkerProcess } from './support/cli';
import { connectFrom, createNodeNetns, netnsOf, removeStaleNetns } from './support/netns';
import type { NodeNetns } from './support/netns';
import { productionTemporal } from './support/prod-temporal';
import type { TestTemporal } from './support/temporal';

/** The one place the fleet's Temporal comes from: PostgreSQL and temporal-server, as a fleet would run. */
function fleetTemporal(): Promise<TestTemporal> {
  return productionTemporal();
}

const EXIT = { ok: 0, unreachable: 4 } as const;
/** The CLI's bound on a node's answer (NODE_ANSWER_MS) plus a process start on a loaded machine: generous, never a hang. */
const UNANSWERED_BOUND_MS = NODE_ANSWER_MS + 15_000;
const GPU = { role: 'gpu0', capacity_mib: 32607, reserve_mib: 4608 };
const FLEET_WORKER = join(ROOT, 'dist', 'test', 'support', 'fleet-worker.js');

interface FleetNode {
  id: 'a' | 'b';
  node: string;
  manifestPath: string;
  stateDir: string;
  serves: TestServe[];
  netns: NodeNetns;
  worker: WorkerProcess;
  startWorker(): Promise<WorkerProcess>;
}

/** What runs on a node's box: each sim serve process alive, its reserved MiB, and the namespace it is in. */
function sampleBox(n: FleetNode): { serve: string; vramMib: number; pid: number; netns: number | undefined }[] {
  return listSimContainers(n.stateDir)
    .filter(({ record }) => processAlive(record.pid, record.procStart))
    .map(({ record }) => ({
      serve: record.labels[LABEL.serve] ?? '?',
      vramMib: Number(record.labels[LABEL.vramMib]),
      pid: record.pid,
      netns: netnsOf(record.pid),
    }))
    .sort((x, y) => x.serve.localeCompare(y.serve));
}

function portOf(n: FleetNode, serve: string): number {
  const s = n.serves.find((x) => x.name === serve);
  assert.ok(s?.port, `no port for ${serve}`);
  return s.port;
}

describe('a fleet: two nodes, each in its own network namespace, against one Temporal', () => {
  let temporal: TestTemporal;
  const nodes: FleetNode[] = [];
  let env: Record<string, string>;
  const a = () => nodes[0] as FleetNode;
  const b = () => nodes[1] as FleetNode;
  const cli = (args: string[], timeoutMs = 120_000): Promise<Run> => gpures(args, env, timeoutMs);

  async function startNode(id: 'a' | 'b', index: number): Promise<void> {
    const node = uniqueNode(`fleet-${id}`);
    const dir = mkdtempSync(join(tmpdir(), `gpures-fleet-${id}-`));
    const base = 21000 + Math.floor(Math.random() * 8000);
    const serves: TestServe[] = [
      { name: `chat-${id}`, vram_mib: 14336, port: base },
      { name: `emb-${id}`, vram_mib: 3200, port: base + 1 },
    ];
    const text = renderManifest(node, [GPU], serves).replace(/^uuid = "GPU-[^"]*"$/m, `uuid = "GPU-${randomUUID()}"`);
    const manifestPath = join(dir, 'serves.toml');
    writeFileSync(manifestPath, text);
    const stateDir = join(dir, 'box');
    mkdirSync(stateDir);
    const uuid = /^uuid = "(GPU-[^"]*)"$/m.exec(text)?.[1] ?? '';
    const smiState = join(dir, 'nvidia-smi.json');
    writeFileSync(
      smiState,
      JSON.stringify({ gpus: [{ index: 0, uuid, name: 'NVIDIA GeForce RTX 5090', totalMib: GPU.capacity_mib, baseUsedMib: 1200 }], simStateDir: stateDir }),
    );
    const netns = await createNodeNetns(id, index, temporal.address);
    const workerEnv = { ...env, TEMPORAL_ADDRESS: netns.temporalAddress, GPURES_NVIDIA_SMI: FAKE_NVIDIA_SMI, FAKE_NVIDIA_SMI_STATE: smiState };
    const startWorker = () =>
      startWorkerProcess(['--manifest', manifestPath, '--state', stateDir], workerEnv, [...netns.exec, process.execPath, '--enable-source-maps', FLEET_WORKER]);
    // Until the node is in `nodes` (after() cleans up what is there), its namespace is this function's to remove.
    let worker: WorkerProcess;
    try {
      worker = await startWorker();
    } catch (err) {
      await netns.close();
      throw err;
    }
    const n: FleetNode = { id, node, manifestPath, stateDir, serves, netns, worker, startWorker };
    n.startWorker = async () => (n.worker = await startWorker());
    nodes.push(n);
  }

  before(async () => {
    const stale = await removeStaleNetns();
    if (stale.length) console.log(`removed what an earlier run left: ${stale.join(', ')}`);
    temporal = await fleetTemporal();
    // The namespace too: the production-shaped server's is its own to name.
    env = { TEMPORAL_ADDRESS: temporal.address, TEMPORAL_NAMESPACE: temporal.client.options.namespace };
    // One after the other, each in `nodes` once started: B failing to start leaves A to after().
    await startNode('a', 0);
    await startNode('b', 1);
  });

  after(async () => {
    for (const n of nodes) {
      try {
        await n.worker.stop();
        const runtime = new SimRuntime({ stateDir: n.stateDir });
        for (const c of await runtime.list({})) await runtime.remove(c.name);
      } finally {
        // Kills whatever is left in it, too.
        await n.netns.close();
      }
    }
    await temporal?.close();
  });

  test('each node brings a serve up; ledger --all and serves status --all list both, --node one; nothing crosses between nodes', async () => {
    for (const n of nodes) {
      const up = await cli(['serves', 'up', `chat-${n.id}`, '--manifest', n.manifestPath]);
      assert.equal(up.code, EXIT.ok, show(up));
    }
    // The boxes: one serve process each, in its node's namespace, reserving what the manifest says.
    for (const n of nodes) {
      const box = sampleBox(n);
      assert.deepEqual(
        box.map((s) => [s.serve, s.vramMib, s.netns]),
        [[`chat-${n.id}`, 14336, n.netns.inode]],
        `${n.node}'s box`,
      );
    }

    const all = await cli(['ledger', '--all']);
    assert.equal(all.code, EXIT.ok, show(all));
    for (const n of nodes) {
      const at = all.stdout.indexOf(`node '${n.node}' (task queue gpures.${n.node}):\n`);
      assert.ok(at >= 0, show(all));
      // The heading, then the ledger lines exactly as `gpures ledger` prints them.
      assert.ok(
        all.stdout
          .slice(at)
          .includes(
            `:\ngpu_role 'gpu0': capacity 32607 MiB, reserve 4608 MiB, committed 14336 MiB, free 13663 MiB\n  chat-${n.id} 14336 MiB (resident, running)\n`,
          ),
        show(all),
      );
    }
    const json = await cli(['ledger', '--all', '--json']);
    assert.equal(json.code, EXIT.ok, show(json));
    const data = JSON.parse(json.stdout) as {
      nodes: {
        node: string;
        answered: boolean;
        leasesPartial: boolean;
        ledgers: { gpuRole: string; committedMib: number; reservations: { serve: string }[] }[];
      }[];
    };
    // Each test file has a Temporal of its own: these two are all the nodes it knows.
    assert.deepEqual(
      data.nodes.map((x) => x.node),
      nodes.map((n) => n.node).sort(),
      "the fleet's Temporal holds only this test's nodes",
    );
    for (const n of nodes) {
      const entry = data.nodes.find((x) => x.node === n.node);
      assert.equal(entry?.answered, true, json.stdout);
      assert.equal(entry.leasesPartial, false, json.stdout);
      assert.deepEqual(
        entry.ledgers.map((l) => [l.gpuRole, l.committedMib, l.reservations.map((r) => r.serve)]),
        [['gpu0', 14336, [`chat-${n.id}`]]],
      );
    }

    const status = await cli(['serves', 'status', '--all']);
    assert.equal(status.code, EXIT.ok, show(status));
    assert.match(status.stdout, /^from Temporal, without the nodes' manifests: /, show(status));
    for (const n of nodes) {
      assert.match(
        status.stdout,
        new RegExp(`^node '${n.node}' \\(task queue gpures\\.${n.node}\\):\\n {2}chat-${n.id} +14336 MiB {2}resident {3}gpu0 +running$`, 'm'),
        show(status),
      );
    }

    // --node reads one node's ledgers, from anywhere, with no manifest.
    const one = await cli(['ledger', '--node', b().node]);
    assert.equal(one.code, EXIT.ok, show(one));
    assert.ok(one.stdout.startsWith(`node '${b().node}' (task queue gpures.${b().node}):\n`), show(one));
    assert.ok(!one.stdout.includes(a().node), show(one));
    const oneStatus = await cli(['serves', 'status', '--node', a().node, '--json']);
    assert.equal(oneStatus.code, EXIT.ok, show(oneStatus));
    const s = JSON.parse(oneStatus.stdout) as { nodes: { node: string; serves: { serve: string; state: string }[] }[] };
    assert.deepEqual(
      s.nodes.map((x) => [x.node, x.serves.map((r) => [r.serve, r.state])]),
      [[a().node, [['chat-a', 'running']]]],
    );
    const bad = await cli(['ledger', '--node', 'Bad_Node']);
    assert.equal(bad.code, 2, show(bad));
    assert.match(bad.stderr, /^--node: a node name of lowercase letters, digits and '-', 1\.\.63 characters/m, show(bad));
    const unknown = await cli(['serves', 'status', '--node', 'no-such-node']);
    assert.equal(unknown.code, 2, show(unknown));
    assert.equal(
      unknown.stderr,
      `--node no-such-node: no ledger of node 'no-such-node' runs in Temporal and no worker polls gpures.no-such-node ` +
        `(nodes with a ledger: ${nodes
          .map((n) => n.node)
          .sort()
          .join(', ')})\n`,
    );
    for (const args of [
      ['ledger', '--all', '--node', a().node],
      ['ledger', '--all', '--manifest', a().manifestPath],
    ]) {
      const r = await cli(args);
      assert.equal(r.code, 2, show(r));
    }

    // Isolation: from A's namespace, A's serve answers, B's cannot even be connected to, nor
    // B's namespace reached, nor the host's loopback Temporal except through the veth.
    assert.equal(await connectFrom(a().netns, '127.0.0.1', portOf(a(), 'chat-a')), 'connected');
    assert.equal(await connectFrom(a().netns, '127.0.0.1', portOf(b(), 'chat-b')), 'ECONNREFUSED');
    assert.equal(await connectFrom(b().netns, '127.0.0.1', portOf(a(), 'chat-a')), 'ECONNREFUSED');
    assert.equal(await connectFrom(a().netns, b().netns.nsAddress, portOf(b(), 'chat-b')), 'ENETUNREACH');
    // Nor the host's end of B's veth: each namespace is routed to its own /30 only.
    const forwarderB = Number(b().netns.temporalAddress.split(':').pop());
    assert.equal(await connectFrom(a().netns, b().netns.hostAddress, forwarderB), 'ENETUNREACH');
    const temporalPort = Number(temporal.address.split(':').pop());
    assert.equal(await connectFrom(a().netns, '127.0.0.1', temporalPort), 'ECONNREFUSED');
  });

  test("kill -9 of B's worker: A still works, B unanswered within seconds, its serves up refused (exit 4) starting nothing; B restarted works", async () => {
    const victim = b();
    const before = sampleBox(victim);
    victim.worker.child.kill('SIGKILL');
    await new Promise((r) => victim.worker.child.once('exit', r));

    const upA = await cli(['serves', 'up', 'emb-a', '--manifest', a().manifestPath]);
    assert.equal(upA.code, EXIT.ok, show(upA));
    assert.deepEqual(
      sampleBox(a()).map((x) => [x.serve, x.vramMib]),
      [
        ['chat-a', 14336],
        ['emb-a', 3200],
      ],
    );
    const downA = await cli(['serves', 'down', 'emb-a', '--manifest', a().manifestPath]);
    assert.equal(downA.code, EXIT.ok, show(downA));
    assert.deepEqual(
      sampleBox(a()).map((x) => [x.serve, x.vramMib]),
      [['chat-a', 14336]],
    );

    const all = await cli(['ledger', '--all']);
    console.log(`ledger --all with ${victim.node}'s worker dead: exit ${all.code} after ${(all.ms / 1000).toFixed(2)} s`);
    assert.equal(all.code, EXIT.unreachable, show(all));
    assert.ok(all.ms < UNANSWERED_BOUND_MS, show(all));
    assert.match(all.stdout, new RegExp(`^node '${a().node}' \\(task queue gpures\\.${a().node}\\):\\ngpu_role 'gpu0': .*committed 14336 MiB`, 'm'), show(all));
    assert.match(
      all.stdout,
      new RegExp(
        `^node '${victim.node}': unanswered: no worker answered the ledger of gpu_role 'gpu0' on ${victim.node} ` +
          `within ${NODE_ANSWER_MS / 1000} s: .*gpures\\.${victim.node}`,
        'm',
      ),
      show(all),
    );
    // The unanswered node after the others (README), whatever the order Temporal lists them in.
    assert.ok(all.stdout.indexOf(`node '${victim.node}': unanswered`) > all.stdout.indexOf(`node '${a().node}' (task queue`), show(all));
    const status = await cli(['serves', 'status', '--all']);
    assert.equal(status.code, EXIT.unreachable, show(status));
    assert.ok(status.stdout.indexOf(`node '${victim.node}': unanswered`) > status.stdout.indexOf(`node '${a().node}' (task queue`), show(status));
    assert.match(status.stdout, new RegExp(`^ {2}chat-a +14336 MiB`, 'm'), show(status));

    const upB = await cli(['serves', 'up', 'emb-b', '--manifest', victim.manifestPath]);
    console.log(`serves up on ${victim.node} with its worker dead: exit ${upB.code} after ${(upB.ms / 1000).toFixed(2)} s`);
    assert.equal(upB.code, EXIT.unreachable, show(upB));
    assert.ok(upB.ms < UNANSWERED_BOUND_MS, show(upB));
    assert.equal(upB.stdout, '');
    // The manifest's own warnings aside.
    const lines = upB.stderr.split('\n').filter((l) => l && !l.startsWith('warning: '));
    assert.equal(lines.length, 1, show(upB));
    assert.match(
      lines[0] ?? '',
      new RegExp(`^node '${victim.node}': no worker answered within ${NODE_ANSWER_MS / 1000} s on task queue gpures\\.${victim.node}; nothing was started`),
      show(upB),
    );
    // Nothing started: no operation in Temporal, and the box as it was.
    await assert.rejects(temporal.client.workflow.getHandle(workflowIds.bringUp(victim.node, 'emb-b')).describe(), WorkflowNotFoundError);
    assert.deepEqual(sampleBox(victim), before);

    await victim.startWorker();
    const again = await cli(['serves', 'up', 'emb-b', '--manifest', victim.manifestPath]);
    assert.equal(again.code, EXIT.ok, show(again));
    assert.deepEqual(
      sampleBox(victim).map((x) => [x.serve, x.vramMib, x.netns]),
      [
        ['chat-b', 14336, victim.netns.inode],
        ['emb-b', 3200, victim.netns.inode],
      ],
    );
    const healed = await cli(['ledger', '--all']);
    assert.equal(healed.code, EXIT.ok, show(healed));
    assert.match(healed.stdout, new RegExp(`^node '${victim.node}' .*\\ngpu_role 'gpu0': .*committed 17536 MiB`, 'm'), show(healed));
  });
});
