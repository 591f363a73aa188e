// The report's sections in order, each written once through a format's writer: text, markdown,
// or the model itself as JSON.
import type { AuditReport, DrainResult, LedgerAtEvidence, IdentityEvidence, PromotionEvidence, VictimEvidence, VramReleaseResult } from './model';
import { summarizeActivity } from './activities';
import { compact, obj, txt, vramReadingOf } from './read';
import { byClause, usedClause } from '../../shared/wording';
import { markdownWriter, textWriter, time } from './writers';
import type { Writer } from './writers';

export type ReportFormat = 'text' | 'markdown' | 'json';

function drainLine(d: DrainResult): string {
  const vllm = d.vllmRunningAtStart !== null ? `, vLLM running ${d.vllmRunningAtStart} → ${txt(d.vllmRunningAtEnd)}` : '';
  const router = `router in flight ${d.routerInFlightAtStart} → ${d.routerInFlightAtEnd}`;
  return `${d.drained ? 'drained' : 'NOT drained'} after ${d.waitedMs} ms (${router}${vllm}; ${d.polls} polls)`;
}

function vramLine(v: VramReleaseResult): string {
  const reading = vramReadingOf(v.reading);
  const used = usedClause({ ...v, reading }, String(v.expectedMib));
  return `nvidia-smi: ${v.releasedMib} MiB back on ${v.gpuUuid} (${used}) within ${v.waitedMs} ms${byClause(reading)}`;
}

function identityLine(i: IdentityEvidence): string {
  const who = i.serve ?? (i.tier ? `tier ${i.tier}` : '?');
  const seen = i.observed.length ? i.observed.map((m) => `'${m}'`).join(', ') : 'nothing';
  const how = i.by === 'v1/models' ? 'GET /v1/models' : `router readmit${i.tier && i.serve ? ` of ${i.tier}` : ''}`;
  return `${who}: ${how} observed ${seen}${i.expected ? `, expected '${i.expected}'` : ''}: ${i.ok ? 'ok' : 'MISMATCH'}`;
}

function sleepLine(s: NonNullable<VictimEvidence['sleep']>): string {
  const asked = `level ${s.level ?? '?'}${s.issuedAt ? `, issued ${s.issuedAt}` : ''}${s.waitedMs !== undefined ? `, ${s.waitedMs} ms` : ''}`;
  if (s.fellBack) return `${asked}; gave up (${s.fellBack}): stopped instead`;
  const kept = s.residualSeenMib !== undefined ? `; keeps ${s.residualSeenMib} MiB asleep (declared ${s.residualDeclaredMib ?? '?'})` : '';
  return `${asked}${kept}`;
}

