// The operator's sentences: what each step of each operation says when it completes. The
// workflows record them (the progress query, the result, the failure's details) and the audit
// report reads the same facts back from history, so both word a fact the same way. Pure
// functions of the facts; changing one changes what operators and tests read.

interface Drain {
  drained: boolean;
  waitedMs: number;
  routerInFlightAtStart: number;
  routerInFlightAtEnd: number;
  vllmRunningAtEnd: number | null;
}

/** Admission, the first step of every way up. */
export const admission = {
  admitted: (vramMib: number, freeAfterMib: number, restoring = false) =>
    `admitted ${vramMib} MiB${restoring ? ' (restoring an evicted serve)' : ''}, free after ${freeAfterMib} MiB`,
  /** A bring-up's denial: it never evicts. */
  overBudget: (shortfallMib: number) => `denied: over budget by ${shortfallMib} MiB`,
  /** An acquisition's denial, with what eviction could or could not do about it. */
  short: (shortfallMib: number, hint: string) => `denied: short by ${shortfallMib} MiB${hint}`,
  evictionHint: (gpuRole: string, evictableMib: number | undefined, evict: boolean) =>
    evictableMib !== undefined ? `; evictable serves on '${gpuRole}' hold only ${evictableMib} MiB` : evict ? '' : ' (add --evict to evict evictable serves)',
  plan: (victims: string[], reason: string) => `victims ${victims.join(', ')}: ${reason}`,
  alreadyRunning: 'already running',
};

/** start → health → identity → measure → readmit → running. */
export const start = {
  started: (c: { containerName: string; created: boolean; gpuPinned: boolean }, gpuUuid: string) =>
    `container ${c.containerName} ${c.created ? 'created' : 'already running'}${c.gpuPinned ? `, pinned to ${gpuUuid}` : ''}`,
  healthy: (api: string, h: { url: string; probes: number }) =>
    api === 'none' ? `${h.url} stayed running (api none: no HTTP to probe)` : `200 from ${h.url} after ${h.probes} probes`,
  identity: (api: string, servedModelName: string) =>
    api === 'openai' ? `observed '${servedModelName}'` : `not checked: an api ${api} serve reports no model`,
  readmit: (tier: string, r: { action: string; observedModel?: string }) =>
    r.action === 'readmitted'
      ? `router readmitted tier ${tier}: health and identity passed (observed '${r.observedModel ?? '?'}')`
      : r.action === 'already-active'
        ? `tier ${tier} already in rotation`
        : 'no router configured on this worker',
  running: 'reservation marked running',
};

/** Taking a tier out and a serve down: an eviction's victim and a bring-down say the same. */
export const eviction = {
  preflight: (p: { image: string; gpu?: { uuid: string; usedMib: number; totalMib: number } | null; tiers: { tier: string; serve: string }[] }) =>
    `image ${p.image} present, ${p.gpu ? `nvidia-smi reads ${p.gpu.uuid} (${p.gpu.usedMib} of ${p.gpu.totalMib} MiB used)` : 'no victim running (no VRAM to confirm)'}` +
    p.tiers.map((t) => `, tier ${t.tier} can readmit ${t.serve}`).join(''),
  quiesced: (tier: string, inFlight: number) => `tier ${tier} quiesced with ${inFlight} in flight`,
  /** What a drain that timed out left behind. */
  stillInFlight: (d: Drain) =>
    `${d.routerInFlightAtEnd} in flight at the router${d.vllmRunningAtEnd !== null ? `, ${d.vllmRunningAtEnd} running in vLLM` : ''}`,
  drained: (d: Drain) => `drained after ${d.waitedMs} ms (${d.routerInFlightAtStart} in flight at start)`,
  forced: (d: Drain, timeoutS: number) => `not drained within ${timeoutS} s (${eviction.stillInFlight(d)}); stopping anyway (--force)`,
  drainTimeout: (victim: string, d: Drain, timeoutS: number) => `${victim} did not drain within ${timeoutS} s (${eviction.stillInFlight(d)})`,
  stopped: (s: { containerName: string; stop: string; remove: string }) => `container ${s.containerName}: ${s.stop}, ${s.remove}`,
  vramBack: (v: { releasedMib: number; usedBeforeMib: number; usedAfterMib: number }, gpuUuid: string) =>
    `nvidia-smi: ${v.releasedMib} MiB back on ${gpuUuid} (used ${v.usedBeforeMib} → ${v.usedAfterMib} MiB)`,
  notRunning: 'container was not running: its VRAM counts as released',
  victimsDown: (stopped: string[]) => (stopped.length ? `; victims now down: ${stopped.join(', ')} (restore with gpures serves up ${stopped.join(' ')})` : ''),
};

/** A bring-down's own sentences, where they differ from a victim's. */
export const bringDown = {
  drained: (d: Drain, timeoutS: number) =>
    d.drained ? `drained after ${d.waitedMs} ms` : `not drained within ${timeoutS} s (${d.routerInFlightAtEnd} in flight); stopping anyway`,
  released: (reservedMib: number | undefined, evicted: boolean) =>
    reservedMib !== undefined ? `released ${reservedMib} MiB` : evicted ? 'held no MiB (evicted)' : 'held no reservation',
  cancelReadmitted: (tier: string, serve: string) => `cancelled before the stop: tier ${tier} readmitted, ${serve} still running`,
  cancelReadmitFailed: (tier: string, error: string) => `cancelled before the stop; readmit of tier ${tier} failed: ${error}`,
  noneEvicted: (serve: string) => `no serve was evicted for ${serve}`,
};

/** How an operation that failed or was cancelled reports what it undid. */
export const failure = {
  failed: (operation: string, step: string, message: string, compensated: string[], extra = '') =>
    `${operation} failed at ${step}: ${message}; compensated: ${compensated.join(', ') || 'nothing'}${extra}`,
  cancelled: (operation: string, step: string, compensated: string[], extra = '') =>
    `${operation} cancelled at ${step}; compensated: ${compensated.join(', ') || 'nothing'}${extra}`,
};
