// On-demand tiers: a request that finds its tier's serve down (the tier quiesced, or its backend
// refusing connections) waits in the tier's bounded FIFO queue while the router acquires the
// serve through the acquisition API, and goes on once the acquisition's guarded readmit has let
// the tier back. One acquisition per tier at a time, however many requests wait (the API joins a
// running one too: one workflow id). See docs/on-demand.md.
import type { FastifyReply } from 'fastify';
import { findTier } from '../config/router-model';
import type { RouterConfig, RouterTier } from '../config/router-model';
import type { TierMode } from '../shared/contracts';
import { AcquisitionApiError } from './acquisitions';
import type { AcquisitionApi } from './acquisitions';
import { errText } from './errors';
import type { Mutex } from './mutex';
import { guardedReadmit } from './readmit';
import type { TierTable } from './tier-table';

/** Why a request to a tier is answered 503; `code` and `reason` of the error body. */
export type RefusalReason =
  'quiesced' | 'queue_full' | 'wait_timeout' | 'acquisition_denied' | 'acquisition_failed' | 'acquisition_unavailable' | 'readmit_refused';

export interface AcquisitionRef {
  workflowId: string;
  /** The last step the acquisition completed, when it has reported one. */
  step?: string;
}

export interface Refusal {
  tier: string;
  reason: RefusalReason;
  message: string;
  retryAfterS: number;
  acquisition?: AcquisitionRef;
  /**
   * A denial for a victim's minimum residency: when its window ends and an acquisition may evict
   * it. Requests that can wait that long are held for it, not refused.
   */
  windowEndsAtEpochMs?: number;
}

export type HoldOutcome = { ok: true } | { ok: false; refusal: Refusal } | { ok: false; gone: true };

interface Waiter {
  /** When its wait_timeout_s ends. */
  deadlineEpochMs: number;
  settle(outcome: HoldOutcome): void;
}

interface Acquisition {
  startedAtEpochMs: number;
  workflowId?: string;
  step?: string;
  /**
   * The tier was active (its backend down) and this acquisition quiesced it for the guard: the
   * tier's quiesce count just after, so an undo leaves alone a quiesce anyone made since.
   */
  ownQuiesce?: number;
  /**
   * The tier's quiesce count before this round's POST: an eviction or a bring-down of the serve
   * decided after that quiesces the tier after it, and the router's own readmit then refuses.
   */
  quiescesAtPost: number;
  /** Denied until a victim's residency window ends: the next acquisition then, and the denial meanwhile. */
  windowWait?: Refusal & { windowEndsAtEpochMs: number };
  /**
   * The last acquisition found the serve up but going down (its lease already expiring: the
   * lease's bring-down drains and stops it): why, as the acquisition said it. The router waits for
   * it to be down and acquires it again, rather than releasing the queue onto it. Kept through the
   * next acquisition until an answer of it says otherwise (a step that starts the serve afresh),
   * so what the admin state and a wait_timeout say follows the answers, not when they are asked.
   */
  goingDown?: string;
  /** Since when nobody has been held for it (undefined while someone is): abandon_after_s counts from here. */
  emptySince?: number;
  /** The last abandon this router asked of it, and the answer (asked again only while the run has not decided). */
  abandon?: AbandonAsk;
  /** Resolves when the tier turns active. */
  readmitted: Promise<void>;
  wake: () => void;
}

/** An abandon the router asked of its acquisition: what it answered (`asked` while it has not). */
export interface AbandonAsk {
  workflowId: string;
  askedAtEpochMs: number;
  answer: 'asked' | 'abandoned' | 'refused' | 'unanswered';
  /** Why it was refused or went unanswered; where it was abandoned, the step it was at. */
  detail?: string;
  /**
   * Refused or unanswered: the API's reason (`committed`, `joined`, `not_for_router`, `ending`;
   * `admitting`, `late` for now), `unanswered`, or `unknown` from an API older than the field.
   */
  reason?: string;
  /** The how-manyth ask of this acquisition's run (1 the first): the wait before the next doubles with each. */
  attempt: number;
  /** Unanswered, or refused for now (still admitting, or the ask reached the run late): asked again from then while nobody is held. */
  askAgainAtEpochMs?: number;
}

