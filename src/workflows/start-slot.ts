// A run's hold on its GPU's start slot (src/domain/start-slot.ts). A cold start (or a wake) takes it
// before the room check and the container's create, so the card is read, profiled by vLLM and
// measured with no other start on it, and gives it back once the serve is measured. Since
// stop-takes-slot a stop takes it too (a bring-down's, an acquisition's first victim's, held then
// through its own start): memory freed during another serve's profiling fails that start as memory
// taken does. The ledger answers a take at once, taken or held by whom: a run that finds it held
// waits on durable timers and asks again, instead of an Update held open in the ledger (its caller
// is a local activity with a 30 s timeout, retried, and a held Update would keep the ledger's
// handlers unfinished across its continue-as-new). Behind start-slot: runs from before replay without it.
import { ApplicationFailure, condition, patched, setHandler, sleep, workflowInfo } from '@temporalio/workflow';
import type { ResolvedServe } from '../shared/contracts';
import { slotHoldS, slotLine, slotPollMs, slotUpdateId, slotWaitBoundMs } from '../domain/start-slot';
import type { SlotWork, StartSlot } from '../domain/start-slot';
import { Failure } from '../shared/failures';
import { startSlotFreedSignal } from '../shared/messages';
import { OPERATION_HANDLERS } from '../shared/handler-descriptions';
import { PATCHES } from './patches';
import { ledgerUpdates, waiting } from './proxies';
import type { Saga } from './saga';
import type { StepLog } from './step-log';

/** How often a waiting run asks Temporal whether the slot's holder still runs (a terminated run never gives it back). */
const HOLDER_CHECK_MS = 30_000;
/** The status read's own bound. */
const HOLDER_STATUS_S = 30;

/** A take of the slot by a run that is not (yet) starting its serve: a bring-down's stop, an acquisition's evictions. */
export interface SlotHold {
  doing: SlotWork;
  /** What the run may take by its own bounds, from the take: what a run waiting for it counts. */
  holdS: number;
  /** What it waits to do, as its step says: `stop vision`. */
  waitingTo: string;
  /** Past its bound: what was not done, and what to do (`vision was not stopped; bring it down again …`). */
  notDone: string;
}

/**
 * Takes the GPU's start slot for `holder`, waiting while another run holds it, at most what that
 * run may take by its own bounds plus a margin from when it took it. A holder whose run has ended
 * (failed, terminated, cancelled without giving it back) is taken over. Recorded as a step only
 * when it waited. Held, a failed or cancelled run gives it back once compensated (the saga's
 * done-step, since stop-takes-slot; before, the ledger's release and abortEviction of its holder).
 */
