// ServeSleep over vLLM's sleep-mode endpoints, which vLLM serves only with VLLM_SERVER_DEV_MODE=1
// (the manifest sets it for a serve with eviction = "sleep") and which free memory only with
// --enable-sleep-mode. Every call has its own deadline; a wake's steps share the one given.
import { ServeUnreachable, SleepEndpointError, unreachable } from '../errors';
import type { ServeSleep, SleepLevel } from './port';

async function call(method: 'GET' | 'POST', url: string, deadline: number, body?: unknown): Promise<string> {
  const left = deadline - Date.now();
  if (left <= 0) throw new ServeUnreachable(url, 'TIMEOUT', 'no time left of the step');
  let res: Response;
  let text: string;
  try {
    res = await fetch(url, {
      method,
      signal: AbortSignal.timeout(left),
      ...(body !== undefined ? { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) } : {}),
    });
    text = await res.text();
  } catch (err) {
    throw unreachable(url, err);
  }
  if (res.status === 404)
    throw new SleepEndpointError(url, res.status, 'vLLM serves it only with VLLM_SERVER_DEV_MODE=1 (and sleeps only with --enable-sleep-mode)');
  if (res.status < 200 || res.status > 299) throw new SleepEndpointError(url, res.status, text.slice(0, 300));
  return text;
}

export class HttpServeSleep implements ServeSleep {
  async sleep(baseUrl: string, level: SleepLevel, timeoutMs: number): Promise<void> {
    await call('POST', `${baseUrl}/sleep?level=${level}`, Date.now() + timeoutMs);
  }

  async wake(baseUrl: string, level: SleepLevel, timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    if (level === 1) {
      await call('POST', `${baseUrl}/wake_up`, deadline);
      return;
    }
    await call('POST', `${baseUrl}/wake_up?tags=weights`, deadline);
    await call('POST', `${baseUrl}/collective_rpc`, deadline, { method: 'reload_weights' });
    await call('POST', `${baseUrl}/wake_up?tags=kv_cache`, deadline);
  }

  async isSleeping(baseUrl: string, timeoutMs: number): Promise<boolean> {
    const url = `${baseUrl}/is_sleeping`;
    const text = await call('GET', url, Date.now() + timeoutMs);
    const body = JSON.parse(text) as { is_sleeping?: unknown };
    if (typeof body.is_sleeping !== 'boolean') throw new SleepEndpointError(url, 200, `no is_sleeping in ${text.slice(0, 200)}`);
    return body.is_sleeping;
  }
}
