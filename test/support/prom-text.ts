// A reader of Prometheus' text exposition format (version 0.0.4), enough for the tests to read
// the samples by name and labels instead of grepping lines: `name{label="value",...} value`, label
// values unescaped (\\, \", \n), and the # TYPE lines, each family declared once.
export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Exposition {
  samples: Sample[];
  /** Each family's declared type (# TYPE name type). */
  types: Map<string, string>;
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+-?\d+)?$/;

function parseLabels(text: string, line: string): Record<string, string> {
  const labels: Record<string, string> = {};
  let i = 0;
  while (i < text.length) {
    const m = /^\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"/.exec(text.slice(i));
    if (!m) throw new Error(`bad labels in '${line}' at ${i}`);
    i += m[0].length;
    let value = '';
    for (;;) {
      const c = text[i];
      if (c === undefined) throw new Error(`unterminated label value in '${line}'`);
      i += 1;
      if (c === '"') break;
      if (c === '\\') {
        const e = text[i];
        i += 1;
        value += e === 'n' ? '\n' : (e ?? '');
      } else value += c;
    }
    labels[m[1] as string] = value;
    const rest = /^\s*,?/.exec(text.slice(i));
    i += rest?.[0].length ?? 0;
  }
  return labels;
}

/** Go's ParseFloat, which Prometheus reads values with, takes NaN and Inf in any case (prom-client writes 'Nan'). */
function parseValue(raw: string, line: string): number {
  const r = raw.toLowerCase();
  if (r === '+inf' || r === 'inf') return Infinity;
  if (r === '-inf') return -Infinity;
  if (r === 'nan') return NaN;
  const v = Number(raw);
  if (Number.isNaN(v)) throw new Error(`bad value in '${line}'`);
  return v;
}

export function parseExposition(text: string): Exposition {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  for (const line of text.split('\n')) {
    if (line.trim() === '') continue;
    if (line.startsWith('#')) {
      const t = /^# TYPE (\S+) (\S+)$/.exec(line);
      if (t) {
        if (types.has(t[1] as string)) throw new Error(`family ${t[1]} declared twice`);
        types.set(t[1] as string, t[2] as string);
      }
      continue;
    }
    const m = SAMPLE.exec(line);
    if (!m) throw new Error(`not a sample line: '${line}'`);
    samples.push({ name: m[1] as string, labels: m[2] ? parseLabels(m[2], line) : {}, value: parseValue(m[3] as string, line) });
  }
  return { samples, types };
}

/** The samples named `name` whose labels include `labels`. */
export function samplesOf(e: Exposition, name: string, labels: Record<string, string> = {}): Sample[] {
  return e.samples.filter((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v));
}

/** The one sample named `name` with `labels`; undefined when there is none, an error when several match. */
export function valueOf(e: Exposition, name: string, labels: Record<string, string> = {}): number | undefined {
  const found = samplesOf(e, name, labels);
  if (found.length > 1) throw new Error(`${found.length} samples of ${name} match ${JSON.stringify(labels)}`);
  return found[0]?.value;
}

/** GET url, 200 and Prometheus' content type, parsed. */
export async function scrape(url: string): Promise<Exposition> {
  const res = await fetch(url);
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${url} answered ${res.status}: ${text.slice(0, 500)}`);
  const type = res.headers.get('content-type') ?? '';
  if (!type.startsWith('text/plain')) throw new Error(`${url} content-type ${type}`);
  return parseExposition(text);
}
