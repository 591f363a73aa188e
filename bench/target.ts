// Issue 15's targets, and the line each benchmark prints for one: the figure, its target, met or
// not; the median every benchmark reports its runs by; and how much CPU the host took meanwhile.
import { readFileSync } from 'node:fs';

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

/**
 * The share of this machine's CPU time the hypervisor gave to others (the `steal` column of
 * /proc/stat) from now until the returned function is called: a figure measured while it was
 * high is the host's as much as the code's. NaN where /proc/stat has no steal column.
 */
export function stealMeter(): () => number {
  const read = (): { steal: number; total: number } => {
    try {
      const fields = (readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '').trim().split(/\s+/).slice(1).map(Number);
      // user nice system idle iowait irq softirq steal [guest guest_nice, already in user and nice]
      const ticks = fields.slice(0, 8);
      return ticks.length === 8 ? { steal: ticks[7] ?? NaN, total: ticks.reduce((a, b) => a + b, 0) } : { steal: NaN, total: NaN };
    } catch {
      return { steal: NaN, total: NaN };
    }
  };
  const start = read();
  return () => {
    const end = read();
    const total = end.total - start.total;
    // No tick went by (total 0): nothing was stolen in it. No steal column: NaN throughout.
    return total > 0 ? (end.steal - start.steal) / total : total;
  };
}

/** `host: 12 % of CPU time stolen by the hypervisor while <what>`, or a line saying it is unknown. */
export function stealLine(share: number, what: string): string {
  return Number.isFinite(share)
    ? `  host: ${(share * 100).toFixed(0)} % of CPU time stolen by the hypervisor while ${what} (its other guests' load; figures move with it)`
    : `  host: steal time unknown here (no /proc/stat steal column)`;
}
