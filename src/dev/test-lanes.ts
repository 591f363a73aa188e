// The test command's schedule (scripts/test.sh, src/dev/test-lanes-main.ts): which compiled test
// file starts next, when several run at once. Most of the suite's wall time is spent waiting out
// the product's own bounds (a lease's term, a heartbeat timeout, a retry's backoff) with the CPU
// idle, so two files at a time halve it on the 2-core machine CI runs on. Files whose checks do
// not hold with another file beside them are listed `alone` in test/lanes.json and run with
// nothing else.
import { basename } from 'node:path';

/** test/lanes.json: the seconds each file took when last measured, and the files that run alone, each with why. */
export interface LanePlan {
  seconds: Record<string, number>;
  alone: Record<string, string>;
}

export interface QueuedFile {
  file: string;
  /** Expected wall seconds: the plan's figure, or DEFAULT_SECONDS for a file it does not list. */
  seconds: number;
  alone: boolean;
}

/** What a file the plan does not list is expected to take (a new file): between the suite's median and its long files. */
export const DEFAULT_SECONDS = 60;
/** The most files at once; more buys nothing on a small machine but load. */
export const MAX_LANES = 8;

/** `dist/test/fence-race.test.js` → `fence-race`: the key test/lanes.json uses. */
export function testKey(file: string): string {
  return basename(file).replace(/\.test\.(js|ts)$/, '');
}

/** Problems with test/lanes.json's content, each naming its field; empty when it is usable. */
export function lanePlanProblems(doc: unknown): string[] {
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) return ['the document must be an object with `seconds` and `alone`'];
  const d = doc as Record<string, unknown>;
  const problems: string[] = [];
  const seconds = d['seconds'];
  if (typeof seconds !== 'object' || seconds === null || Array.isArray(seconds)) problems.push('seconds: must be an object of file key → seconds');
  else
    for (const [k, v] of Object.entries(seconds))
      if (typeof v !== 'number' || !Number.isFinite(v) || v < 0 || v > 3600)
        problems.push(`seconds.${k}: must be a number of seconds in 0..3600 (got ${JSON.stringify(v)})`);
  const alone = d['alone'];
  if (typeof alone !== 'object' || alone === null || Array.isArray(alone)) problems.push('alone: must be an object of file key → why it runs alone');
  else for (const [k, v] of Object.entries(alone)) if (typeof v !== 'string' || v.trim() === '') problems.push(`alone.${k}: must say why the file runs alone`);
  return problems;
}

/**
 * The files in the order they are offered to free lanes: longest expected first (the longest
 * started last would leave one lane running alone at the end), ties by name so every run
 * schedules alike.
 */
export function queueFiles(files: string[], plan: LanePlan): QueuedFile[] {
  const alone = new Set(Object.keys(plan.alone));
  return files
    .map((file) => ({ file, seconds: plan.seconds[testKey(file)] ?? DEFAULT_SECONDS, alone: alone.has(testKey(file)) }))
    .sort((a, b) => b.seconds - a.seconds || a.file.localeCompare(b.file));
}

/**
 * The index in `queue` of the file to start now, or -1 to wait. Nothing starts beside a file that
 * runs alone; a file that runs alone starts only when nothing runs, and waits for the others
 * rather than holding free lanes empty while they run: it is taken once no other file is left.
 */
export function nextToStart(queue: readonly QueuedFile[], running: readonly QueuedFile[], lanes: number): number {
  if (running.length >= lanes || running.some((r) => r.alone)) return -1;
  const shared = queue.findIndex((q) => !q.alone);
  if (shared >= 0) return shared;
  return running.length === 0 && queue.length > 0 ? 0 : -1;
}

/** The TAP summary counters node --test prints last (`# tests 12`), summed over files. */
export const TAP_COUNTERS = ['tests', 'suites', 'pass', 'fail', 'cancelled', 'skipped', 'todo'] as const;
export type TapCounts = Record<(typeof TAP_COUNTERS)[number], number>;

