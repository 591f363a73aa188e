// A recorded history's conversion from JSON reads each field's and type's full name from a value
// given once (src/audit/proto-json.ts), not from protobufjs's getter on every read: checked on the
// recordings. If a protobufjs upgrade moves the getter, this fails instead of the conversion
// silently slowing down.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Type } from 'protobufjs';
import type { ReflectionObject } from 'protobufjs';
import { computedFullName, fixFullNames, fullNameIsComputed, historyFromJsonObject, historyToJsonObject, historyType } from '../src/audit/proto-json';

const HISTORIES = join(__dirname, '..', '..', 'test', 'histories');

/** Every type, field, oneof and enum a History reaches, as protojson walks them. */
function reached(root: Type): ReflectionObject[] {
  const seen = new Set<ReflectionObject>();
  const visit = (type: Type) => {
    if (seen.has(type)) return;
    seen.add(type);
    for (const field of type.fieldsArray) {
      seen.add(field);
      const resolved = field.resolvedType;
      if (resolved instanceof Type) visit(resolved);
      else if (resolved) seen.add(resolved);
    }
    for (const oneof of type.oneofsArray) seen.add(oneof);
  };
  visit(root);
  return [...seen];
}

describe('a history from its JSON form', () => {
  test('protobufjs computes a full name by its getter; after the first conversion each object a History reaches holds the same name as its own', () => {
    assert.ok(fullNameIsComputed(), 'ReflectionObject.prototype.fullName is no longer a getter: src/audit/proto-json.ts fixes nothing');
    const files = readdirSync(HISTORIES).filter((f) => f.endsWith('.json'));
    assert.ok(files.length > 0);
    for (const file of files) {
      const json = JSON.parse(readFileSync(join(HISTORIES, file), 'utf8')) as unknown;
      // The same history back: what the names serve (the well-known types' table) converts as before.
      assert.deepEqual(
        historyToJsonObject(historyFromJsonObject(json)),
        historyToJsonObject(historyFromJsonObject(historyToJsonObject(historyFromJsonObject(json)))),
      );
    }
    // The type the SDK's conversion used is this one: protojson keeps its index of fields on it.
    assert.ok(Object.hasOwn(historyType(), '_fieldsByJsonName'), 'the SDK converted through another History type: its names were not fixed');
    const objects = reached(historyType());
    assert.ok(objects.length > 500, `${objects.length} objects reached`);
    const unfixed = objects.filter((o) => !Object.hasOwn(o, 'fullName')).map((o) => computedFullName(o));
    assert.deepEqual(unfixed, []);
    const wrong = objects.filter((o) => o.fullName !== computedFullName(o)).map((o) => `${o.fullName} against ${computedFullName(o)}`);
    assert.deepEqual(wrong, []);
    assert.equal(fixFullNames(historyType()), 0, 'a second pass finds every name fixed');
  });

  test('a bad value is still refused naming its field in full', () => {
    const json = JSON.parse(readFileSync(join(HISTORIES, 'acquire-abandoned.json'), 'utf8')) as { events: { eventId: unknown }[] };
    const [first] = json.events;
    assert.ok(first);
    first.eventId = 'abc';
    assert.throws(() => historyFromJsonObject(json), /^Error: \.temporal\.api\.history\.v1\.HistoryEvent\.eventId: invalid integer: "abc"$/);
  });
});
