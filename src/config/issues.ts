// Validation plumbing shared by the TOML config files (the serve manifest and the router config):
// TOML parsing into issues, zod field schemas whose messages read "must be …" in the file's own
// terms, dotted paths, unknown-key suggestions, named rules and the issue collector.
//
// No node built-ins and no I/O: the caller reads the file and hands over its text. Not for the
// workflow bundle (zod, smol-toml); workflows take the types from src/domain.

import { parse as parseToml, TomlError } from 'smol-toml';
import { z } from 'zod';
import type { ManifestIssue } from '../domain/types';

export type PathSegment = string | number;

// ---------------------------------------------------------------------------------------------
// Field schemas. Each field is a z.custom with a predicate and its own message, so every issue
// reads "must be …, (got …)" in the file's terms rather than zod's.

/** How a value reads in a message: `"text"`, `42`, `an array`, `a table`, … */
export function describe(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (value === null) return 'null';
  if (typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return String(value);
  if (Array.isArray(value)) return 'an array';
  if (value instanceof Date) return 'a date';
  return 'a table';
}

/** What kind of value it is, never the value: for a field that may hold a secret. `a number`, `a string`, `an array`, … */
export function describeKind(value: unknown): string {
  if (typeof value === 'string') return 'a string';
  if (typeof value === 'number' || typeof value === 'bigint') return 'a number';
  if (typeof value === 'boolean') return 'true or false';
  return describe(value);
}

/** A field schema: `expectation` completes "must be …"; `shown` says what was there instead. */
export function field<T>(predicate: (v: unknown) => boolean, expectation: string, shown: (v: unknown) => string = describe) {
  return z.custom<T>(predicate, {
    error: (iss) => (iss.input === undefined ? `is required (${expectation})` : `must be ${expectation} (got ${shown(iss.input)})`),
  });
}

export const isString = (v: unknown): v is string => typeof v === 'string';

export const nonEmptyString = field<string>((v) => isString(v) && v.trim() !== '', 'a non-empty string');
export const bool = field<boolean>((v) => typeof v === 'boolean', 'true or false');

/** An array of tables, written `[[what]]`; its entries are validated one by one by the caller. */
export const tableArray = (what: string) =>
  z.array(z.unknown(), { error: (iss) => `must be an array of tables, written [[${what}]] (got ${describe(iss.input)})` });

// ---------------------------------------------------------------------------------------------
// Named rules

/** What a rule found, before the collector labels it with the file. */
export interface Finding {
  severity: 'error' | 'warning';
  path: readonly PathSegment[] | string;
  message: string;
}

export const error = (path: Finding['path'], message: string): Finding => ({ severity: 'error', path, message });
export const warning = (path: Finding['path'], message: string): Finding => ({ severity: 'warning', path, message });

/**
 * One check with a name, over a subject (a serve, a tier, the whole file) and what the loader
 * knows around it. A rule reports and never throws; it returns nothing when its subject is fine or
 * when an earlier problem already explains it.
 */
export type Rule<Subject, Context> = (subject: Subject, ctx: Context) => Finding[];

// ---------------------------------------------------------------------------------------------
// Issue plumbing

/** `serves[2].gpu_role`; keys that are not bare TOML keys are quoted: `env["A B"]`. */
export function formatPath(path: readonly PathSegment[]): string {
  let out = '';
  for (const seg of path) {
    if (typeof seg === 'number') out += `[${seg}]`;
    else if (/^[A-Za-z0-9_-]+$/.test(seg)) out += out ? `.${seg}` : seg;
    else out += `[${JSON.stringify(seg)}]`;
  }
  return out;
}

function editDistance(a: string, b: string): number {
  const prev = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let diag = prev[0] ?? 0;
    prev[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const up = prev[j] ?? 0;
      const left = prev[j - 1] ?? 0;
      prev[j] = Math.min(up + 1, left + 1, diag + (a[i - 1] === b[j - 1] ? 0 : 1));
      diag = up;
    }
  }
  return prev[b.length] ?? 0;
}

