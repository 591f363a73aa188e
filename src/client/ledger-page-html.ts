// The ledger page itself: one self-contained HTML document (inline CSS and script, nothing fetched
// but /v1/ledger; the box has no internet). It carries no data: the script polls /v1/ledger and
// builds the page with the DOM API, every text through textContent (serve names come from the
// manifest, decision lines from history), never innerHTML.

export const PAGE_STYLE = `
:root { color-scheme: light; --committed: #3b6fb6; --evicting: #c0504d; --held: #e0a030; --free: #e6efe6; --reserve: #9a9a9a; --smi: #555; }
* { box-sizing: border-box; }
body { font: 14px/1.4 system-ui, sans-serif; margin: 0; padding: 16px 24px; color: #222; background: #fafafa; }
header { display: flex; gap: 16px; align-items: baseline; flex-wrap: wrap; }
h1 { font-size: 20px; margin: 0; }
h2 { font-size: 16px; margin: 20px 0 6px; }
h3 { font-size: 14px; margin: 0 0 4px; }
small, .muted { color: #666; }
#status { padding: 2px 8px; border-radius: 4px; font-weight: 600; }
#status[data-state="live"] { background: #dff3df; color: #1d5e1d; }
#status[data-state="stale"], #status[data-state="unreachable"] { background: #fde2e1; color: #8a1f1b; }
#status[data-state="locked"], #status[data-state="loading"] { background: #eee; color: #444; }
body[data-stale="true"] main { opacity: 0.55; }
.gpu { background: #fff; border: 1px solid #ddd; border-radius: 6px; padding: 10px 12px; margin: 8px 0; }
.bar, .smi { display: flex; width: 100%; border: 1px solid #bbb; border-radius: 3px; overflow: hidden; }
.bar { height: 34px; }
.smi { height: 10px; margin-top: 3px; border-color: #ddd; background: #fff; }
.seg { height: 100%; min-width: 0; overflow: hidden; white-space: nowrap; font-size: 12px; color: #fff; padding: 0 4px; display: flex; align-items: center; border-right: 1px solid rgba(255,255,255,.6); }
.seg[data-kind="committed"] { background: var(--committed); }
.seg[data-kind="evicting"] { background: repeating-linear-gradient(45deg, var(--evicting), var(--evicting) 6px, #d9736f 6px, #d9736f 12px); }
.seg[data-kind="held"] { background: repeating-linear-gradient(45deg, var(--held), var(--held) 6px, #f0c060 6px, #f0c060 12px); color: #332; }
.seg[data-kind="sleeping"] { background: repeating-linear-gradient(90deg, var(--committed), var(--committed) 4px, #9fb7d9 4px, #9fb7d9 8px); }
.seg[data-kind="free"] { background: var(--free); color: #335; }
.seg[data-kind="reserve"] { background: var(--reserve); }
.seg[data-kind="used"] { background: var(--smi); padding: 0; }
.figures { display: flex; flex-wrap: wrap; gap: 4px 18px; margin: 6px 0 0; padding: 0; list-style: none; }
.figures b { font-variant-numeric: tabular-nums; }
.warn { color: #8a1f1b; }
table { border-collapse: collapse; background: #fff; width: 100%; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid #eee; vertical-align: top; }
th { background: #f0f0f0; font-weight: 600; }
td.at { white-space: nowrap; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
tr[data-phase="stopped"] { color: #888; }
#token-form { background: #fff8e1; border: 1px solid #e0c060; padding: 10px 12px; border-radius: 6px; margin: 12px 0; }
#token-form[hidden] { display: none; }
`;

