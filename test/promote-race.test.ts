// Router promotion against other writers of the live config: an operator's edit and admin reload
// landing during a promotion's verify window, and a second promotion started beside the CLI's
// (the Temporal UI's form under another workflow id). Real dev server, real dockerd,
// gpures/fake-router:test containers; the box is sampled: the live file on disk and the
// router's /healthz, not the workflow's word.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import type { RouterTarget } from '../src/adapters/router-deployment/port';
import { followPromotion, startPromotion } from '../src/client/promote';
import type { PromoteInput } from '../src/shared/promotion';
import { promotionStepsQuery } from '../src/shared/promotion';
import { taskQueueFor } from '../src/shared/messages';
import { healthz, makeVariantImage, promotionBox, ROUTER_IMAGE, ROUTER_TOKEN, routerConfig, waitHealthy } from './support/router';
import { waitUntil } from './support/wait';

describe('router promotion racing other writers of the live config', () => {
  const box = promotionBox('promrace', ['opedit', 'twoids', 'opimg']);
  const { node } = box;
  const target = (name: string) => box.target(name);

  /** What an operator (or config management) does: write the live file in place, then POST /admin/reload. */
  async function operatorEdit(t: RouterTarget, content: string): Promise<void> {
    writeFileSync(t.configPath, content);
    const res = await fetch(`${t.url}/admin/reload`, { method: 'POST', headers: { authorization: `Bearer ${ROUTER_TOKEN}` } });
    assert.equal(res.status, 200, await res.text());
  }

  test("an operator's edit and admin reload during the verify window: the promotion's rollback does not put the backup back over it", async () => {
    const t = target('opedit');
    const handle = await startPromotion(box.temporal.client, node, { router: 'opedit', config: { content: routerConfig('opedit-v2') }, image: ROUTER_IMAGE });
    // The promotion wrote opedit-v2 and reloaded; it is now watching /healthz for it.
    await waitUntil('the promotion at verify', async () => (await handle.query(promotionStepsQuery)).current === 'verify', 30_000, 50);
    const mine = routerConfig('opedit-operator');
    await operatorEdit(t, mine);
    assert.deepEqual(await healthz(t.url), { status: 200, mappingVersion: 'opedit-operator' });

    const out = await followPromotion(handle, () => undefined, 200);
    assert.ok(!out.ok, 'the promotion cannot verify opedit-v2: someone else reloaded');
    console.log(`  promotion: ${out.failureType}: ${out.message}`);
    // The box: the operator's config is still the live file, and still what the router serves.
    const live = readFileSync(t.configPath, 'utf8');
    const h = await healthz(t.url);
    console.log(`  live file mapping: ${/mapping_version = "([^"]*)"/.exec(live)?.[1]}; router serves: ${h.mappingVersion}`);
    assert.equal(live, mine, "the rollback restored the backup over the operator's change");
    assert.deepEqual(h, { status: 200, mappingVersion: 'opedit-operator' });
    assert.equal(out.failureType, 'HealthzMismatch');
    assert.match(
      out.message,
      /ROLLBACK FAILED \(rollback: restore: LiveConfigConflict: .*router\.toml changed since this promotion wrote it .*left as they are\)/,
    );
    assert.equal(out.details?.rollback?.ok, false);
  });

  test('a second promotion started under another workflow id (the UI form) while the CLI one runs: refused, nothing of it reaches the box', async () => {
    const t = target('twoids');
    const a = await startPromotion(box.temporal.client, node, { router: 'twoids', config: { content: routerConfig('twoids-a') }, image: ROUTER_IMAGE });
    await waitUntil('promotion A at verify', async () => (await a.query(promotionStepsQuery)).current === 'verify', 30_000, 50);
    // The UI's "Start workflow" form: same type, task queue and input shape, an id the operator typed.
    const inputB: PromoteInput = { router: 'twoids', config: { content: routerConfig('twoids-b') }, image: ROUTER_IMAGE };
    const b = await box.temporal.client.workflow.start('promoteWorkflow', {
      workflowId: `promote-by-hand/${node}/twoids`,
      taskQueue: taskQueueFor(node),
      args: [inputB],
    });
    const [outA, outB] = await Promise.all([followPromotion(a, () => undefined, 200), followPromotion(b, () => undefined, 200)]);
    const said = (o: typeof outA) => (o.ok ? `ok: ${o.result.message}` : `${o.failureType}: ${o.message}`);
    console.log(`  A: ${said(outA)}\n  B: ${said(outB)}`);
    const live = readFileSync(t.configPath, 'utf8');
    const h = await healthz(t.url);
    console.log(`  live file mapping: ${/mapping_version = "([^"]*)"/.exec(live)?.[1]}; router serves: ${h.mappingVersion}`);
    assert.ok(outA.ok, `A: ${said(outA)}`);
    assert.ok(!outB.ok && outB.failureType === 'PromotionInputInvalid', `B: ${said(outB)}`);
    assert.equal(live, routerConfig('twoids-a'));
    assert.deepEqual(h, { status: 200, mappingVersion: 'twoids-a' });
  });
  test("an image change whose restore is refused (the operator's edit) still brings the previous image back, under the operator's config", async () => {
    const t = target('opimg');
    const before = await box.d.getContainer(t.container).inspect();
    const v2 = await makeVariantImage(box.d, box.run, `promrace-v2-${box.run}`);
    box.images.push(v2);
    const handle = await startPromotion(box.temporal.client, node, { router: 'opimg', config: { content: routerConfig('opimg-v2') }, image: v2 });
    await waitUntil('the promotion at verify', async () => (await handle.query(promotionStepsQuery)).current === 'verify', 60_000, 50);
    await waitHealthy(t.url, 30_000);
    writeFileSync(t.configPath, routerConfig('opimg-operator'));
    const reload = await fetch(`${t.url}/admin/reload`, { method: 'POST', headers: { authorization: `Bearer ${ROUTER_TOKEN}` } });
    assert.equal(reload.status, 200, await reload.text());
    const out = await followPromotion(handle, () => undefined, 200);
    assert.ok(!out.ok);
    assert.match(
      out.message,
      /rolled back the image only: .* recreated and verified healthy on mapping_version 'opimg-operator' under the live config, which was not restored/,
    );
    // The box: the image it ran before, the operator's config on disk and served.
    const after = await box.d.getContainer(t.container).inspect();
    assert.equal(after.Image, before.Image, `the router runs ${after.Config.Image}, not the image it ran before the failed promotion`);
    assert.match(readFileSync(t.configPath, 'utf8'), /mapping_version = "opimg-operator"/);
    assert.equal((await healthz(t.url)).mappingVersion, 'opimg-operator');
  });
});
