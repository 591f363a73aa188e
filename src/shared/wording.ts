// The operator's sentences: what each step of each operation says when it completes. The
// workflows record them (the progress query, the result, the failure's details) and the audit
// report reads the same facts back from history, so both word a fact the same way. Pure
// functions of the facts; changing one changes what operators and tests read.

import type { EvictionOutlook, HeldFor, ResidencyWindow } from '../domain/eviction';
import { parseHolder } from '../domain/fence';
import type { UnverifiedWrite } from '../domain/promotion';
import type { RouterDescription, VramReading } from './contracts';
import type { RollbackReport, VerifyReport } from './promotion';

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
  /**
   * What eviction could or could not do about a denial. With --evict it was tried: why it could
   * not. Without: the --evict that would help, when one would.
   */
  evictionHint: (gpuRole: string, outlook: EvictionOutlook, evict: boolean): string => {
    if (outlook.kind === 'resident') return `; ${outlook.windows.map(admission.resident).join('; ')}`;
    if (outlook.kind === 'would-evict') return evict ? '' : admission.suggestEvict(outlook.victims);
    return `; evictable serves on '${gpuRole}' hold only ${outlook.evictableMib} MiB${admission.held(outlook.held)}`;
  },
  /** A plain bring-up never evicts: its denial names the --evict that would help, or whose eviction holds the MiB. */
  bringUpHint: (outlook: EvictionOutlook): string =>
    outlook.kind === 'would-evict' ? admission.suggestEvict(outlook.victims) : outlook.kind === 'short' ? admission.held(outlook.held) : '',
  /** Read by CLI operators and API callers alike (`evict: true` there). */
  suggestEvict: (victims: readonly { serve: string; vramMib: number }[]) =>
    ` (with --evict it would evict ${victims.map((v) => v.serve).join(', ')}: ${victims.reduce((s, v) => s + v.vramMib, 0)} MiB)`,
  held: (held: readonly HeldFor[]) =>
    held
      .map(
        (h) =>
          `; ${h.vramMib} MiB are held for ${h.serve}` +
          (h.victims.length ? ` while ${h.victims.join(', ')} ${h.victims.length === 1 ? 'is' : 'are'} being evicted for it` : '') +
          ` (${parseHolder(h.holder)?.workflowId ?? h.holder})`,
      )
      .join(''),
  /** Which serve, since when, and when it may be evicted: `vision came back 12 s ago and stays resident for 60 s: it may be evicted in 48 s`. */
  resident: (w: ResidencyWindow) =>
    `${w.serve} ${w.cameUpBy === 'restore' ? 'came back' : 'was acquired'} ${w.runningForS} s ago and stays resident for ${w.minResidencyS} s: ` +
    `it may be evicted in ${w.evictableInS} s`,
  plan: (victims: string[], reason: string) => `victims ${victims.join(', ')}: ${reason}`,
  alreadyRunning: 'already running',
};

/**
 * Whether an operation's steps say it found its serve already running (its admit answered
 * admission.alreadyRunning): it starts nothing. Read here, beside the sentence, so that a caller
 * (the API's `found_running`, which the router acts on) never matches the sentence itself.
 */
export function foundRunning(steps: readonly { step: string; outcome: string }[]): boolean {
  return steps.some((s) => s.step === 'admit' && s.outcome === admission.alreadyRunning);
}

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
        : r.action === 'quiesced-since'
          ? `tier ${tier} quiesced again before the readmit reached the router (an eviction or bring-down of the serve): left quiesced`
          : 'no router configured on this worker',
  notMeasured: (serve: string, why: string) => `${serve}'s VRAM not measured (nvidia-smi: ${why}); it runs on its declared reservation`,
  running: 'reservation marked running',
  roomNotChecked: (gpuUuid: string) => `not checked: ${gpuUuid.startsWith('MIG-') ? migNotRead(gpuUuid) : `no nvidia-smi on this worker reads ${gpuUuid}`}`,
};

/** A victim's VRAM release as confirmVramReleased reports it; `reading` absent in results recorded before it. */
interface VramFigures {
  releasedMib: number;
  usedBeforeMib: number;
  usedAfterMib: number;
  reading?: VramReading;
}