/** Told each abandon as it is asked (answer `asked`) and again once answered: the router's metrics count them. */
export type AbandonListener = (tier: string, ask: Readonly<AbandonAsk>) => void;

/** An acquisition that ended abandoned: nobody wanted it, and nothing is to cool down from. */
interface Abandoned {
  abandoned: string;
}

interface TierDemand {
  /** Insertion order is arrival order: released first come, first served. */
  queue: Set<Waiter>;
  acquisition?: Acquisition;
  /** The last abandon asked for this tier, kept once its acquisition has ended (the admin state shows it). */
  lastAbandon?: AbandonAsk;
  /** A failed acquisition's refusal, repeated without a new acquisition until it expires. */
  cooldown?: { untilEpochMs: number; refusal: Refusal };
}

/**
 * The moments of an on-demand request's closed loop in the router: held in the queue, the tier
 * quiesced by the router for the guard, the acquisition POSTed and its 202 back, the tier active
 * (the acquisition's guarded readmit), the held requests released onto it.
 */
export type OnDemandMark = 'held' | 'quiesced' | 'posted' | 'accepted' | 'active' | 'released';

export interface OnDemandOptions {
  probeTimeoutMs: number;
  /** Between two GETs of a running acquisition. Default 500 ms. */
  pollMs?: number;
  /** The request bytes all on-demand queues together may hold. Default DEFAULT_HELD_BYTES. */
  heldBytesLimit?: number;
  /** Told each mark as it passes, with its tier: bench/router-on-demand.ts times the loop by them. */
  marks?: (tier: string, mark: OnDemandMark) => void;
  /** Where an abandon asked and its answer are said (the router process: its stderr). */
  log?: (line: string) => void;
}

/**
 * What the queues of every on-demand tier together may hold while acquisitions run: each queue
 * is bounded in requests, but a request may be as large as the body limit (64 MiB), and anyone
 * who reaches the router can queue one. 256 MiB: four of the largest, or thousands of chat turns.
 */
export const DEFAULT_HELD_BYTES = 256 * 1024 * 1024;

/** What the admin API shows of a tier's queue. */
export interface DemandState {
  queued: number;
  acquisition: {
    workflowId: string | null;
    step: string | null;
    startedAtEpochMs: number;
    residencyWindowEndsAtEpochMs?: number;
    serveGoingDown?: string;
    /** Nobody is held for it: when the router asks to abandon it (abandon_after_s), unless a request comes first. */
    abandonAtEpochMs?: number;
  } | null;
  /** The last abandon the router asked of this tier's acquisitions, and the answer. */
  abandon: AbandonAsk | null;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, Math.max(0, ms)).unref());

/**
 * Whether a request held until `deadlineEpochMs` can wait out a residency window ending at
 * `endsAt`: only if its deadline leaves room after the window for the acquisition then, as long
 * as the tier's last one took. Held otherwise, it would time out while that acquisition runs,
 * after waiting all its wait_timeout_s, and the acquisition (an eviction) would be made for nobody.
 * A tier never acquired has no figure (nor one whose router has no state file and restarted): its
 * requests are held to the window's end.
 */
function canWaitOut(deadlineEpochMs: number, endsAt: number, lastAcquisitionMs: number | undefined): boolean {
  return deadlineEpochMs >= endsAt + (lastAcquisitionMs ?? 0);
}

/** A residency denial as answered now to a request that cannot wait for its window: Retry-After is what is left of it. */
function denialNow(denial: Refusal, waitTimeoutS: number, lastAcquisitionMs: number | undefined): Refusal {
  const { windowEndsAtEpochMs: endsAt, ...refusal } = denial;
  if (endsAt === undefined) return refusal;
  const leftS = Math.max(1, Math.ceil((endsAt - Date.now()) / 1000));
  const took = lastAcquisitionMs === undefined ? '' : ` and the ${Math.round(lastAcquisitionMs / 1000)} s its last acquisition took`;
  return {
    ...refusal,
    message: `${refusal.message}; this tier holds a request at most ${waitTimeoutS} s (wait_timeout_s), less than the ${leftS} s left of that window${took}`,
    retryAfterS: leftS,
  };
}

