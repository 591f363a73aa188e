// Router promotion end to end: real dev server, real dockerd, fake-router containers
// (gpures/fake-router:test) whose live config sits in a host directory bind-mounted at /config.
// Verification windows are 3 s (the router targets' verifyWindowS), polls 200 ms.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import { existsSync, linkSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MockActivityEnvironment } from '@temporalio/testing';
import { Worker } from '@temporalio/worker';
import { DockerRouterDeployment } from '../src/adapters/router-deployment/docker-router';
import { PermanentError } from '../src/adapters/errors';
import { createPromotionActivities } from '../src/activities/promotion';
import { runKey } from '../src/activities/promotion-files';
import { REDACTED } from '../src/domain/serve';
import { fetchHistoryJson } from '../src/audit/export';
import type { RouterDeployment, RouterTarget } from '../src/adapters/router-deployment/port';
import type { RecreateResult } from '../src/adapters/router-deployment/port';
import { journalPath } from '../src/adapters/router-deployment/port';
import { followPromotion, PromotionRefused, startPromotion } from '../src/client/promote';
import type { PromotionOutcome } from '../src/client/promote';
import { mappingVersionOf } from '../src/config/mapping-version';
import { IMAGE_REFERENCE_RULE } from '../src/domain/bounds';
import {
  backupFileName,
  backupsToPrune,
  MAX_CONFIG_BYTES,
  promoteInputProblems,
  staleAttempt,
  unverifiedLiveToRefuse,
  unverifiedWriteOf,
} from '../src/domain/promotion';
import type { JournalLine, StaleAttemptLine, UnverifiedWrite } from '../src/domain/promotion';
import type { PromoteInput, StepRecord, ValidationRun } from '../src/shared/promotion';
import { docker, renderManifest, uniqueNode } from './support/box';
import { gpures } from './support/cli';
import { activityRuns, historyTexts } from './support/history-scan';
import {
  backupsIn,
  deployTestRouter,
  healthz,
  makeVariantImage,
  removeTestArtifacts,
  ROUTER_IMAGE,
  routerConfig,
  spawnPromoteWorker,
  startPromotionWorker,
  tearDownPromotion,
} from './support/router';
import { UNCOUNTED_SINKS } from '../src/worker/workflow-code';
import { testTemporal, workflowBundle } from './support/temporal';
import type { TestTemporal } from './support/temporal';
import type { TestWorker } from './support/worker';
import { waitUntil } from './support/wait';