/**
 * Why a file failed, in one line for the run's summary (the tail a CI log shows): the tests that
 * failed on their own (not a suite for its tests, not one cancelled with its parent, not a TODO),
 * each with its error's first line, and what the file said at the top level: node --test writes
 * a crashed file's stderr there (a file that crashed is a failed test named by its path) and an
 * error raised after its test ended. Of what it said, the lines naming an error or a warning
 * first, without stack frames; each item cut to `width`, at most `count` of each.
 */
export function failureLines(output: string, count = 4, width = 200): string {
  const cut = (l: string) => (l.length > width ? `${l.slice(0, width - 1)}…` : l);
  const unquote = (v: string) => v.replace(/^'|'$/g, '');
  type Failed = { name: string; type?: string; error?: string };
  const failed: Failed[] = [];
  const said: string[] = [];
  // The YAML block after a `not ok` line (`---` to `...` at its indent): its failureType and error.
  let block: { indent: number; test: Failed | undefined; errorNext: boolean } | undefined;
  let justFailed: Failed | undefined;
  for (const line of output.split('\n')) {
    const indent = line.length - line.trimStart().length;
    if (block) {
      const { test } = block;
      if (line.trim() === '...' && indent === block.indent) block = undefined;
      else if (test) {
        if (block.errorNext && test.error === undefined && line.trim() !== '') test.error = line.trim();
        block.errorNext = false;
        const field = /^\s*(failureType|error): (.*)$/.exec(line);
        const value = (field?.[2] ?? '').trim();
        if (field?.[1] === 'failureType') test.type = unquote(value);
        else if (field?.[1] === 'error' && test.error === undefined) {
          if (/^[|>][-+]?$/.test(value)) block.errorNext = true;
          else test.error = unquote(value);
        }
      }
      continue;
    }
    if (line.trim() === '---') {
      block = { indent, test: justFailed, errorNext: false };
      continue;
    }
    justFailed = undefined;
    const notOk = /^\s*not ok \d+ - (.*)$/.exec(line)?.[1];
    if (notOk !== undefined) {
      if (!/\s# (TODO|SKIP)\b/i.test(notOk)) failed.push((justFailed = { name: notOk }));
      continue;
    }
    const diag = /^# (.*\S)\s*$/.exec(line)?.[1];
    if (!diag || /^(Subtest: |(tests|suites|pass|fail|cancelled|skipped|todo|duration_ms) \d)|^\s*at |^Node\.js v|^\s*\^+$/.test(diag)) continue;
    const late =
      /^Error: Test "(.*?)" at .*? generated asynchronous activity after the test ended\. This activity created the error "(.*?)" (and would|which)/.exec(diag);
    said.push(cut(late ? `after "${late[1] as string}" ended: ${late[2] as string}` : diag));
  }
  const own = failed.filter((t) => t.type !== 'subtestsFailed' && t.type !== 'cancelledByParent');
  const errors = said.filter((l) => /error|warning/i.test(l));
  const told = (errors.length ? errors.slice(0, count) : said.slice(-count)).join(' | ');
  return [
    own.length
      ? `not ok: ${own
          .slice(0, count)
          .map((t) => cut(t.error ? `${t.name} (${t.error})` : t.name))
          .join('; ')}`
      : 'no test failed on its own',
    ...(told ? [`said: ${told}`] : []),
  ].join('; ');
}

/** The counters of one file's output, or null when it printed no summary (it was killed, or crashed before one). */
export function tapCounts(output: string): TapCounts | null {
  const counts = Object.fromEntries(TAP_COUNTERS.map((c) => [c, 0])) as TapCounts;
  let seen = false;
  for (const line of output.split('\n')) {
    const m = /^# (tests|suites|pass|fail|cancelled|skipped|todo) (\d+)$/.exec(line);
    if (m) {
      counts[m[1] as keyof TapCounts] = Number(m[2]);
      seen = true;
    }
  }
  return seen ? counts : null;
}