/** The first wait before acquiring again a serve that was going down; doubled each time, up to GOING_DOWN_RECHECK_MAX_MS. */
export const GOING_DOWN_RECHECK_MS = 1_000;
export const GOING_DOWN_RECHECK_MAX_MS = 5_000;

/** An acquisition that found the serve up under a lease already expiring: it is not to be routed to. */
interface GoingDown {
  goingDown: string;
}

/**
 * How long after an abandon the run did not decide (unanswered, or refused for now) the router
 * asks again, while nobody is held: 1 s, doubled with each ask of the same run, up to 10 s. An
 * unanswered ask (its worker down) is an Update the run takes once the worker is back, an event
 * pair in its history each: a fixed 1 s would pile them up without bound.
 */
export const ABANDON_REASK_MS = 1_000;
export const ABANDON_REASK_MAX_MS = 10_000;

/** The wait before asking again after the `attempt`th ask went undecided. */
export function abandonReaskMs(attempt: number): number {
  return Math.min(ABANDON_REASK_MAX_MS, ABANDON_REASK_MS * 2 ** Math.min(Math.max(0, attempt - 1), 10));
}

/** How long a running acquisition's status may go unanswered before the router stops following it. */
export const STATUS_UNANSWERED_MS = 120_000;

/** A 4xx other than a timeout or a rate limit: the API will not answer for this acquisition, however often asked. */
function answersNever(err: AcquisitionApiError): boolean {
  const s = err.httpStatus;
  return s !== undefined && s >= 400 && s < 500 && s !== 408 && s !== 429;
}

export class OnDemand {
  private readonly tiers = new Map<string, TierDemand>();
  private readonly pollMs: number;
  private readonly heldBytesLimit: number;
  /** The request bytes held in every queue now. */
  private heldBytes = 0;
  private readonly abandonListeners: AbandonListener[] = [];

  constructor(
    private readonly table: TierTable,
    private readonly api: AcquisitionApi | undefined,
    private readonly changes: Mutex,
    private readonly opts: OnDemandOptions,
  ) {
    this.pollMs = opts.pollMs ?? 500;
    this.heldBytesLimit = opts.heldBytesLimit ?? DEFAULT_HELD_BYTES;
    table.onModeChange((name, mode) => {
      const a = mode === 'active' ? this.tiers.get(name)?.acquisition : undefined;
      if (!a) return;
      this.mark(name, 'active');
      a.wake();
    });
  }

  private mark(tier: string, mark: OnDemandMark): void {
    this.opts.marks?.(tier, mark);
  }

  /** Calls `listener` with each abandon asked, and again with its answer. */
  onAbandon(listener: AbandonListener): void {
    this.abandonListeners.push(listener);
  }

  private toldAbandon(tier: string, ask: AbandonAsk): void {
    for (const l of this.abandonListeners) l(tier, ask);
  }

  private get config(): RouterConfig {
    return this.table.config;
  }

  private demand(name: string): TierDemand {
    let d = this.tiers.get(name);
    if (!d) {
      d = { queue: new Set() };
      this.tiers.set(name, d);
    }
    return d;
  }

  /** Whether on-demand tiers can acquire (the router has the acquisition API's URL and token). */
  get enabled(): boolean {
    return this.api !== undefined;
  }

  /** A recent failure's refusal, with the seconds left of it, while no acquisition runs. */
  cooldown(name: string): Refusal | undefined {
    const d = this.tiers.get(name);
    const now = Date.now();
    if (!d || d.acquisition || !d.cooldown || d.cooldown.untilEpochMs <= now) return undefined;
    return { ...d.cooldown.refusal, retryAfterS: Math.ceil((d.cooldown.untilEpochMs - now) / 1000) };
  }

  state(name: string): DemandState {
    const d = this.tiers.get(name);
    const a = d?.acquisition;
    return {
      queued: d?.queue.size ?? 0,
      acquisition: a
        ? {
            workflowId: a.workflowId ?? null,
            step: a.step ?? null,
            startedAtEpochMs: a.startedAtEpochMs,
            ...(a.windowWait ? { residencyWindowEndsAtEpochMs: a.windowWait.windowEndsAtEpochMs } : {}),
            ...(a.goingDown ? { serveGoingDown: a.goingDown } : {}),
            ...(this.abandonAt(name, a) !== undefined ? { abandonAtEpochMs: this.abandonAt(name, a) } : {}),
          }
        : null,
      abandon: a?.abandon ?? d?.lastAbandon ?? null,
    };
  }

