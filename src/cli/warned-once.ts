// A manifest's warnings are shown once, not on every command: an operator who runs `serves up`
// twenty times a day reads the same vLLM-memory warning once, and `gpures validate` (and the
// long-running `worker` and `api`, at start) show them every time. Keyed by the warnings' own
// text, so a changed manifest that warns differently is shown again.
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

function stampDir(env: NodeJS.ProcessEnv): string {
  return join(env['XDG_CACHE_HOME'] || join(homedir(), '.cache'), 'gpu-reservations', 'warned');
}

/** The lines not shown before; records them as shown. Where the stamp cannot be kept, every line is new. */
export function notShownBefore(lines: readonly string[], env: NodeJS.ProcessEnv = process.env): string[] {
  if (!lines.length) return [];
  const stamp = join(stampDir(env), createHash('sha256').update(lines.join('\n')).digest('hex').slice(0, 32));
  if (existsSync(stamp)) return [];
  try {
    mkdirSync(stampDir(env), { recursive: true });
    writeFileSync(stamp, '');
  } catch {
    // A read-only home: the warnings every time, as before.
  }
  return [...lines];
}
