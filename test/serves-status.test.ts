// gpures serves status beside gpures ledger: a row says what the ledger's line says of the serve.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { applyAdmit, emptyLedger, formatLedger, withPhase } from '../src/domain/ledger';
import type { AdmitRequest, LedgerState } from '../src/domain/ledger';
import { applyEvictionPlan, applyVictimReleased } from '../src/domain/eviction';
import { parseManifest } from '../src/config/manifest';
import { statusLines, statusText } from '../src/cli/commands/serves-status';

const MANIFEST = `
[node]
name = "box"

[[gpus]]
role = "main"
uuid = "GPU-00000000-0000-0000-0000-000000000000"
capacity_mib = 24000
reserve_mib = 2000

[[serves]]
name = "vision"
gpu_role = "main"
class = "evictable"
vram_mib = 8000
image = "vllm/vllm-openai:v0.11.0"
model = "test/vision"
port = 30001
served_model_name = "m1"
args = ["--gpu-memory-utilization", "0.33"]

[[serves]]
name = "big"
gpu_role = "main"
class = "on-demand"
vram_mib = 16000
image = "vllm/vllm-openai:v0.11.0"
model = "test/big"
port = 30002
served_model_name = "m2"
args = ["--gpu-memory-utilization", "0.66"]
`;

test("an evicted serve's row names whom it was evicted for, as the ledger's line does; --json keeps the bare phase", () => {
  const parsed = parseManifest(MANIFEST, 'serves.toml');
  assert.ok(parsed.ok, JSON.stringify(parsed));
  const gpu = { role: 'main', uuid: 'GPU-00000000-0000-0000-0000-000000000000', capacityMib: 24000, reserveMib: 2000 };
  const vision: AdmitRequest = { serve: 'vision', vramMib: 8000, class: 'evictable', holder: 'up/vision' };
  const big: AdmitRequest = { serve: 'big', vramMib: 16000, class: 'on-demand', holder: 'acquire/big' };
  let l: LedgerState = withPhase(applyAdmit(emptyLedger('box', gpu), vision), 'vision', 'running');
  l = applyEvictionPlan(l, big, [{ serve: 'vision', vramMib: 8000 }]);
  const during = statusLines(parsed.manifest, [l]);
  l = withPhase(applyVictimReleased(l, 'vision', 'big'), 'big', 'running');
  const after = statusLines(parsed.manifest, [l]);

  // The line an operator reads: the same words as the ledger's.
  assert.match(statusText({ ...after[0]!, operation: null, lease: null }), /^vision +8000 MiB {2}evictable {2}main {8}evicted for big$/);
  assert.ok(formatLedger(l).includes('  vision 8000 MiB (evictable, evicted for big): not committed'), formatLedger(l).join('\n'));
  assert.deepEqual(
    during.map((r) => [r.serve, r.state, r.stateText]),
    [
      ['vision', 'evicting', 'evicting for big'],
      ['big', 'pending', 'waiting for victims vision'],
    ],
  );
  assert.deepEqual(
    after.map((r) => [r.serve, r.state, r.stateText]),
    [
      ['vision', 'evicted', 'evicted for big'],
      ['big', 'running', 'running'],
    ],
  );
});
