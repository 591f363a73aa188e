// `gpures ledger` on the node's own box, answered by its worker's endpoint (GET /v1/ledger): the
// same lines and the same JSON as the command's own read through Temporal, without loading the
// Temporal client, live after a bring-down; read around (through Temporal) when the worker's
// answer is not the command's: another Temporal address (with a note), a read that failed, a
// ledger not started yet. The endpoint answers only this host, a loopback name and the CLI's
// header, a few reads at a time.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { createServer, request } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client, Connection } from '@temporalio/client';
import type { ConnectionOptions } from '@temporalio/client';
import { readRunningLedgers } from '../src/client/node-ledgers';
import { serveDown, serveUp } from '../src/client/operations';
import { ledgerFromWorker, mismatch, WORKER_LEDGER_HEADER, WORKER_LEDGER_PATH, WORKER_LEDGER_VERSION, workerLedgerHost } from '../src/client/worker-ledger';
import type { WorkerLedgerAnswer } from '../src/client/worker-ledger';
import { FAKE_NVIDIA_SMI } from '../src/sim/box';
import { parseManifest } from '../src/config/manifest';
import { workflowIds } from '../src/shared/messages';
import { ledgerHandler, MAX_LEDGER_READS_IN_FLIGHT, workerLedgerRead } from '../src/worker/ledger-endpoint';
import type { LedgerReadOutcome } from '../src/worker/ledger-endpoint';
import { startMetricsServer } from '../src/worker/metrics-server';
import { WorkerMetrics } from '../src/worker/metrics';
import { renderManifest } from './support/box';
import { gpures, show } from './support/cli';
import { startSimTestBox } from './support/sim';
import type { SimTestBox } from './support/sim';

const GPU = { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 };
const AS_CLI = { [WORKER_LEDGER_HEADER]: 'test' };

function get(addr: string, path: string, headers: Record<string, string> = {}): Promise<{ status: number; body: string }> {
  const [hostname, port] = [addr.slice(0, addr.lastIndexOf(':')), Number(addr.slice(addr.lastIndexOf(':') + 1))];
  return new Promise((resolve, reject) => {
    const req = request({ host: hostname, port, path, headers }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString('utf8')));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** A request as the handler sees it, from `remoteAddress`, and the status it was answered. */
function handled(handler: (req: IncomingMessage, res: ServerResponse) => void, remoteAddress: string, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve) => {
    const req = { socket: { remoteAddress }, headers } as unknown as IncomingMessage;
    const res = { writeHead: (status: number) => ({ end: () => resolve(status) }), destroy: () => resolve(-1) } as unknown as ServerResponse;
    handler(req, res);
  });
}

