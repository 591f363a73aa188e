// History <-> the JSON form `temporal workflow show --output json` prints, through the SDK.
// protobufjs 8 is a direct dependency so npm hoists one copy for every @temporalio package:
// with nested copies (protobufjs 7 on top for @grpc/proto-loader and dockerode) the SDK's
// protojson fails its cross-copy `instanceof Type` check with "type must be a Type".
import { historyFromJSON, historyToJSON } from '@temporalio/common/lib/proto-utils';
import type { History } from '@temporalio/common/lib/proto-utils';

export function historyToJsonObject(history: History): unknown {
  return JSON.parse(historyToJSON(history)) as unknown;
}

/** A History from its JSON form, as the replayer takes it. */
export function historyFromJsonObject(json: unknown): History {
  return historyFromJSON(json);
}