/** `unknown key "evcit" (did you mean 'evict'?)`, else the allowed keys: the manifest's wording, and the API's. */
export function unknownKeyMessage(key: string, allowed: readonly string[]): string {
  const lower = key.toLowerCase();
  const close = allowed
    .map((k) => ({ k, d: lower.length >= 3 && (k.startsWith(lower) || lower.startsWith(k)) ? 1 : editDistance(lower, k) }))
    .filter(({ d }) => d <= 2)
    .sort((x, y) => x.d - y.d)[0];
  return close ? `unknown key ${JSON.stringify(key)} (did you mean '${close.k}'?)` : `unknown key ${JSON.stringify(key)} (allowed keys: ${allowed.join(', ')})`;
}

/**
 * The keys allowed where a schema reported unknown ones: a fixed list, or a function of the path
 * of the offending table relative to the schema's root (`[]` for the root itself).
 */
export type AllowedKeys = readonly string[] | ((relativePath: readonly PathSegment[]) => readonly string[]);

/** Collects the errors and warnings of one file. */
export class Issues {
  readonly errors: ManifestIssue[] = [];
  readonly warnings: ManifestIssue[] = [];

  /** `serves[7]` → `serve 'vision'`: an operator knows the entry by its name, not its place. */
  private readonly subjects = new Map<string, string>();

  constructor(private readonly file: string) {}

  /** Names each entry of the array of tables `key` by its `name` field, where it has a string one. */
  nameEntries(key: string, noun: string, entries: readonly unknown[]): void {
    entries.forEach((entry, index) => {
      const name = (entry as { name?: unknown } | null)?.name;
      if (typeof name === 'string' && name.trim() !== '') this.subjects.set(formatPath([key, index]), `${noun} '${name}'`);
    });
  }

  error(path: readonly PathSegment[] | string, message: string): void {
    this.errors.push(this.issue(path, message));
  }

  warn(path: readonly PathSegment[] | string, message: string): void {
    this.warnings.push(this.issue(path, message));
  }

  private issue(path: readonly PathSegment[] | string, message: string): ManifestIssue {
    const text = typeof path === 'string' ? path : formatPath(path);
    const subject = this.subjects.get(/^[A-Za-z0-9_-]+\[\d+\]/.exec(text)?.[0] ?? '');
    return { file: this.file, path: text, ...(subject ? { subject } : {}), message };
  }

  /** Records what the rules found over one subject, in rule order; true when none found an error. */
  check<S, C>(rules: readonly Rule<S, C>[], subject: S, ctx: C): boolean {
    let ok = true;
    for (const rule of rules) {
      for (const f of rule(subject, ctx)) {
        if (f.severity === 'error') {
          this.error(f.path, f.message);
          ok = false;
        } else {
          this.warn(f.path, f.message);
        }
      }
    }
    return ok;
  }

