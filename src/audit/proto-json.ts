// History <-> the JSON form `temporal workflow show --output json` prints, through the SDK.
// protobufjs 8 is a direct dependency so npm hoists one copy for every @temporalio package:
// with nested copies (protobufjs 7 on top for @grpc/proto-loader and dockerode) the SDK's
// protojson fails its cross-copy `instanceof Type` check with "type must be a Type".
import * as proto from '@temporalio/proto';
import { patchProtobufRoot } from '@temporalio/proto/lib/patch-protobuf-root';
import { historyFromJSON, historyToJSON } from '@temporalio/common/lib/proto-utils';
import type { History } from '@temporalio/common/lib/proto-utils';
import { ReflectionObject, Type } from 'protobufjs';

export function historyToJsonObject(history: History): unknown {
  return JSON.parse(historyToJSON(history)) as unknown;
}

/** A History from its JSON form, as the replayer takes it. */
export function historyFromJsonObject(json: unknown): History {
  namesFixed ??= fixFullNames(historyType());
  return historyFromJSON(json);
}

/** The SDK's reflected History type: the one its protojson conversion reads (the SDK's proto-utils looks it up the same way). */
export function historyType(): Type {
  return (patchProtobufRoot(proto) as unknown as { lookupType(name: string): Type }).lookupType('temporal.api.history.v1.History');
}

let namesFixed: number | undefined;

/** Whether protobufjs computes `fullName` (an accessor of its prototype), as this file expects. */
export function fullNameIsComputed(): boolean {
  const descriptor = Object.getOwnPropertyDescriptor(ReflectionObject.prototype, 'fullName');
  return descriptor !== undefined && 'get' in descriptor;
}

/** The name as protobufjs computes it, whatever the object holds as its own. */
export function computedFullName(o: ReflectionObject): string {
  return String(Reflect.get(ReflectionObject.prototype, 'fullName', o));
}

/**
 * protojson reads the `fullName` of a field or type for every value it converts (for its error
 * messages, its table of well-known types), and protobufjs computes it on each read, walking the
 * parents and joining their names: a third of a recorded history's conversion here, and the
 * garbage of every read (docs/performance.md, Audit replay). A name is fixed once the SDK's
 * protos are loaded, so the types, fields, oneofs and enums a History reaches are given theirs as
 * a value. Where protobufjs no longer computes it as a getter of its prototype, nothing changes.
 * Returns how many were given theirs.
 */
export function fixFullNames(root: Type): number {
  if (!fullNameIsComputed()) return 0;
  root.root.resolveAll();
  const seen = new Set<Type>();
  let fixed = 0;
  const fix = (o: ReflectionObject) => {
    if (Object.hasOwn(o, 'fullName')) return;
    Object.defineProperty(o, 'fullName', { value: computedFullName(o), enumerable: false });
    fixed++;
  };
  const visit = (type: Type) => {
    if (seen.has(type)) return;
    seen.add(type);
    fix(type);
    for (const field of type.fieldsArray) {
      fix(field);
      const resolved = field.resolvedType;
      if (resolved instanceof Type) visit(resolved);
      else if (resolved) fix(resolved);
    }
    for (const oneof of type.oneofsArray) fix(oneof);
  };
  visit(root);
  return fixed;
}
