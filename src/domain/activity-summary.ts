// The one line the Temporal UI shows for an activity (its user metadata summary): the activity's
// name and the serve or tier it acts on, as its input names them, so a run's "Events with
// Metadata" reads `drainServe vision (tier vision-local)`, where its history said `drainServe`
// for every victim alike (the list shows the summary alone, so it carries the name too). A
// promotion's steps all act on its one router: they have none. The UI shows these as plain
// text (not markdown, unlike a run's summary): nothing is escaped. Values a manifest could not
// name (a serve name 3,000 characters long from a UI form) are cut.

const MAX_VALUE = 100;

function named(v: unknown): string | undefined {
  if (typeof v === 'string' && v) return v.length > MAX_VALUE ? `${v.slice(0, MAX_VALUE)}…` : v;
  // A serve spec: { name, … }.
  if (typeof v === 'object' && v !== null && !Array.isArray(v)) return named((v as Record<string, unknown>)['name']);
  return undefined;
}

/** `drainServe vision (tier vision-local)`; undefined when the input names nothing (the type says it all). */
export function activitySummary(activityType: string, input: unknown): string | undefined {
  const i = typeof input === 'object' && input !== null && !Array.isArray(input) ? (input as Record<string, unknown>) : {};
  const subject = named(i['serve']) ?? named(i['victim']) ?? named(i['acquirer']);
  const where = [...(named(i['tier']) ? [`tier ${named(i['tier'])}`] : []), ...(named(i['gpuUuid']) && !subject ? [named(i['gpuUuid']) ?? ''] : [])];
  if (!subject && !where.length) return undefined;
  if (!subject) return `${activityType} ${where.join(', ')}`;
  return `${activityType} ${subject}${where.length ? ` (${where.join(', ')})` : ''}`;
}
