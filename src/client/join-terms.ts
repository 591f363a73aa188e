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

  /** A signal with `lease`, sent from `sentAtMs`, reached `runId`. */
  record(workflowId: string, runId: string, lease: LeaseRequest, sentAtMs: number): void {
    const prev = this.sent.get(workflowId);
    const s: Sent = prev?.runId === runId ? prev : { runId, fixedUntilMs: 0, idle: false, signals: 0 };
    s.signals += 1;
    if (lease.kind === 'idle') s.idle = true;
    else s.fixedUntilMs = Math.max(s.fixedUntilMs, sentAtMs + lease.seconds * 1000);
    this.sent.set(workflowId, s);
  }
}
