// Whether dockerd answers, asked before anything that needs it: the worker before it takes work,
// `gpures serves logs` before it reads. One bounded ping, its failure one line naming DOCKER_HOST.
import type Docker from 'dockerode';

/** Where dockerode reaches dockerd: DOCKER_HOST in this process's environment (it reads no other), else its default socket. */
export function dockerHost(): string {
  return process.env['DOCKER_HOST'] || 'unix:///var/run/docker.sock';
}

/** dockerd did not answer: as Temporal not answering, the box's infrastructure, not the operator's input. */
export class DockerUnreachable extends Error {
  override readonly name = 'DockerUnreachable';
}

/** How long dockerd may take to answer its ping: a blackholed tcp:// host would otherwise wait for the OS's connect timeout. */
const DOCKER_PING_TIMEOUT_MS = 10_000;

export async function reachDocker(docker: Docker): Promise<void> {
  try {
    // dockerode hands ping's abortSignal to its modem; @types/dockerode declares no options for it.
    const pingable = docker as unknown as { ping(opts: { abortSignal: AbortSignal }): Promise<unknown> };
    await pingable.ping({ abortSignal: AbortSignal.timeout(DOCKER_PING_TIMEOUT_MS) });
  } catch (err) {
    const why =
      (err as Error).name === 'AbortError' || (err as Error).name === 'TimeoutError'
        ? `no answer within ${DOCKER_PING_TIMEOUT_MS / 1000} s`
        : (err as Error).message;
    throw new DockerUnreachable(`cannot reach Docker at ${dockerHost()} (DOCKER_HOST): ${why}`);
  }
}
