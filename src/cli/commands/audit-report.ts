// gpures audit report: the evidence of one operation, from its history alone.
import { resolve as resolvePath } from 'node:path';
import type { CommandContext, Rendered } from '../command';
import { CliError, EXIT } from '../exit-codes';
import { notFound, withClient } from '../temporal';

export interface ReportOpts {
  target: string;
  markdown?: boolean;
  runId?: string;
  output?: string;
  json?: boolean;
  /** A ledger's state at this instant (ISO 8601). */
  at?: string;
}

export async function auditReport(input: ReportOpts, _ctx: CommandContext): Promise<Rendered> {
  const { target } = input;
  if (input.markdown && input.json) throw new CliError('audit report: --markdown or --json, not both', EXIT.badInput);
  const { existsSync, statSync, writeFileSync } = await import('node:fs');
  const { HistoryFileError, idFromFileName, readHistoryFile } = await import('../../audit/history');
  const { buildReport, ledgerAt, LedgerAtError, renderMarkdown, renderText } = await import('../../audit/report');
  const atMs = input.at === undefined ? undefined : Date.parse(input.at);
  if (atMs !== undefined && Number.isNaN(atMs))
    throw new CliError(`audit report: --at '${input.at}' is not a time (ISO 8601, e.g. 2026-12-05T04:18:17.5Z)`, EXIT.badInput);
  // Date.parse reads a date-time without a zone as local time; history's are UTC.
  if (input.at !== undefined && /T/.test(input.at) && !/(Z|[+-]\d{2}:?\d{2})$/i.test(input.at))
    throw new CliError(`audit report: --at '${input.at}' has no zone: history's times are UTC; end it with Z (${input.at}Z) or an offset`, EXIT.badInput);
  let history;
  let fallbackId = target;
  if (existsSync(target) && statSync(target).isFile()) {
    try {
      history = readHistoryFile(target);
    } catch (err) {
      if (err instanceof HistoryFileError) throw new CliError(err.message, EXIT.badInput);
      throw err;
    }
    fallbackId = idFromFileName(target);
  } else {
    const { fetchHistoryJson } = await import('../../audit/export');
    history = await withClient((client) =>
      fetchHistoryJson(client, target, input.runId).catch((err: unknown) => {
        if (notFound(err)) throw new CliError(`audit report: '${target}' is neither a history file nor a workflow in this namespace`, EXIT.badInput);
        throw err;
      }),
    );
  }
  const report = buildReport(history, fallbackId);
  if (atMs !== undefined) {
    try {
      report.ledger.at = ledgerAt(report, atMs);
    } catch (err) {
      if (err instanceof LedgerAtError) throw new CliError(`audit report: ${err.message}`, EXIT.badInput);
      throw err;
    }
  }
  const lines = input.markdown ? renderMarkdown(report) : renderText(report);
  if (input.output) {
    const file = resolvePath(input.output);
    writeFileSync(file, input.json ? `${JSON.stringify(report, null, 2)}\n` : `${lines.join('\n')}\n`);
    const { workflowId } = report.workflow;
    return { data: { file, workflowId }, text: [`${file}: ${report.operation} (${workflowId})`], exitCode: EXIT.ok };
  }
  return { data: report, text: lines, exitCode: EXIT.ok };
}
