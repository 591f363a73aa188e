// Issue 15's targets, and the line each benchmark prints for one: the figure, its target, met or
// not; and the median every benchmark reports its runs by.

export const TARGETS = {
  /** Bring-up and bring-down as a workflow, against the same calls in a plain script. */
  bringRatio: 1.15,
  /** An acquisition with eviction, against its drain and container operations. */
  evictionRatio: 1.15,
  /** The CLI's --help and validate, against a bare `node -e 0`. */
  cliRatio: 3,
  /** `gpures ledger` on the simulated box, ms. */
  cliLedgerMs: 300,
  /** Recorded histories replayed per second. */
  replayPerSecond: 100,
  /** The worker's resident set, idle and after a storm, MiB. */
  workerRssMib: 200,
  /** The ledger's admit/release decisions per second from 50 callers, and their p99, ms. */
  ledgerPerSecond: 200,
  ledgerP99Ms: 50,
} as const;

/** `  target: <figure> <value> (<= or >=) <target>: met | NOT met`. */
export function targetLine(figure: string, value: number, op: '<=' | '>=', target: number, unit = ''): string {
  const met = op === '<=' ? value <= target : value >= target;
  const digits = Math.abs(value) < 10 ? 2 : 0;
  return `  target: ${figure} ${value.toFixed(digits)}${unit} ${op} ${target}${unit}: ${met ? 'met' : 'NOT met'}`;
}

/** The median of the runs (the mean of the middle two for an even count); NaN for none. */
export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? (s[mid] ?? NaN) : ((s[mid - 1] ?? NaN) + (s[mid] ?? NaN)) / 2;
}