/** Which reading confirmed a release, as a clause; empty for results recorded before readings were told apart. */
export function confirmedBy(r: VramReading | undefined): string {
  if (r?.by === 'own-processes' && r.unread !== undefined)
    return `by its own processes: pid ${r.pids.join(', ')}, not listed in the last reading (${r.unread}), counted as still held`;
  if (r?.by === 'own-processes') return `by its own processes: pid ${r.pids.join(', ')}, ${r.heldBeforeMib} → ${r.heldNowMib} MiB`;
  if (r?.by === 'whole-gpu' && r.why) return `by the whole GPU: its own processes could not say (${r.why})`;
  return '';
}

/**
 * The whole GPU's figures beside a release, in parentheses' words. Confirmed by its own processes,
 * the GPU's `used` is the stream's latest reading, which may predate the stop: printed beside the
 * release it read as nothing given back (`12288 MiB back (used 32324 → 32324 MiB)`), so it is
 * named as not the evidence instead of quoted.
 */
export function usedClause(v: { usedBeforeMib: unknown; usedAfterMib: unknown; reading?: VramReading }, expected = ''): string {
  const exp = expected ? `expected ${expected} MiB` : '';
  if (v.reading?.by === 'own-processes' && v.reading.unread === undefined)
    return `${exp ? `${exp}; ` : ''}the whole GPU's used is not the evidence: its last reading may predate the stop`;
  return `used ${String(v.usedBeforeMib)} → ${String(v.usedAfterMib)} MiB${exp ? `, ${exp}` : ''}`;
}

/** confirmedBy as a clause after a release's figures. */
export function byClause(r: VramReading | undefined): string {
  const by = confirmedBy(r);
  return by ? `, ${by}` : '';
}

/** Taking a tier out and a serve down: an eviction's victim and a bring-down say the same. */
export const eviction = {
  preflight: (p: { image: string; gpu?: { uuid: string; usedMib: number; totalMib: number } | null; tiers: { tier: string; serve: string }[] }) =>
    `image ${p.image} present, ` +
    (p.gpu ? `nvidia-smi reads ${p.gpu.uuid} (${p.gpu.usedMib} of ${p.gpu.totalMib} MiB used)` : 'no victim running (no VRAM to confirm)') +
    p.tiers.map((t) => `, tier ${t.tier} can readmit ${t.serve}`).join(''),
  quiesced: (tier: string, inFlight: number) => `tier ${tier} quiesced with ${inFlight} in flight`,
  /** Why an acquisition's compensation did not readmit its victim's tier: the router refused over a quiesce made since. */
  leftQuiesced: (tier: string, victim: string) =>
    `tier ${tier} was quiesced again since this run's quiesce (an eviction or a bring-down of ${victim}, or an operator, relies on it), ` +
    'or the router restarted without its state file: left quiesced',
  /** What a drain that timed out left behind. */
  stillInFlight: (d: Drain) =>
    `${d.routerInFlightAtEnd} in flight at the router${d.vllmRunningAtEnd !== null ? `, ${d.vllmRunningAtEnd} running in vLLM` : ''}`,
  drained: (d: Drain) => `drained after ${d.waitedMs} ms (${d.routerInFlightAtStart} in flight at start)`,
  forced: (d: Drain, timeoutS: number) => `not drained within ${timeoutS} s (${eviction.stillInFlight(d)}); stopping anyway (--force)`,
  /** With what the operator can do about it, in the CLI's flags and the API's fields (as suggestEvict). */
  drainTimeout: (victim: string, d: Drain, timeoutS: number) =>
    `${victim} did not drain within ${timeoutS} s (${eviction.stillInFlight(d)}): ` +
    `give it longer with --drain-timeout S (drain_timeout_s), or stop it with its requests in flight with --force (force)`,
  stopped: (s: { containerName: string; stop: string; remove: string; downAfterRefusal?: string }) =>
    (s.stop === 'absent' && s.remove === 'absent'
      ? `container ${s.containerName}: absent, nothing to stop`
      : `container ${s.containerName}: ${s.stop}, ${s.remove}`) + (s.downAfterRefusal ? `; ${s.downAfterRefusal}` : ''),
  vramBack: (v: VramFigures, gpuUuid: string) => `nvidia-smi: ${v.releasedMib} MiB back on ${gpuUuid} (${usedClause(v)})${byClause(v.reading)}`,
  /**
   * The release timeout's failure: what should have come back and is still held, by the reading
   * that was to confirm it. By its own processes the GPU's used is the stream's latest, which may
   * predate the stop: `freshUsed` says it was read at the failure; otherwise it is not called now.
   */
  vramHeld: (victim: string, v: VramFigures & { gpuUuid: string; expectedMib: number }, keepMib: number, afterS: number, freshUsed = true) =>
    `VRAM of ${victim} not released on GPU ${v.gpuUuid}: ` +
    (v.reading?.by === 'own-processes'
      ? `${Math.max(0, v.reading.heldNowMib - keepMib)} MiB still held by its own processes${keepMib > 0 ? ` above the ${keepMib} MiB it keeps asleep` : ''}`
      : `${v.expectedMib - Math.max(0, v.releasedMib)} MiB still held`) +
    ` after ${afterS} s (${freshUsed ? `used ${v.usedBeforeMib} MiB before the stop, ${v.usedAfterMib} MiB now` : usedClause(v)})${byClause(v.reading)}`,
  notRunning: 'container was not running: its VRAM counts as released',
  victimsDown: (stopped: string[]) => (stopped.length ? `; victims now down: ${stopped.join(', ')} (restore with gpures serves up ${stopped.join(' ')})` : ''),
};

