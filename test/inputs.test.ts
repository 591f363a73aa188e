// The checks every workflow runs on its JSON input before it touches anything, and the one bound
// table the CLI, the API and those checks share.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { BOUNDS } from '../src/domain/bounds';
import { boundProblem, ledgerInputProblems, oneOf, operationInputProblems } from '../src/domain/inputs';
import { BRING_DOWN_REASONS } from '../src/shared/operations';
import { historyFromJSON } from '@temporalio/common/lib/proto-utils';

const ACQUIRE = { booleans: ['evict', 'force'], seconds: ['drainTimeoutS', 'releaseTimeoutS'] } as const;
const GPU = { role: 'dark-fast', uuid: 'GPU-00000000-0000-0000-0000-000000000000', capacityMib: 32607, reserveMib: 4608 };

test('a drain timeout of 1e300 (or any duration past its bound) is refused, naming the field and the bound', () => {
  assert.deepEqual(operationInputProblems({ serve: 'vision', evict: true, drainTimeoutS: 1e300 }, ACQUIRE), [
    'drainTimeoutS: must be a whole number of seconds in 1..3600 (got 1e+300)',
  ]);
  for (const bad of [0, -1, 3601, 1.5, Number.POSITIVE_INFINITY, '120', null]) {
    const problems = operationInputProblems({ serve: 'vision', releaseTimeoutS: bad }, ACQUIRE);
    assert.equal(problems.length, 1, `${String(bad)}: ${problems.join('; ')}`);
    assert.match(problems[0] ?? '', /^releaseTimeoutS: must be a whole number of seconds in 1\.\.600 \(got /);
  }
  // The bounds are inclusive; absent means the workflow's default.
  assert.deepEqual(operationInputProblems({ serve: 'vision', drainTimeoutS: 1, releaseTimeoutS: 600 }, ACQUIRE), []);
  assert.deepEqual(operationInputProblems({ serve: 'vision', drainTimeoutS: BOUNDS.drainTimeoutS.max }, ACQUIRE), []);
  assert.deepEqual(operationInputProblems({ serve: 'vision' }, ACQUIRE), []);
});

test('boundProblem is what the CLI and the API say too', () => {
  assert.equal(boundProblem('drainTimeoutS', 120), undefined);
  assert.equal(boundProblem('drainTimeoutS', 1e300), 'must be a whole number of seconds in 1..3600');
  assert.equal(boundProblem('drainTimeoutS', Number.NaN), 'must be a whole number of seconds in 1..3600');
});

test("a field of a few values is refused in oneOf's words, as a ledger update's and a quiesce's are (a bring-down's downReason)", () => {
  const spec = { other: { downReason: oneOf(BRING_DOWN_REASONS) } };
  assert.deepEqual(operationInputProblems({ serve: 'vision', downReason: 'bored' }, spec), ['downReason: one of "operator-down", "lease-ended" (got "bored")']);
  assert.deepEqual(operationInputProblems({ serve: 'vision', downReason: 'lease-ended' }, spec), []);
});

test('serve must be a name that can be a container name', () => {
  for (const bad of ['../x', 'box; rm -rf /', 'bóx', '', 7, undefined]) {
    const problems = operationInputProblems({ serve: bad });
    assert.equal(problems.length, 1, problems.join('; '));
    assert.match(problems[0] ?? '', /^serve: a serve name from the manifest \(got /);
  }
  assert.deepEqual(operationInputProblems([]), ['the input must be one JSON object, e.g. { "serve": "vision" }']);
});

test('every recorded history still passes its own input check', () => {
  const dir = join(__dirname, '..', '..', 'test', 'histories');
  const specs: Record<string, Parameters<typeof operationInputProblems>[1]> = {
    bringUpWorkflow: {},
    bringDownWorkflow: { booleans: ['restore'], seconds: ['drainTimeoutS'] },
    acquireWorkflow: ACQUIRE,
  };
  let checked = 0;
  for (const name of [
    'bring-up',
    'bring-up-before-admit-whole',
    'denial',
    'drain-timeout',
    'eviction',
    'eviction-before-preflight',
    'restore',
    'restore-child-bring-up',
    'ledger',
  ]) {
    const history = historyFromJSON(JSON.parse(readFileSync(join(dir, `${name}.json`), 'utf8')));
    const started = history.events?.[0]?.workflowExecutionStartedEventAttributes;
    const type = started?.workflowType?.name ?? '?';
    const data = started?.input?.payloads?.[0]?.data;
    assert.ok(data, name);
    const input: unknown = JSON.parse(Buffer.from(data).toString('utf8'));
    const problems = type === 'ledgerWorkflow' ? ledgerInputProblems(input) : operationInputProblems(input, specs[type]);
    assert.deepEqual(problems, [], `${name} (${type})`);
    checked++;
  }
  assert.equal(checked, 9);
});

test('ledgerWorkflow input: {} and a partial gpu are refused field by field', () => {
  assert.deepEqual(ledgerInputProblems({}), [
    "node: a name of lowercase letters, digits and '-', 1..63 characters, starting and ending with a letter or digit, as in the manifest (got nothing)",
    'gpu: { "role", "uuid", "capacityMib", "reserveMib" } from the manifest\'s [[gpus]] entry (got nothing)',
  ]);
  assert.deepEqual(ledgerInputProblems({ node: 'primary-node', gpu: { role: 'dark-fast' } }), [
    "gpu.uuid: the GPU's uuid, a non-empty string (got nothing)",
    'gpu.capacityMib: a whole number of MiB in 1..1048576 (got nothing)',
    'gpu.reserveMib: a whole number of MiB in 0..1048575 (got nothing)',
  ]);
  assert.deepEqual(ledgerInputProblems({ node: 'primary-node', gpu: { ...GPU, reserveMib: 40000 } }), [
    'gpu.reserveMib: 40000 MiB must be less than gpu.capacityMib 32607 MiB',
  ]);
  assert.deepEqual(
    ledgerInputProblems({ node: '../x', gpu: { ...GPU, role: 'g/x' } }).map((p) => p.split(':')[0]),
    ['node', 'gpu.role'],
  );
  assert.deepEqual(
    ledgerInputProblems({ node: 'n', gpu: GPU, state: 'x', maxHistoryEvents: 0 }).map((p) => p.split(':')[0]),
    ['state', 'maxHistoryEvents'],
  );
  assert.deepEqual(ledgerInputProblems({ node: 'n', gpu: GPU, slotToldAskMs: 60_000 }), [
    'slotToldAskMs: a whole number of milliseconds in 50..30000 (got 60000)',
  ]);
  assert.equal(ledgerInputProblems(null).length, 1);
  // What LedgerClient starts, and what continue-as-new carries (fields it does not know included).
  assert.deepEqual(ledgerInputProblems({ node: 'primary-node', gpu: GPU }), []);
  assert.deepEqual(
    ledgerInputProblems({ node: 'primary-node', gpu: GPU, state: { reservations: [] }, maxHistoryEvents: 2000, slotToldAskMs: 1000, somethingNew: 1 }),
    [],
  );
});
