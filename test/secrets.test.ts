// A serve's secrets given as vLLM flags (`--hf-token`, `--api-key`) end to end: real dev server,
// real dockerd. They reach the container through its environment, never its command line (what
// `ps` on the host shows), and no workflow history of the node carries them, nor the audit report,
// nor a failure message quoting a container's last output.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fetchHistoryJson } from '../src/audit/export';
import { serveDown, serveUp } from '../src/client/operations';
import { manifestOrThrow, parseManifest } from '../src/config/manifest';
import { containerName, REDACTED, serveBaseUrl } from '../src/domain/serve';
import { workflowIds } from '../src/shared/messages';
import { docker, renderManifest, startTestBox, uniqueNode } from './support/box';
import type { TestBox } from './support/box';
import { gpures, show } from './support/cli';
import { historyTexts } from './support/history-scan';
import { waitUntil } from './support/wait';

const HF_TOKEN = `hf_secretsTest${Math.random().toString(36).slice(2)}`;
const API_KEY = `sk-secretsTest${Math.random().toString(36).slice(2)}`;
const LEAKED = `hf_echoedByTheContainer${Math.random().toString(36).slice(2)}`;
const SECRETS = [HF_TOKEN, API_KEY, LEAKED];

describe('serve secrets: environment, not command line; never in history', () => {
  let box: TestBox;

  before(async () => {
    const node = uniqueNode('secrets');
    box = await startTestBox(
      node,
      renderManifest(
        node,
        [{ role: 'g', capacity_mib: 10000, reserve_mib: 0 }],
        [
          { name: 'gated', vram_mib: 1000, args: ['--hf-token', HF_TOKEN, '--max-model-len', '4096', `--api-key=${API_KEY}`] },
          // A job that prints its token and fails: the failure message quotes its last output.
          {
            name: 'leaky',
            vram_mib: 1000,
            class: 'on-demand',
            api: 'none',
            env: { HF_TOKEN: LEAKED },
            args: ['sh', '-c', 'echo "login with $HF_TOKEN refused"; exit 4'],
          },
        ],
      ),
    );
  });

  after(async () => {
    await box?.close();
  });

  test('--hf-token and --api-key reach the container as HF_TOKEN and VLLM_API_KEY, not on its command line', async () => {
    const up = await serveUp(box.temporal.client, box.node, 'gated');
    assert.ok(up.ok, !up.ok ? up.message : '');
    const info = await docker().getContainer(containerName(box.node, 'gated')).inspect();
    const commandLine = [info.Path, ...info.Args, ...(info.Config.Cmd ?? []), ...[info.Config.Entrypoint ?? []].flat()];
    for (const secret of [HF_TOKEN, API_KEY])
      assert.ok(!commandLine.some((a) => a.includes(secret)), `${secret} on the command line: ${commandLine.join(' ')}`);
    assert.ok(info.Config.Cmd?.includes('--max-model-len'), 'the other args are kept');
    assert.ok(!info.Config.Cmd?.some((a) => a.startsWith('--hf-token') || a.startsWith('--api-key')), info.Config.Cmd?.join(' '));
    assert.ok(info.Config.Env.includes(`HF_TOKEN=${HF_TOKEN}`), info.Config.Env.join(' '));
    assert.ok(info.Config.Env.includes(`VLLM_API_KEY=${API_KEY}`));
    // What `ps` on the host reads: the container's process is a host process.
    const cmdline = readFileSync(`/proc/${info.State.Pid}/cmdline`, 'utf8');
    assert.ok(cmdline.length > 0 && !SECRETS.some((s) => cmdline.includes(s)), cmdline);
    const environ = readFileSync(`/proc/${info.State.Pid}/environ`, 'utf8').split('\0');
    assert.ok(environ.includes(`HF_TOKEN=${HF_TOKEN}`) && environ.includes(`VLLM_API_KEY=${API_KEY}`));
  });

  test("the key is asked on /v1 as vLLM asks it, and the bring-up's identity probe sent it (read from the manifest, not history)", async () => {
    // The bring-up above passed its identity check against a serve that refuses /v1 without the key.
    const manifest = manifestOrThrow(parseManifest(readFileSync(box.manifestPath, 'utf8'), box.manifestPath));
    const serve = manifest.serves.find((s) => s.name === 'gated');
    assert.ok(serve);
    const models = `${serveBaseUrl(serve)}/v1/models`;
    assert.equal((await fetch(models)).status, 401);
    assert.equal((await fetch(models, { headers: { authorization: 'Bearer sk-not-it' } })).status, 401);
    const keyed = await fetch(models, { headers: { authorization: `Bearer ${API_KEY}` } });
    assert.equal(keyed.status, 200);
    assert.match(await keyed.text(), /"id":"/);
  });

  test("a failure quoting a container's output shows the secret redacted", async () => {
    const up = await serveUp(box.temporal.client, box.node, 'leaky');
    assert.ok(!up.ok);
    assert.equal(up.failureType, 'ContainerExited');
    assert.match(up.message, new RegExp(`login with ${REDACTED} refused`));
    assert.ok(!up.message.includes(LEAKED));
  });

  test("no history of the node's workflows, and no audit report, carries a secret", async () => {
    const down = await serveDown(box.temporal.client, box.node, 'gated');
    assert.ok(down.ok, !down.ok ? down.message : '');
    const ids = [
      workflowIds.bringUp(box.node, 'gated'),
      workflowIds.bringUp(box.node, 'leaky'),
      workflowIds.bringDown(box.node, 'gated'),
      workflowIds.ledger(box.node, 'g'),
    ];
    const query = `TaskQueue = 'gpures.${box.node}'`;
    const listed = new Set<string>();
    await waitUntil(
      'the workflows of this node listed',
      async () => {
        for await (const wf of box.temporal.client.workflow.list({ query })) listed.add(wf.workflowId);
        return ids.every((id) => listed.has(id));
      },
      10_000,
      100,
    );
    for (const id of listed) {
      const texts = historyTexts(await fetchHistoryJson(box.temporal.client, id));
      for (const secret of SECRETS) assert.ok(!texts.some((t) => t.includes(secret)), `${id}: carries a secret`);
    }
    // The scan sees inside payloads: the resolved serve (its env names, the redaction) is there.
    const upTexts = historyTexts(await fetchHistoryJson(box.temporal.client, ids[0] as string));
    assert.ok(
      upTexts.some((t) => t.includes('VLLM_API_KEY') && t.includes(REDACTED)),
      'the resolved serve is not in the scanned payloads',
    );

    const env = { TEMPORAL_ADDRESS: box.temporal.address, TEMPORAL_NAMESPACE: 'default' };
    for (const id of ids.slice(0, 2)) {
      const report = await gpures(['audit', 'report', id], env);
      assert.equal(report.code, 0, show(report));
      assert.match(report.stdout, /serves up (gated|leaky)/);
      for (const secret of SECRETS) assert.ok(!report.stdout.includes(secret) && !report.stderr.includes(secret), `${id}: the report carries a secret`);
    }
  });
});