  /** The acquisition a refusal names while one runs. */
  private ref(d: TierDemand): AcquisitionRef | undefined {
    const a = d.acquisition;
    return a?.workflowId ? { workflowId: a.workflowId, ...(a.step ? { step: a.step } : {}) } : undefined;
  }

  /**
   * Holds the request until the tier is active again (`ok`), refuses it, or reports that the
   * client went away (it has then left the queue). Starts the tier's acquisition if none runs.
   */
  hold(tier: RouterTier, reply: FastifyReply, bytes: number): Promise<HoldOutcome> {
    const policy = tier.onDemand;
    if (!policy || !this.api) throw new Error(`tier '${tier.name}' is not on demand`);
    const d = this.demand(tier.name);
    const cooling = this.cooldown(tier.name);
    if (cooling) return Promise.resolve({ ok: false, refusal: cooling });
    const deadlineEpochMs = Date.now() + policy.waitTimeoutS * 1000;
    const waiting = d.acquisition?.windowWait;
    const lastMs = this.lastAcquisitionMs(tier);
    if (waiting && !canWaitOut(deadlineEpochMs, waiting.windowEndsAtEpochMs, lastMs)) {
      return Promise.resolve({ ok: false, refusal: denialNow(waiting, policy.waitTimeoutS, lastMs) });
    }
    const full = (message: string): Promise<HoldOutcome> => Promise.resolve({ ok: false, refusal: this.refusal(tier, d, 'queue_full', message) });
    if (d.queue.size >= policy.queueSize) {
      return full(`tier '${tier.name}' is being acquired and its queue is full (${policy.queueSize} requests waiting); retry later`);
    }
    if (this.heldBytes + bytes > this.heldBytesLimit) {
      const mib = (n: number) => (n / 1024 / 1024).toFixed(2);
      return full(
        `tier '${tier.name}' would hold this request (${mib(bytes)} MiB) while its serve is acquired, past the ` +
          `${mib(this.heldBytesLimit)} MiB of waiting requests the router holds at most (${mib(this.heldBytes)} MiB now); retry later`,
      );
    }
    return new Promise<HoldOutcome>((resolve) => {
      let done = false;
      const waiter: Waiter = {
        deadlineEpochMs,
        settle: (outcome) => {
          if (done) return;
          done = true;
          clearTimeout(timer);
          reply.raw.off('close', onGone);
          d.queue.delete(waiter);
          // The last one gone: abandon_after_s counts from now.
          if (d.queue.size === 0 && d.acquisition) d.acquisition.emptySince = Date.now();
          this.heldBytes -= bytes;
          resolve(outcome);
        },
      };
      const timer = setTimeout(() => {
        const ref = this.ref(d);
        const goingDown = d.acquisition?.goingDown;
        waiter.settle({
          ok: false,
          refusal: {
            tier: tier.name,
            reason: 'wait_timeout',
            message:
              `tier '${tier.name}' was not back within its wait_timeout_s of ${policy.waitTimeoutS} s` +
              (goingDown
                ? `; serve '${policy.serve}' was up but going down (${goingDown}): the router waits for it to be down to acquire it again`
                : ref
                  ? `; acquisition ${ref.workflowId} is still under way${ref.step ? ` (last step: ${ref.step})` : ''}`
                  : ''),
            retryAfterS: this.config.retryAfterS,
            ...(ref ? { acquisition: ref } : {}),
          },
        });
      }, policy.waitTimeoutS * 1000);
      const onGone = () => waiter.settle({ ok: false, gone: true });
      reply.raw.once('close', onGone);
      d.queue.add(waiter);
      this.heldBytes += bytes;
      this.mark(tier.name, 'held');
      // Someone is held again: an abandon pending is off.
      if (d.acquisition) d.acquisition.emptySince = undefined;
      if (!d.acquisition) void this.run(tier, d);
    });
  }

