// The floor workflow's activities: the plain script's calls, once each, for one serve.
import type Docker from 'dockerode';
import type { GpuSpec, ServeSpec } from '../src/domain/types';
import { plainDown, plainUp } from './plain';
import type { PlainUp } from './plain';

/** The floor's workflows (bench/floor-workflow.ts), for a worker's workflowsPath or a bundle. */
export const FLOOR_WORKFLOWS = require.resolve('./floor-workflow');

export interface FloorActivities {
  floorUpActivity(): Promise<PlainUp>;
  floorDownActivity(): Promise<number>;
}

export function createFloorActivities(docker: Docker, node: string, serve: ServeSpec, gpu: GpuSpec, pollMs: number): FloorActivities {
  return {
    floorUpActivity: () => plainUp(docker, node, serve, gpu, pollMs),
    floorDownActivity: () => plainDown(docker, node, serve),
  };
}
