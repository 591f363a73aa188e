// The histories of one `gpures audit replay`, handed out one at a time to whichever replayer asks
// first: a replayer process, or a lane in this process. A replayer that was quick takes
// more; one that ends without finishing what it took (a process that died) gives it back, and
// another replays it. Each history's outcome is settled once.

/** Where a replayer takes its histories from and settles their outcomes: the queue, or, in a replayer process, the queue over IPC. */
export interface ReplaySource<T> {
  take(): Promise<number | undefined>;
  settle(i: number, outcome: T): void;
}

export class ReplayQueue<T> implements ReplaySource<T> {
  private readonly waiting: number[];
  private readonly outstanding = new Set<number>();
  private readonly diedOn = new Set<number>();
  private readonly askers: ((i: number | undefined) => void)[] = [];
  /** Each history's outcome, once settled. */
  readonly outcomes: T[];
  /** Which replayer settled each (the `by` given to settle). */
  readonly settledBy: string[];
  private allSettled: () => void = () => undefined;
  /** Resolves once every history is settled. */
  readonly done = new Promise<void>((resolve) => (this.allSettled = resolve));

  constructor(
    readonly count: number,
    private readonly onSettled: (i: number, by: string) => void = () => undefined,
  ) {
    this.waiting = Array.from({ length: count }, (_, i) => i);
    this.outcomes = new Array<T>(count);
    this.settledBy = new Array<string>(count);
    if (count === 0) this.allSettled();
  }

  /** The next history to replay; undefined once every history is settled. Waits while only histories others took remain: one may come back. */
  take(): Promise<number | undefined> {
    const i = this.waiting.shift();
    if (i !== undefined) {
      this.outstanding.add(i);
      return Promise.resolve(i);
    }
    if (this.outstanding.size === 0) return Promise.resolve(undefined);
    return new Promise((resolve) => this.askers.push(resolve));
  }

  /** A history replayed, or failed to: its outcome is final. A history settled already keeps its first outcome. */
  settle(i: number, outcome: T, by = ''): void {
    if (!this.outstanding.delete(i)) return;
    this.outcomes[i] = outcome;
    this.settledBy[i] = by;
    this.onSettled(i, by);
    if (!this.settled) return;
    for (const ask of this.askers.splice(0)) ask(undefined);
    this.allSettled();
  }

  /**
   * Histories a replayer took and will not finish: the next to ask replays them. With `orElse`,
   * the replayer died holding them, and one a replayer died holding before is settled with
   * `orElse`'s outcome instead: it may be what ends its replayers.
   */
  giveBack(taken: Iterable<number>, orElse?: (i: number) => T): void {
    for (const i of taken) {
      if (!this.outstanding.has(i)) continue;
      if (orElse && this.diedOn.has(i)) {
        this.settle(i, orElse(i), 'none');
        continue;
      }
      if (orElse) this.diedOn.add(i);
      const ask = this.askers.shift();
      if (ask) ask(i);
      else {
        this.outstanding.delete(i);
        this.waiting.unshift(i);
      }
    }
  }

  /** The queue as one replayer sees it: what it settles is counted as `by`'s. */
  as(by: string): ReplaySource<T> {
    return { take: () => this.take(), settle: (i, outcome) => this.settle(i, outcome, by) };
  }

  get settled(): boolean {
    return this.waiting.length === 0 && this.outstanding.size === 0;
  }
}
