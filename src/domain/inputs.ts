// Workflow inputs arrive as JSON from the CLI, the API or the Temporal UI's start form: checked
// before anything runs, so a typo there is a clear failure rather than a stuck workflow task.

export interface InputSpec {
  booleans?: readonly string[];
  /** Positive, finite numbers of seconds. */
  seconds?: readonly string[];
}

export function operationInputProblems(input: unknown, spec: InputSpec = {}): string[] {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) return ['the input must be one JSON object, e.g. { "serve": "vision" }'];
  const o = input as Record<string, unknown>;
  const problems: string[] = [];
  if (typeof o['serve'] !== 'string' || !o['serve']) problems.push(`serve: a serve name from the manifest (got ${JSON.stringify(o['serve'])})`);
  for (const k of spec.booleans ?? []) {
    if (o[k] !== undefined && typeof o[k] !== 'boolean') problems.push(`${k}: true or false (got ${JSON.stringify(o[k])})`);
  }
  for (const k of spec.seconds ?? []) {
    const v = o[k];
    if (v !== undefined && !(typeof v === 'number' && Number.isFinite(v) && v > 0)) problems.push(`${k}: a positive number of seconds (got ${JSON.stringify(v)})`);
  }
  const known = new Set(['serve', ...(spec.booleans ?? []), ...(spec.seconds ?? [])]);
  for (const k of Object.keys(o)) if (!known.has(k)) problems.push(`${k}: unknown field (known: ${[...known].join(', ')})`);
  return problems;
}