  /** Records zod issues under `prefix`; unknown keys get a suggestion from `allowed`. */
  fromZod(issues: readonly z.core.$ZodIssue[], prefix: readonly PathSegment[], allowed: AllowedKeys): void {
    for (const iss of issues) {
      const rel = iss.path.map((p) => (typeof p === 'symbol' ? String(p) : p));
      if (iss.code === 'unrecognized_keys') {
        const keys = typeof allowed === 'function' ? allowed(rel) : allowed;
        for (const key of iss.keys) this.error([...prefix, ...rel, key], unknownKeyMessage(key, keys));
        continue;
      }
      let message = iss.message;
      if (iss.code === 'invalid_type' && iss.expected === 'object') {
        // A table slot (a top-level table, an array-of-tables entry) holding something else; every
        // other schema carries its own message.
        message = `must be a table (got ${describe(iss.input)})`;
      }
      this.error([...prefix, ...rel], message);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// TOML

/**
 * Parses TOML text into its top-level table. Malformed TOML is recorded as one whole-file issue
 * (`line L, column C: invalid TOML: …`) and yields undefined; this never throws.
 */
export function parseTomlTable(text: string, issues: Issues): Record<string, unknown> | undefined {
  try {
    return parseToml(text, { unsafeKeyBehaviour: 'throw' });
  } catch (err) {
    if (err instanceof TomlError) {
      const detail = (err.message.split('\n')[0] ?? '').replace(/^Invalid TOML document:\s*/, '');
      issues.error(tomlKeyPath(text, err.line, err.column, detail) ?? '', `line ${err.line}, column ${err.column}: invalid TOML: ${detail}`);
    } else {
      issues.error('', `invalid TOML: ${err instanceof Error ? err.message : String(err)}`);
    }
    return undefined;
  }
}

const BARE_PATH = String.raw`[A-Za-z0-9_-]+(?:\s*\.\s*[A-Za-z0-9_-]+)*`;
const TABLE_HEADER = new RegExp(String.raw`^\s*(\[\[?)\s*(${BARE_PATH})\s*\]\]?\s*(?:#.*)?$`);
const KEY_VALUE = new RegExp(String.raw`^\s*(${BARE_PATH})\s*=`);

/**
 * The dotted path of the key a TOML error is about (`serves[0].vram_mib`), so a value the parser
 * refuses is named as the schema's errors are: the key its line assigns, where the error lies in
 * that value or redefines that key. Undefined otherwise: an error at the start of a line may be
 * the statement before it left open (an array without its `]`), not this one. Undefined too where
 * a line before could hide what its lines are (a multi-line string) or a header is not one of bare
 * keys. Lines before the error's parsed, so their table headers are real ones.
 */
export function tomlKeyPath(text: string, line: number, column: number, detail: string): PathSegment[] | undefined {
  const lines = text.split(/\r?\n/);
  const assigns = KEY_VALUE.exec(lines[line - 1] ?? '');
  if (!assigns || (column <= assigns[0].length && !/redefine/i.test(detail))) return undefined;
  const arrayIndex = new Map<string, number>();
  let table: PathSegment[] = [];
  for (const before of lines.slice(0, line - 1)) {
    if (before.includes('"""') || before.includes("'''")) return undefined;
    if (!/^\s*\[/.test(before)) continue;
    const header = TABLE_HEADER.exec(before);
    // A quoted key (`["node"]`), or an array's line: which table follows is not known here.
    if (!header) return undefined;
    const names = splitKey(header[2] as string);
    const name = names.join('.');
    if (header[1] === '[[') {
      arrayIndex.set(name, (arrayIndex.get(name) ?? -1) + 1);
      // A new entry's own arrays of tables count from 0 again.
      for (const other of [...arrayIndex.keys()]) if (other.startsWith(`${name}.`)) arrayIndex.delete(other);
    }
    // `[tiers.on_demand]` after `[[tiers]]` is the last tiers entry's table.
    table = names.flatMap((seg, i): PathSegment[] => {
      const index = arrayIndex.get(names.slice(0, i + 1).join('.'));
      return index === undefined ? [seg] : [seg, index];
    });
  }
  return [...table, ...splitKey(assigns[1] as string)];
}

function splitKey(dotted: string): string[] {
  return dotted.split('.').map((k) => k.trim());
}

/** The entries of an array-of-tables key, or none when the key is missing or not an array. */
export function tableEntries(table: Record<string, unknown>, key: string): unknown[] {
  const value = table[key];
  return Array.isArray(value) ? (value as unknown[]) : [];
}

export type Entry<T> = { index: number; spec: T; issues?: undefined } | { index: number; spec?: undefined; issues: z.core.$ZodIssue[] };

/** Each entry of an array of tables through its schema, in order; a failure carries its zod issues. */
export function parseEach<T>(raws: readonly unknown[], schema: z.ZodType<T>): Entry<T>[] {
  return raws.map((raw, index) => {
    const r = schema.safeParse(raw, { reportInput: true });
    return r.success ? { index, spec: r.data } : { index, issues: r.error.issues };
  });
}

export const parsed = <T>(entries: Entry<T>[]): { index: number; spec: T }[] =>
  entries.flatMap((e) => (e.spec === undefined ? [] : [{ index: e.index, spec: e.spec }]));