describe('promotion rules (pure)', () => {
  test('mapping_version from TOML, or from the line when the file is not TOML', () => {
    assert.equal(mappingVersionOf('mapping_version = "a.b"\n[[tiers]]\nname = "x"\n'), 'a.b');
    assert.equal(mappingVersionOf('mapping_version = "v1"\nthis is not toml ==\n'), 'v1');
    assert.equal(mappingVersionOf('[[tiers]]\nname = "x"\n'), undefined);
  });

  test('backups: the newest N kept, never the current run', () => {
    const names = [1, 2, 3, 4, 5, 6].map((i) => backupFileName('router.toml', Date.UTC(2026, 0, i), `${i}`.repeat(12)));
    assert.deepEqual(backupsToPrune('router.toml', [...names, 'router.toml', 'other.bak'], 5, '666666666666'), [names[0]]);
    // A current run whose clock is behind is still kept; the next oldest goes instead.
    assert.deepEqual(backupsToPrune('router.toml', names, 5, '111111111111'), [names[1]]);
  });

  test("the live config as another run's unverified write: only a write that promised `verified`, the last of this content, with none after it", () => {
    const line = (op: string, run: string, sha256: string, extra: Partial<JournalLine> = {}): JournalLine => ({
      at: `t-${op}-${run}`,
      op,
      run,
      sha256,
      ...extra,
    });
    const p1 = [
      line('backup', 'p/1', 'v1', { path: '/d/v1.bak' }),
      line('write', 'p/1', 'v2', { phase: 'intent', verifies: true }),
      line('write', 'p/1', 'v2', { verifies: true }),
    ];
    // Terminated mid-verify: its write is live, nothing verified or restored it.
    assert.deepEqual(unverifiedWriteOf(p1, 'v2'), { run: 'p/1', writtenAt: 't-write-p/1', backupPath: '/d/v1.bak', backupSha256: 'v1' });
    // Succeeded: verified after the write.
    assert.equal(unverifiedWriteOf([...p1, line('verified', 'p/1', 'v2')], 'v2'), undefined);
    // Rolled back: the restore put the config before it live.
    assert.equal(unverifiedWriteOf([...p1, line('restore', 'p/1', 'v1', { path: '/d/v1.bak' })], 'v1'), undefined);
    // The way back (a promotion of p/1's backup) failed its verify and rolled back: its restore put
    // p/1's write back, still never verified.
    const wayBack = [
      ...p1,
      line('backup', 'p/2', 'v2', { path: '/d/v2.bak' }),
      line('write', 'p/2', 'v1', { verifies: true }),
      line('restore', 'p/2', 'v2', { path: '/d/v2.bak' }),
    ];
    assert.deepEqual(unverifiedWriteOf(wayBack, 'v2'), { run: 'p/1', writtenAt: 't-write-p/1', backupPath: '/d/v1.bak', backupSha256: 'v1' });
    // A restore of a content whose last write was verified leaves it verified.
    assert.equal(unverifiedWriteOf([...p1, line('verified', 'p/1', 'v2'), ...wayBack.slice(3)], 'v2'), undefined);
    // Killed before its rename: the intent alone, the live file still the backup.
    assert.equal(unverifiedWriteOf(p1.slice(0, 2), 'v1'), undefined);
    // The operator put the backup back by hand, or edited the file: no journaled effect made it.
    assert.equal(unverifiedWriteOf(p1, 'operator-edit'), undefined);
    // A write from before the journal knew `verified` (its run may have succeeded) never counts.
    assert.equal(unverifiedWriteOf([line('backup', 'p/0', 'v1', { path: '/d/v1.bak' }), line('write', 'p/0', 'v2')], 'v2'), undefined);
    // A `verified` of this content before the write that put it live again does not clear it.
    const again = [
      line('write', 'p/0', 'v2', { verifies: true }),
      line('verified', 'p/0', 'v2'),
      line('write', 'p/3', 'v3', { verifies: true }),
      line('verified', 'p/3', 'v3'),
      ...p1,
    ];
    assert.equal(unverifiedWriteOf(again, 'v2')?.run, 'p/1');
    // No live file: nothing to refuse.
    assert.equal(unverifiedWriteOf(p1, null), undefined);
    // The way back: a candidate equal to that run's backup goes ahead; anything else is refused.
    const u = unverifiedWriteOf(p1, 'v2');
    assert.equal(unverifiedLiveToRefuse(u, 'v1'), undefined);
    assert.equal(unverifiedLiveToRefuse(u, 'v3'), u);
    assert.equal(unverifiedLiveToRefuse(u, 'v2'), u, 'promoting the unverified content again would back it up as the config before');
    assert.equal(unverifiedLiveToRefuse({ ...(u as UnverifiedWrite), backupPath: null, backupSha256: null }, 'v1')?.run, 'p/1');
  });

  test("a write or restore attempt is stale once a later attempt, its run's restore or a later run has journaled", () => {
    const p1 = 'promote/n/r/run-1';
    const p2 = 'promote/n/r/run-2';
    const lines: StaleAttemptLine[] = [
      { op: 'backup', run: p1 },
      { op: 'write', run: p1, attempt: 1 },
    ];
    assert.equal(staleAttempt(lines, { op: 'write', run: p1, attempt: 1 }), undefined);
    const retried = [...lines, { op: 'write' as const, run: p1, attempt: 2 }];
    assert.match(staleAttempt(retried, { op: 'write', run: p1, attempt: 1 }) ?? '', /attempt 2 of this write took over from attempt 1/);
    // The earlier attempt's line, appended late by a worker that woke up, does not make the later one stale.
    assert.equal(staleAttempt([...retried, { op: 'write', run: p1, attempt: 1 }], { op: 'write', run: p1, attempt: 2 }), undefined);
    const restored = [...lines, { op: 'restore' as const, run: p1, attempt: 1 }];
    assert.match(staleAttempt(restored, { op: 'write', run: p1, attempt: 1 }) ?? '', /restored its backup/);
    assert.equal(staleAttempt(restored, { op: 'restore', run: p1, attempt: 1 }), undefined);
    const next = [...restored, { op: 'backup' as const, run: p2 }];
    assert.match(staleAttempt(next, { op: 'restore', run: p1, attempt: 1 }) ?? '', /a later promotion \(promote\/n\/r\/run-2\)/);
    // P1's stale line after P2 began is P1's, not a reason to stop P2.
    assert.equal(
      staleAttempt([...next, { op: 'write', run: p1, attempt: 1 }, { op: 'write', run: p2, attempt: 1 }], { op: 'write', run: p2, attempt: 1 }),
      undefined,
    );
  });

  test('an older run whose first line a frozen attempt appends late does not make the running promotion stale', () => {
    // P0 terminated while its backup (or, with no live file, its write) was frozen before it journaled:
    // P0 has no line until that attempt wakes during P1. Journal order alone takes P0 for the later run.
    const p0 = 'promote/n/r/run-0';
    const p1 = 'promote/n/r/run-1';
    const lines: StaleAttemptLine[] = [
      { op: 'backup', run: p1, scheduledAtMs: 2_000 },
      { op: 'write', run: p1, attempt: 1, scheduledAtMs: 2_100 },
      { op: 'backup', run: p0, scheduledAtMs: 1_000 },
    ];
    assert.equal(staleAttempt(lines, { op: 'write', run: p1, attempt: 1 }), undefined, "P0's late line stopped P1's write");
    const rolledBack = [...lines, { op: 'restore' as const, run: p1, attempt: 1, scheduledAtMs: 9_000 }];
    assert.equal(staleAttempt(rolledBack, { op: 'restore', run: p1, attempt: 1 }), undefined, "P0's late line stopped P1's rollback");
    // And P0's zombie write, waking as well, is the stale one.
    const zombie = [...lines, { op: 'write' as const, run: p0, attempt: 1, scheduledAtMs: 1_100 }];
    assert.match(staleAttempt(zombie, { op: 'write', run: p0, attempt: 1 }) ?? '', /a later promotion \(promote\/n\/r\/run-1\)/);
  });

  test("a router's output recorded in history never carries its admin token", async () => {
    const token = 'router-admin-token-0123456789';
    const deployment: Pick<RouterDeployment, 'validate'> = {
      validate: () => Promise.resolve({ exitCode: 1, output: `rejected; the token is ${token}`, timedOut: false, durationMs: 1 }),
    };
    const acts = createPromotionActivities({
      routerDeployment: deployment as RouterDeployment,
      routerTargets: [
        {
          name: 'r',
          container: 'c',
          configPath: '/srv/router/router.toml',
          containerConfigPath: '/config/router.toml',
          url: 'http://127.0.0.1:1',
          adminToken: token,
        },
      ],
    });
    const verdict: ValidationRun = await new MockActivityEnvironment().run((input: Parameters<typeof acts.promoteValidate>[0]) => acts.promoteValidate(input), {
      router: 'r',
      image: 'i',
      content: 'x',
      run: { workflowId: 'w', runId: 'r' },
    });
    assert.equal(verdict.output, `rejected; the token is ${REDACTED}`);
  });

  test('input problems are all listed', () => {
    assert.deepEqual(promoteInputProblems({ router: 'r', config: { content: 'x' }, image: 'i' }), []);
    assert.deepEqual(promoteInputProblems({ router: '', config: { content: 'x', path: '/p' }, image: '' }), [
      'router: a deployment name such as "router" (got "")',
      `image: ${IMAGE_REFERENCE_RULE} (got "")`,
      'config: exactly one of content and path',
    ]);
    // The bound is on the bytes written, not the characters: 2-byte characters count twice.
    const content = (chars: number, ch: string) => ({ router: 'r', config: { content: ch.repeat(chars) }, image: 'i' });
    assert.deepEqual(promoteInputProblems(content(MAX_CONFIG_BYTES / 2, 'é')), []);
    assert.deepEqual(promoteInputProblems(content(MAX_CONFIG_BYTES / 2 + 1, 'é')), [`config.content: larger than ${MAX_CONFIG_BYTES} bytes`]);
    assert.deepEqual(promoteInputProblems(content(MAX_CONFIG_BYTES / 4 + 1, '🙂')), [`config.content: larger than ${MAX_CONFIG_BYTES} bytes`]);
    assert.deepEqual(promoteInputProblems(content(MAX_CONFIG_BYTES, 'x')), []);
  });

  test("the image must be a Docker image reference: a '..' path or a flag after the tag is refused before the worker hands it to Docker", () => {
    const input = (image: unknown) => ({ router: 'r', config: { content: 'x' }, image });
    for (const image of ['../containers/revop-router', 'gpures/fake-router:test --privileged', 'a b', 'X:UPPER', undefined]) {
      assert.deepEqual(promoteInputProblems(input(image)), [`image: ${IMAGE_REFERENCE_RULE} (got ${JSON.stringify(image)})`]);
    }
    for (const image of ['gpures/fake-router:test', 'localhost:5000/a/b:c', `router@sha256:${'f'.repeat(64)}`])
      assert.deepEqual(promoteInputProblems(input(image)), []);
  });
});