  /** One acquisition: its outcome settles every request queued meanwhile. */
  private async run(tier: RouterTier, d: TierDemand): Promise<void> {
    let wake = () => undefined as void;
    const readmitted = new Promise<void>((r) => (wake = r));
    const a: Acquisition = { startedAtEpochMs: Date.now(), quiescesAtPost: 0, readmitted, wake };
    d.acquisition = a;
    d.cooldown = undefined;
    let refusal: Refusal | undefined;
    let cool = true;
    let abandoned = false;
    for (let downChecks = 0; ;) {
      const startedAt = Date.now();
      let end: Refusal | GoingDown | Abandoned | undefined;
      try {
        end = await this.acquire(tier, d, a);
      } catch (err) {
        end = this.refusal(tier, d, 'acquisition_unavailable', `acquiring tier '${tier.name}' failed in the router: ${errText(err)}`);
      }
      if (end && 'abandoned' in end) {
        // A request came after the run decided: it is acquired again, at once.
        if (d.queue.size > 0) continue;
        // Nobody wanted it: no cooldown, and the next request acquires again.
        refusal = this.refusal(tier, d, 'quiesced', end.abandoned);
        cool = false;
        abandoned = true;
        break;
      }
      if (end && 'goingDown' in end) {
        const after = await this.waitOutGoingDown(tier, d, a, end.goingDown, downChecks++);
        if (after === 'acquire') continue;
        // Readmitted meanwhile (a cancelled bring-down gives the tier back), or nobody left to acquire for.
        refusal = after === 'readmitted' ? undefined : this.refusal(tier, d, 'quiesced', `serve '${tier.onDemand?.serve}' went down: ${end.goingDown}`);
        cool = false;
        break;
      }
      a.goingDown = undefined;
      refusal = end;
      if (!refusal) {
        const save = this.table.setLastAcquisition(tier.name, Date.now() - startedAt);
        // Saved in the background, the requests held going on now; a write that fails loses the
        // figure across a restart, not the acquisition.
        void this.changes.run(save).catch(() => undefined);
        break;
      }
      const after = await this.waitOutWindow(tier, d, a, refusal);
      if (after === 'readmitted') refusal = undefined;
      // Its window has passed: nothing to cool down from, though nobody is left to acquire for.
      if (after === 'passed') cool = false;
      if (after !== 'acquire') break;
    }
    if (refusal) {
      if (cool) d.cooldown = { untilEpochMs: Date.now() + refusal.retryAfterS * 1000, refusal };
      // Leave the tier as the acquisition found it: an active tier over a down backend stays active,
      // unless anyone has quiesced it since the router did (an eviction, a bring-down, an operator's
      // drain), who relies on it. Checked inside the admin mutex, so a quiesce queued meanwhile counts.
      const own = a.ownQuiesce;
      if (own !== undefined) {
        await this.changes
          .run(async () => {
            const rt = this.table.runtimeOf(tier.name);
            if (rt.mode === 'quiesced' && rt.quiesces === own) await this.table.setMode(tier.name, 'active');
          })
          .catch(() => undefined);
      }
    }
    d.acquisition = undefined;
    // Requests that came while the tier was handed back (the admin lock can be held for seconds by
    // another change) were held after the run decided: the abandon was not for them, and they start
    // a new acquisition at once rather than get its refusal.
    if (abandoned && d.queue.size > 0) {
      void this.run(tier, d);
      return;
    }
    if (!refusal) this.mark(tier.name, 'released');
    const outcome: HoldOutcome = refusal ? { ok: false, refusal } : { ok: true };
    for (const w of [...d.queue]) w.settle(outcome);
  }