export const PAGE_SCRIPT = `
'use strict';
const POLL_MS = 1000;
const STALE_MS = 3500;
const REQUEST_TIMEOUT_MS = 15000;
const TOKEN_KEY = 'gpures-api-token';
let lastOkAt = 0;
let lastError = '';
let locked = false;
let timer;

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'text') e.textContent = String(v);
    else e.setAttribute(k, String(v));
  }
  for (const c of children.flat()) if (c !== undefined && c !== null) e.append(typeof c === 'string' ? document.createTextNode(c) : c);
  return e;
}
const mib = (n) => n + ' MiB';
/** Only http(s) links: a link is built from GPURES_TEMPORAL_UI_URL, never from a javascript: URL. */
function link(href, text) {
  return href && /^https?:[/][/]/.test(href) ? el('a', { href, target: '_blank', rel: 'noopener noreferrer', text }) : el('span', { text });
}
function clock(iso) {
  if (!iso) return '';
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toLocaleTimeString(undefined, { hour12: false });
}
function ago(ms) {
  const s = Math.max(0, Math.round(ms / 1000));
  return s < 120 ? s + ' s' : Math.round(s / 60) + ' min';
}
const COMMITTED = ['admitted', 'running', 'stopping', 'evicting'];
/** A holder is '<workflow id>/<run id>': the workflow id is everything before the last slash. */
function holderId(holder) {
  const i = holder.lastIndexOf('/');
  return i > 0 ? holder.slice(0, i) : holder;
}

function segment(kind, mibs, scale, label, title, extra) {
  const s = el('div', Object.assign({ class: 'seg', 'data-kind': kind, 'data-mib': mibs, title }, extra || {}), label);
  s.style.width = (scale > 0 ? (100 * mibs) / scale : 0) + '%';
  if (mibs === 0) s.style.display = 'none';
  return s;
}

function gpuCard(l, links) {
  const freeShown = Math.max(0, l.freeMib);
  const over = l.freeMib < 0 ? -l.freeMib : 0;
  const scale = Math.max(l.capacityMib, l.committedMib + l.heldMib + l.reserveMib, l.physical ? l.physical.usedMib : 0);
  const bar = el('div', { class: 'bar', role: 'img', 'aria-label': 'gpu ' + l.gpuRole + ' ledger' });
  for (const r of l.reservations) {
    if (COMMITTED.includes(r.phase)) {
      const evicting = r.phase === 'evicting';
      const title = r.serve + ' ' + mib(r.vramMib) + ' (' + r.class + ', ' + r.phase + (evicting && r.evictedFor ? ' for ' + r.evictedFor : '') + ')';
      const label = evicting && r.evictedFor ? r.serve + ' (evicting for ' + r.evictedFor + ')' : r.serve;
      bar.append(segment(evicting ? 'evicting' : 'committed', r.vramMib, scale, label, title, { 'data-serve': r.serve }));
    } else if (r.phase === 'sleeping') {
      // Asleep, its process keeps the residual on the GPU: that much stays committed.
      const held = r.sleep ? r.sleep.residualMib : 0;
      const title = r.serve + ' ' + mib(held) + ' held asleep (level ' + (r.sleptAtLevel || (r.sleep && r.sleep.level)) + (r.evictedFor ? ', for ' + r.evictedFor : '') + ')';
      bar.append(segment('sleeping', held, scale, r.serve + ' (asleep)', title, { 'data-serve': r.serve }));
    } else if (r.phase === 'pending') {
      const title = 'held for ' + r.serve + ' by ' + holderId(r.holder) + ' while its victims drain';
      bar.append(segment('held', r.vramMib, scale, 'held: ' + r.serve, title, { 'data-serve': r.serve }));
    }
  }
  bar.append(segment('free', freeShown, scale, freeShown > 0 ? 'free' : '', 'free ' + mib(freeShown)));
  bar.append(segment('reserve', l.reserveMib, scale, 'reserve', 'reserve ' + mib(l.reserveMib) + ' (display, sidecars: never reserved)'));

  const holders = l.reservations.filter((r) => r.phase === 'pending');
  const heldFor = holders.length
    ? el('span', {}, ' (for ', holders.flatMap((r, i) => [i ? ', ' : '', r.serve + ' by ', link(links[r.holder], holderId(r.holder))]), ')')
    : null;
  const figures = el(
    'ul',
    { class: 'figures' },
    el('li', {}, 'capacity ', el('b', { 'data-figure': 'capacity', 'data-mib': l.capacityMib, text: mib(l.capacityMib) })),
    el('li', {}, 'committed ', el('b', { 'data-figure': 'committed', 'data-mib': l.committedMib, text: mib(l.committedMib) })),
    el('li', {}, 'held ', el('b', { 'data-figure': 'held', 'data-mib': l.heldMib, text: mib(l.heldMib) }), heldFor),
    // The ledger's own words (the API's, as \`gpures ledger\` prints them): never a negative free.
    el('li', { class: over ? 'warn' : null, 'data-figure': 'free', 'data-mib': freeShown, text: l.freeText }),
    el('li', {}, 'reserve ', el('b', { 'data-figure': 'reserve', 'data-mib': l.reserveMib, text: mib(l.reserveMib) })),
  );
  const card = el('section', { class: 'gpu', 'data-gpu-role': l.gpuRole }, el('h3', {}, 'gpu_role ' + l.gpuRole + ' ', el('small', { text: l.gpuUuid })));
  if (l.reconciling) card.append(el('p', { class: 'warn', text: 'reconciling with the running containers: these figures are not the truth yet' }));
  if (l.lostRunNote) card.append(el('p', { class: 'warn', 'data-note': 'lost-run-unread', text: l.lostRunNote }));
  if (l.startSlotNote) card.append(el('p', { 'data-note': 'start-slot', text: l.startSlotNote }));
  card.append(bar);
  if (l.physical) {
    const p = l.physical;
    // From this page's server (the ledger view); one before this version sent no inFlux.
    const flux = Boolean(p.inFlux && p.inFlux.length);
    const smi = el('div', { class: 'smi', title: 'nvidia-smi used ' + mib(p.usedMib) + ' of ' + mib(p.totalMib) });
    smi.append(segment('used', p.usedMib, scale, '', 'nvidia-smi used ' + mib(p.usedMib)));
    card.append(smi);
    figures.append(
      el(
        'li',
        {},
        'nvidia-smi used ',
        el('b', { 'data-figure': 'nvidia-smi-used', 'data-mib': p.usedMib, text: mib(p.usedMib) }),
        ' of ' + mib(p.totalMib) + '; non-ledger draw ',
        // A serve starting, stopping or being evicted holds part of its reservation now: the draw is a range, as gpures ledger says it.
        flux ? el('b', { 'data-figure': 'non-ledger-draw-least', 'data-mib': p.nonLedgerDrawMinMib, text: mib(Math.max(0, p.nonLedgerDrawMinMib)) }) : null,
        flux ? ' to ' : null,
        el('b', { 'data-figure': 'non-ledger-draw', 'data-mib': p.nonLedgerDrawMib, text: mib(flux ? Math.max(0, p.nonLedgerDrawMib) : p.nonLedgerDrawMib) }),
        flux
          ? el('span', {
              class: 'muted',
              text: ' (up to ' + mib(p.fluxShareMib) + ' of it ' + p.inFlux.map((f) => f.serve + ' ' + f.phase).join(', ') + ')',
            })
          : null,
        p.optimistic
          ? el('span', { class: 'warn', text: ' exceeds the reserve' + (flux ? ' even at its least' : '') + ': the free figure is optimistic' })
          : null,
      ),
    );
  } else {
    figures.append(el('li', { class: 'muted', 'data-figure': 'nvidia-smi-used', text: 'nvidia-smi: no reading' }));
  }
  card.append(figures);
  return card;
}

function noLedgerCard(g) {
  return el(
    'section',
    { class: 'gpu', 'data-gpu-role': g.gpuRole, 'data-no-ledger': 'true' },
    el('h3', {}, 'gpu_role ' + g.gpuRole + ' ', el('small', { text: g.gpuUuid })),
    el('p', { class: 'muted', text: 'no ledger running for this GPU (it starts with the first serve brought up on it)' }),
  );
}

function forWhom(r, links) {
  if (r.phase === 'pending') return el('span', {}, 'waiting for victims; held by ', link(links[r.holder], holderId(r.holder)));
  const why = { evicting: 'evicting for ', sleeping: 'asleep for ' }[r.phase] || 'evicted for ';
  if (r.evictedFor) return el('span', {}, why + r.evictedFor + (r.evictedBy ? ' by ' : ''), r.evictedBy ? link(links[r.evictedBy], holderId(r.evictedBy)) : null);
  return el('span', {}, 'held by ', link(links[r.holder], holderId(r.holder)));
}

function servesTable(data) {
  const rows = [];
  const seen = new Set();
  for (const l of data.ledgers) {
    for (const r of l.reservations) {
      seen.add(r.serve);
      const declared = data.serves.find((s) => s.name === r.serve);
      const lease = (l.leases || []).find((x) => x.serve === r.serve);
      rows.push(
        el(
          'tr',
          { 'data-serve': r.serve, 'data-phase': r.phase },
          el('td', { text: r.serve }),
          el('td', { text: l.gpuRole }),
          el('td', { 'data-col': 'class', text: r.class }),
          el('td', { text: declared && declared.routerTier ? declared.routerTier : '' }),
          el('td', { class: 'num', 'data-col': 'vram', text: mib(r.vramMib) }),
          el('td', { 'data-col': 'phase', text: r.phase }),
          el('td', {}, forWhom(r, data.links), lease ? el('div', { class: 'muted', text: lease.text }) : null),
        ),
      );
    }
  }
  for (const s of data.serves) {
    if (seen.has(s.name)) continue;
    rows.push(
      el(
        'tr',
        { 'data-serve': s.name, 'data-phase': 'stopped' },
        el('td', { text: s.name }),
        el('td', { text: s.gpuRole }),
        el('td', { 'data-col': 'class', text: s.class }),
        el('td', { text: s.routerTier || '' }),
        el('td', { class: 'num', 'data-col': 'vram', text: mib(s.vramMib) }),
        el('td', { 'data-col': 'phase', text: 'stopped' }),
        el('td', {}),
      ),
    );
  }
  return el(
    'table',
    { id: 'serves' },
    el('tr', {}, ['serve', 'gpu_role', 'class', 'router tier', 'vram', 'phase', 'held by / lease'].map((h) => el('th', { text: h }))),
    rows,
  );
}

function operationsTable(data) {
  if (data.operations.length === 0) return el('p', { class: 'muted', id: 'operations', text: 'no operation running' });
  return el(
    'table',
    { id: 'operations' },
    el('tr', {}, ['operation', 'serve', 'workflow', 'running for'].map((h) => el('th', { text: h }))),
    data.operations.map((o) =>
      el(
        'tr',
        { 'data-workflow-id': o.workflowId },
        el('td', { text: o.workflowType }),
        el('td', { text: o.serve }),
        el('td', {}, link(o.url, o.workflowId)),
        el('td', { title: o.since, text: ago(Date.parse(data.readAt) - Date.parse(o.since)) }),
      ),
    ),
  );
}

function decisionsTable(data) {
  if (data.decisions.length === 0) return el('p', { class: 'muted', id: 'decisions', text: 'no decision in the ledgers\\' current runs' });
  return el(
    'table',
    { id: 'decisions' },
    el('tr', {}, ['at', 'gpu_role', 'update', 'decision'].map((h) => el('th', { text: h }))),
    data.decisions.map((d) => el('tr', {}, el('td', { class: 'at', title: d.at || '', text: clock(d.at) }), el('td', { text: d.gpuRole }), el('td', { text: d.update }), el('td', { text: d.summary }))),
  );
}

function render(data) {
  document.title = 'gpures ledger: ' + data.node;
  document.getElementById('node').textContent = 'node ' + data.node;
  const main = document.getElementById('main');
  const smi = data.nvidiaSmiError ? el('p', { class: 'muted', text: 'nvidia-smi: ' + data.nvidiaSmiError }) : null;
  const parts = [
    el('h2', { text: 'GPUs' }),
    smi,
    data.ledgers.map((l) => gpuCard(l, data.links)),
    (data.noLedger || []).map(noLedgerCard),
    el('h2', { text: 'Serves' }),
    servesTable(data),
    el('h2', { text: 'Operations running now' }),
    operationsTable(data),
    el('h2', { text: 'Last decisions of the ledgers' }),
    decisionsTable(data),
  ];
  main.replaceChildren(...parts.flat().filter((p) => p !== null));
  document.getElementById('read-at').textContent = 'read ' + clock(data.readAt);
}

function setStatus() {
  const status = document.getElementById('status');
  let state;
  let text;
  if (locked) {
    state = 'locked';
    text = 'token needed';
  } else if (lastOkAt === 0) {
    state = lastError ? 'unreachable' : 'loading';
    text = lastError ? 'unreachable: ' + lastError : 'loading';
  } else if (Date.now() - lastOkAt > STALE_MS) {
    state = 'stale';
    text = 'stale: last update ' + ago(Date.now() - lastOkAt) + ' ago' + (lastError ? ' (' + lastError + ')' : '');
  } else {
    state = 'live';
    text = 'live';
  }
  status.dataset.state = state;
  status.textContent = text;
  document.body.dataset.stale = String(state === 'stale' || state === 'unreachable');
}

function showTokenForm(message) {
  locked = true;
  document.getElementById('main').replaceChildren();
  document.getElementById('token-message').textContent = message;
  document.getElementById('token-form').hidden = false;
}

async function poll() {
  clearTimeout(timer);
  const ctl = new AbortController();
  const abort = setTimeout(() => ctl.abort(), REQUEST_TIMEOUT_MS);
  const token = sessionStorage.getItem(TOKEN_KEY);
  try {
    const res = await fetch('/v1/ledger', { headers: token ? { authorization: 'Bearer ' + token } : {}, signal: ctl.signal, cache: 'no-store' });
    if (res.status === 401) {
      showTokenForm(token ? 'The API refused this token.' : 'This API listens beyond loopback and needs its token: enter GPURES_API_TOKEN.');
      return;
    }
    const body = await res.json();
    if (!res.ok) throw new Error((body && body.error && body.error.message) || 'HTTP ' + res.status);
    locked = false;
    document.getElementById('token-form').hidden = true;
    render(body);
    lastOkAt = Date.now();
    lastError = '';
  } catch (err) {
    lastError = err && err.name === 'AbortError' ? 'no answer within ' + REQUEST_TIMEOUT_MS / 1000 + ' s' : String((err && err.message) || err);
  } finally {
    clearTimeout(abort);
    setStatus();
    if (!locked) timer = setTimeout(poll, POLL_MS);
  }
}

document.getElementById('token-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const input = document.getElementById('token');
  sessionStorage.setItem(TOKEN_KEY, input.value);
  input.value = '';
  locked = false;
  void poll();
});
document.getElementById('forget-token').addEventListener('click', () => {
  sessionStorage.removeItem(TOKEN_KEY);
  void poll();
});
setInterval(setStatus, 500);
void poll();
`;

/** The document; the style and script are inline, each allowed by its hash in the page's Content-Security-Policy. */
export function pageHtml(): string {
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>gpures ledger</title>
<style>${PAGE_STYLE}</style>
</head>
<body data-stale="false">
<header>
<h1>gpures ledger</h1><span id="node"></span>
<span id="status" data-state="loading">loading</span>
<small id="read-at"></small>
<button type="button" id="forget-token">forget token</button>
</header>
<form id="token-form" hidden autocomplete="off">
<p id="token-message"></p>
<label>API token <input id="token" type="password" autocomplete="off" spellcheck="false" required></label>
<button type="submit">use for this tab</button>
<small>kept in this tab's sessionStorage and sent as a bearer header; never put in a URL</small>
</form>
<main id="main"></main>
<script>${PAGE_SCRIPT}</script>
</body>
</html>
`;
}
