// The lease terms this API has sent to each acquisition run. Each join signal is an event in the
// run's history, and a signal cannot be refused: a flood of POSTs (a router or a client joining in
// a loop) grew one run's history by one event each, without bound. Terms that what was already
// sent to the same run covers are not sent again (the run folds them anyway, and each is "at least,
// from when it is applied", never before it was sent); past JOIN_SIGNALS_PER_RUN signals to one
// run, terms it does not cover are refused, nothing sent, rather than told they were taken.
import type { LeaseRequest } from '../shared/operations';

/** How many join signals this API sends one acquisition run: its own terms, and this many - 1 longer asks. */
export const JOIN_SIGNALS_PER_RUN = 16;

interface Sent {
  runId: string;
  /** The latest of each fixed ask's send time + its seconds: the run's lease lasts at least until then. */
  fixedUntilMs: number;
  idle: boolean;
  signals: number;
}

export class JoinTerms {
  /** By acquisition workflow id (one per serve of the manifest): the run last signalled. */
  private readonly sent = new Map<string, Sent>();
  /** By acquisition workflow id: signals sent and not yet answered, whose run is not known yet. */
  private readonly inFlight = new Map<string, number>();

  /** The run last signalled under this id, if any: a join lands on it unless it has closed. */
  lastRun(workflowId: string): string | undefined {
    return this.sent.get(workflowId)?.runId;
  }

  /** Whether the terms sent to this run already ask at least as much as `lease`, from `nowMs`. */
  covered(workflowId: string, runId: string, lease: LeaseRequest, nowMs: number): boolean {
    const s = this.sent.get(workflowId);
    if (!s || s.runId !== runId) return false;
    return lease.kind === 'idle' ? s.idle : s.fixedUntilMs >= nowMs + lease.seconds * 1000;
  }

  /** Whether this run has had its JOIN_SIGNALS_PER_RUN signals. */
  full(workflowId: string, runId: string): boolean {
    const s = this.sent.get(workflowId);
    return s !== undefined && s.runId === runId && s.signals >= JOIN_SIGNALS_PER_RUN;
  }

  /** What a run was covering, for the refusal: `at least until T`, `idle terms`. */
  asked(workflowId: string): string {
    const s = this.sent.get(workflowId);
    if (!s) return 'nothing';
    const fixed = s.fixedUntilMs > 0 ? [`a lease lasting at least until ${new Date(s.fixedUntilMs).toISOString()}`] : [];
    return [...fixed, ...(s.idle ? ['idle terms'] : [])].join(' and ') || 'nothing';
  }

  /**
   * Counts a signal to `runId` before it is sent, unless the run has had its JOIN_SIGNALS_PER_RUN:
   * checked and counted in one synchronous step, so POSTs awaiting their sends at once cannot all
   * pass a check that none has counted yet. False: nothing counted, send nothing.
   */
  reserve(workflowId: string, runId: string): boolean {
    if (this.full(workflowId, runId)) return false;
    this.entry(workflowId, runId).signals += 1;
    return true;
  }

  /** A reserved signal that was not sent (the call failed): its count given back. */
  release(workflowId: string, runId: string): void {
    const s = this.sent.get(workflowId);
    if (s?.runId === runId && s.signals > 0) s.signals -= 1;
  }

  /** A send is under way: until it is answered, another POST for the id joins first to learn the run (see sending). */
  begin(workflowId: string): void {
    this.inFlight.set(workflowId, (this.inFlight.get(workflowId) ?? 0) + 1);
  }

  end(workflowId: string): void {
    const n = (this.inFlight.get(workflowId) ?? 1) - 1;
    if (n > 0) this.inFlight.set(workflowId, n);
    else this.inFlight.delete(workflowId);
  }

  /** Whether a send for this id is awaiting its answer: a first POST's, whose run nothing here names yet. */
  sending(workflowId: string): boolean {
    return this.inFlight.has(workflowId);
  }

  /**
   * A signal with `lease`, sent from `sentAtMs`, reached `runId`. `reservedOn`: the run its count
   * was reserved on; the same run is not counted again, another (the reserved one closed meanwhile
   * and the signal started a new run) gives that count back and counts on the new one.
   */
  record(workflowId: string, runId: string, lease: LeaseRequest, sentAtMs: number, reservedOn?: string): void {
    if (reservedOn !== undefined && reservedOn !== runId) this.release(workflowId, reservedOn);
    const s = this.entry(workflowId, runId);
    if (reservedOn !== runId) s.signals += 1;
    this.take(s, lease, sentAtMs);
  }

  /** This API started `runId` with `lease` in its input, at `startedAtMs`: no signal, but its terms are the run's. */
  started(workflowId: string, runId: string, lease: LeaseRequest, startedAtMs: number): void {
    this.take(this.entry(workflowId, runId), lease, startedAtMs);
  }

  private take(s: Sent, lease: LeaseRequest, atMs: number): void {
    if (lease.kind === 'idle') s.idle = true;
    else s.fixedUntilMs = Math.max(s.fixedUntilMs, atMs + lease.seconds * 1000);
  }

  /** This run's entry; a run not the one last signalled replaces it (that one has closed). */
  private entry(workflowId: string, runId: string): Sent {
    const prev = this.sent.get(workflowId);
    if (prev?.runId === runId) return prev;
    const s: Sent = { runId, fixedUntilMs: 0, idle: false, signals: 0 };
    this.sent.set(workflowId, s);
    return s;
  }
}
