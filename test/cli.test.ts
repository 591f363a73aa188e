// The CLI as an operator runs it: `bin/gpures` as real processes against a real dev server, a
// `gpures worker` child process and the test dockerd. Asserts stdout, stderr and exit codes.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse as parseToml, stringify as stringifyToml } from 'smol-toml';
import { WorkflowNotFoundError } from '@temporalio/client';
import * as grpc from '@grpc/grpc-js';
import { NODE_ANSWER_MS, workflowIds } from '../src/shared/messages';
import { nodeContainers, removeNodeContainers, renderManifest, uniqueNode } from './support/box';
import type { TestGpu, TestServe } from './support/box';
import type { TestTemporal } from './support/temporal';
import { GPURES, ROOT, gpures, gpuresAsInstalled, show, startCliWorker, startWorkerProcess } from './support/cli';
import { spawn } from 'node:child_process';
import { waitUntil } from './support/wait';
import type { Run, WorkerProcess } from './support/cli';

const EXAMPLE = 'examples/primary-node/serves.toml';

const EXIT = { ok: 0, badInput: 2, denied: 3, unreachable: 4 } as const;

const GPU: TestGpu = { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 };
const SERVES: TestServe[] = [
  { name: 'a', vram_mib: 14336 },
  { name: 'b', vram_mib: 3200 },
  // With a + b up (17536 of 27999 committed, 10463 free) it is over budget by 1825 MiB.
  { name: 'big', vram_mib: 12288, class: 'evictable' },
  // Healthy only after 8 s: long enough for `serves status`, a process each time, to see its bring-up under way.
  { name: 'slow', vram_mib: 100, env: { FAKE_START_DELAY_S: '8' } },
];

function writeManifest(dir: string, name: string, text: string): string {
  const file = join(dir, name);
  writeFileSync(file, text);
  return file;
}

type Table = Record<string, unknown>;

/** Renders a good manifest for `node`, then lets `edit` break it as a TOML document. */
function editedManifest(node: string, edit: (doc: { serves: Table[]; gpus: Table[] }) => void): string {
  const doc = parseToml(renderManifest(node, [GPU], SERVES)) as unknown as { serves: Table[]; gpus: Table[] };
  edit(doc);
  return stringifyToml(doc);
}

function setField(doc: { serves: Table[] }, index: number, key: string, value: unknown): void {
  const serve = doc.serves[index];
  assert.ok(serve, `no serves[${index}]`);
  serve[key] = value;
}

interface BadCase {
  what: string;
  text: (node: string) => string;
  /** What stderr must name: the dotted field (or, for a TOML syntax error, the position). */
  field: string;
  message: RegExp;
}

const BAD: BadCase[] = [
  {
    what: 'malformed TOML',
    text: (node) => `${renderManifest(node, [GPU], SERVES)}\n[[serves]\nname = "broken"\n`,
    field: 'line ',
    message: /: line \d+, column \d+: invalid TOML: /,
  },
  {
    what: 'unknown gpu_role',
    text: (node) => editedManifest(node, (d) => setField(d, 1, 'gpu_role', 'dark-slow')),
    field: 'serves[1].gpu_role',
    message: /unknown gpu_role 'dark-slow' \(known roles: 'dark-fast'\)/,
  },
  {
    what: 'unknown class',
    text: (node) => editedManifest(node, (d) => setField(d, 0, 'class', 'sometimes')),
    field: 'serves[0].class',
    message: /unknown class "sometimes" \(allowed: resident, evictable, on-demand\)/,
  },
  {
    what: 'duplicate serve names',
    text: (node) => editedManifest(node, (d) => setField(d, 2, 'name', 'a')),
    field: 'serves[2].name',
    message: /duplicate serve name 'a' \(first declared at serves\[0\]\)/,
  },
  {
    what: 'duplicate ports',
    text: (node) => editedManifest(node, (d) => setField(d, 1, 'port', d.serves[0]?.['port'])),
    field: 'serves[1].port',
    message: /host port \d+ on 127\.0\.0\.1 is already taken by serves\[0\] \('a'\)/,
  },
  {
    what: 'zero MiB',
    text: (node) => editedManifest(node, (d) => setField(d, 1, 'vram_mib', 0)),
    field: 'serves[1].vram_mib',
    message: /must be a whole number of MiB in 1\.\.1048576 \(got 0\)/,
  },
  {
    what: 'reservation larger than the budget',
    text: (node) => editedManifest(node, (d) => setField(d, 0, 'vram_mib', 28000)),
    field: 'serves[0].vram_mib',
    message: /28000 MiB exceeds the budget of gpu_role 'dark-fast' \(capacity 32607 − reserve 4608 = 27999 MiB\)/,
  },
  {
    what: 'bind 0.0.0.0 without allow_non_loopback_bind',
    text: (node) => editedManifest(node, (d) => setField(d, 0, 'bind', '0.0.0.0')),
    field: 'serves[0].bind',
    message: /'0\.0\.0\.0' is not a loopback address/,
  },
  {
    what: '--gpu-memory-utilization too high for vram_mib',
    text: (node) => editedManifest(node, (d) => setField(d, 1, 'args', ['--gpu-memory-utilization', '0.2'])),
    field: 'serves[1].vram_mib',
    // 0.2 x 32607 = 6521 MiB > 3200 MiB declared.
    message: /3200 MiB understates the serve's real draw: vLLM will take --gpu-memory-utilization 0\.2 × capacity 32607 MiB = 6521 MiB/,
  },
  // Issue 9 part 5: what got through before names, uuids, durations and env keys had rules.
  ...['../x', 'box; rm -rf /', 'bóx'].map((name): BadCase => ({
    what: `node name ${JSON.stringify(name)}`,
    text: (node) => renderManifest(node, [GPU], SERVES).replace(`name = "${node}"`, `name = ${JSON.stringify(name)}`),
    field: 'node.name',
    message: new RegExp(
      `must be a name of lowercase letters, digits and '-', 1\\.\\.63 characters.* \\(got ${JSON.stringify(name).replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}\\)`,
    ),
  })),
  {
    what: "gpu role 'g/x'",
    text: (node) =>
      editedManifest(node, (d) => {
        (d.gpus[0] as Table)['role'] = 'g/x';
        for (const serve of d.serves) serve['gpu_role'] = 'g/x';
      }),
    field: 'gpus[0].role',
    message: /must be a name of lowercase letters, digits and '-'.* \(got "g\/x"\)/,
  },
  {
    what: 'gpu uuid that is not GPU-<uuid> or MIG-<uuid>',
    text: (node) => editedManifest(node, (d) => ((d.gpus[0] as Table)['uuid'] = 'GPU-1')),
    field: 'gpus[0].uuid',
    message: /must be 'GPU-' or 'MIG-' and a UUID \(xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx\), as `nvidia-smi -L` prints it \(got "GPU-1"\)/,
  },
  {
    what: 'stop_timeout_s = 1e11',
    text: (node) => renderManifest(node, [GPU], SERVES).replace('stop_timeout_s = 5', 'stop_timeout_s = 1e11'),
    field: 'serves[0].stop_timeout_s',
    message: /must be a whole number of seconds in 0\.\.3600 \(got 100000000000\)/,
  },
  {
    what: 'env key A=B',
    text: (node) => editedManifest(node, (d) => setField(d, 0, 'env', { 'A=B': '1' })),
    field: 'serves[0].env["A=B"]',
    message: /"A=B" is not an environment variable name/,
  },
];

