// The callers of the acquisition API a lease test plays: a second API instance (another script's,
// its own server and connection), a POST, and what Temporal has of a serve's lease and the box runs.
import { after, before } from 'node:test';
import assert from 'node:assert/strict';
import { Client, Connection } from '@temporalio/client';
import { buildApi } from '../../src/client/api';
import type { LeaseView } from '../../src/domain/lease';
import { leaseQuery, workflowIds } from '../../src/shared/messages';
import type { AcquireResult } from '../../src/shared/operations';
import { startOnDemandBox } from './on-demand-box';
import type { OnDemandBox, OnDemandBoxOptions } from './on-demand-box';

export interface PostAnswer {
  status: number;
  body: { workflow_id: string; run_id: string };
}

/** Another acquisition API on the box's manifest and token, on its own Temporal connection. */
export async function startSecondApi(box: OnDemandBox): Promise<{ url: string; close: () => Promise<void> }> {
  const connection = await Connection.connect({ address: box.temporal.address });
  const client = new Client({ connection, namespace: box.temporal.client.options.namespace });
  const api = buildApi({ client, manifest: box.manifest, manifestFile: 'serves.toml', token: box.apiToken });
  await api.listen({ host: '127.0.0.1', port: 0 });
  const a = api.server.address();
  assert.ok(a && typeof a !== 'string');
  return {
    url: `http://127.0.0.1:${a.port}`,
    close: async () => {
      await api.close();
      await connection.close();
    },
  };
}

export async function postAcquisition(box: OnDemandBox, url: string, body: Record<string, unknown>): Promise<PostAnswer> {
  const res = await fetch(`${url}/v1/acquisitions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${box.apiToken}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as PostAnswer['body'] };
}

/** The lease workflow of a serve as Temporal has it: its status, its run, and (running) what its query answers. */
export async function leaseOf(box: OnDemandBox, serve: string): Promise<{ status: string; runId?: string; view?: LeaseView }> {
  const handle = box.temporal.client.workflow.getHandle(workflowIds.lease(box.node, serve));
  try {
    const d = await handle.describe();
    if (d.status.name !== 'RUNNING') return { status: d.status.name, runId: d.runId };
    return { status: d.status.name, runId: d.runId, view: await handle.query(leaseQuery) };
  } catch {
    return { status: 'none' };
  }
}

/** The names of the box's running containers. */
export async function runningContainers(box: OnDemandBox): Promise<string[]> {
  return (await box.runtime.list({})).filter((c) => c.running).map((c) => c.name);
}

/** The result of the run a POST started or joined. */
export function resultOf(box: OnDemandBox, r: PostAnswer): Promise<AcquireResult> {
  return box.temporal.client.workflow.getHandle(r.body.workflow_id, r.body.run_id).result() as Promise<AcquireResult>;
}

/** A suite's box and its two APIs, started before its tests and closed after (node:test hooks), and what its tests ask of them. */
/**
 * A `serves down` of `serve` under the CLI's id that no worker takes (another task queue): a lease
 * expiring finds it under way and waits it out, so the lease stays `expiring` with its serve up,
 * held by its acquisition, until the test terminates it.
 */
export function stuckBringDown(box: OnDemandBox, serve: string) {
  return box.temporal.client.workflow.start('bringDownWorkflow', {
    taskQueue: `${box.node}-nobody`,
    workflowId: workflowIds.bringDown(box.node, serve),
    args: [{ serve }],
  });
}

export interface JoinBox {
  readonly box: OnDemandBox;
  /** The second API's URL (the box's own is box.apiUrl). */
  readonly secondUrl: string;
  post: (url: string, body: Record<string, unknown>) => Promise<PostAnswer>;
  leaseOf: (serve: string) => ReturnType<typeof leaseOf>;
  running: () => Promise<string[]>;
  resultOf: (r: PostAnswer) => Promise<AcquireResult>;
}

export function joinBox(o: OnDemandBoxOptions): JoinBox {
  let box: OnDemandBox | undefined;
  let second: Awaited<ReturnType<typeof startSecondApi>> | undefined;
  before(async () => {
    box = await startOnDemandBox(o);
    second = await startSecondApi(box);
  });
  after(async () => {
    await second?.close();
    await box?.close();
  });
  const started = () => {
    assert.ok(box && second, 'the box is started before the tests');
    return { box, second };
  };
  return {
    get box() {
      return started().box;
    },
    get secondUrl() {
      return started().second.url;
    },
    post: (url, body) => postAcquisition(started().box, url, body),
    leaseOf: (serve) => leaseOf(started().box, serve),
    running: () => runningContainers(started().box),
    resultOf: (r) => resultOf(started().box, r),
  };
}
