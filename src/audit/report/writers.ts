// How each format lays out the parts of a section (sections.ts walks them once): text for a
// terminal, markdown for an evidence file. A section says what it shows; the writer decides how.
import { callerLine } from './caller';
import type { AuditReport } from './model';

/** A cell of a table: text as it is, or an instant (text shows its clock time, markdown all of it). */
export type Cell = string | { at: string | undefined };

export interface Column {
  title: string;
  /** Text only: the width the column is padded to, or the widest of its cells. */
  pad?: number | 'widest';
  /** Text only: what is written before the cell and after it (two spaces between columns unless said). */
  prefix?: string;
  after?: string;
  /** Shown in markdown only; the terminal line is short without it. */
  markdownOnly?: boolean;
}

export interface Table {
  columns: Column[];
  rows: Cell[][];
  /** The text form, where a line or two per row reads better than aligned columns. */
  textLines?: string[];
}

export interface Writer {
  /** The operation, its workflow and its outcome (and, in an evidence file, the workflow's input). */
  head(r: AuditReport): void;
  /** A section's title; a count, where given, is part of the text title only. */
  heading(title: string, count?: number): void;
  /** A section with parts (text titles each part "<title> <part>" instead). */
  group(title: string): void;
  /** Lines kept exactly, under the group's part. */
  preformatted(part: string, lines: string[]): void;
  /** One labelled fact, before the section's details. */
  fact(label: string, value: string): void;
  /** Facts one per line; `loose` sets them apart in markdown. */
  items(lines: string[], loose?: boolean): void;
  /** A short list: one line in text, a section of its own in markdown. */
  brief(title: string, items: string[]): void;
  table(t: Table): void;
  /** Inline: an identifier, a reference to another workflow, a signed delta. */
  code(s: string): string;
  ref(s: string): string;
  signed(n: number): string;
  lines(): string[];
}

/** An event time as a terminal shows it: the clock time, to the millisecond. */
export function time(at: string | undefined): string {
  return at ? at.replace(/^\d{4}-\d{2}-\d{2}T/, '').replace(/Z$/, '') : '?';
}

function outcomeLine(r: AuditReport): string {
  return `${r.outcome.failureType ? `${r.outcome.failureType}: ` : ''}${r.outcome.message}`;
}

export function textWriter(): Writer {
  const out: string[] = [];
  let group = '';
  const cellText = (c: Cell | undefined) => (typeof c === 'object' ? time(c.at) : (c ?? ''));
  return {
    head(r) {
      const w = r.workflow;
      out.push(
        r.operation,
        `  workflow ${w.workflowId} (${w.type})${w.runId ? `, run ${w.runId}` : ''}${w.parent ? `, child of ${w.parent}` : ''}`,
        `  task queue ${w.taskQueue ?? '?'}; started ${w.startedAt ?? '?'}${w.closedAt ? `, closed ${w.closedAt}` : ''}; ${w.status}; ${w.events} events`,
        `  started by ${callerLine(w.startedBy)}`,
        `  outcome: ${outcomeLine(r)}`,
      );
    },
    heading: (title, count) => out.push('', count === undefined ? title : `${title} (${count})`),
    group(title) {
      group = title;
    },
    preformatted: (part, lines) => out.push('', `${group} ${part}`, ...lines.map((l) => `  ${l}`)),
    fact: (label, value) => out.push(`  ${label}: ${value}`),
    items: (lines) => out.push(...lines.map((l) => `  ${l}`)),
    brief: (title, items) => out.push('', `${title}: ${items.join(', ')}`),
    table(t) {
      if (t.textLines) {
        out.push(...t.textLines.map((l) => `  ${l}`));
        return;
      }
      const shown = t.columns.flatMap((c, k) => (c.markdownOnly ? [] : [{ c, k }]));
      const widths = shown.map(({ c, k }) => (c.pad === 'widest' ? Math.max(...t.rows.map((row) => cellText(row[k]).length)) : (c.pad ?? 0)));
      for (const row of t.rows) {
        const cells = shown.map(({ c, k }, n) => `${c.prefix ?? ''}${cellText(row[k]).padEnd(widths[n] ?? 0)}${n < shown.length - 1 ? (c.after ?? '  ') : ''}`);
        out.push(`  ${cells.join('')}`);
      }
    },
    code: (s) => s,
    ref: (s) => `[${s}]`,
    signed: (n) => `${n >= 0 ? '+' : ''}${n}`,
    lines: () => out,
  };
}

/** A table cell's text: a pipe would end the cell, a newline the row. */
function cell(s: string): string {
  return s.replace(/\|/g, '\\|').replace(/\n/g, ' ');
}

function codeBlock(lines: string[], lang = ''): string[] {
  return [`\`\`\`${lang}`, ...lines, '```'];
}

export function markdownWriter(): Writer {
  const out: string[] = [];
  return {
    head(r) {
      const w = r.workflow;
      out.push(
        `# Evidence: ${r.operation}`,
        '',
        `Rendered by \`gpures audit report\` from the workflow history alone (${w.events} events).`,
        '',
        '| | |',
        '|---|---|',
        `| workflow | \`${cell(w.workflowId)}\` (${w.type}) |`,
        ...(w.runId ? [`| run | \`${w.runId}\` |`] : []),
        `| started by | ${cell(callerLine(w.startedBy))} |`,
        `| task queue | \`${cell(w.taskQueue ?? '?')}\` |`,
        `| started | ${w.startedAt ?? '?'} |`,
        `| closed | ${w.closedAt ?? '(still running)'} |`,
        `| status | **${w.status}** |`,
        `| outcome | ${cell(outcomeLine(r))} |`,
        '',
        '## Input',
        '',
        ...codeBlock([JSON.stringify(r.input, null, 2)], 'json'),
      );
    },
    heading: (title) => out.push('', `## ${title}`),
    group: (title) => out.push('', `## ${title}`),
    preformatted: (part, lines) => out.push('', `${part.charAt(0).toUpperCase()}${part.slice(1)}:`, '', ...codeBlock(lines)),
    fact: (label, value) => out.push('', `${label.charAt(0).toUpperCase()}${label.slice(1)}: ${value}`),
    items: (lines, loose) => out.push(...(loose ? lines.flatMap((l) => ['', `- ${l}`]) : ['', ...lines.map((l) => `- ${l}`)])),
    brief: (title, items) => out.push('', `## ${title}`, '', ...items.map((i) => `- ${i}`)),
    table(t) {
      const md = (c: Cell | undefined) => (typeof c === 'object' ? (c.at ?? '?') : cell(c ?? ''));
      const row = (cells: string[]) => `| ${cells.join(' | ')} |`;
      out.push('', row(t.columns.map((c) => c.title)), `|${t.columns.map(() => '---|').join('')}`);
      out.push(...t.rows.map((r) => row(t.columns.map((_c, k) => md(r[k])))));
    },
    code: (s) => `\`${s}\``,
    ref: (s) => `(\`${s}\`)`,
    signed: (n) => `${n}`,
    lines: () => [...out, ''],
  };
}
