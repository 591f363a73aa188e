// A sleeper whose wake always fails, beside the on-demand serve that puts it to sleep: the fence
// tests' sleeper cases, where a restore or an acquisition of it stops it and starts it cold.
import type { TestServe } from './box';
import type { SimTestBox } from './sim';
import { taskQueueFor, workflowIds } from '../../src/shared/messages';

/** The sleeper's GPU: it and the on-demand serve that puts it to sleep do not fit together (24000 MiB budget). */
export const SLEEP_GPU = { role: 'sleepers', capacity_mib: 32000, reserve_mib: 8000 };
export const SLEEPER = { serve: 'sleepy', tier: 'sleepy-local' };
const TAKER = 'od';

/** The sleeper (evicted by sleeping; every wake fails) and the on-demand serve that puts it to sleep. */
export const SLEEPER_SERVES: TestServe[] = [
  {
    name: SLEEPER.serve,
    gpu_role: SLEEP_GPU.role,
    vram_mib: 12000,
    class: 'evictable',
    router_tier: SLEEPER.tier,
    sleep: { level: 2, residual_mib: 600 },
    env: { SIM_SLEEP_RESIDUAL_MIB: '600', SIM_WAKE_FAIL: '1' },
  },
  { name: TAKER, gpu_role: SLEEP_GPU.role, vram_mib: 20000, class: 'on-demand' },
];

/** The sleeper up, put to sleep by the on-demand serve's acquisition, that one down: it sleeps, evicted, and its next admission is a wake. */
export async function putToSleep(t: SimTestBox): Promise<void> {
  const run = (workflow: 'bringUpWorkflow' | 'acquireWorkflow' | 'bringDownWorkflow', id: string, args: Record<string, unknown>) =>
    t.temporal.client.workflow.execute(workflow, { workflowId: id, taskQueue: taskQueueFor(t.node), args: [args] });
  await run('bringUpWorkflow', workflowIds.bringUp(t.node, SLEEPER.serve), { serve: SLEEPER.serve });
  await run('acquireWorkflow', workflowIds.acquire(t.node, TAKER), { serve: TAKER, evict: true });
  await run('bringDownWorkflow', workflowIds.bringDown(t.node, TAKER), { serve: TAKER });
}