/** Eviction by sleeping and restore by waking (vLLM's sleep mode). */
export const sleeping = {
  slept: (r: { level: number; alreadyAsleep: boolean; waitedMs: number }) =>
    r.alreadyAsleep ? `already asleep at level ${r.level}` : `asleep at level ${r.level} after ${r.waitedMs} ms`,
  residualAbove: (serve: string, seenMib: number, declaredMib: number) =>
    `${serve} keeps ${seenMib} MiB on the GPU asleep, above its sleep_residual_mib of ${declaredMib}: raise the declaration`,
  fallBack: (serve: string, why: string) => `sleep of ${serve} gave up (${why}): stopping it instead`,
  notFreed: (v: { releasedMib: number; expectedMib: number; usedBeforeMib: number; usedAfterMib: number }) =>
    `freed ${v.releasedMib} of ${v.expectedMib} MiB (used ${v.usedBeforeMib} → ${v.usedAfterMib} MiB)`,
  woke: (r: { level: number; alreadyAwake: boolean; waitedMs: number }) =>
    r.alreadyAwake ? 'already awake' : `awake from level ${r.level} after ${r.waitedMs} ms`,
  coldRestart: (serve: string, why: string) => `wake of ${serve} failed (${why}): cold restart`,
  notAsleep: (serve: string, status: string) => `${serve} is recorded asleep but its container is ${status}: cold start`,
};

/** A bring-down's own sentences, where they differ from a victim's. */
export const bringDown = {
  drained: (d: Drain, timeoutS: number) =>
    d.drained ? `drained after ${d.waitedMs} ms` : `not drained within ${timeoutS} s (${d.routerInFlightAtEnd} in flight); stopping anyway`,
  released: (reservedMib: number | undefined, evicted: boolean) =>
    reservedMib !== undefined ? `released ${reservedMib} MiB` : evicted ? 'held no MiB (evicted)' : 'held no reservation',
  cancelReadmitted: (tier: string, serve: string) => `cancelled before the stop: tier ${tier} readmitted, ${serve} still running`,
  cancelLeftQuiesced: (tier: string, serve: string) =>
    `cancelled before the stop; tier ${tier} was quiesced again since this run's quiesce (an eviction or a bring-down of ${serve} relies on it), or the router restarted without its state file: left quiesced`,
  cancelReadmitFailed: (tier: string, error: string) => `cancelled before the stop; readmit of tier ${tier} failed: ${error}`,
  noneEvicted: (serve: string) => `no serve was evicted for ${serve}`,
  /**
   * A victim that an operation this bring-down ended (cancelled, or took over) had stopped or put
   * to sleep: it gave back its own MiB, not the victim, which stays set aside unless restored here.
   */
  victimLeft: (serve: string, asleep: boolean, restored: boolean) =>
    `${serve}, which it had ${asleep ? 'put to sleep' : 'stopped'}, ` +
    (restored
      ? 'runs again (restored)'
      : asleep
        ? `stays asleep (\`gpures serves up ${serve}\` wakes it)`
        : `stays evicted (\`gpures serves up ${serve}\` brings it back)`),
  /** A set-aside serve's tier, quiesced by its eviction, told why it is down now. */
  toldWhy: (tier: string, reason: string) => `tier ${tier} (quiesced by its eviction) now says why: ${reason}`,
  whyNotTold: (tier: string, error: string) => `tier ${tier} stays quiesced as its eviction left it (retry later), the router not told why: ${error}`,
  cancelAfterStop: (restore: boolean) =>
    `cancel asked after the stop: not taken, the stop${restore ? ' and the restore' : ''} seen through (a cancel stops a bring-down only before its stop)`,
};

