// What the readmit races (victim-readmit-race, readmit-after-cancel-race, bring-up-readmit-race) ask of their box while
// they run: vision's tier as the router has it, a request routed to vision, and whether a serve's
// container runs, each read from the box itself rather than the ledger.
import { after, before } from 'node:test';
import { LABEL } from '../../src/domain/serve';
import { docker } from './box';
import type { TestServe } from './box';
import { startProcessBox } from './process-box';
import type { ProcessBox } from './process-box';
import { StallingProxy } from './stalling-proxy';

/** b, the evictable vision, and two on-demand serves, each of which evicts vision to fit. */
export const GPU = { role: 'dark-fast', capacity_mib: 32607, reserve_mib: 4608 };
export const SERVES: TestServe[] = [
  { name: 'b', vram_mib: 9000 },
  // Neither on-demand serve fits beside b and vision: each acquisition evicts vision.
  { name: 'vision', vram_mib: 12288, class: 'evictable', served_model_name: 'qwen3-vl-4b-instruct', router_tier: 'vision-local' },
  { name: 'ondemand', vram_mib: 8192, class: 'on-demand', api: 'none', args: ['sleep', '3600'] },
  { name: 'od2', vram_mib: 12000, class: 'on-demand', api: 'none', args: ['sleep', '3600'] },
];

/**
 * The late-readmit races' box, started and closed with the describe this is called in: a worker
 * whose router calls go through a proxy that, once `holdFirstReadmit()` has stalled it, holds only
 * the first readmit of vision's tier (the worker's attempt times out, its retry goes through) until
 * `proxy.resume()`.
 */
export function lateReadmitBox(prefix: string) {
  let box: ProcessBox | undefined;
  let holdFirst = false;
  const proxy = new StallingProxy((method, url) => {
    if (!holdFirst || method !== 'POST' || !url.startsWith('/admin/tiers/vision-local/readmit')) return false;
    holdFirst = false;
    return true;
  });
  before(async () => {
    box = await startProcessBox(prefix, GPU, SERVES, { workerRouterUrl: (url) => proxy.start(url) });
  });
  after(async () => {
    await box?.close();
    await proxy.close();
  });
  const holdFirstReadmit = () => {
    holdFirst = true;
    proxy.held = 0;
    proxy.stall();
  };
  const current = () => {
    if (!box) throw new Error('the box has not started');
    return box;
  };
  return { box: current, proxy, holdFirstReadmit };
}

export function visionProbes(box: () => ProcessBox) {
  const tier = async () => {
    const res = await fetch(`${box().router.url}/admin/tiers/vision-local`, { headers: { authorization: `Bearer ${box().routerToken}` } });
    return (await res.json()) as { state: string; inFlight: number; backend: string };
  };
  /** A chat request through the router, answered after `delayMs`: its status, and whether vision answered it. */
  const routed = async (delayMs = 0) => {
    const res = await fetch(`${box().router.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'vision', messages: [{ role: 'user', content: 'describe' }], sim_delay_ms: delayMs }),
    });
    await res.text();
    return { status: res.status, byVision: res.status === 200 && res.headers.get('x-gpures-tier') === 'vision-local' };
  };
  const running = async (serve: string) =>
    (await docker().listContainers({ filters: { label: [`${LABEL.node}=${box().node}`, `${LABEL.serve}=${serve}`], status: ['running'] } })).length > 0;
  /** Every 200 ms until vision's container stops: the tier's state, and a request through the router. */
  const untilVisionStops = async () => {
    const samples: { state: string; status: number; byVision: boolean }[] = [];
    for (let visionUp = true; visionUp; await new Promise((r) => setTimeout(r, 200))) {
      const [t, r] = await Promise.all([tier(), routed()]);
      visionUp = await running('vision');
      if (visionUp) samples.push({ state: t.state, ...r });
    }
    return samples;
  };
  return { tier, routed, running, untilVisionStops };
}
