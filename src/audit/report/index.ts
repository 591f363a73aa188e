// `gpures audit report`: the evidence of one operation rendered from its workflow history ALONE
// (no server, no Docker, no router): the workflow input, every activity's input and result, the
// ledger's update requests and results, child workflows, and the workflow's result or failure,
// decoded with the default payload converter. History JSON → AuditReport (evidence.ts) → text,
// markdown or JSON (sections.ts). Pure: no I/O here.
export { buildReport } from './evidence';
export { ledgerAt, LedgerAtError } from './ledger-at';
export { render, renderMarkdown, renderText } from './sections';
export type { ReportFormat } from './sections';
export { isActivityName, summarizeActivity } from './activities';
export { isoMs } from './read';
export type * from './model';