  /**
   * A denial for a victim's minimum residency holds the requests that can wait for its window to
   * end (their wait_timeout_s is later) and answers the others now. Queue rather than fail: a
   * client asking for the other model of a pair it alternates between gets its answer once the
   * window allows the swap, and the window still bounds how often the GPU swaps. Then: `acquire`
   * again for the requests held, `readmitted` if the tier came back meanwhile, `passed` if none
   * is held when it ends; `refuse` for any other refusal.
   */
  private async waitOutWindow(tier: RouterTier, d: TierDemand, a: Acquisition, refusal: Refusal): Promise<'acquire' | 'readmitted' | 'passed' | 'refuse'> {
    const endsAt = refusal.windowEndsAtEpochMs;
    if (endsAt === undefined) return 'refuse';
    const waitTimeoutS = tier.onDemand?.waitTimeoutS ?? 0;
    const lastMs = this.lastAcquisitionMs(tier);
    for (const w of [...d.queue]) {
      if (!canWaitOut(w.deadlineEpochMs, endsAt, lastMs)) w.settle({ ok: false, refusal: denialNow(refusal, waitTimeoutS, lastMs) });
    }
    // Open even with nobody held, instead of a cooldown: a request arriving meanwhile that can wait
    // for the window joins it, and one that cannot is told at once what is left of it.
    a.windowWait = { ...refusal, windowEndsAtEpochMs: endsAt };
    a.workflowId = undefined;
    a.step = undefined;
    const after = await this.pause(tier, d, a, endsAt - Date.now());
    a.windowWait = undefined;
    return after;
  }

  /**
   * The serve is up but its lease was already expiring when the acquisition found it: the lease's
   * bring-down is about to quiesce, drain and stop it. Released onto it, the held requests would
   * hold up that drain, or be cut off by its stop, and the next ones would meet the bring-down
   * (ServeBusy). So the tier stays quiesced and the queue held while the bring-down runs; the
   * router asks again (1 s, then twice as long each time, up to 5 s) until an acquisition starts
   * the serve afresh, under a lease of its own. Each request's wait_timeout_s still bounds it.
   */
  private async waitOutGoingDown(tier: RouterTier, d: TierDemand, a: Acquisition, why: string, checks: number): Promise<'acquire' | 'readmitted' | 'passed'> {
    a.goingDown = why;
    return this.pause(tier, d, a, Math.min(GOING_DOWN_RECHECK_MS * 2 ** checks, GOING_DOWN_RECHECK_MAX_MS));
  }

  /** Waits `ms` for the next acquisition, or less if the tier turns active: `passed` if nobody is held by then. */
  private async pause(tier: RouterTier, d: TierDemand, a: Acquisition, ms: number): Promise<'acquire' | 'readmitted' | 'passed'> {
    // Each wait is on a readmit of its own: one seen earlier (the tier active, then quiesced again)
    // would end it at once, and the next acquisition's polls with it.
    const freshReadmit = () => (a.readmitted = new Promise<void>((r) => (a.wake = r)));
    await Promise.race([freshReadmit(), sleep(ms)]);
    if (this.table.runtimeOf(tier.name).mode === 'active') return 'readmitted';
    if (d.queue.size === 0) return 'passed';
    void freshReadmit();
    return 'acquire';
  }

  /** What the acquisition after a residency window is expected to take: the tier's last one, this run's or a previous run's (the state file). */
  private lastAcquisitionMs(tier: RouterTier): number | undefined {
    return this.table.runtimeOf(tier.name).lastAcquisitionMs;
  }

  private refusal(tier: RouterTier, d: TierDemand, reason: RefusalReason, message: string, retryAfterS?: number): Refusal {
    const ref = this.ref(d);
    return { tier: tier.name, reason, message, retryAfterS: retryAfterS ?? this.config.retryAfterS, ...(ref ? { acquisition: ref } : {}) };
  }

  /**
   * When the router asks to abandon `a`: abandon_after_s after its last held request left, or
   * when an ask left undecided is asked again; undefined while someone is held, while an ask is in
   * flight, once the run decided, or never (0).
   */
  private abandonAt(name: string, a: Acquisition): number | undefined {
    const afterS = findTier(this.config, name)?.onDemand?.abandonAfterS ?? 0;
    if (!afterS || !a.workflowId || a.emptySince === undefined) return undefined;
    const due = a.emptySince + afterS * 1000;
    if (!a.abandon) return due;
    return a.abandon.askAgainAtEpochMs === undefined ? undefined : Math.max(due, a.abandon.askAgainAtEpochMs);
  }