/** What a run's compensations did not undo, and why: `; not undone: release reservation (…)`. */
const notUndone = (failed: { name: string; why: string }[]) => (failed.length ? `; not undone: ${failed.map((f) => `${f.name} (${f.why})`).join('; ')}` : '');

/** How an operation that failed or was cancelled reports what it undid. */
export const failure = {
  failed: (operation: string, step: string, message: string, compensated: string[], extra = '', failed: { name: string; why: string }[] = []) =>
    `${operation} failed at ${step}: ${message}; compensated: ${compensated.join(', ') || 'nothing'}${notUndone(failed)}${extra}`,
  cancelled: (operation: string, step: string, compensated: string[], extra = '', failed: { name: string; why: string }[] = []) =>
    `${operation} cancelled at ${step}; compensated: ${compensated.join(', ') || 'nothing'}${notUndone(failed)}${extra}`,
  /**
   * An acquisition abandoned for the router: its held requests had all gone before any victim was
   * stopped or put to sleep and before the serve's start. The victims named stay running unless the
   * compensations say otherwise.
   */
  abandoned: (operation: string, step: string, victims: string[], compensated: string[], failed: { name: string; why: string }[] = []) =>
    `${operation} abandoned at ${step}: the router's held requests had all gone before any victim was stopped or the serve started` +
    `${victims.length ? `; ${victims.join(', ')} left running` : ''}; compensated: ${compensated.join(', ') || 'nothing'}${notUndone(failed)}`,
  /** A compensation that found another run's container under the serve's name and changed nothing. */
  leftAlone: (compensation: string, holder: string) => `${compensation}: left alone, the container under the name is ${holder}'s`,
  /** A give-back held back because the serve's container still runs; `removalFailed`: why its removal failed, when it did. */
  kept: (serve: string, container: string, removalFailed?: string) =>
    `${serve}'s MiB stay reserved: its container ${container} still runs${removalFailed ? ` (its removal failed: ${removalFailed})` : ''}; ` +
    `\`gpures serves down ${serve}\` takes the hold over, stops it and gives them back`,
};

/** A bring-down taking its serve in the ledger: who held it, and what was done about them. */
interface Holder {
  holder: string;
  phase: string;
  evictedFor?: string;
}

/** Who holds a serve now, for a run that finds it no longer its own. */
export function heldNow(phase: string | undefined, holder: string | undefined): string {
  return phase === undefined ? 'not in the ledger' : `${phase === 'admitted' ? 'starting' : phase}, held by ${holder ?? '?'}`;
}

/**
 * What a caller is told when the serve's lease is expiring: the lease's answer to terms that came
 * too late and the API's serve_going_down for an acquisition that asked none say the same fact.
 */
export const leaseExpiring = (leaseWorkflowId: string, why: string, serve: string) =>
  `${leaseWorkflowId} is expiring (${why}): its bring-down takes ${serve} down as planned, so ${serve} will not stay up; ask again once it is down`;

