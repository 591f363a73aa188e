// The floor under a bring-up and a bring-down: the plain script (bench/plain.ts) as the one
// activity of a workflow that does nothing else. What it adds over the plain script is what any
// workflow adds on this server and host: the start, a workflow task to schedule the activity, its
// dispatch, a workflow task to complete, and the result back to the client. And a workflow that
// returns at once, the smallest history the replayer can be given (bench/audit-replay.ts).
import { proxyActivities } from '@temporalio/workflow';
import type { FloorActivities } from './floor-activities';

const { floorUpActivity, floorDownActivity } = proxyActivities<FloorActivities>({
  startToCloseTimeout: '2 minutes',
  retry: { maximumAttempts: 1 },
});

export async function floorUp(): ReturnType<FloorActivities['floorUpActivity']> {
  return floorUpActivity();
}

export async function floorDown(): ReturnType<FloorActivities['floorDownActivity']> {
  return floorDownActivity();
}

export function floorNothing(): Promise<string> {
  return Promise.resolve('done');
}
