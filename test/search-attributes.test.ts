// The registry a run's tagging asks (src/adapters/search-attributes/temporal.ts), over a fake
// operator service: a server that cannot answer now is asked again (so a slow moment does not
// leave a run untagged), one that refuses for good says none, a listing that has them all is kept.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { ServiceError } from '@temporalio/client';
import type { Client } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { GrpcStatus } from '../src/adapters/grpc-status';
import { TemporalSearchAttributes } from '../src/adapters/search-attributes/temporal';

const KEYWORD = temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD;
const NAMES = ['GpuresServe', 'GpuresNode'];

/** A client whose listings answer each of `answers` in turn: an error is thrown, a record is the registered attributes. */
function fakeClient(answers: (Error | Record<string, number>)[]): { client: Client; listings: () => number } {
  let listings = 0;
  const client = {
    options: { namespace: 'default' },
    withDeadline: <R>(_deadline: number, fn: () => Promise<R>) => fn(),
    connection: {
      operatorService: {
        listSearchAttributes: () => {
          listings += 1;
          const a = answers.shift() ?? new Error('no more answers');
          return a instanceof Error ? Promise.reject(a) : Promise.resolve({ customAttributes: a });
        },
      },
    },
  };
  return { client: client as unknown as Client, listings: () => listings };
}

const grpcError = (code: number) =>
  new ServiceError('listSearchAttributes', { cause: Object.assign(new Error(`code ${code}`), { code, details: '', metadata: {} }) });

describe('TemporalSearchAttributes', () => {
  test('a server that cannot answer now (UNAVAILABLE, DEADLINE_EXCEEDED) throws, and the next ask lists afresh', async () => {
    const { client, listings } = fakeClient([
      grpcError(GrpcStatus.UNAVAILABLE),
      grpcError(GrpcStatus.DEADLINE_EXCEEDED),
      { GpuresServe: KEYWORD, GpuresNode: KEYWORD },
    ]);
    const registry = new TemporalSearchAttributes(client);
    await assert.rejects(registry.registered(NAMES), ServiceError);
    await assert.rejects(registry.registered(NAMES), ServiceError);
    assert.deepEqual(await registry.registered(NAMES), NAMES);
    // Kept: all were there.
    assert.deepEqual(await registry.registered(NAMES), NAMES);
    assert.equal(listings(), 3);
  });

  test('no operator access (PERMISSION_DENIED) says none rather than failing', async () => {
    const { client } = fakeClient([grpcError(GrpcStatus.PERMISSION_DENIED)]);
    assert.deepEqual(await new TemporalSearchAttributes(client).registered(NAMES), []);
  });

  test('only Keyword attributes count; a listing that lacks some is asked again next time', async () => {
    const { client, listings } = fakeClient([
      { GpuresServe: KEYWORD, GpuresNode: 1 },
      { GpuresServe: KEYWORD, GpuresNode: KEYWORD },
    ]);
    const registry = new TemporalSearchAttributes(client);
    assert.deepEqual(await registry.registered(NAMES), ['GpuresServe']);
    assert.deepEqual(await registry.registered(NAMES), NAMES);
    assert.equal(listings(), 2);
  });

  test('GpuresVictims counts only as a KeywordList: registered as a Keyword, every upsert of its list would fail', async () => {
    const LIST = temporal.api.enums.v1.IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST;
    const { client } = fakeClient([
      { GpuresServe: KEYWORD, GpuresVictims: KEYWORD },
      { GpuresServe: KEYWORD, GpuresVictims: LIST },
    ]);
    const registry = new TemporalSearchAttributes(client);
    assert.deepEqual(await registry.registered(['GpuresServe', 'GpuresVictims']), ['GpuresServe']);
    assert.deepEqual(await registry.registered(['GpuresServe', 'GpuresVictims']), ['GpuresServe', 'GpuresVictims']);
  });
});