  /**
   * Nobody has been held for the acquisition for abandon_after_s: asks the API to abandon it. The
   * run decides (only before any victim is stopped and the serve started, and only if nobody else
   * joined it); the answer is logged and kept for the admin state. Not awaited by the poll loop:
   * the tier's readmit and the run's end are followed while the ask is in flight. An ask the run
   * did not decide (unanswered, or refused for now) is asked again abandonReaskMs later; a refusal
   * (a stop or start begun, an operator joined) is final, and the run is not asked again.
   */
  private maybeAbandon(tier: RouterTier, d: TierDemand, a: Acquisition): void {
    const at = this.abandonAt(tier.name, a);
    const workflowId = a.workflowId;
    const api = this.api;
    if (at === undefined || Date.now() < at || !api || !workflowId || d.queue.size > 0) return;
    const ask: AbandonAsk = { workflowId, askedAtEpochMs: Date.now(), answer: 'asked', attempt: (a.abandon?.attempt ?? 0) + 1 };
    a.abandon = ask;
    d.lastAbandon = ask;
    this.toldAbandon(tier.name, ask);
    const idleS = ((Date.now() - (a.emptySince ?? Date.now())) / 1000).toFixed(1);
    void api.abandon(workflowId).then(
      (r) =>
        this.abandonAnswered(
          tier,
          ask,
          idleS,
          r.abandoned ? { answer: 'abandoned', ...(r.at ? { detail: `at ${r.at}` } : {}) } : { answer: 'refused', detail: r.why, reason: r.reason },
          !r.abandoned && r.askAgain === true,
        ),
      (err: unknown) => this.abandonAnswered(tier, ask, idleS, { answer: 'unanswered', detail: errText(err), reason: 'unanswered' }, true),
    );
  }

  private abandonAnswered(tier: RouterTier, ask: AbandonAsk, idleS: string, answer: Pick<AbandonAsk, 'answer' | 'detail' | 'reason'>, again: boolean): void {
    Object.assign(ask, answer, again ? { askAgainAtEpochMs: Date.now() + abandonReaskMs(ask.attempt) } : {});
    this.toldAbandon(tier.name, ask);
    this.opts.log?.(
      `tier '${tier.name}': nobody held for ${idleS} s (abandon_after_s ${tier.onDemand?.abandonAfterS ?? 0}): asked to abandon ${ask.workflowId}: ` +
        (ask.answer === 'abandoned' ? `abandoned${ask.detail ? ` ${ask.detail}` : ''}` : `${ask.answer}: ${ask.detail ?? ''}`),
    );
  }