export const take = {
  taken: (serve: string, from: string, takenOverFrom: string | undefined) =>
    `${serve} held for this bring-down (was ${from}${takenOverFrom ? `, taken over from ${takenOverFrom}, which had ended` : ''})`,
  absent: (serve: string) => `${serve} holds no reservation; held for this bring-down while a stray container is stopped`,
  evicted: (serve: string, evictedFor: string | undefined) => `${serve} was evicted for ${evictedFor ?? '?'}: it stays down, off that serve's restore list`,
  notHeld: (serve: string, by: string, now: { heldBy?: string; phase?: string }) =>
    `${serve} is no longer held running by ${by} (now ${heldNow(now.phase, now.heldBy)}): left alone`,
  takingOver: (op: Holder, closedAs: string | undefined, serve: string, victimsDown: string[], victimsAsleep: string[] = []) =>
    `${op.holder} (${op.phase}) ended ${closedAs ?? ''} without giving ${serve} back: taking it over` +
    (victimsDown.length ? `; its victims ${victimsDown.join(', ')} are down` : '') +
    (victimsAsleep.length ? `; ${victimsAsleep.join(', ')} ${victimsAsleep.length > 1 ? 'sleep' : 'sleeps'}` : ''),
  ending: (op: Holder, serve: string, mode: 'cancel' | 'wait' | 'status') =>
    `${op.holder} holds ${serve} (${op.phase}): ` + (mode === 'cancel' ? 'cancelling it' : mode === 'wait' ? 'waiting for it' : 'asking whether it still runs'),
  ended: (op: Holder, e: { outcome: string; closedAs?: string; waitedMs: number }) =>
    e.outcome === 'cancelled'
      ? `${op.holder} (${op.phase}) cancelled; it ended after ${e.waitedMs} ms`
      : `${op.holder} (${op.phase}) ended ${e.closedAs ?? ''} after ${e.waitedMs} ms`,
  why: (op: Holder, attempts: number) =>
    op.phase === 'evicting'
      ? `it is being evicted for ${op.evictedFor ?? '?'} by ${op.holder}, which stops it unless its drain times out`
      : `${op.holder} holds it (${op.phase}) after ${attempts} attempts to take it`,
  refusal: (serve: string, why: string, ended: string[], cancelHint: string) =>
    `serves down ${serve}: ${why}; ${ended.length ? `ended meanwhile: ${ended.join(', ')}` : 'nothing changed'}. ` +
    `To keep it up instead, cancel that operation: ${cancelHint}`,
  victimReadmitted: (victim: string, tier: string, action: string) => `${victim} still runs: tier ${tier} ${action}`,
  victimLeftQuiesced: (victim: string, tier: string) =>
    `${victim} still runs; tier ${tier} was quiesced again since the take (an eviction or a bring-down of ${victim} relies on it), or the router restarted without its state file: left quiesced`,
  victimReadmitFailed: (victim: string, tier: string, error: string) => `${victim} still runs; readmit of tier ${tier} failed: ${error}`,
};

