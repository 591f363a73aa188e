// What `serves up`/`down` print for a run that failed by a step timing out while the serve's
// ledger still reconciles with the box: the ledger's word is the cause only where the step that
// timed out was the ledger's (its attempts each waited for the reconcile); another step's timeout
// (a start, a drain) keeps its own top line, whatever the ledger is doing meanwhile.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { parseManifest } from '../src/config/manifest';
import { withReconcileCause } from '../src/cli/serve-operations';
import type { ServeOutcome } from '../src/cli/serve-operations';
import { renderManifest } from './support/box';

const parsed = parseManifest(
  renderManifest('rc-node', [{ role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 }], [{ name: 'other', vram_mib: 1000, class: 'resident' }]),
  'serves.toml',
);
assert.ok(parsed.ok);
const manifest = parsed.manifest;

/** A ledger still reconciling, as LedgerClient.stillReconciling answers for it. */
const reconciling = () => Promise.resolve("its reconcile's attempt 12 failed: connect ENOENT /run/docker.sock");

function timedOut(type: string, message: string): ServeOutcome {
  return {
    ok: false,
    serve: 'other',
    workflowId: 'serves-up/rc-node/other',
    runId: 'r1',
    failureType: 'ActivityFailure',
    message,
    activity: { type, timedOut: true },
  };
}

const topLine = (o: ServeOutcome) => (o.ok ? o.result.message : `${o.message} [${o.failureType}]`);

describe("a step's timeout while the ledger reconciles", () => {
  test("the ledger's admit timing out: relabelled with what the reconcile meets", async () => {
    const o = await withReconcileCause(reconciling, manifest, 'up', 'other', timedOut('ledgerAdmit', 'Local Activity timed out'));
    assert.match(
      topLine(o),
      /^serves up other failed: the ledger of gpu_role 'dark-fast' on rc-node is still reconciling .*\(Local Activity timed out\) \[LedgerReconciling\]$/,
    );
  });

  test('another step timing out (the container start): its own top line, not relabelled', async () => {
    const o = await withReconcileCause(reconciling, manifest, 'up', 'other', timedOut('startServeContainer', 'Activity task timed out'));
    console.log(`  the top line: ${topLine(o)}`);
    assert.equal(topLine(o), 'Activity task timed out [ActivityFailure]');
  });
});