describe('gpures CLI, as real processes', () => {
  let temporal: TestTemporal;
  let env: Record<string, string>;
  let dir: string;
  let node: string;
  let manifest: string;
  let worker: WorkerProcess | undefined;
  const nodes: string[] = [];

  before(async () => {
    ({ temporal, env, dir, node, manifest, worker } = await startCliWorker('cli', [GPU], SERVES));
    nodes.push(node);
  });

  after(async () => {
    await worker?.stop();
    for (const n of nodes) await removeNodeContainers(n);
    await temporal?.close();
  });

  const containersOf = nodeContainers;

  /** No bring-up workflow (nor any other workflow) was started for node `n`, and no container exists. */
  async function assertNothingStarted(n: string, serves: string[]): Promise<void> {
    for (const prefix of [`serves-up/${n}/`, `serves-down/${n}/`, `ledger/${n}/`]) {
      const ids: string[] = [];
      for await (const wf of temporal.client.workflow.list({ query: `WorkflowId STARTS_WITH '${prefix}'` })) ids.push(wf.workflowId);
      assert.deepEqual(ids, [], `workflows started under ${prefix}`);
    }
    // Visibility is eventually consistent: also ask for each id the CLI would have used.
    for (const s of serves) {
      await assert.rejects(temporal.client.workflow.getHandle(workflowIds.bringUp(n, s)).describe(), WorkflowNotFoundError);
    }
    assert.deepEqual(await containersOf(n), [], `containers of node ${n}`);
  }

  const ledgerLines = (committed: number, free: number, ...rows: string[]) => [
    `gpu_role 'dark-fast': capacity 32607 MiB, reserve 4608 MiB, committed ${committed} MiB, free ${free} MiB`,
    ...rows,
  ];

  test('serves up a b: exit 0, stdout ends with the ledger', async () => {
    const r = await gpures(['serves', 'up', 'a', 'b', '--manifest', manifest], env);
    assert.equal(r.code, EXIT.ok, show(r));
    assert.ok(r.stdout.endsWith(`${ledgerLines(17536, 10463, '  a 14336 MiB (resident, running)', '  b 3200 MiB (resident, running)').join('\n')}\n`), show(r));
    assert.match(r.stderr, /^serves up a: running, 14336 MiB committed on 'dark-fast'$/m);
    assert.match(r.stderr, /^serves up b: running, 3200 MiB committed on 'dark-fast'$/m);
    // Live progress, each step once, before the outcome line.
    const progress = r.stderr.split('\n').filter((l) => l.startsWith('  '));
    assert.ok(progress.filter((l) => /^ {2}admit: admitted 14336 MiB/.test(l)).length === 1, show(r));
    assert.ok(
      progress.some((l) => /^ {2}health: 200 from http:\/\/127\.0\.0\.1:\d+\/health/.test(l)),
      show(r),
    );
    assert.ok(r.stderr.indexOf('  identity:') < r.stderr.indexOf('serves up a: running'), show(r));
    assert.deepEqual((await containersOf(node)).map((c) => `${c.serve}:${c.running}`).sort(), ['a:true', 'b:true']);
  });

  test('ledger --json: committedMib and freeMib as numbers', async () => {
    const r = await gpures(['ledger', '--json', '--manifest', manifest], env);
    assert.equal(r.code, EXIT.ok, show(r));
    const data = JSON.parse(r.stdout) as Table[];
    assert.equal(data.length, 1);
    const l = data[0] as Table;
    assert.equal(l['gpuRole'], 'dark-fast');
    assert.equal(l['committedMib'], 17536);
    assert.equal(l['freeMib'], 10463);
    assert.equal(l['budgetMib'], 27999);
    assert.deepEqual(
      (l['reservations'] as Table[]).map((x) => [x['serve'], x['vramMib'], x['phase']]),
      [
        ['a', 14336, 'running'],
        ['b', 3200, 'running'],
      ],
    );

    const text = await gpures(['ledger', '--manifest', manifest], env);
    assert.equal(text.code, EXIT.ok, show(text));
    assert.equal(text.stdout, `${ledgerLines(17536, 10463, '  a 14336 MiB (resident, running)', '  b 3200 MiB (resident, running)').join('\n')}\n`);
  });

  test('serves status: a and b running, big stopped', async () => {
    const r = await gpures(['serves', 'status', '--manifest', manifest], env);
    assert.equal(r.code, EXIT.ok, show(r));
    const state: Record<string, string> = {};
    for (const line of r.stdout.trimEnd().split('\n')) {
      const cols = line.trim().split(/\s+/);
      state[cols[0] ?? ''] = cols[cols.length - 1] ?? '';
    }
    assert.deepEqual(state, { a: 'running', b: 'running', big: 'stopped', slow: 'stopped' }, show(r));

    const json = await gpures(['serves', 'status', '--json', '--manifest', manifest], env);
    assert.equal(json.code, EXIT.ok, show(json));
    assert.deepEqual(
      (JSON.parse(json.stdout) as Table[]).map((x) => [x['serve'], x['state']]),
      [
        ['a', 'running'],
        ['b', 'running'],
        ['big', 'stopped'],
        ['slow', 'stopped'],
      ],
    );
  });

  test('serves status shows an operation under way beside the ledger state', async () => {
    const up = gpures(['serves', 'up', 'slow', '--manifest', manifest], env);
    // The bring-up's workflow exists a moment before its admit lands in the ledger: poll until both show.
    const underWay = new RegExp(`^slow .* starting  \\(serves-up/${node}/slow running since \\d{4}-\\d\\d-\\d\\dT`);
    const seen: string[] = [];
    try {
      for (let i = 0; i < 40 && !underWay.test(seen.at(-1) ?? ''); i++) {
        const r = await gpures(['serves', 'status', '--manifest', manifest], env);
        seen.push(r.stdout.split('\n').find((l) => l.startsWith('slow ')) ?? '');
        if (!underWay.test(seen.at(-1) ?? '')) await new Promise((res) => setTimeout(res, 100));
      }
      assert.match(seen.at(-1) ?? '', underWay, `status lines seen:\n${seen.join('\n')}`);
      assert.equal((await up).code, EXIT.ok);
    } finally {
      // Later tests assert the exact ledger: never leave slow admitted, whatever failed above.
      await up;
      assert.equal((await gpures(['serves', 'down', 'slow', '--manifest', manifest], env)).code, EXIT.ok);
    }
  });

  test('Ctrl-C while following serves up: exit 130, the workflow named, and the bring-up goes on to running', async () => {
    const child = spawn(process.execPath, [GPURES, 'serves', 'up', 'slow', '--manifest', manifest], { cwd: ROOT, env: { ...process.env, ...env } });
    let stderr = '';
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (c: string) => (stderr += c));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    // Interrupt once the bring-up is under way (its admit printed).
    await waitUntil('the admit step printed', () => stderr.includes('  admit: '), 30_000, 50);
    child.kill('SIGINT');
    assert.equal(await exited, 130, stderr);
    assert.match(
      stderr,
      new RegExp(
        `interrupted: serves up slow goes on in Temporal \\(workflow serves-up/${node}/slow\\); \`gpures serves status\` shows it; ` +
          `\`gpures serves down slow\` cancels it \\(it gives back what it took\\), as does the UI or \`temporal workflow cancel --workflow-id serves-up/${node}/slow\`$`,
        'm',
      ),
    );
    const handle = temporal.client.workflow.getHandle(workflowIds.bringUp(node, 'slow'));
    await handle.result();
    assert.equal((await handle.describe()).status.name, 'COMPLETED');
    assert.deepEqual(
      (await containersOf(node)).filter((c) => c.serve === 'slow').map((c) => c.running),
      [true],
    );
    assert.equal((await gpures(['serves', 'down', 'slow', '--manifest', manifest], env)).code, EXIT.ok);
  });

  test('a denial: exit 3, the reason on stderr, nothing started', async () => {
    const r = await gpures(['serves', 'up', 'big', '--manifest', manifest], env);
    assert.equal(r.code, EXIT.denied, show(r));
    assert.ok(r.stderr.includes('serves up big denied: over budget by 1825 MiB, nothing started'), show(r));
    // The ledger is unchanged and still printed.
    assert.ok(r.stdout.endsWith(`${ledgerLines(17536, 10463, '  a 14336 MiB (resident, running)', '  b 3200 MiB (resident, running)').join('\n')}\n`), show(r));
    assert.equal((await containersOf(node)).filter((c) => c.serve === 'big').length, 0);

    const json = await gpures(['serves', 'up', 'big', '--json', '--manifest', manifest], env);
    assert.equal(json.code, EXIT.denied, show(json));
    const data = JSON.parse(json.stdout) as { outcomes: Table[] };
    assert.equal(data.outcomes[0]?.['ok'], false);
    assert.equal(data.outcomes[0]?.['failureType'], 'AdmissionDenied');
  });

  test('serves down a, then again: already stopped, nothing changed, exit 0 both times', async () => {
    const first = await gpures(['serves', 'down', 'a', '--manifest', manifest], env);
    assert.equal(first.code, EXIT.ok, show(first));
    assert.match(first.stderr, /^serves down a: stopped, 14336 MiB released on 'dark-fast'$/m);
    assert.equal(first.stdout, `${ledgerLines(3200, 24799, '  b 3200 MiB (resident, running)').join('\n')}\n`);
    assert.deepEqual(
      (await containersOf(node)).map((c) => c.serve),
      ['b'],
    );

    const second = await gpures(['serves', 'down', 'a', '--manifest', manifest], env);
    assert.equal(second.code, EXIT.ok, show(second));
    assert.match(second.stderr, /^serves down a: already stopped, nothing changed$/m);
    assert.equal(second.stdout, first.stdout);
  });

  test('unknown serve name: exit 2, no serve named, nothing started; --json error shape', async () => {
    const other = uniqueNode('cli-unknown');
    nodes.push(other);
    const file = writeManifest(dir, `${other}.toml`, renderManifest(other, [GPU], SERVES));
    const r = await gpures(['serves', 'up', 'a', 'nope', '--manifest', file], env);
    assert.equal(r.code, EXIT.badInput, show(r));
    assert.ok(r.stderr.includes(`${file}: no serve named 'nope' (serves: a, b, big, slow)`), show(r));
    assert.equal(r.stdout, '');
    // The known serve named alongside is not started either: the whole command is refused.
    await assertNothingStarted(other, ['a', 'nope']);

    const json = await gpures(['serves', 'up', 'nope', '--json', '--manifest', file], env);
    assert.equal(json.code, EXIT.badInput, show(json));
    const data = JSON.parse(json.stdout) as { error?: { message?: unknown; exitCode?: unknown } };
    assert.deepEqual(Object.keys(data), ['error']);
    assert.equal(data.error?.message, `${file}: no serve named 'nope' (serves: a, b, big, slow)`);
    assert.equal(data.error?.exitCode, EXIT.badInput);
    assert.ok(!json.stderr.includes('no serve named'), show(json));
    await assertNothingStarted(other, ['nope']);
  });

  describe('bad manifests: exit 2, file and field named, nothing started', () => {
    for (const bad of BAD) {
      test(bad.what, async () => {
        const n = uniqueNode('cli-bad');
        nodes.push(n);
        const file = writeManifest(dir, `${n}.toml`, bad.text(n));

        const up = await gpures(['serves', 'up', 'a', 'b', '--manifest', file], env, 30_000);
        assert.equal(up.code, EXIT.badInput, show(up));
        assert.equal(up.stdout, '');
        // A serve's field is named with the serve: `file: serve 'b' (serves[1].gpu_role): …`.
        const named = new RegExp(`${escapeRegExp(file)}: ((serve|gpu) '[^']+' \\()?${escapeRegExp(bad.field)}`);
        assert.match(up.stderr, named, `stderr should name ${file} and ${bad.field}\n${show(up)}`);
        assert.match(up.stderr, bad.message, show(up));
        await assertNothingStarted(n, ['a', 'b']);

        const validate = await gpures(['validate', file], env);
        assert.equal(validate.code, EXIT.badInput, show(validate));
        assert.equal(validate.stdout, '');
        assert.equal(validate.stderr, up.stderr);

        const json = await gpures(['validate', file, '--json'], env);
        assert.equal(json.code, EXIT.badInput, show(json));
        const data = JSON.parse(json.stdout) as { error: { message: string; exitCode: number; details?: { errors?: unknown[] } } };
        assert.equal(data.error.exitCode, EXIT.badInput);
        assert.equal(`${data.error.message}\n`, up.stderr);
        assert.ok((data.error.details?.errors?.length ?? 0) >= 1, show(json));
        await assertNothingStarted(n, ['a', 'b']);
      });
    }
  });

  test('serves up --evict --drain-timeout 1e300: exit 2 naming the flag and its bound, nothing started', async () => {
    const other = uniqueNode('cli-drain');
    nodes.push(other);
    const file = writeManifest(dir, `${other}.toml`, renderManifest(other, [GPU], SERVES));
    for (const value of ['1e300', '3601', '0', '1.5', 'soon']) {
      const r = await gpures(['serves', 'up', 'big', '--evict', '--drain-timeout', value, '--manifest', file], env);
      assert.equal(r.code, EXIT.badInput, show(r));
      assert.equal(r.stderr, `--drain-timeout: must be a whole number of seconds in 1..3600 (got '${value}')\n`, show(r));
      assert.equal(r.stdout, '');
    }
    // Without --evict it would bound nothing; a serve named twice would run twice: both refused as typed.
    const noEvict = await gpures(['serves', 'up', 'big', '--drain-timeout', '30', '--manifest', file], env);
    assert.equal(noEvict.code, EXIT.badInput, show(noEvict));
    assert.equal(noEvict.stderr, '--drain-timeout applies only with --evict\n');
    const twice = await gpures(['serves', 'up', 'big', 'big', '--manifest', file], env);
    assert.equal(twice.code, EXIT.badInput, show(twice));
    assert.equal(twice.stderr, "NAME: 'big' given more than once\n");
    await assertNothingStarted(other, ['big']);
    await assert.rejects(temporal.client.workflow.getHandle(workflowIds.acquire(other, 'big')).describe(), WorkflowNotFoundError);
  });

  /** One line on stderr naming the node and its task queue, exit 4, no stack trace. */
  function assertNoWorker(r: Run, n: string, message: RegExp): void {
    assert.equal(r.code, EXIT.unreachable, show(r));
    assert.equal(r.stdout, '', show(r));
    // The manifest's own warnings aside.
    assert.equal(r.stderr.split('\n').filter((l) => l && !l.startsWith('warning: ')).length, 1, show(r));
    assert.match(r.stderr, message, show(r));
    assert.ok(r.stderr.includes(`'${n}'`) || r.stderr.includes(` ${n} `), show(r));
    assert.ok(r.stderr.includes(`task queue gpures.${n}`), show(r));
    assert.doesNotMatch(r.stderr, /^\s+at /m, show(r));
  }

  test('ledger and serves status with no worker for the node: exit 4, one line naming node and task queue, at once', async () => {
    const other = uniqueNode('cli-noworker');
    nodes.push(other);
    const file = writeManifest(dir, `${other}.toml`, renderManifest(other, [GPU], SERVES));
    const says = new RegExp(
      `^node '${other}': no worker polls task queue gpures\\.${other}, so nothing can answer its ledger; start \`gpures worker\` for node '${other}'$`,
      'm',
    );
    for (const args of [['ledger'], ['serves', 'status']]) {
      const r = await gpures([...args, '--manifest', file], env, 60_000);
      assertNoWorker(r, other, says);
      // No query is left to time out: the server's poller list answers (three looks, 0.5 s apart).
      assert.ok(r.ms < 8_000, `${args.join(' ')} took ${r.ms} ms`);
      const json = await gpures([...args, '--json', '--manifest', file], env, 60_000);
      assert.equal(json.code, EXIT.unreachable, show(json));
      const data = JSON.parse(json.stdout) as { error: { message: string; exitCode: number } };
      assert.equal(data.error.exitCode, EXIT.unreachable);
      assert.ok(r.stderr.split('\n').includes(data.error.message), show(json));
    }
    // An operation is refused the same way, and says that nothing was started.
    const up = await gpures(['serves', 'up', 'a', '--manifest', file], env, 60_000);
    const refused = `^node '${other}': no worker polls task queue gpures\\.${other}, so nothing can answer its ledger; nothing was started: `;
    assertNoWorker(up, other, new RegExp(refused, 'm'));
    // Nothing was started on its behalf: not even the ledger.
    await assertNothingStarted(other, ['a']);
  });

  test('a worker that polled a moment ago and is gone: the query deadline, still exit 4 and one line', async () => {
    const other = uniqueNode('cli-deadworker');
    nodes.push(other);
    const file = writeManifest(dir, `${other}.toml`, renderManifest(other, [GPU], SERVES));
    // What a worker killed a moment ago leaves behind: the server lists its poll for minutes.
    await temporal.client
      // Long polls need a few seconds of deadline, or the server refuses them before it records the poller.
      .withDeadline(Date.now() + 5_000, () =>
        temporal.client.workflowService.pollWorkflowTaskQueue({ namespace: 'default', taskQueue: { name: `gpures.${other}` }, identity: 'a worker that died' }),
      )
      .catch(() => undefined);
    const r = await gpures(['ledger', '--manifest', file], env, 60_000);
    assertNoWorker(
      r,
      other,
      new RegExp(
        `^no worker answered the ledger of gpu_role 'dark-fast' on ${other} within ${NODE_ANSWER_MS / 1000} s: ` +
          `is \`gpures worker\` running for ${other} \\(task queue gpures\\.${other}\\)\\?$`,
        'm',
      ),
    );
    assert.ok(r.ms < 30_000, `took ${r.ms} ms`);
  });

  test('bin/gpures run as a program: node with --max-semi-space-size=1 and malloc capped at 2 arenas, from its shebang', async () => {
    // A module node loads before the CLI's own says what node was started with.
    const dir = mkdtempSync(join(tmpdir(), 'gpures-shebang-'));
    const preload = join(dir, 'exec-argv.js');
    writeFileSync(preload, 'process.stderr.write(`execArgv ${JSON.stringify(process.execArgv)}\\nMALLOC_ARENA_MAX ${process.env.MALLOC_ARENA_MAX}\\n`);\n');
    // The shebang's value replaces one in the environment (README, Configuration).
    const r = await gpuresAsInstalled(['validate', EXAMPLE], { ...env, NODE_OPTIONS: `--require ${preload}`, MALLOC_ARENA_MAX: '8' });
    assert.equal(r.code, EXIT.ok, show(r));
    assert.equal(r.stdout, `${EXAMPLE}: ok (node primary-node, 1 gpu, 7 serves)\n`);
    assert.match(r.stderr, /^execArgv \["--max-semi-space-size=1"\]$/m);
    assert.match(r.stderr, /^MALLOC_ARENA_MAX 2$/m);
    // Run by node itself, it has only what it is given.
    const plain = await gpures(['validate', EXAMPLE], { ...env, NODE_OPTIONS: `--require ${preload}` });
    assert.match(plain.stderr, /^execArgv \[\]$/m);
  });

  test('validate the example manifest: exit 0', async () => {
    const r = await gpures(['validate', EXAMPLE], env);
    assert.equal(r.code, EXIT.ok, show(r));
    assert.equal(r.stdout, `${EXAMPLE}: ok (node primary-node, 1 gpu, 7 serves)\n`);
    // As every other command takes it.
    const named = await gpures(['validate', '--manifest', EXAMPLE], env);
    assert.equal(named.code, EXIT.ok, show(named));
    assert.equal(named.stdout, r.stdout);
    // A malformed variable is exit 2 naming it, for a command that runs; --help shows regardless.
    const badVar = { ...env, GPURES_TEMPORAL_UI_URL: 'ftp://ui' };
    const refused = await gpures(['validate', EXAMPLE], badVar);
    assert.equal(refused.code, EXIT.badInput, show(refused));
    assert.match(refused.stderr, /^GPURES_TEMPORAL_UI_URL: an http\(s\) base URL .*\(got 'ftp:\/\/ui'\)$/m);
    const help = await gpures(['--help'], badVar);
    assert.equal(help.code, EXIT.ok, show(help));
    assert.match(help.stdout, /^Usage: gpures /);
    const version = await gpures(['--version'], badVar);
    assert.equal(version.code, EXIT.ok, show(version));
    assert.equal(version.stdout, `${(JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version}\n`);
    const both = await gpures(['validate', EXAMPLE, '--manifest', 'other.toml'], env);
    assert.equal(both.code, EXIT.badInput, show(both));
    assert.match(both.stderr, /give the manifest once: as the argument \(.*\) or as --manifest \(other\.toml\), not both/);
  });

  test('Temporal unreachable: exit 4, quickly, nothing started', async () => {
    const n = uniqueNode('cli-unreach');
    nodes.push(n);
    const file = writeManifest(dir, `${n}.toml`, renderManifest(n, [GPU], SERVES));
    const unreachable = { TEMPORAL_ADDRESS: '127.0.0.1:1' };
    const commands = [['serves', 'up', 'a'], ['serves', 'down', 'a'], ['serves', 'status'], ['ledger']];
    // In parallel: a refused port is known at once, before any gRPC connect deadline.
    const runs = await Promise.all(commands.map((args) => gpures([...args, '--manifest', file], unreachable, 30_000)));
    runs.forEach((r, i) => {
      const what = commands[i]?.join(' ') ?? '?';
      assert.equal(r.code, EXIT.unreachable, `${what}: ${show(r)}`);
      assert.match(r.stderr, /^cannot reach Temporal at 127\.0\.0\.1:1 \(namespace default\): connection refused \(nothing listens there\)/m, show(r));
      assert.equal(r.stdout, '');
      // A bound against a hang, not a timing: the refusal comes from a TCP probe, not a 10 s deadline.
      assert.ok(r.ms < 20_000, `${what} took ${r.ms} ms`);
    });
    const json = await gpures(['serves', 'up', 'a', '--json', '--manifest', file], unreachable, 30_000);
    assert.equal(json.code, EXIT.unreachable, show(json));
    const data = JSON.parse(json.stdout) as { error: { message: string; exitCode: number } };
    assert.equal(data.error.exitCode, EXIT.unreachable);
    assert.match(data.error.message, /^cannot reach Temporal at 127\.0\.0\.1:1 \(namespace default\): /);
    await assertNothingStarted(n, ['a']);
  });

  test("an address that answers gRPC without Temporal's WorkflowService, or whose TLS setting is not the server's: exit 4 saying so, not a missing worker", async () => {
    const n = uniqueNode('cli-not-frontend');
    nodes.push(n);
    const file = writeManifest(dir, `${n}.toml`, renderManifest(n, [GPU], SERVES));
    // Another program's gRPC server (grpc-js words the refusal its own way, not Go's).
    const other = new grpc.Server();
    const port = await new Promise<number>((ok, fail) =>
      other.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? fail(e) : ok(p))),
    );
    try {
      const at = { TEMPORAL_ADDRESS: `127.0.0.1:${port}` };
      const [ledger, up, tls] = await Promise.all([
        gpures(['ledger', '--manifest', file], at),
        gpures(['serves', 'up', 'a', '--manifest', file], at),
        // The test server has no TLS: a CLI set for it never completes the handshake.
        gpures(['ledger', '--manifest', file], { ...env, TEMPORAL_TLS: 'true' }),
      ]);
      const last = (r: Run) => r.stderr.trim().split('\n').pop() ?? '';
      for (const r of [ledger, up]) {
        assert.equal(r.code, EXIT.unreachable, show(r));
        assert.match(
          last(r),
          /^Temporal's frontend does not answer there \(12 UNIMPLEMENTED: .*temporal\.api\.workflowservice.*\): .*not its frontend/,
          show(r),
        );
      }
      assert.equal(tls.code, EXIT.unreachable, show(tls));
      assert.match(last(tls), /no gRPC handshake completed in time: .*a frontend without TLS while TLS is on \(TEMPORAL_TLS/, show(tls));
    } finally {
      other.forceShutdown();
    }
    await assertNothingStarted(n, ['a']);
  });

  test('Temporal config file: an empty one configures nothing (exit 4 at the address given, not a TypeError); one that is not TOML, or lacks the profile named, is exit 2 naming the file', async () => {
    const n = uniqueNode('cli-envconfig');
    nodes.push(n);
    const file = writeManifest(dir, `${n}.toml`, renderManifest(n, [GPU], SERVES));
    const empty = writeManifest(dir, `${n}-empty.toml`, '');
    const broken = writeManifest(dir, `${n}-broken.toml`, 'address = = "x"\n');
    const runs = await Promise.all([
      gpures(['ledger', '--manifest', file], { TEMPORAL_CONFIG_FILE: empty, TEMPORAL_ADDRESS: '127.0.0.1:1' }, 30_000),
      gpures(['ledger', '--manifest', file], { TEMPORAL_CONFIG_FILE: empty, TEMPORAL_PROFILE: 'prod' }, 30_000),
      gpures(['serves', 'up', 'a', '--manifest', file], { TEMPORAL_CONFIG_FILE: broken }, 30_000),
    ]);
    const [unset, noProfile, notToml] = runs;
    assert.equal(unset.code, EXIT.unreachable, show(unset));
    assert.match(unset.stderr, /^cannot reach Temporal at 127\.0\.0\.1:1 /m, show(unset));
    assert.equal(noProfile.code, EXIT.badInput, show(noProfile));
    assert.equal(noProfile.stderr.trim().split('\n').pop(), `${empty}: no [profile.prod] (TEMPORAL_PROFILE): the file has no profile table at all`);
    assert.equal(notToml.code, EXIT.badInput, show(notToml));
    assert.match(
      notToml.stderr,
      new RegExp(`^${broken.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: Temporal's environment configuration cannot be used: not TOML at line 1, column 11$`, 'm'),
    );
    for (const r of runs) assert.doesNotMatch(r.stderr, /Cannot read properties/, show(r));
    await assertNothingStarted(n, ['a']);
  });

  test("one line each, never a stack: a namespace the server lacks (exit 4), the worker's bad variable (2) or absent server (4), the demo's missing manifest (2) or server (4), the default manifest not there (2, saying where it looked), an address without a port refused at once (4), a named Temporal config file that is not there (2), Docker not there for the worker (4)", async () => {
    const n = uniqueNode('cli-one-line');
    nodes.push(n);
    const file = writeManifest(dir, `${n}.toml`, renderManifest(n, [GPU], SERVES));
    const noNamespace = { ...env, TEMPORAL_NAMESPACE: 'no-such-namespace' };
    const asWorker = ['worker', '--manifest', file, '--gpus', 'off', '--metrics', 'off'];
    const taken = temporal.address;
    const takenPort = taken.split(':').pop() ?? '';
    const runs = await Promise.all([
      gpures(['serves', 'up', 'a', '--manifest', file], noNamespace),
      gpures(['ledger', '--manifest', file], noNamespace),
      gpures(asWorker, { ...env, GPURES_NVIDIA_SMI_LOOP_MS: '5' }),
      gpures(asWorker, { TEMPORAL_ADDRESS: '127.0.0.1:1' }, 30_000),
      gpures(['demo', '--manifest', join(dir, 'no-such.toml')], env),
      gpures(['demo', '--temporal-address', '127.0.0.1:1'], env, 30_000),
      gpures(['serves', 'status'], env),
      gpures(['ledger', '--manifest', file], { TEMPORAL_ADDRESS: '127.0.0.1' }),
      gpures(['ledger', '--manifest', file], { TEMPORAL_CONFIG_FILE: join(dir, 'no-such-temporal.toml'), TEMPORAL_PROFILE: 'prod' }),
      gpures(asWorker, { ...env, DOCKER_HOST: `unix://${join(dir, 'no-dockerd.sock')}` }),
      // The dev server's own port: taken.
      gpures([...asWorker.slice(0, -1), taken], env),
      gpures(['api', '--manifest', file, '--port', takenPort], { ...env, GPURES_API_TOKEN: 'x'.repeat(40) }),
    ]);
    const [up, ledger, badVar, noServer, demoManifest, demoServer, noManifest, noPort, noFile, noDocker, metricsTaken, apiTaken] = runs;
    // After the manifest's warnings (shown once), the error is the last line.
    const last = (r: { stderr: string }) => r.stderr.trim().split('\n').pop() ?? '';
    for (const r of [up, ledger]) {
      assert.equal(r.code, EXIT.unreachable, show(r));
      assert.match(last(r), /^(Temporal has no namespace 'no-such-namespace': set TEMPORAL_NAMESPACE|Temporal refused the call: .*no-such-namespace)/, show(r));
    }
    assert.equal(badVar.code, EXIT.badInput, show(badVar));
    assert.match(last(badVar), /^GPURES_NVIDIA_SMI_LOOP_MS: an integer number of milliseconds from 20 to 10000, or 'off' \(got '5'\)$/);
    assert.equal(noServer.code, EXIT.unreachable, show(noServer));
    assert.match(
      last(noServer),
      /^cannot reach Temporal at 127\.0\.0\.1:1 \(namespace default\): connection refused \(nothing listens there\) \(set TEMPORAL_ADDRESS/,
    );
    assert.equal(demoManifest.code, EXIT.badInput, show(demoManifest));
    assert.match(last(demoManifest), /no-such\.toml: cannot read manifest: ENOENT/);
    assert.equal(demoServer.code, EXIT.unreachable, show(demoServer));
    assert.match(
      demoServer.stderr,
      /^cannot reach Temporal at 127\.0\.0\.1:1 \(namespace default\): connection refused \(nothing listens there\) \(check --temporal-address\)$/m,
    );
    assert.equal(noManifest.code, EXIT.badInput, show(noManifest));
    assert.match(
      last(noManifest),
      /^serves\.toml: cannot read manifest: ENOENT.* \(no --manifest given and GPURES_MANIFEST unset: the manifest defaults to serves\.toml in the current directory\)$/,
    );
    // No port: the SDK's 7233, probed as any address is, so nothing listening there is known at
    // once: the probe's words (ECONNREFUSED), not the gRPC connect's deadline. (Not timed: twelve
    // CLIs at once on a loaded 2-core runner took 8.1 s where the probe answers in milliseconds.)
    assert.equal(noPort.code, EXIT.unreachable, show(noPort));
    assert.match(last(noPort), /^cannot reach Temporal at 127\.0\.0\.1 \(namespace default\): connection refused \(nothing listens there\)/);
    assert.equal(noFile.code, EXIT.badInput, show(noFile));
    assert.match(last(noFile), /no-such-temporal\.toml: cannot read Temporal's config file: ENOENT.*\(TEMPORAL_CONFIG_FILE\)$/);
    // Docker checked before the worker takes work: not a ledger failing its reconcile while `gpures ledger` asks for a worker.
    assert.equal(noDocker.code, EXIT.unreachable, show(noDocker));
    assert.equal(last(noDocker), `cannot reach Docker at unix://${join(dir, 'no-dockerd.sock')} (DOCKER_HOST): connect ENOENT ${join(dir, 'no-dockerd.sock')}`);
    assert.equal(metricsTaken.code, EXIT.badInput, show(metricsTaken));
    assert.match(last(metricsTaken), /^cannot listen for \/metrics on http:\/\/\S+: listen EADDRINUSE.* \(--metrics or GPURES_METRICS_ADDR\)$/);
    assert.equal(apiTaken.code, EXIT.badInput, show(apiTaken));
    assert.equal(last(apiTaken), `--port: cannot listen on 127.0.0.1:${takenPort}: another process listens there`);
    for (const r of runs) assert.doesNotMatch(r.stderr, /^\s+at /m, `a stack trace: ${show(r)}`);
    await assertNothingStarted(n, ['a']);
  });

  test("the worker at start, from one nvidia-smi reading: a uuid nvidia-smi does not report, a capacity above the card's, nvidia-smi missing; warnings, and it runs", async () => {
    const n = uniqueNode('cli-gpus');
    nodes.push(n);
    const gpus = [GPU, { role: 'other', capacity_mib: 40000, reserve_mib: 0 }];
    const file = writeManifest(dir, `${n}.toml`, renderManifest(n, gpus, [{ name: 'a', vram_mib: 1000 }]));
    // renderManifest numbers the uuids by index: the box has the second, at 32607 MiB, and another card.
    const state = join(dir, `${n}-smi.json`);
    const card = (index: number, uuid: string) => ({ index, uuid, name: 'NVIDIA GeForce RTX 5090', totalMib: 32607, baseUsedMib: 0 });
    writeFileSync(state, JSON.stringify({ gpus: [card(0, 'GPU-99999999-0000-0000-0000-000000000000'), card(1, 'GPU-00000000-0000-0000-0000-000000000001')] }));
    const fake = join(ROOT, 'bin', 'fake-nvidia-smi');
    const cases: [Record<string, string>, RegExp[]][] = [
      [
        { GPURES_NVIDIA_SMI: fake, FAKE_NVIDIA_SMI_STATE: state },
        [
          /^worker: warning: gpus\[0\]\.uuid GPU-00000000-0000-0000-0000-000000000000 \(gpu_role 'dark-fast'\) is not a GPU nvidia-smi reports \(GPU-99999999-0000-0000-0000-000000000000, GPU-00000000-0000-0000-0000-000000000001\): an eviction on it fails at its preflight; copy the uuid from `nvidia-smi -L`$/m,
          /^worker: warning: gpus\[1\]\.capacity_mib 40000 MiB \(gpu_role 'other'\) is more than the 32607 MiB nvidia-smi reports for it: the ledger would admit what the card cannot hold$/m,
        ],
      ],
      [
        { GPURES_NVIDIA_SMI: join(dir, 'no-nvidia-smi') },
        [
          /^worker: warning: nvidia-smi \(\S+no-nvidia-smi, GPURES_NVIDIA_SMI\) cannot be read: .*; until it can, an eviction fails at its preflight and no serve is measured$/m,
        ],
      ],
    ];
    for (const [smi, expected] of cases) {
      const w = await startWorkerProcess(['--manifest', file, '--gpus', 'off'], { ...env, ...smi });
      try {
        await waitUntil('the warnings', () => expected.every((re) => re.test(w.stderr())), 20_000, 100);
        assert.match(w.stderr(), /^worker for node /m);
        assert.equal(w.child.exitCode, null, 'the worker runs on');
      } finally {
        await w.stop();
      }
    }
  });
});

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
