// `gpures api` as a real process: resolved once it says where it listens, with the addresses it
// printed, what it printed so far, and a stop (SIGTERM, SIGKILL 10 s later) that answers its exit code.
import { spawn } from 'node:child_process';
import { GPURES, ROOT } from './cli';

export interface ApiProcess {
  /** The addresses after `listening on`. */
  printed: string;
  /** Its port, from the first address printed. */
  port: number;
  stderr(): string;
  stop(): Promise<number | null>;
}

/** How long stop() waits for SIGTERM to end the process before SIGKILL. */
const STOP_KILL_MS = 10_000;

/** `gpures api --manifest FILE --port 0 ARGS` with `env` over this process's. */
export async function startApiProcess(manifest: string, args: string[], env: Record<string, string>): Promise<ApiProcess> {
  const child = spawn(process.execPath, [GPURES, 'api', '--manifest', manifest, '--port', '0', ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  const printed = await new Promise<string>((ok, fail) => {
    const timer = setTimeout(() => {
      // Not left running: the test that failed to start it would never stop it.
      child.kill('SIGKILL');
      fail(new Error(`not listening within 30 s: ${stderr}`));
    }, 30_000);
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (chunk: string) => {
      stderr += chunk;
      const m = /listening on (.*)\n/.exec(stderr);
      if (m?.[1]) {
        clearTimeout(timer);
        ok(m[1]);
      }
    });
    child.once('exit', (code) => fail(new Error(`gpures api exited ${code}: ${stderr}`)));
  });
  const port = Number(/:(\d+)/.exec(printed)?.[1]);
  return {
    printed,
    port,
    stderr: () => stderr,
    stop: () =>
      new Promise((ok) => {
        if (child.exitCode !== null || child.signalCode !== null) return ok(child.exitCode);
        // One that ignores SIGTERM is killed after STOP_KILL_MS, and answers null (killed).
        const kill = setTimeout(() => child.kill('SIGKILL'), STOP_KILL_MS);
        child.once('exit', (code) => {
          clearTimeout(kill);
          ok(code);
        });
        child.kill('SIGTERM');
      }),
  };
}
