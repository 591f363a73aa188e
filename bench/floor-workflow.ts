// The floor under a bring-up and a bring-down: the plain script (bench/plain.ts) as the one
// activity of a workflow that does nothing else. What it adds over the plain script is what any
// workflow adds on this server and host: the start, a workflow task to schedule the activity, its
// dispatch, a workflow task to complete, and the result back to the client. And, for the replayer
// (bench/audit-replay.ts), a workflow that returns at once, the smallest history there is, and
// one that runs as many workflow tasks as a recording and does nothing in them.
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

const { floorStep } = proxyActivities<{ floorStep(): Promise<void> }>({ startToCloseTimeout: '10 seconds' });

/** `steps` activities that do nothing, one after another: a history with steps + 1 workflow tasks and nothing else. */
export async function floorSteps(steps: number): Promise<number> {
  for (let i = 0; i < steps; i++) await floorStep();
  return steps;
}