/** router promote: validate → backup → write → reload → verify, and the rollback's same steps. */
export const promotion = {
  described: (d: RouterDescription, image: string) => {
    const c = d.container;
    const next = d.imageChanged
      ? `is a different image (${short(d.targetImageId)}): the router will be recreated`
      : `is the running image: the router will ${c.running ? 'reload' : 'be recreated (it is not running)'}`;
    return (
      `container ${c.name} runs ${c.image} (${c.running ? 'running' : c.status}, restart count ${c.restartCount}); ` +
      `live ${d.target.configPath} ${d.live.exists ? `has mapping_version '${d.live.mappingVersion ?? '?'}'` : 'is absent'}; ` +
      `${image} ${next}`
    );
  },
  backedUp: (b: { path: string | null; created: boolean; pruned: string[] }, configPath: string) =>
    b.path
      ? `${b.created ? 'saved' : 'already saved by this run:'} ${b.path}${b.pruned.length ? `; ${b.pruned.length} older backup(s) pruned` : ''}`
      : `no live config at ${configPath}: nothing to back up`,
  written: (write: 'written' | 'unchanged', bytes: number, configPath: string) =>
    write === 'written' ? `wrote ${bytes} bytes to ${configPath} (temp file, fsync, rename, fsync dir)` : `${configPath} already holds this config`,
  restored: (outcome: string, configPath: string, backupPath: string | null) =>
    outcome === 'unchanged' ? 'the live config already equals the backup' : `${outcome} ${configPath} from ${backupPath ?? '(none)'}`,
  recreated: (container: string, image: string, id: string) => `recreated container ${container} from ${image} (id ${short(id)})`,
  reloaded: (url: string, mappingVersion: string | null) => `POST ${url}/admin/reload: the router answered mapping_version '${mappingVersion}'`,
  verified: (v: VerifyReport, windowS: number) =>
    `running, restart count flat at ${v.restartCount}, /healthz 200 with mapping_version '${v.mappingVersion ?? '?'}' ${v.streak} times in a row ` +
    `(${v.polls} polls over ${(v.waitedMs / 1000).toFixed(1)} s, window ${windowS} s)`,
  live: (op: string, mappingVersion: string, image: string, reload: string, windowS: number, backupPath: string | null) =>
    `${op}: mapping_version '${mappingVersion}' is live on ${image} (${reload}), verified for ${windowS} s${backupPath ? `; backup ${backupPath}` : ''}`,
  rolledBack: (r: RollbackReport, previousImage: string, backupPath: string | null) =>
    r.ok && r.configKept !== undefined
      ? `rolled back the image only: ${r.image ?? previousImage} recreated and verified healthy on mapping_version '${r.verify?.mappingVersion ?? '?'}' ` +
        `under the live config, which was not restored (${r.configKept}); check that config; backup ${backupPath ?? '(none)'}`
      : r.ok
        ? `rolled back: config ${r.restored === 'unchanged' ? 'already the backup' : r.restored} (${backupPath ?? 'no backup: there was no live file'}), ` +
          `${r.reload === 'recreated' ? `${r.image ?? previousImage} recreated` : 'router reloaded'}, ` +
          `verified on mapping_version '${r.verify?.mappingVersion ?? '?'}'`
        : `ROLLBACK FAILED (${r.error ?? '?'}): the router needs attention; backup ${backupPath ?? '(none)'}`,
  /** Why a promotion will not start from another run's unverified candidate, and the ways out. */
  unverifiedLive: (configPath: string, u: UnverifiedWrite & { backupExists: boolean }) => {
    const h = parseHolder(u.run);
    const who = h ? `workflow ${h.workflowId}, run ${h.runId}` : u.run;
    const before = !u.backupPath
      ? `that run found no live config to back up: put a config you trust at ${configPath} and POST /admin/reload, then promote again`
      : !u.backupExists
        ? `its backup ${u.backupPath} (the config before it) is gone: put a config you trust at ${configPath} and POST /admin/reload, then promote again`
        : `the config before it is its backup ${u.backupPath}: put that back by hand (cp -p it over ${configPath}, then POST /admin/reload) ` +
          `or promote it (\`gpures router promote --config ${u.backupPath}\`), then promote again`;
    return (
      `${configPath} holds the candidate of another promotion (${who}, written ${u.writtenAt}) that was never verified and never rolled back ` +
      `(that run ended mid-way: terminated, timed out or reset); this promotion would back it up as the config to roll back to; ${before}`
    );
  },
};

/** An image id as docker prints it short. */
function short(id: string): string {
  return id.replace(/^sha256:/, '').slice(0, 12);
}

/**
 * The reason a bring-down records when it cancels the operation holding its serve: what the
 * cancelled run's follower prints as who cancelled it ("cancelled by serves down vision"), where
 * the request's identity would name only the worker (pid@host) that ran the bring-down.
 */
export function cancelReason(bringDownWorkflowId: string | undefined): string {
  const serve = /^serves-down\/[^/]+\/(.+)$/.exec(bringDownWorkflowId ?? '')?.[1];
  return serve ? `serves down ${serve}` : `a bring-down (workflow ${bringDownWorkflowId ?? '?'})`;
}

/**
 * Why a MIG instance is never read: nvidia-smi's --query-gpu (the GPU reading, the stream) lists
 * whole GPUs by their GPU-<uuid>; a MIG device (`nvidia-smi -L` lists it under its GPU) is not
 * among them, whatever nvidia-smi is installed. What the operator can do instead.
 */
export function migNotRead(gpuUuid: string): string {
  return (
    `${gpuUuid} is a MIG instance, and nvidia-smi's --query-gpu lists whole GPUs only, so its memory is not read: ` +
    `the ledger admits on the capacity_mib declared for it alone (declare the instance's own memory there), ` +
    `or, with MIG mode off, declare the whole GPU by its GPU-<uuid> (nvidia-smi -L) to have its room read`
  );
}