/** A victim as text: what was asked of it and what it did, step by step. */
function victimLines(v: VictimEvidence): string[] {
  const out = [`victim ${v.serve}${v.vramMib !== undefined ? ` (${v.vramMib} MiB` : ' ('}${v.tier ? `, tier ${v.tier}` : ', no router tier'})`];
  if (v.inFlightAtQuiesce !== undefined) out.push(`  quiesce: ${v.inFlightAtQuiesce} in flight at quiesce`);
  if (v.drain) out.push(`  drain: ${drainLine(v.drain)}`);
  if (v.sleep) out.push(`  sleep: ${sleepLine(v.sleep)}`);
  if (v.stopped) out.push(`  stop: ${v.inFlightAtStop ?? '?'} in flight at stop${v.stopIssuedAt ? `, issued ${v.stopIssuedAt}` : ''}; ${v.stop ?? ''}`);
  else out.push(v.sleep && !v.sleep.fellBack ? '  stop: not stopped (asleep)' : '  stop: never stopped');
  if (v.vram) out.push(`  release: ${vramLine(v.vram)}`);
  return out;
}

function promotionLines(p: PromotionEvidence): string[] {
  const sha = p.candidateSha256 ? ` (candidate sha256 ${p.candidateSha256})` : '';
  const how = p.imageChanged === undefined ? '' : p.imageChanged ? ' (new image: recreate)' : ' (same image: reload)';
  const out = [
    `router ${p.router ?? '?'}: ${p.previousImage ?? '?'} → ${p.image ?? '?'}${how}`,
    `mapping_version '${p.previousMappingVersion ?? '?'}' → '${p.mappingVersion ?? '?'}'${sha}`,
  ];
  if (p.profile) out.push(`profile ${p.profile}`);
  const v = p.validation;
  const last = v?.output.split('\n').pop() ?? '';
  if (v) out.push(`validate-only: ${v.passed ? 'passed' : 'FAILED'}, ${v.timedOut ? 'timed out' : `exit ${txt(v.exitCode)}`} in ${v.durationMs} ms: ${last}`);
  if (p.backupPath !== undefined) out.push(`backup: ${p.backupPath ?? 'none (no live config)'}`);
  if (p.write) out.push(`write: ${p.write}`);
  if (p.reload) out.push(`reload: ${p.reload}`);
  if (p.verify) out.push(`verify: ${summarizeActivity('promoteVerify', undefined, p.verify)}`);
  if (p.observed !== undefined) out.push(`verification observed: ${compact(p.observed, 300)}`);
  if (p.rollback) {
    const r = p.rollback;
    out.push(
      `rollback: ${r['ok'] ? 'ok' : 'FAILED'}; config ${txt(r['restored'] ?? '?')}, ${txt(r['reload'] ?? '?')}${r['image'] ? ` ${txt(r['image'])}` : ''}${
        obj(r['verify']) ? `; verified: ${summarizeActivity('promoteVerify', undefined, r['verify'])}` : ''
      }${r['error'] ? `; error: ${txt(r['error'])}` : ''}`,
    );
  }
  out.push(`outcome: ${p.outcome}`);
  return out;
}

function ledgerAtLines(a: LedgerAtEvidence): string[] {
  const by = a.asOf.by ? ` (sent by ${a.asOf.by})` : '';
  return [
    ...a.lines,
    a.asOf.eventId === undefined ? `as ${a.asOf.what} at ${a.asOf.at ?? '?'} (its input)` : `as answered by ${a.asOf.what} at ${a.asOf.at ?? '?'}${by}`,
    ...a.holders,
    ...(a.olderRecording ? ["this ledger's update answers carry no state (recorded before they did): the lines above are older than the updates below"] : []),
    ...a.notInLines.map((l) => `not in the lines above (its answer carries no state): ${l}`),
    ...(a.afterClose ? [`this run closed at ${a.afterClose}: a later run of the ledger may hold more`] : []),
  ];
}

type Section = (r: AuditReport, w: Writer) => void;

const SECTIONS: Section[] = [
  (r, w) => w.head(r),
  (r, w) => {
    if (!r.steps.length) return;
    w.heading('Steps');
    w.table({
      columns: [{ title: 'time' }, { title: 'step', pad: 'widest' }, { title: 'outcome' }],
      rows: r.steps.map((s) => [{ at: s.at }, s.step, s.outcome]),
    });
  },
  ({ ledger }, w) => {
    if (!ledger.before && !ledger.after) return;
    w.group('Ledger');
    if (ledger.before) w.preformatted('before', ledger.before);
    if (ledger.after) w.preformatted('after', ledger.after);
    if (ledger.at) w.preformatted(`at ${ledger.at.at}`, ledgerAtLines(ledger.at));
  },
  ({ eviction }, w) => {
    if (!eviction) return;
    w.heading('Eviction');
    w.fact('why', eviction.reason ?? '?');
    w.table({
      columns: ['victim', 'MiB', 'tier', 'in flight at quiesce', 'drain', 'in flight at stop', 'VRAM released (nvidia-smi)'].map((title) => ({ title })),
      rows: eviction.victims.map((v) => [
        v.serve,
        `${v.vramMib ?? '?'}`,
        v.tier ?? '—',
        `${v.inFlightAtQuiesce ?? '—'}`,
        v.drain ? drainLine(v.drain) : '—',
        v.stopped ? txt(v.inFlightAtStop ?? '?') : v.sleep ? `asleep at level ${v.sleep.level ?? '?'}` : 'not stopped',
        v.vram ? `${v.vram.releasedMib} MiB (${usedClause({ ...v.vram, reading: vramReadingOf(v.vram.reading) })})` : '—',
      ]),
      textLines: eviction.victims.flatMap(victimLines),
    });
  },
  ({ identity }, w) => {
    if (!identity.length) return;
    w.heading('Observed identity');
    w.items(identity.map(identityLine));
  },
  ({ nvidiaSmi }, w) => {
    const { readings, rooms = [], releases, measuredDelta: d } = nvidiaSmi;
    if (!readings.length && !releases.length && !d) return;
    w.heading('nvidia-smi');
    if (readings.length) {
      w.table({
        columns: ['time', 'activity', 'GPU', 'used MiB', 'free MiB', 'total MiB'].map((title) => ({ title })),
        rows: readings.map((g) => [{ at: g.at }, g.activity, g.uuid, `${g.usedMib}`, `${g.freeMib}`, `${g.totalMib}`]),
        textLines: readings.map((g) => `${time(g.at)}  ${g.activity.padEnd(10)} ${g.uuid}: used ${g.usedMib} MiB, free ${g.freeMib} of ${g.totalMib} MiB`),
      });
    }
    w.items(
      [
        ...rooms.map((m) => `room for ${m.serve} at ${time(m.at)}: ${m.allowed ? 'allowed' : 'refused'}: ${m.line}`),
        ...releases.map((v) => `release of ${v.victim ?? '?'}: ${vramLine(v)}`),
      ],
      true,
    );
    if (d) w.items([`measured delta: ${d.serve ?? '?'} ${w.signed(d.deltaMib)} MiB device used (declared ${d.declaredMib ?? '?'} MiB)`], true);
  },
  ({ promotion }, w) => {
    if (!promotion) return;
    w.heading('Promotion');
    w.items(promotionLines(promotion));
  },
  ({ restored }, w) => {
    if (!restored.length) return;
    w.heading('Restored');
    w.items(restored.map((x) => `${x.serve}: ${x.ok ? 'ok' : 'FAILED'}: ${x.message} ${w.ref(x.workflowId)}`));
  },
  ({ children }, w) => {
    if (!children.length) return;
    w.heading('Child workflows');
    w.items(children.map((c) => `${w.code(c.workflowId)} (${c.workflowType}${c.runId ? `, run ${c.runId}` : ''}): ${c.status}: ${c.summary}`));
  },
  ({ updates }, w) => {
    if (!updates.length) return;
    w.heading('Updates', updates.length);
    w.table({
      columns: [
        { title: 'event', prefix: '#', pad: 4, after: ' ' },
        { title: 'accepted' },
        { title: 'update', pad: 14, after: ' ' },
        { title: 'request → result' },
      ],
      rows: updates.map((u) => [`${u.eventId}`, { at: u.acceptedAt }, u.name, u.summary]),
    });
  },
  ({ patches }, w) => {
    if (patches.length) w.brief('Patches', patches);
  },
  ({ activities }, w) => {
    if (!activities.length) return;
    w.heading('Activities');
    w.table({
      columns: [
        { title: 'event', prefix: '#', pad: 4, after: ' ' },
        { title: 'scheduled' },
        { title: 'closed', markdownOnly: true },
        { title: 'activity', pad: 'widest' },
        { title: 'status', after: ': ' },
        { title: 'result' },
      ],
      rows: activities.map((a) => {
        const status = `${a.status}${a.attempts > 1 ? ` (attempt ${a.attempts})` : ''}`;
        return [`${a.eventId}`, { at: a.scheduledAt }, a.closedAt ?? '—', a.type, status, a.summary];
      }),
    });
  },
];

/** The report in one format, as lines: the sections walked once through that format's writer; JSON is the model itself. */
export function render(r: AuditReport, format: ReportFormat): string[] {
  if (format === 'json') return JSON.stringify(r, null, 2).split('\n');
  const w = format === 'markdown' ? markdownWriter() : textWriter();
  for (const section of SECTIONS) section(r, w);
  return w.lines();
}

export const renderText = (r: AuditReport): string[] => render(r, 'text');
export const renderMarkdown = (r: AuditReport): string[] => render(r, 'markdown');