export async function takeStartSlot({ node, serve, gpu }: ResolvedServe, holder: string, saga: Saga, log: StepLog, hold?: SlotHold): Promise<void> {
  if (saga.startSlot.held || !patched(hold ? PATCHES.stopTakesSlot : PATCHES.startSlot)) return;
  const began = Date.now();
  let takeOverFrom: string | undefined;
  let checkedAt = Number.NEGATIVE_INFINITY;
  let waitedFor: StartSlot | undefined;
  const what = hold ? { doing: hold.doing, holdS: hold.holdS } : {};
  const told = patched(PATCHES.slotFreedSignal) ? toldWhenFreed() : undefined;
  for (let asked = 0; ; asked++) {
    const ask = saga.startSlot.asks++;
    // Cleared before the ask: the ledger enrols a refused take in the same decision, so a give
    // after it reaches this run in its turn (since slot-wakes-first, the longest waiting is told a
    // give; since slot-told-bounded, the next too each second the slot stays free), and one before
    // it was seen by this ask.
    if (told) told.freed = false;
    const a = await ledgerUpdates().ledgerStartSlot({
      node,
      gpu,
      args: {
        serve: serve.name,
        holder,
        take: true,
        startTimeoutS: serve.startTimeoutS,
        ...what,
        ...(takeOverFrom ? { takeOverFrom } : {}),
        ...(told ? { wake: workflowInfo().workflowId } : {}),
      },
      updateId: slotUpdateId(holder, ask, true),
    });
    if (a.taken) {
      // One step gives it back on every way a run ends failed or cancelled: runs from before relied
      // on the ledger's release and abortEviction, and one path (the abort) was missed once.
      slotHeld({ node, serve, gpu }, holder, saga, patched(PATCHES.stopTakesSlot));
      if (waitedFor)
        log.record(
          'slot',
          `start slot taken on ${gpu.role} after ${Math.round((Date.now() - began) / 1000)} s${takeOverFrom ? ` (${takeOverFrom} had ended holding it)` : ''}`,
        );
      return;
    }
    const slot = a.heldBy;
    if (!slot) continue;
    if (waitedFor?.holder !== slot.holder) {
      waitedFor = slot;
      log.begin('slot');
      log.record('slot', `${slotLine(slot, gpu.role, Date.now())}; waiting${hold ? ` to ${hold.waitingTo}` : ''}`);
      checkedAt = Number.NEGATIVE_INFINITY;
    }
    if (Date.now() - checkedAt >= HOLDER_CHECK_MS) {
      checkedAt = Date.now();
      const end = await waiting(HOLDER_STATUS_S).endOperation({ holder: slot.holder, timeoutS: HOLDER_STATUS_S, mode: 'status' });
      if (end.outcome !== 'running') {
        takeOverFrom = slot.holder;
        continue;
      }
    }
    const boundMs = slotWaitBoundMs(slot);
    if (Date.now() - slot.sinceMs >= boundMs) {
      throw ApplicationFailure.create({
        type: Failure.StartSlotBusy,
        message:
          `${slotLine(slot, gpu.role, Date.now())}, past ${slot.holdS !== undefined ? 'its own bounds' : 'its start timeout'} (${slotHoldS(slot)} s) and margin: ` +
          (hold ? hold.notDone : `${serve.name} was not started; bring it up again once that start has ended`),
        nonRetryable: true,
      });
    }
    log.begin('slot');
    const pollMs = Math.min(slotPollMs(asked), Math.max(1, slot.sinceMs + boundMs - Date.now()));
    if (told) await condition(() => told.freed, pollMs);
    else await sleep(pollMs);
  }
}

/** Set by the ledger's startSlotFreed, which it sends a run its take named (`wake`) once the slot is given back. */
function toldWhenFreed(): { freed: boolean } {
  const told = { freed: false };
  setHandler(startSlotFreedSignal, () => void (told.freed = true), { description: OPERATION_HANDLERS.startSlotFreed });
  return told;
}

/** The run holds the slot (taken, or by its admission since admit-takes-slot); `givenOnEnd`: by its saga's done-step, failed or cancelled. */
export function slotHeld(resolved: ResolvedServe, holder: string, saga: Saga, givenOnEnd: boolean): void {
  saga.startSlot.held = true;
  if (givenOnEnd) saga.startSlot.give = () => giveStartSlot(resolved, holder, saga);
}

/**
 * Gives the slot back once the serve is measured (or woken and healthy), or a stop's release is
 * seen, or (the saga's last step) its run is compensated: the next start on the GPU may go.
 */
export async function giveStartSlot({ node, serve, gpu }: ResolvedServe, holder: string, saga: Saga): Promise<void> {
  if (!saga.startSlot.held) return;
  // Its id distinct per give (the asks so far): one run may take and give more than once.
  await ledgerUpdates().ledgerStartSlot({
    node,
    gpu,
    args: { serve: serve.name, holder, take: false },
    updateId: slotUpdateId(holder, saga.startSlot.asks++, false),
  });
  saga.startSlot.held = false;
}

/**
 * A wake falling back to a cold start renews the slot it holds: its since is now, so the waiters'
 * bound (one start timeout and the margin) covers the cold start too. Behind slot-renewed-on-cold-start.
 */
export async function renewStartSlot({ node, serve, gpu }: ResolvedServe, holder: string, saga: Saga): Promise<void> {
  if (!saga.startSlot.held || !patched(PATCHES.slotRenewedOnColdStart)) return;
  const a = await ledgerUpdates().ledgerStartSlot({
    node,
    gpu,
    args: { serve: serve.name, holder, take: true, startTimeoutS: serve.startTimeoutS, renew: true },
    updateId: slotUpdateId(holder, saga.startSlot.asks++, true),
  });
  // Another start holds it now (a waiter took it over, seeing this run as ended): the cold start waits for it as any start.
  if (!a.taken) saga.startSlot.held = false;
}