describe('promotion files: only regular files directly in the real config directory', () => {
  const fs = new DockerRouterDeployment(docker());
  const base = mkdtempSync(join(tmpdir(), 'gpures-confine-'));
  const dir = join(base, 'config');
  const secret = join(base, 'secret');
  after(() => rmSync(base, { recursive: true, force: true }));

  async function refused(p: Promise<unknown>, message: RegExp): Promise<void> {
    await assert.rejects(p, (err: unknown) => err instanceof PermanentError && err.type === 'UnsafeConfigPath' && message.test(err.message));
  }

  test('links, FIFOs, other directories and swapped directories are refused; the outside file is untouched', async () => {
    mkdirSync(dir);
    writeFileSync(secret, 'outside\n');
    writeFileSync(join(dir, 'router.toml'), 'mapping_version = "a"\n');
    symlinkSync(secret, join(dir, 'link.toml'));
    execFileSync('mkfifo', [join(dir, 'fifo.toml')]);
    assert.deepEqual(await fs.readFile(dir, join(dir, 'router.toml')), Buffer.from('mapping_version = "a"\n'));
    assert.equal(await fs.readFile(dir, join(dir, 'absent.toml')), undefined);
    await refused(fs.readFile(dir, join(dir, 'link.toml')), /link\.toml is a symbolic link \(to .*secret\)/);
    await refused(fs.fileMode(dir, join(dir, 'link.toml')), /is a symbolic link/);
    await refused(fs.writeFileAtomic(dir, join(dir, 'link.toml'), 'x'), /is a symbolic link/);
    symlinkSync(secret, join(dir, 'j.toml.journal.jsonl'));
    await refused(fs.appendJournal(dir, join(dir, 'j.toml'), { at: '', op: 'write', run: 'r', sha256: '' }), /j\.toml\.journal\.jsonl is a symbolic link/);
    await refused(fs.readFile(dir, join(dir, 'fifo.toml')), /fifo\.toml is not a regular file/);
    await refused(fs.readFile(dir, secret), /is not a file of the router's config directory/);
    await refused(fs.readFile(dir, join(dir, 'sub', '..', '..', 'secret')), /is not a file of the router's config directory/);
    // Unlinking a link removes the link only.
    await fs.removeFile(dir, join(dir, 'link.toml'));
    assert.equal(readFileSync(secret, 'utf8'), 'outside\n');
    assert.ok(!readdirSync(dir).includes('link.toml'));
    // The directory swapped for a link after the worker was configured: every call refuses.
    renameSync(dir, `${dir}.old`);
    symlinkSync(base, dir);
    await refused(fs.readFile(dir, join(dir, 'secret')), /resolves to .*gpures-confine-\w+, so a symbolic link on the way/);
    await refused(fs.listDir(dir), /resolves to/);
    await refused(fs.writeFileAtomic(dir, join(dir, 'secret'), 'overwritten'), /resolves to/);
    assert.equal(readFileSync(secret, 'utf8'), 'outside\n');
  });
});

describe('router promotion', () => {
  const d = docker();
  const run = Date.now().toString(36);
  const node = uniqueNode('promote');
  const images: string[] = [];
  const tmpDirs: string[] = [];
  let temporal: TestTemporal;
  let worker: TestWorker | undefined;
  let v2: string;
  const targets: Record<string, RouterTarget> = {};

  const ROUTERS = ['good', 'reload', 'invalid', 'crash', 'crashreload', 'mismatch', 'race', 'cli', 'confined', 'linkdir'];
  // Stand-ins for /etc/shadow outside every config directory: no history may ever carry them.
  const outside = mkdtempSync(join(tmpdir(), 'gpures-outside-'));
  tmpDirs.push(outside);
  const SHADOW = join(outside, 'shadow');
  const SHADOW_TEXT = `mapping_version = "stolen"\nroot:$6$shadowStandIn${run}:19000:0:99999:7:::\n`;
  writeFileSync(SHADOW, SHADOW_TEXT);

  before(async () => {
    temporal = await testTemporal();
    v2 = await makeVariantImage(d, run, `promote-v2-${run}`);
    images.push(v2);
    for (const name of ROUTERS) {
      targets[name] = await deployTestRouter(d, { name, run, config: routerConfig(`${name}-v1`) });
      tmpDirs.push(join(targets[name].configPath, '..'));
    }
    // linkdir's directory as a symbolic link to another one holding the stand-in, as if someone
    // with write access above the config directory had swapped it for a link.
    const swapped = mkdtempSync(join(tmpdir(), 'gpures-swapped-'));
    tmpDirs.push(swapped);
    writeFileSync(join(swapped, 'router.toml'), routerConfig('linkdir-v1'));
    writeFileSync(join(swapped, 'shadow'), SHADOW_TEXT);
    const link = join(outside, 'router-link');
    symlinkSync(swapped, link);
    targets['linkdir'] = { ...target('linkdir'), configPath: join(link, 'router.toml') };
    worker = await startPromotionWorker(temporal, node, targets);
  });

  after(() => tearDownPromotion({ worker, d, run, images, tmpDirs, temporal }));

  function target(name: string): RouterTarget {
    const t = targets[name];
    assert.ok(t, name);
    return t;
  }

  async function promote(input: PromoteInput, onStep?: (s: StepRecord) => void): Promise<PromotionOutcome> {
    const handle = await startPromotion(temporal.client, node, input);
    return followPromotion(handle, onStep ?? (() => undefined), 200);
  }

  async function containerOf(t: RouterTarget) {
    const info = await d.getContainer(t.container).inspect();
    return { id: info.Id, image: info.Config.Image, restartCount: info.RestartCount, running: info.State.Running };
  }

  function journal(t: RouterTarget): { op: string; phase: string; run: string }[] {
    const p = journalPath(t.configPath);
    return existsSync(p)
      ? readFileSync(p, 'utf8')
          .trim()
          .split('\n')
          .filter(Boolean)
          .map((l) => JSON.parse(l) as { op: string; phase: string; run: string })
      : [];
  }

  test('good config with a new image: validated, backed up, written, recreated, verified', async () => {
    const t = target('good');
    const before = readFileSync(t.configPath);
    const config = routerConfig('good-v2');
    const seen: string[] = [];
    const started = Date.now();
    const out = await promote(
      { router: 'good', config: { content: config }, image: v2, profile: '/etc/gpures/promotion-profile.json', verify: { windowS: 2 } },
      (s) => seen.push(s.step),
    );
    assert.ok(out.ok, !out.ok ? `${out.failureType}: ${out.message}` : '');
    const r = out.result;
    assert.equal(r.outcome, 'promoted');
    assert.equal(r.reload, 'recreated');
    assert.equal(r.imageChanged, true);
    assert.equal(r.mappingVersion, 'good-v2');
    assert.equal(r.previousMappingVersion, 'good-v1');
    assert.equal(r.profile, '/etc/gpures/promotion-profile.json');
    assert.equal(r.validation.exitCode, 0);
    assert.match(r.validation.output, /valid \(mapping_version 'good-v2'\)/);
    assert.deepEqual(seen, ['resolve', 'validate', 'backup', 'write', 'reload', 'verify', 'done']);
    assert.equal(readFileSync(t.configPath, 'utf8'), config);
    assert.ok(r.backupPath);
    assert.deepEqual(readFileSync(r.backupPath), before);
    assert.deepEqual(await healthz(t.url), { status: 200, mappingVersion: 'good-v2' });
    const c = await containerOf(t);
    assert.equal(c.image, v2);
    assert.equal(c.id, r.containerId);
    // Same deployment: name, labels, env (the admin token), mount, port and restart policy carried over.
    const info = await d.getContainer(t.container).inspect();
    assert.equal(info.Config.Labels['gpures.router'], 'good');
    assert.ok(info.Config.Env.includes('ROUTER_ADMIN_TOKEN=promote-test-token'));
    assert.equal(info.HostConfig.RestartPolicy?.Name, 'on-failure');
    assert.deepEqual(info.HostConfig.Binds, [`${join(t.configPath, '..')}:/config:ro`]);
    // The validate container is gone, and so are the recreate's parking names.
    const leftovers = await d.listContainers({ all: true, filters: { name: [`${t.container}-`] } });
    assert.deepEqual(
      leftovers.map((x) => x.Names),
      [],
    );
    console.log(`  promoted with a recreate in ${Date.now() - started} ms`);
  });

  test('same image: /admin/reload, same container; backups pruned to the newest 5', async () => {
    const t = target('reload');
    const before = await containerOf(t);
    // Six older backups already there: after this promotion's, the five newest remain.
    const dir = join(t.configPath, '..');
    for (let i = 1; i <= 6; i++) writeFileSync(join(dir, backupFileName('router.toml', Date.UTC(2026, 0, i), 'a'.repeat(11) + String(i))), `old ${i}\n`);
    const config = routerConfig('reload-v2');
    const started = Date.now();
    const out = await promote({ router: 'reload', config: { content: config }, image: ROUTER_IMAGE });
    assert.ok(out.ok, !out.ok ? `${out.failureType}: ${out.message}` : '');
    assert.equal(out.result.reload, 'reloaded');
    assert.equal(out.result.imageChanged, false);
    assert.equal(readFileSync(t.configPath, 'utf8'), config);
    assert.deepEqual(await healthz(t.url), { status: 200, mappingVersion: 'reload-v2' });
    const now = await containerOf(t);
    assert.equal(now.id, before.id);
    assert.equal(now.restartCount, before.restartCount);
    const backups = backupsIn(t.configPath);
    assert.equal(backups.length, 5);
    assert.ok(out.result.backupPath?.endsWith(backups[4] ?? '?'), `${out.result.backupPath} is the newest of ${backups.join(', ')}`);
    assert.ok(!backups.some((b) => b.includes('aaaaaaaaaaa1') || b.includes('aaaaaaaaaaa2')));
    console.log(`  promoted with a reload in ${Date.now() - started} ms`);
  });

  test('validate-only: the verdict, and nothing changed', async () => {
    const t = target('reload');
    const before = readFileSync(t.configPath);
    const backups = backupsIn(t.configPath);
    const out = await promote({ router: 'reload', config: { content: routerConfig('reload-v3') }, image: ROUTER_IMAGE, validateOnly: true });
    assert.ok(out.ok);
    assert.equal(out.result.outcome, 'validated');
    assert.deepEqual(readFileSync(t.configPath), before);
    assert.deepEqual(backupsIn(t.configPath), backups);
  });

  test('invalid config: stops at validate; live file byte-identical, router untouched', async () => {
    const t = target('invalid');
    const before = readFileSync(t.configPath);
    const c0 = await containerOf(t);
    const out = await promote({ router: 'invalid', config: { content: routerConfig('invalid-v2', ['', '# fake-router: invalid = true']) }, image: v2 });
    assert.equal(out.ok, false);
    assert.ok(!out.ok);
    assert.equal(out.failureType, 'ValidationFailed');
    assert.match(
      out.message,
      /--validate-only exit 1 .*rejected the config: fake-router: validate: \/config\/router\.toml: invalid: line \d+: invalid = true; nothing was changed/,
    );
    assert.equal(out.details?.validation?.exitCode, 1);
    assert.deepEqual(
      out.details?.steps.map((s) => s.step),
      ['resolve', 'validate'],
    );
    assert.deepEqual(readFileSync(t.configPath), before);
    assert.deepEqual(await containerOf(t), c0);
    assert.deepEqual(backupsIn(t.configPath), []);
    assert.deepEqual(journal(t), []);
    assert.deepEqual(await healthz(t.url), { status: 200, mappingVersion: 'invalid-v1' });
  });

  test("content the image would take but the worker could not start on: refused at resolve naming each problem, nothing changed; its rules, and the T013 rule against the worker's manifest", async () => {
    const t = target('invalid');
    const before = readFileSync(t.configPath);
    const c0 = await containerOf(t);
    // The fake router takes any line it does not know; the reference router's rules do not.
    const unknownKey = await promote({ router: 'invalid', config: { content: routerConfig('invalid-v3', ['bogus = 1']) }, image: v2 });
    // The tier of the worker's serve `chat` made to send another model: the manifest's rule, not the file's.
    const otherModel = await promote({
      router: 'invalid',
      config: { content: routerConfig('invalid-v4').replace('served_model_name = "chat"', 'served_model_name = "other"') },
      image: v2,
    });
    for (const [out, problem] of [
      [unknownKey, `config\\.content: preset 'chat' \\(presets\\[0\\]\\.bogus\\): unknown key "bogus"`],
      [
        otherModel,
        `config\\.content: tiers\\[0\\]\\.served_model_name: tier 'chat-local' sends model 'other', but its serve 'chat' \\(serves\\.toml\\) serves 'chat'`,
      ],
    ] as const) {
      assert.ok(!out.ok);
      assert.equal(out.failureType, 'PromotionInputInvalid');
      assert.match(
        out.message,
        new RegExp(`failed at resolve: config\\.content is not a router config this worker could start on \\(it reads the live one at start\\): ${problem}`),
      );
      assert.deepEqual(
        out.details?.steps.map((x) => x.step),
        ['resolve'],
      );
    }
    assert.deepEqual(readFileSync(t.configPath), before);
    assert.deepEqual(await containerOf(t), c0);
    assert.deepEqual(backupsIn(t.configPath), []);
  });

  test('crash-looping release with a new image: CrashLoopDetected, rolled back to the previous image and config', async () => {
    const t = target('crash');
    const before = readFileSync(t.configPath);
    const c0 = await containerOf(t);
    const started = Date.now();
    const out = await promote({ router: 'crash', config: { content: routerConfig('crash-v2', ['', '# fake-router: crash = true']) }, image: v2 });
    assert.equal(out.ok, false);
    assert.ok(!out.ok);
    assert.equal(out.failureType, 'CrashLoopDetected');
    assert.match(
      out.message,
      /failed at verify: router container \S+ restarted within [\d.]+ s of verification: restart count 0 → [1-9]\d* \(status \w+, last exit code 3\)/,
    );
    assert.match(out.message, /rolled back: config restored .*gpures\/fake-router:test recreated, verified on mapping_version 'crash-v1'/);
    const rb = out.details?.rollback;
    assert.equal(rb?.ok, true);
    assert.equal(rb?.reload, 'recreated');
    const observed = out.details?.observed as { baselineRestartCount: number; restartCount: number };
    assert.equal(observed.baselineRestartCount, 0);
    assert.ok(observed.restartCount >= 1);
    assert.deepEqual(readFileSync(t.configPath), before);
    assert.deepEqual(await healthz(t.url), { status: 200, mappingVersion: 'crash-v1' });
    const c = await containerOf(t);
    assert.equal(c.image, c0.image);
    assert.equal(c.running, true);
    assert.equal(c.restartCount, 0);
    // Each effect written ahead (intent) and then confirmed (done).
    assert.deepEqual(
      journal(t).map((e) => `${e.op} ${e.phase}`),
      ['backup intent', 'backup done', 'write intent', 'write done', 'restore intent', 'restore done'],
    );
    console.log(`  crash loop detected and rolled back in ${Date.now() - started} ms`);
  });

  test('crash on reload (same image): rolled back, the crash-looping container recreated on the old config', async () => {
    const t = target('crashreload');
    const before = readFileSync(t.configPath);
    const out = await promote({
      router: 'crashreload',
      config: { content: routerConfig('crashreload-v2', ['', '# fake-router: crash = true']) },
      image: ROUTER_IMAGE,
    });
    assert.ok(!out.ok);
    assert.equal(out.failureType, 'CrashLoopDetected');
    assert.equal(out.details?.rollback?.ok, true);
    assert.deepEqual(readFileSync(t.configPath), before);
    assert.deepEqual(await healthz(t.url), { status: 200, mappingVersion: 'crashreload-v1' });
    assert.equal((await containerOf(t)).running, true);
  });

  test('a release serving the wrong mapping: HealthzMismatch, rolled back', async () => {
    const t = target('mismatch');
    const before = readFileSync(t.configPath);
    const out = await promote({
      router: 'mismatch',
      config: { content: routerConfig('mismatch-v2', ['', '# fake-router: report_mapping_version = "stale"']) },
      image: v2,
    });
    assert.ok(!out.ok);
    assert.equal(out.failureType, 'HealthzMismatch');
    assert.match(
      out.message,
      /did not answer 200 with mapping_version 'mismatch-v2' 3 times in a row within 3 s .*last answer: 200 with mapping_version 'stale'/,
    );
    assert.equal(out.details?.rollback?.ok, true);
    assert.deepEqual(readFileSync(t.configPath), before);
    assert.deepEqual(await healthz(t.url), { status: 200, mappingVersion: 'mismatch-v1' });
    assert.equal((await containerOf(t)).image, ROUTER_IMAGE);
  });

  test('two promotions of one router started together: the second is refused, naming the running one', async () => {
    const t = target('race');
    const inputs = ['race-a', 'race-b'].map((v) => ({ router: 'race', config: { content: routerConfig(v) }, image: ROUTER_IMAGE }));
    const starts = await Promise.allSettled(inputs.map((i) => startPromotion(temporal.client, node, i)));
    const won = starts.flatMap((s, i) => (s.status === 'fulfilled' ? [{ handle: s.value, input: inputs[i] }] : []));
    const refused = starts.flatMap((s) => (s.status === 'rejected' ? [s.reason as unknown] : []));
    assert.equal(won.length, 1);
    assert.equal(refused.length, 1);
    const err = refused[0];
    assert.ok(err instanceof PromotionRefused, String(err));
    const winner = won[0];
    assert.ok(winner);
    assert.equal(err.workflowId, `promote/${node}/race`);
    assert.equal(err.runningRunId, winner.handle.firstExecutionRunId);
    assert.match(
      err.message,
      new RegExp(
        `refused: a promotion of router 'race' on node '${node}' is already running \\(workflow promote/${node}/race, run ${winner.handle.firstExecutionRunId}`,
      ),
    );
    const out = await followPromotion(winner.handle, () => undefined, 200);
    assert.ok(out.ok);
    assert.equal(readFileSync(t.configPath, 'utf8'), winner.input?.config.content);
    // Once it is done, the next one may start.
    const next = await promote({ router: 'race', config: { content: routerConfig('race-c') }, image: ROUTER_IMAGE });
    assert.ok(next.ok, !next.ok ? next.message : '');
    assert.deepEqual(await healthz(t.url), { status: 200, mappingVersion: 'race-c' });
  });

  /** The promotion's whole history, every payload decoded: it must carry none of `needles`. */
  async function assertNotInHistory(out: PromotionOutcome, needles: string[], what: string): Promise<void> {
    const texts = historyTexts(await fetchHistoryJson(temporal.client, out.workflowId, out.runId));
    assert.ok(
      texts.some((t) => t.includes('resolve')),
      'payloads not decoded by the scan',
    );
    const found = needles.filter((n) => texts.some((t) => t.includes(n)));
    assert.deepEqual(found, [], `${out.workflowId}: ${what} is in history`);
  }

  const assertNoShadowIn = (out: PromotionOutcome) => assertNotInHistory(out, ['shadowStandIn', 'stolen'], 'the outside file');

  test('config.path through a symbolic link or a second hard link to a file outside: refused at resolve, nothing read into history', async () => {
    const t = target('confined');
    const dir = join(t.configPath, '..');
    const before = readFileSync(t.configPath);
    symlinkSync(SHADOW, join(dir, 'candidate.toml'));
    linkSync(SHADOW, join(dir, 'hard.toml'));
    for (const [name, why] of [
      ['candidate.toml', `is a symbolic link \\(to ${SHADOW}\\)`],
      ['hard.toml', 'has 2 hard links'],
    ] as const) {
      const out = await promote({ router: 'confined', config: { path: join(dir, name) }, image: ROUTER_IMAGE });
      assert.ok(!out.ok);
      assert.equal(out.failureType, 'UnsafeConfigPath');
      assert.match(out.message, new RegExp(`failed at resolve: ${join(dir, name)} ${why}.*the router's config directory ${dir}.*; nothing was changed`));
      assert.deepEqual(
        out.details?.steps.map((x) => x.step),
        ['resolve'],
      );
      await assertNoShadowIn(out);
    }
    assert.deepEqual(readFileSync(t.configPath), before);
    assert.deepEqual(backupsIn(t.configPath), []);
    assert.deepEqual(journal(t), []);
    // A regular file staged there is read: the rule refuses links, not config.path.
    writeFileSync(join(dir, 'staged.toml'), routerConfig('confined-v2'));
    const staged = await promote({ router: 'confined', config: { path: join(dir, 'staged.toml') }, image: ROUTER_IMAGE, validateOnly: true });
    assert.ok(staged.ok, !staged.ok ? staged.message : '');
    assert.equal(staged.result.mappingVersion, 'confined-v2');
  });

  test("config.path of a file in the directory that is not a router config (the manifest, with its serves' tokens): refused at resolve naming the file and its first problem, its text in no history", async () => {
    const t = target('confined');
    const dir = join(t.configPath, '..');
    const hfToken = `hf_SECRET${run}`;
    const apiKey = `sk-SECRET${run}`;
    const inUrl = `pw-SECRET${run}`;
    const manifest = join(dir, 'serves.toml');
    writeFileSync(
      manifest,
      renderManifest(
        node,
        [{ role: 'g', capacity_mib: 1000, reserve_mib: 0 }],
        [{ name: 's', vram_mib: 100, env: { HF_TOKEN: hfToken }, args: ['--api-key', apiKey] }],
      ),
    );
    // Nearly a router config: its problem's message would quote the value found there.
    const credentialed = join(dir, 'credentialed.toml');
    writeFileSync(credentialed, routerConfig('confined-cred').replace('http://127.0.0.1:30001', `http://gpures:${inUrl}@127.0.0.1:30001`));
    for (const [path, problem] of [
      [manifest, 'mapping_version: is required \\(a non-empty string\\)'],
      [credentialed, 'tiers\\[0\\]\\.backend: must be an http\\(s\\) base URL .*credentials\\)'],
    ] as const) {
      const out = await promote({ router: 'confined', config: { path }, image: ROUTER_IMAGE, validateOnly: true });
      await assertNotInHistory(out, [hfToken, apiKey, inUrl], `${path}'s text`);
      assert.ok(!out.ok);
      assert.equal(out.failureType, 'PromotionInputInvalid');
      assert.match(out.message, new RegExp(`failed at resolve: config\\.path: ${path} is not a router config: ${problem}; nothing was changed$`));
      assert.deepEqual(
        out.details?.steps.map((x) => x.step),
        ['resolve'],
      );
    }
  });

  test('a live config or journal that is a symbolic link out of the directory: refused before anything is backed up or written', async () => {
    const t = target('confined');
    const dir = join(t.configPath, '..');
    const shadowBefore = statSync(SHADOW);
    const real = join(dir, 'router.toml.real');
    renameSync(t.configPath, real);
    symlinkSync(SHADOW, t.configPath);
    try {
      const out = await promote({ router: 'confined', config: { content: routerConfig('confined-v3') }, image: ROUTER_IMAGE });
      assert.ok(!out.ok);
      assert.equal(out.failureType, 'UnsafeConfigPath');
      assert.match(out.message, new RegExp(`failed at resolve: ${t.configPath} is a symbolic link \\(to ${SHADOW}\\)`));
      await assertNoShadowIn(out);
    } finally {
      rmSync(t.configPath);
      renameSync(real, t.configPath);
    }
    symlinkSync(SHADOW, journalPath(t.configPath));
    try {
      const out = await promote({ router: 'confined', config: { content: routerConfig('confined-v3') }, image: ROUTER_IMAGE });
      assert.ok(!out.ok);
      assert.equal(out.failureType, 'UnsafeConfigPath');
      assert.match(out.message, new RegExp(`failed at resolve: ${journalPath(t.configPath)} is a symbolic link`));
    } finally {
      rmSync(journalPath(t.configPath));
    }
    assert.equal(readFileSync(SHADOW, 'utf8'), SHADOW_TEXT);
    assert.equal(statSync(SHADOW).mtimeMs, shadowBefore.mtimeMs);
    assert.deepEqual(backupsIn(t.configPath), []);
    assert.deepEqual(await healthz(t.url), { status: 200, mappingVersion: 'confined-v1' });
  });

  test('a config directory reached through a symbolic link: refused, naming the path, the directory and where it leads', async () => {
    const t = target('linkdir');
    const dir = join(t.configPath, '..');
    const out = await promote({ router: 'linkdir', config: { path: join(dir, 'shadow') }, image: ROUTER_IMAGE });
    assert.ok(!out.ok);
    assert.equal(out.failureType, 'UnsafeConfigPath');
    assert.match(
      out.message,
      new RegExp(
        `failed at resolve: ${t.configPath}: the router's config directory ${dir} resolves to /\\S+gpures-swapped-\\S+, so a symbolic link on the way leads outside it`,
      ),
    );
    await assertNoShadowIn(out);
  });

  test('CLI: gpures router promote prints each step on stderr and the result on stdout', async () => {
    const t = target('cli');
    const dir = mkdtempSync(join(tmpdir(), 'gpures-promote-cli-'));
    tmpDirs.push(dir);
    const manifest = join(dir, 'serves.toml');
    writeFileSync(manifest, renderManifest(node, [{ role: 'g', capacity_mib: 1000, reserve_mib: 0 }], [{ name: 's', vram_mib: 100 }]));
    const configFile = join(dir, 'router.toml');
    writeFileSync(configFile, routerConfig('cli-v2'));
    const promoteCli = (config: string) =>
      gpures(['router', 'promote', '--config', config, '--image', ROUTER_IMAGE, '--router', 'cli', '-m', manifest], { TEMPORAL_ADDRESS: temporal.address });
    const r = await promoteCli(configFile);
    assert.equal(r.code, 0, `${r.stdout}\n${r.stderr}`);
    assert.match(r.stdout, /^router promote cli: mapping_version 'cli-v2' is live on gpures\/fake-router:test \(reloaded\), verified for 3 s; backup \S+\n$/);
    for (const step of ['resolve', 'validate', 'backup', 'write', 'reload', 'verify', 'done']) assert.match(r.stderr, new RegExp(`^  ${step}: `, 'm'));
    assert.equal(readFileSync(t.configPath, 'utf8'), routerConfig('cli-v2'));

    // A serve manifest given as the config is refused before anything reaches history (its serves' env and args).
    const asConfig = await promoteCli(manifest);
    assert.equal(asConfig.code, 2, asConfig.stderr);
    assert.ok(
      asConfig.stderr.endsWith(`${manifest}: a serve manifest (it has [node], [[gpus]] or [[serves]]), not a router config; nothing was sent\n`),
      asConfig.stderr,
    );
    // What the worker would refuse at resolve is refused here, each problem named, before anything is sent.
    const bogus = join(dir, 'bogus.toml');
    writeFileSync(bogus, routerConfig('cli-v3', ['bogus = 1']));
    const ownFormat = await promoteCli(bogus);
    assert.equal(ownFormat.code, 2, ownFormat.stderr);
    assert.match(ownFormat.stderr, /bogus\.toml: preset 'chat' \(presets\[0\]\.bogus\): unknown key "bogus" \(allowed keys: name, tier\)\n$/);
    assert.equal(readFileSync(t.configPath, 'utf8'), routerConfig('cli-v2'));
  });
});

describe('router promotion: a worker killed just after the backup, or mid-recreate', () => {
  const d = docker();
  const run = `k${Date.now().toString(36)}`;
  const node = uniqueNode('promote-kill');
  let temporal: TestTemporal;
  let t: RouterTarget;
  let r: RouterTarget;
  let v2: string;
  let dir: string;
  const children: ChildProcess[] = [];

  before(async () => {
    temporal = await testTemporal();
    t = await deployTestRouter(d, { name: 'kill', run, config: routerConfig('kill-v1') });
    r = await deployTestRouter(d, { name: 'recreate', run, config: routerConfig('recreate-v1') });
    v2 = await makeVariantImage(d, run, `promote-kill-v2-${run}`);
    dir = mkdtempSync(join(tmpdir(), 'gpures-promote-kill-'));
    writeFileSync(join(dir, 'bundle.js'), (await workflowBundle()).code);
  });

  after(async () => {
    for (const c of children) {
      if (c.exitCode === null && c.signalCode === null) {
        c.kill('SIGKILL');
        await new Promise((r) => c.once('exit', r));
      }
    }
    await removeTestArtifacts(d, run, [v2]);
    rmSync(join(t.configPath, '..'), { recursive: true, force: true });
    rmSync(join(r.configPath, '..'), { recursive: true, force: true });
    rmSync(dir, { recursive: true, force: true });
    await temporal?.close();
  });

  function startChild(extra: Record<string, unknown>): Promise<ChildProcess> {
    return spawnPromoteWorker(
      { address: temporal.address, node, bundlePath: join(dir, 'bundle.js'), targets: [t, r], pollIntervalMs: 200, ...extra },
      children,
    );
  }

  test('a replacement worker finishes exactly once: one backup, one write', async () => {
    const marker = join(dir, 'backup-done.json');
    const first = await startChild({ hangAfter: 'promoteBackup', markerPath: marker });
    const config = routerConfig('kill-v2');
    const handle = await startPromotion(temporal.client, node, { router: 'kill', config: { content: config }, image: ROUTER_IMAGE });
    await waitUntil('the backup on the first worker', () => existsSync(marker), 30_000, 50);
    const killedAt = Date.now();
    first.kill('SIGKILL');
    await new Promise((r) => first.once('exit', r));
    // The backup was made, the server never heard of it, the live file is still the old one.
    assert.equal(readFileSync(t.configPath, 'utf8'), routerConfig('kill-v1'));
    assert.equal(backupsIn(t.configPath).length, 1);

    const second = await startChild({});
    const out = await followPromotion(handle, () => undefined, 200);
    console.log(`  replacement worker finished ${Date.now() - killedAt} ms after the kill`);
    assert.ok(out.ok, !out.ok ? `${out.failureType}: ${out.message}` : '');
    assert.equal(out.result.write, 'written');
    assert.match(out.result.steps.find((s) => s.step === 'backup')?.outcome ?? '', /^already saved by this run:/);
    assert.equal(readFileSync(t.configPath, 'utf8'), config);
    assert.deepEqual(await healthz(t.url), { status: 200, mappingVersion: 'kill-v2' });

    const key = runKey({ workflowId: handle.workflowId, runId: handle.firstExecutionRunId });
    const backups = backupsIn(t.configPath);
    assert.equal(backups.length, 1);
    assert.ok(backups[0]?.includes(`.${key}.bak`));
    const runRef = `${handle.workflowId}/${handle.firstExecutionRunId}`;
    const entries = readFileSync(journalPath(t.configPath), 'utf8')
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { op: string; phase: string; run: string });
    assert.deepEqual(
      entries.map((e) => [e.op, e.phase, e.run]),
      [
        ['backup', 'intent', runRef],
        ['backup', 'done', runRef],
        ['write', 'intent', runRef],
        ['write', 'done', runRef],
        ['verified', 'done', runRef],
      ],
    );

    // The history, worker crash and retried backup included, replays against the bundle.
    await Worker.runReplayHistory({ workflowBundle: await workflowBundle(), sinks: UNCOUNTED_SINKS }, await handle.fetchHistory(), handle.workflowId);

    second.kill('SIGTERM');
    await new Promise((r) => second.once('exit', r));
  });

  test('killed mid-recreate with the router down: the recreate is retried within 30 s and finishes the job', async () => {
    const marker = join(dir, 'recreate-hung.json');
    const first = await startChild({ hangAt: 'recreate-rename', markerPath: marker });
    const c0 = await d.getContainer(r.container).inspect();
    const handle = await startPromotion(temporal.client, node, { router: 'recreate', config: { content: routerConfig('recreate-v2') }, image: v2 });
    await waitUntil('the recreate to stop the old router', () => existsSync(marker), 60_000, 20);
    assert.equal((await healthz(r.url)).status, 0, 'the router is down mid-recreate');
    const killedAt = Date.now();
    first.kill('SIGKILL');
    await new Promise((res) => first.once('exit', res));

    const second = await startChild({});
    await waitUntil('the router to answer again', async () => (await healthz(r.url)).status === 200, 60_000, 50);
    const downAfterKillMs = Date.now() - killedAt;
    const out = await followPromotion(handle, () => undefined, 200);
    assert.ok(out.ok, !out.ok ? `${out.failureType}: ${out.message}` : '');
    const [recreate] = activityRuns((await handle.fetchHistory()).events ?? [], 'promoteRecreate');
    assert.ok(recreate);
    const gapMs = recreate.startedAtMs - killedAt;
    console.log(
      `  recreate retried ${(gapMs / 1000).toFixed(1)} s after kill -9 (attempt ${recreate.attempt}); router answered again ${(downAfterKillMs / 1000).toFixed(1)} s after the kill`,
    );
    assert.ok(recreate.attempt >= 2, `attempt ${recreate.attempt}`);
    assert.ok(gapMs > 0 && gapMs < 30_000, `recreate retried ${gapMs} ms after the kill`);
    // The retry finished what the first attempt began: one container on v2, nothing parked.
    assert.equal((recreate.result as RecreateResult).recreated, true);
    const c1 = await d.getContainer(r.container).inspect();
    assert.notEqual(c1.Id, c0.Id);
    assert.equal(c1.Config.Image, v2);
    assert.deepEqual(await healthz(r.url), { status: 200, mappingVersion: 'recreate-v2' });
    const leftovers = await d.listContainers({ all: true, filters: { name: [`${r.container}-gpures-`] } });
    assert.deepEqual(
      leftovers.map((x) => x.Names),
      [],
    );

    second.kill('SIGTERM');
    await new Promise((res) => second.once('exit', res));
  });
});
