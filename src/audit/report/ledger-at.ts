// What a ledger held at a given instant, from its history alone (`gpures audit report LEDGER --at T`).
// The ledger's updates answer with its whole state after each change (admit, acquire, setPhase,
// release, …; recordings before 2026-12-02 do not, and are told as such), so the state at T is the last such answer completed at or before T, or the run's
// input before any. A beginStop answers with a brief, not the state (unless its bring-down asked
// for the state, since take-answers): one completed after that answer and by T is listed as not in
// the lines rather than guessed at. Each reservation is shown
// with the run that held it and, for a victim, the run that evicted it: who, not only what.
import { emptyLedger, formatLedger } from '../../domain/ledger';
import type { LedgerState } from '../../domain/ledger';
import type { AuditReport, LedgerAtEvidence } from './model';
import { isLedgerState, ledgerIn, obj, path, txt } from './read';

export class LedgerAtError extends Error {}

/** The state the run began with: carried over by continue-as-new, else empty. */
function startState(input: unknown): LedgerState | undefined {
  const i = obj(input);
  if (isLedgerState(i?.['state'])) return i['state'];
  const gpu = obj(i?.['gpu']) as Parameters<typeof emptyLedger>[1] | undefined;
  return i && gpu ? emptyLedger(txt(i['node']), gpu) : undefined;
}

function holderLines(state: LedgerState): string[] {
  return state.reservations.map((r) => `${r.serve}: held by ${r.holder}${r.evictedBy ? `; evicted by ${r.evictedBy}` : ''}`);
}

export function ledgerAt(report: AuditReport, atMs: number): LedgerAtEvidence {
  const { workflow } = report;
  if (workflow.type !== 'ledgerWorkflow')
    throw new LedgerAtError(`--at reads a ledger's history (ledgerWorkflow); ${workflow.workflowId} is a run of ${workflow.type}`);
  const at = new Date(atMs).toISOString();
  const startedMs = workflow.startedAt ? Date.parse(workflow.startedAt) : NaN;
  if (atMs < startedMs) {
    const { continuedFrom } = workflow.startedBy;
    const where = continuedFrom
      ? `the ledger then is in the run it continues, ${continuedFrom} (audit export --query "WorkflowId = '${workflow.workflowId}'" writes every run)`
      : 'it continues no earlier run: nothing was reserved through it before';
    throw new LedgerAtError(`--at ${at} is before this run of ${workflow.workflowId} began (${workflow.startedAt}); ${where}`);
  }
  const answered = report.updates.filter((u) => u.completedAt !== undefined && Date.parse(u.completedAt) <= atMs);
  let state = startState(report.input);
  let asOf: LedgerAtEvidence['asOf'] = { what: 'the run began', at: workflow.startedAt };
  let from = 0;
  answered.forEach((u, i) => {
    const l = ledgerIn(u.result);
    if (!l) return;
    state = l;
    asOf = { what: `update #${u.eventId} ${u.name}`, at: u.completedAt, eventId: u.eventId, by: txt(path(u.request, 'holder')) };
    from = i + 1;
  });
  if (!state) throw new LedgerAtError(`${workflow.workflowId}: neither its input nor an update's answer by ${at} holds the ledger's state`);
  // A fence only checks; a beginStop changes a phase without answering with the state (unless asked).
  const notInLines = answered.slice(from).filter((u) => u.name !== 'fence' && u.failure === undefined);
  // Every update but a beginStop has answered with the state since 2026-12-02 (b669db6); one recorded before did not.
  const older = notInLines.some((u) => u.name !== 'beginStop');
  return {
    ...(older ? { olderRecording: true as const } : {}),
    at,
    asOf,
    lines: formatLedger(state),
    holders: holderLines(state),
    notInLines: notInLines.map((u) => `#${u.eventId} ${u.name} at ${u.completedAt ?? '?'}: ${u.summary}`),
    ...(workflow.closedAt && atMs > Date.parse(workflow.closedAt) ? { afterClose: workflow.closedAt } : {}),
  };
}
