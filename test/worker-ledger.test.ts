// `gpures ledger` on the node's own box, answered by its worker's loopback endpoint (GET
// /v1/ledger): the same lines and the same JSON as the command's own read through Temporal, live
// after a bring-down, refused to a Host that is not a loopback name, and read around (through
// Temporal, with a note) when the worker's answer is not the command's: another Temporal address,
// a read that failed.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { request } from 'node:http';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { serveDown, serveUp } from '../src/client/operations';
import { mismatch, WORKER_LEDGER_PATH, WORKER_LEDGER_VERSION } from '../src/client/worker-ledger';
import type { WorkerLedgerAnswer } from '../src/client/worker-ledger';
import { FAKE_NVIDIA_SMI } from '../src/sim/box';
import { answerLedger } from '../src/worker/ledger-endpoint';
import { startMetricsServer } from '../src/worker/metrics-server';
import { WorkerMetrics } from '../src/worker/metrics';
import { gpures, show } from './support/cli';
import { startSimTestBox } from './support/sim';
import type { SimTestBox } from './support/sim';

const GPU = { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 };

function get(addr: string, path: string, host?: string): Promise<{ status: number; body: string }> {
  const [hostname, port] = [addr.slice(0, addr.lastIndexOf(':')), Number(addr.slice(addr.lastIndexOf(':') + 1))];
  return new Promise((resolve, reject) => {
    const req = request({ host: hostname, port, path, headers: host ? { host } : {} }, (res) => {
      let body = '';
      res.on('data', (c: Buffer) => (body += c.toString('utf8')));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('gpures ledger answered by the node worker', () => {
  let t: SimTestBox;
  let env: Record<string, string>;
  const ledger = (extra: Record<string, string> = {}, json = false) =>
    gpures(['ledger', '--manifest', t.manifestPath, ...(json ? ['--json'] : [])], { ...env, ...extra });

  before(async () => {
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

  test('prints what its own read through Temporal prints, text and JSON, and was answered by the worker', async () => {
    const before = t.ledgerReads();
    const viaWorker = await ledger();
    const viaTemporal = await ledger({ GPURES_METRICS_ADDR: 'off' });
    assert.equal(viaWorker.code, 0, show(viaWorker));
    assert.equal(viaTemporal.code, 0, show(viaTemporal));
    assert.equal(t.ledgerReads(), before + 1, 'the worker read once, for the first command only');
    assert.match(viaWorker.stdout, /committed 26624 MiB/);
    assert.match(viaWorker.stdout, /^ {2}nvidia-smi: used \d+ of 32607 MiB/m);
    assert.equal(viaWorker.stdout, viaTemporal.stdout);
    assert.doesNotMatch(viaWorker.stderr, /was not asked/);

    const jsonWorker = await ledger({}, true);
    const jsonTemporal = await ledger({ GPURES_METRICS_ADDR: 'off' }, true);
    assert.equal(jsonWorker.code, 0, show(jsonWorker));
    assert.deepEqual(JSON.parse(jsonWorker.stdout), JSON.parse(jsonTemporal.stdout));
    assert.equal(t.ledgerReads(), before + 2);
  });

  test('follows the box: after a bring-down the worker answers the release', async () => {
    const down = await serveDown(t.temporal.client, t.node, 'vision');
    assert.ok(down.ok, JSON.stringify(down));
    const r = await ledger();
    assert.equal(r.code, 0, show(r));
    assert.match(r.stdout, /committed 14336 MiB/);
    assert.doesNotMatch(r.stdout, /vision/);
    const up = await serveUp(t.temporal.client, t.node, 'vision');
    assert.ok(up.ok, JSON.stringify(up));
  });

  test('an answer for another Temporal address is read around, with a note, and the figures are still right', async () => {
    const port = t.temporal.address.slice(t.temporal.address.lastIndexOf(':') + 1);
    const reads = t.ledgerReads();
    const r = await ledger({ TEMPORAL_ADDRESS: `localhost:${port}` });
    assert.equal(r.code, 0, show(r));
    assert.equal(t.ledgerReads(), reads + 1);
    assert.match(
      r.stderr,
      /the worker at http:\/\/127\.0\.0\.1:\d+\/v1\/ledger was not asked: it reads Temporal at 127\.0\.0\.1:\d+ namespace default, this command localhost:\d+/,
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
      assert.equal((await get(addr, WORKER_LEDGER_PATH)).status, 503);
      const r = await ledger({ GPURES_METRICS_ADDR: addr });
      assert.equal(r.code, 0, show(r));
      assert.match(r.stdout, /committed 26624 MiB/);
      assert.doesNotMatch(r.stderr, /was not asked|Temporal went away/);
    } finally {
      await failing.close();
    }
  });

  test('the endpoint answers only to a loopback name, and says what else it serves', async () => {
    const reads = t.ledgerReads();
    const rebound = await get(t.endpointAddr, WORKER_LEDGER_PATH, 'attacker.example:80');
    assert.equal(rebound.status, 421);
    assert.equal(t.ledgerReads(), reads, 'nothing was read for it');
    const other = await get(t.endpointAddr, '/v1/anything');
    assert.equal(other.status, 404);
    assert.match(other.body, /GET \/metrics and GET \/v1\/ledger/);
    const ok = await get(t.endpointAddr, WORKER_LEDGER_PATH, `localhost:${t.endpointAddr.split(':')[1]}`);
    assert.equal(ok.status, 200);
    const answer = JSON.parse(ok.body) as WorkerLedgerAnswer;
    assert.equal(answer.version, WORKER_LEDGER_VERSION);
    assert.equal(answer.node, t.node);
    assert.deepEqual(
      answer.ledgers.map((l) => l.reservations.map((x) => x.serve)),
      [['fast', 'vision']],
    );
  });

  test('mismatch names what differs: node, Temporal, GPUs', () => {
    const answer: WorkerLedgerAnswer = {
      version: WORKER_LEDGER_VERSION,
      node: t.node,
      temporal: { address: '127.0.0.1:7233', namespace: 'default' },
      ledgers: [{ node: t.node, gpuRole: 'dark-fast', gpuUuid: 'GPU-x', capacityMib: 1, reserveMib: 0, reservations: [] }],
      leases: [],
      devices: { ok: false, error: 'none' },
    };
    const temporal = { address: '127.0.0.1:7233', namespace: 'default' };
    assert.equal(mismatch(answer, { manifest: t.manifest, temporal }), undefined);
    assert.match(mismatch({ ...answer, node: 'other' }, { manifest: t.manifest, temporal }) ?? '', /serves node 'other', not/);
    assert.match(
      mismatch(answer, { manifest: t.manifest, temporal: { ...temporal, namespace: 'prod' } }) ?? '',
      /this command 127\.0\.0\.1:7233 namespace prod/,
    );
    assert.match(mismatch({ ...answer, ledgers: [] }, { manifest: t.manifest, temporal }) ?? '', /its manifest's GPUs are none, this one's dark-fast/);
  });
  test('a peer beyond loopback gets 403 and nothing is read, even addressing a loopback name', async () => {
    let reads = 0;
    const read = () => {
      reads++;
      return Promise.reject(new Error('must not be read'));
    };
    const answered = (remoteAddress: string) =>
      new Promise<number>((resolve) => {
        const req = { socket: { remoteAddress }, headers: { host: '127.0.0.1:9475' } } as unknown as IncomingMessage;
        const res = { writeHead: (status: number) => ({ end: () => resolve(status) }) } as unknown as ServerResponse;
        answerLedger(req, res, read);
      });
    assert.equal(await answered('192.168.1.20'), 403);
    assert.equal(await answered('::ffff:10.0.0.5'), 403);
    assert.equal(reads, 0);
    assert.equal(await answered('::ffff:127.0.0.1'), 503, 'a loopback peer is read for (this read fails)');
    assert.equal(reads, 1);
  });
});