  /** Undefined once the tier is active; the serve going down under its lease; the refusal otherwise. */
  private async acquire(tier: RouterTier, d: TierDemand, a: Acquisition): Promise<Refusal | GoingDown | Abandoned | undefined> {
    const policy = tier.onDemand;
    const api = this.api;
    if (!policy || !api) throw new Error(`tier '${tier.name}' is not on demand`);
    const mode = (): TierMode => this.table.runtimeOf(tier.name).mode;
    // Active over a backend refusing connections: quiesce it first, so the acquisition's readmit
    // goes through the guard (it only readmits a quiesced tier) rather than finding it active.
    if (mode() === 'active') {
      await this.changes.run(() => this.table.setMode(tier.name, 'quiesced'));
      a.ownQuiesce = this.table.runtimeOf(tier.name).quiesces;
      this.mark(tier.name, 'quiesced');
    }
    a.quiescesAtPost = this.table.runtimeOf(tier.name).quiesces;
    // Each POST is a new run (after an abandon, a serve going down, a residency window): nothing
    // asked of it yet, and nobody held counted from now.
    a.abandon = undefined;
    a.emptySince = d.queue.size === 0 ? Date.now() : undefined;
    try {
      this.mark(tier.name, 'posted');
      a.workflowId = await api.acquire(policy.serve, policy.evict);
      this.mark(tier.name, 'accepted');
    } catch (err) {
      if (!(err instanceof AcquisitionApiError)) throw err;
      return this.refusal(tier, d, 'acquisition_unavailable', `tier '${tier.name}' needs serve '${policy.serve}', but ${err.message}`);
    }
    let unansweredSince: number | undefined;
    for (;;) {
      if (mode() === 'active') return undefined;
      // Followed to its end even when every waiter has gone (timed out, disconnected): a failure
      // must still start the cooldown and give back a tier this router quiesced for it. Gone for
      // abandon_after_s, the run is asked to abandon itself (maybeAbandon), and decides.
      // The GET (a describe and a query of the run) can take longer than the readmit that makes it
      // moot: the held requests go on as soon as the tier is active, not once the GET is answered.
      const asked = api.status(a.workflowId);
      const answered = asked.then(
        () => false,
        () => false,
      );
      if ((await Promise.race([a.readmitted.then(() => true), answered])) && mode() === 'active') return undefined;
      let st;
      try {
        st = await asked;
      } catch (err) {
        if (!(err instanceof AcquisitionApiError)) throw err;
        // A blip of the API is not the acquisition's failure. One that says it never will answer
        // for it (no such acquisition, the token refused), or that has not for STATUS_UNANSWERED_MS,
        // ends the following: else the tier would wait on it, and start no other, until a restart.
        unansweredSince ??= Date.now();
        if (answersNever(err) || Date.now() - unansweredSince > STATUS_UNANSWERED_MS) {
          return this.refusal(
            tier,
            d,
            'acquisition_unavailable',
            `tier '${tier.name}' needs serve '${policy.serve}', but acquisition ${a.workflowId} can no longer be followed: ${err.message}`,
          );
        }
        await Promise.race([a.readmitted, sleep(this.pollMs)]);
        continue;
      }
      unansweredSince = undefined;
      if (st.status === 'running') {
        if (st.step) a.step = st.step;
        this.maybeAbandon(tier, d, a);
        // The serve went down meanwhile and this acquisition starts it: acquiring, no longer going down.
        if (st.startsAfresh) a.goingDown = undefined;
        await Promise.race([a.readmitted, sleep(this.pollMs)]);
        continue;
      }
      if (st.status === 'failed') {
        if (st.type === 'Abandoned') return { abandoned: `acquisition ${a.workflowId} of serve '${policy.serve}' was abandoned: ${st.message}` };
        // Going down, then taken by the lease's bring-down: busy until it has released the serve.
        if (a.goingDown !== undefined && st.type === 'ServeBusy') return { goingDown: st.message };
        const denied = st.type === 'AdmissionDenied';
        const retryAfterS = st.retryAfterS !== undefined ? Math.max(1, Math.ceil(st.retryAfterS)) : undefined;
        const refusal = this.refusal(
          tier,
          d,
          denied ? 'acquisition_denied' : 'acquisition_failed',
          `acquisition ${a.workflowId} of serve '${policy.serve}' ${denied ? 'was denied' : 'failed'}: ${st.message}`,
          retryAfterS,
        );
        // Only a residency denial says when it would pass (the ledger's retryAfterS).
        return denied && retryAfterS !== undefined ? { ...refusal, windowEndsAtEpochMs: Date.now() + retryAfterS * 1000 } : refusal;
      }
      // Completed with the tier still quiesced: the serve was already running (no readmit step
      // ran). The router's own guarded readmit is the same guard, but only over the quiesce it
      // acquired for: one made since the POST is an eviction's or a bring-down's of the serve,
      // decided after this acquisition's (the acquisition may have readmitted the tier itself
      // before it), which drains and stops the serve behind it.
      if (mode() === 'active') return undefined;
      // Up, but its lease's bring-down is about to drain and stop it: not a serve to route to.
      if (st.goingDown !== undefined) return { goingDown: st.goingDown };
      const outcome = await this.changes.run(async () => {
        const since = this.table.runtimeOf(tier.name).quiesces - a.quiescesAtPost;
        if (since > 0) return { ok: false as const, quiescedSince: since };
        const o = await guardedReadmit(tier, this.opts.probeTimeoutMs);
        if (o.ok) await this.table.readmitted(tier.name);
        return o;
      });
      if (outcome.ok) return undefined;
      if ('quiescedSince' in outcome) {
        return this.refusal(
          tier,
          d,
          'quiesced',
          `acquisition ${a.workflowId} of serve '${policy.serve}' completed, but tier '${tier.name}' was quiesced again since it began ` +
            `(an eviction or a bring-down of '${policy.serve}', which drains and stops it): the router does not readmit it over that; retry later`,
        );
      }
      return this.refusal(tier, d, 'readmit_refused', `serve '${policy.serve}' is up but ${outcome.reason}: ${outcome.message}`);
    }
  }
}