describe('gpures ledger answered by the node worker', () => {
  let t: SimTestBox;
  let env: Record<string, string>;
  let dir: string;
  const ledger = (extra: Record<string, string> = {}, json = false) =>
    gpures(['ledger', '--manifest', t.manifestPath, ...(json ? ['--json'] : [])], { ...env, ...extra });

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gpures-wledger-'));
    t = await startSimTestBox(
      'wledger',
      [GPU],
      [
        { name: 'fast', vram_mib: 14336 },
        { name: 'vision', vram_mib: 12288, class: 'evictable', router_tier: 'vision-local' },
      ],
    );
    for (const s of ['fast', 'vision']) {
      const up = await serveUp(t.temporal.client, t.node, s);
      assert.ok(up.ok, JSON.stringify(up));
    }
    env = {
      TEMPORAL_ADDRESS: t.temporal.address,
      GPURES_NVIDIA_SMI: FAKE_NVIDIA_SMI,
      FAKE_NVIDIA_SMI_STATE: t.box.nvidiaSmiStatePath,
      GPURES_METRICS_ADDR: t.endpointAddr,
    };
  });
  after(async () => {
    await t?.close();
  });

  test('prints what its own read through Temporal prints, text and JSON, answered by the worker', async () => {
    const before = t.ledgerReads();
    const viaWorker = await ledger();
    const viaTemporal = await ledger({ GPURES_METRICS_ADDR: 'off' });
    assert.equal(viaWorker.code, 0, show(viaWorker));
    assert.equal(viaTemporal.code, 0, show(viaTemporal));
    assert.equal(t.ledgerReads(), before + 1, 'the worker answered the first command only');
    assert.match(viaWorker.stdout, /committed 26624 MiB/);
    assert.match(viaWorker.stdout, /^ {2}nvidia-smi: used \d+ of 32607 MiB/m);
    assert.equal(viaWorker.stdout, viaTemporal.stdout);
    assert.doesNotMatch(viaWorker.stderr, /not used/);

    const jsonWorker = await ledger({}, true);
    const jsonTemporal = await ledger({ GPURES_METRICS_ADDR: 'off' }, true);
    assert.equal(jsonWorker.code, 0, show(jsonWorker));
    assert.deepEqual(JSON.parse(jsonWorker.stdout), JSON.parse(jsonTemporal.stdout));
    assert.equal(t.ledgerReads(), before + 2);
  });

  test('answered by the worker, the command loads no Temporal client; reading for itself, it does', async () => {
    const probe = join(dir, 'loaded.js');
    const out = join(dir, 'loaded.txt');
    writeFileSync(
      probe,
      `process.on('exit', () => require('fs').writeFileSync(${JSON.stringify(out)}, Object.keys(require.cache).filter((k) => k.includes('@temporalio/client')).length + '\\n'));\n`,
    );
    const loaded = async (extra: Record<string, string>) => {
      const r = await ledger({ ...extra, NODE_OPTIONS: `--require ${probe}` });
      assert.equal(r.code, 0, show(r));
      return Number(readFileSync(out, 'utf8'));
    };
    assert.equal(await loaded({}), 0);
    assert.ok((await loaded({ GPURES_METRICS_ADDR: 'off' })) > 0, 'the probe sees the client where it is loaded');
  });

  test('follows the box: after a bring-down the worker answers the release', async () => {
    const down = await serveDown(t.temporal.client, t.node, 'vision');
    assert.ok(down.ok, JSON.stringify(down));
    const before = t.ledgerReads();
    const r = await ledger();
    assert.equal(r.code, 0, show(r));
    assert.equal(t.ledgerReads(), before + 1);
    assert.match(r.stdout, /committed 14336 MiB/);
    assert.doesNotMatch(r.stdout, /vision/);
    const up = await serveUp(t.temporal.client, t.node, 'vision');
    assert.ok(up.ok, JSON.stringify(up));
  });

  test('an answer for another Temporal address is read around, with a note, and the figures are still right', async () => {
    const port = t.temporal.address.slice(t.temporal.address.lastIndexOf(':') + 1);
    const r = await ledger({ TEMPORAL_ADDRESS: `localhost:${port}` });
    assert.equal(r.code, 0, show(r));
    assert.match(
      r.stderr,
      /the answer of the worker at http:\/\/127\.0\.0\.1:\d+\/v1\/ledger was not used: it reads Temporal at 127\.0\.0\.1:\d+ namespace default, this command localhost:\d+/,
    );
    assert.match(r.stdout, /committed 26624 MiB/);
  });

  test('a worker whose read fails (503) is read around without a word', async () => {
    const failing = await startMetricsServer({
      host: '127.0.0.1',
      port: 0,
      metrics: new WorkerMetrics(),
      ledger: () => Promise.reject(new Error('Temporal went away')),
    });
    try {
      const addr = new URL(failing.url).host;
      assert.equal((await get(addr, WORKER_LEDGER_PATH, AS_CLI)).status, 503);
      const r = await ledger({ GPURES_METRICS_ADDR: addr });
      assert.equal(r.code, 0, show(r));
      assert.match(r.stdout, /committed 26624 MiB/);
      assert.doesNotMatch(r.stderr, /not used|Temporal went away/);
    } finally {
      await failing.close();
    }
  });

  test('the endpoint answers a loopback name with the header; it names what else it serves', async () => {
    const reads = t.ledgerReads();
    const port = t.endpointAddr.split(':')[1];
    assert.equal((await get(t.endpointAddr, WORKER_LEDGER_PATH, { ...AS_CLI, host: 'attacker.example:80' })).status, 421);
    assert.equal((await get(t.endpointAddr, WORKER_LEDGER_PATH)).status, 403, 'without the header');
    assert.equal(t.ledgerReads(), reads, 'nothing was read for them');
    const other = await get(t.endpointAddr, '/v1/anything');
    assert.equal(other.status, 404);
    assert.match(other.body, /GET \/metrics and GET \/v1\/ledger/);
    const ok = await get(t.endpointAddr, WORKER_LEDGER_PATH, { ...AS_CLI, host: `localhost:${port}` });
    assert.equal(ok.status, 200);
    const answer = JSON.parse(ok.body) as WorkerLedgerAnswer;
    assert.equal(answer.version, WORKER_LEDGER_VERSION);
    assert.equal(answer.node, t.node);
    assert.deepEqual(answer.notRunning, []);
    assert.deepEqual(
      answer.ledgers.map((l) => l.reservations.map((x) => x.serve)),
      [['fast', 'vision']],
    );
  });

  test("the endpoint's read asks Temporal one query a GPU (refused for a run not open) and the leases, nothing first; the page's asks for a poller first", async () => {
    // Issue 15: a poller check and a describe before each query were two round trips in sequence.
    const calls: string[] = [];
    type Interceptor = NonNullable<ConnectionOptions['interceptors']>[number];
    // grpc-js takes the next call as it is (its InterceptingCall only wraps one in more hooks).
    const recordCall: Interceptor = (options, next) => {
      calls.push(options.method_definition.path.slice(options.method_definition.path.lastIndexOf('/') + 1));
      return next(options) as ReturnType<Interceptor>;
    };
    const connection = await Connection.connect({ address: t.temporal.address, interceptors: [recordCall] });
    const client = new Client({ connection });
    try {
      // Beside the box's GPU one whose ledger was terminated (on a queue no worker polls: a query the
      // server did not refuse would wait for one) and one whose ledger never ran.
      const gone = { role: 'gone-gpu', capacity_mib: 24576, reserve_mib: 0 };
      const never = { role: 'never-gpu', capacity_mib: 24576, reserve_mib: 0 };
      const ended = await client.workflow.start('ledgerWorkflow', {
        workflowId: workflowIds.ledger(t.node, gone.role),
        taskQueue: `${t.node}-nobody`,
        args: [{ node: t.node, gpu: { role: gone.role, uuid: 'GPU-gone', capacityMib: gone.capacity_mib, reserveMib: 0 } }],
      });
      await ended.terminate('test: a ledger that no longer runs');
      const text = renderManifest(t.node, [GPU, gone, never], [{ name: 'fast', vram_mib: 14336 }]);
      const source = { read: () => Promise.resolve({ text, file: 'serves.toml' }) };
      const temporal = { address: t.temporal.address, namespace: 'default' };

      calls.length = 0;
      const answer = await workerLedgerRead({ client, temporal, node: t.node, manifest: source })();
      assert.deepEqual(
        answer.ledgers.map((l) => l.gpuRole),
        ['dark-fast'],
      );
      assert.deepEqual(answer.notRunning, ['gone-gpu', 'never-gpu']);
      assert.deepEqual([...calls].sort(), ['ListWorkflowExecutions', 'QueryWorkflow', 'QueryWorkflow', 'QueryWorkflow'], calls.join(' '));

      // The ledger page reads for any box: whether a worker polls at all comes first, so that a Temporal
      // that does not answer is named by the page's own bound (ledger-page.test), then the same queries.
      const parsed = parseManifest(text, 'serves.toml');
      assert.ok(parsed.ok);
      calls.length = 0;
      const page = await readRunningLedgers(client, parsed.manifest, 5000);
      assert.deepEqual(
        page.map((l) => l.gpuRole),
        ['dark-fast'],
      );
      assert.deepEqual(calls, ['DescribeTaskQueue', 'QueryWorkflow', 'QueryWorkflow', 'QueryWorkflow']);
    } finally {
      await connection.close();
    }
  });

  test('a peer beyond loopback is refused and nothing read; past the reads in flight the answer is busy', async () => {
    const outcomes: LedgerReadOutcome[] = [];
    let reads = 0;
    const pending: (() => void)[] = [];
    const handler = ledgerHandler(
      () => {
        reads++;
        return new Promise((_resolve, reject) => pending.push(() => reject(new Error('done'))));
      },
      (o) => outcomes.push(o),
    );
    const headers = { host: '127.0.0.1:9475', ...AS_CLI };
    assert.equal(await handled(handler, '192.168.1.20', headers), 403);
    assert.equal(await handled(handler, '::ffff:10.0.0.5', headers), 403);
    assert.equal(reads, 0);
    const inFlight = Array.from({ length: MAX_LEDGER_READS_IN_FLIGHT }, () => handled(handler, '::ffff:127.0.0.1', headers));
    assert.equal(await handled(handler, '127.0.0.1', headers), 503, 'one read too many');
    assert.equal(reads, MAX_LEDGER_READS_IN_FLIGHT);
    for (const p of pending) p();
    assert.deepEqual(await Promise.all(inFlight), Array<number>(MAX_LEDGER_READS_IN_FLIGHT).fill(503), 'each failed read answers 503');
    assert.deepEqual(outcomes, ['refused', 'refused', 'busy', ...Array<LedgerReadOutcome>(MAX_LEDGER_READS_IN_FLIGHT).fill('failed')]);
  });

  test('an answer naming a ledger not started yet is read around without a word (the command starts it)', async () => {
    const answer: WorkerLedgerAnswer = {
      version: WORKER_LEDGER_VERSION,
      node: t.node,
      temporal: { address: t.temporal.address, namespace: 'default' },
      ledgers: [],
      notRunning: ['dark-fast'],
      leases: [],
      devices: { ok: false, error: 'none' },
    };
    const stub = createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer)));
    await new Promise<void>((r) => stub.listen(0, '127.0.0.1', r));
    try {
      const port = (stub.address() as AddressInfo).port;
      const target = { host: '127.0.0.1', port, manifest: t.manifest, temporal: answer.temporal };
      assert.deepEqual(await ledgerFromWorker(target), { ok: false });
      const running = {
        ...answer,
        notRunning: [],
        ledgers: [{ node: t.node, gpuRole: 'dark-fast', gpuUuid: 'GPU-x', capacityMib: 1, reserveMib: 0, reservations: [] }],
      };
      stub.removeAllListeners('request');
      stub.on('request', (_req, res: ServerResponse) => res.writeHead(200).end(JSON.stringify(running)));
      assert.equal((await ledgerFromWorker(target)).ok, true);
      stub.removeAllListeners('request');
      stub.on('request', (_req, res: ServerResponse) => res.writeHead(200).end(JSON.stringify({ ...running, ledgers: [{ gpuRole: 'dark-fast' }] })));
      assert.deepEqual(await ledgerFromWorker(target), { ok: false }, 'a ledger missing its fields is not rendered');
      stub.removeAllListeners('request');
      // Headers, then nothing: the whole answer's deadline gives up on it.
      stub.on('request', (_req, res: ServerResponse) => res.writeHead(200).write('{'));
      assert.deepEqual(await ledgerFromWorker(target, 300), { ok: false });
    } finally {
      stub.closeAllConnections();
      await new Promise((r) => stub.close(r));
    }
  });

  test('the worker is asked before the manifest is read: its request arrives while the manifest (a FIFO) is unwritten', async () => {
    // The worker reads while the command reads (issue 15). The manifest is a named pipe the command's
    // read blocks on until the test writes it, once the worker was asked or 15 s passed.
    let asked: () => void = () => undefined;
    const request = new Promise<boolean>((resolve) => (asked = () => resolve(true)));
    const stub = createServer((_req, res) => {
      asked();
      res.writeHead(503).end();
    });
    await new Promise<void>((r) => stub.listen(0, '127.0.0.1', r));
    try {
      const fifo = join(dir, `manifest-${Date.now()}.toml`);
      execFileSync('mkfifo', [fifo]);
      const run = gpures(['ledger', '--manifest', fifo], { ...env, GPURES_METRICS_ADDR: `127.0.0.1:${(stub.address() as AddressInfo).port}` });
      const before = await Promise.race([request, new Promise<boolean>((r) => setTimeout(() => r(false), 15_000))]);
      await writeFile(fifo, readFileSync(t.manifestPath));
      const r = await run;
      assert.equal(r.code, 0, show(r));
      assert.match(r.stdout, /^gpu_role 'dark-fast'/m, show(r));
      assert.equal(before, true, 'the worker was not asked while the manifest was unread');
    } finally {
      stub.closeAllConnections();
      await new Promise((r) => stub.close(r));
    }
  });

  test('where the command asks: a wildcard bind on loopback, an address beyond it not at all', () => {
    assert.equal(workerLedgerHost('127.0.0.1'), '127.0.0.1');
    assert.equal(workerLedgerHost('::1'), '::1');
    assert.equal(workerLedgerHost('localhost'), 'localhost');
    assert.equal(workerLedgerHost('0.0.0.0'), '127.0.0.1');
    assert.equal(workerLedgerHost('::'), '::1');
    assert.equal(workerLedgerHost('192.168.1.20'), undefined);
  });

  test('mismatch names what differs: node, Temporal, GPUs', () => {
    const answer: WorkerLedgerAnswer = {
      version: WORKER_LEDGER_VERSION,
      node: t.node,
      temporal: { address: '127.0.0.1:7233', namespace: 'default' },
      ledgers: [{ node: t.node, gpuRole: 'dark-fast', gpuUuid: 'GPU-x', capacityMib: 1, reserveMib: 0, reservations: [] }],
      notRunning: [],
      leases: [],
      devices: { ok: false, error: 'none' },
    };
    const temporal = { address: '127.0.0.1:7233', namespace: 'default' };
    assert.equal(mismatch(answer, { manifest: t.manifest, temporal }), undefined);
    assert.equal(mismatch({ ...answer, ledgers: [], notRunning: ['dark-fast'] }, { manifest: t.manifest, temporal }), undefined);
    assert.match(mismatch({ ...answer, node: 'other' }, { manifest: t.manifest, temporal }) ?? '', /serves node 'other', not/);
    assert.match(
      mismatch(answer, { manifest: t.manifest, temporal: { ...temporal, namespace: 'prod' } }) ?? '',
      /this command 127\.0\.0\.1:7233 namespace prod/,
    );
    assert.match(mismatch({ ...answer, ledgers: [] }, { manifest: t.manifest, temporal }) ?? '', /its manifest's GPUs are none, this one's dark-fast/);
  });
});
