// The ledger of one GPU as an entity workflow. Updates run one at a time on the workflow's
// single thread, so concurrent admissions are serialized and each decision lands in history.
import { allHandlersFinished, ApplicationFailure, condition, continueAsNew, proxyActivities, setHandler, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { quick } from './options';
import { checkLedgerInput } from './saga';
import type { LedgerState, LedgerTotals } from '../domain/ledger';
import { activeReservation, applyAdmit, decideAdmit, emptyLedger, findReservation, totals, withoutReservation, withPhase } from '../domain/ledger';
import { applyEvictionAborted, applyEvictionPlan, applyVictimReleased, planEviction, toVictim } from '../domain/eviction';
import { applyStop, decideStop, fenceProblem, operationUnderWay } from '../domain/fence';
import type { GpuSpec } from '../domain/types';
import { Failure } from '../shared/failures';
import { abortEvictionUpdate, acquireUpdate, admitUpdate, beginStopUpdate, fenceUpdate, releaseUpdate, setPhaseUpdate, snapshotQuery, victimReleasedUpdate } from '../shared/messages';
import type {
  AcquireDecision,
  LedgerAbortArgs,
  LedgerAcquireArgs,
  LedgerAcquireAnswer,
  LedgerAdmitAnswer,
  LedgerAdmitArgs,
  LedgerChangeAnswer,
  LedgerFenceArgs,
  LedgerPhaseArgs,
  LedgerReleaseAnswer,
  LedgerReleaseArgs,
  LedgerStopArgs,
  LedgerVictimArgs,
} from '../shared/messages';

export interface LedgerInput {
  node: string;
  gpu: GpuSpec;
  /** Carried across continue-as-new. */
  state?: LedgerState;
  /** Continue-as-new once history passes this many events (the server may suggest it sooner). */
  maxHistoryEvents?: number;
}

function invalid(message: string): never {
  throw ApplicationFailure.create({ type: 'InvalidLedgerRequest', message, nonRetryable: true });
}

function lost(message: string): never {
  throw ApplicationFailure.create({ type: Failure.ReservationLost, message, nonRetryable: true });
}

const reconcile = proxyActivities<Activities>(quick);

export async function ledgerWorkflow(input: LedgerInput): Promise<void> {
  checkLedgerInput(input);
  let state = input.state ?? emptyLedger(input.node, input.gpu);
  const maxHistoryEvents = input.maxHistoryEvents ?? 2000;
  // A first run (never a continuation) learns what already runs before it decides anything.
  let ready = input.state !== undefined;
  /** Updates wait for the reconcile; after it each runs to completion without yielding. */
  const whenReady =
    <A, R>(handler: (arg: A) => R) =>
    async (arg: A): Promise<R> => {
      await condition(() => ready);
      return handler(arg);
    };

  setHandler(snapshotQuery, () => (ready ? state : { ...state, reconciling: true }));

  /** Shared by admit and acquire: adopt the manifest's figures, recognise a retry, then decide. */
  function admitOrRecognise(req: LedgerAdmitArgs): LedgerAdmitAnswer | undefined {
    // The manifest is the source of truth for capacity and reserve; adopt what the caller read.
    state = { ...state, gpuUuid: req.gpu.uuid, capacityMib: req.gpu.capacityMib, reserveMib: req.gpu.reserveMib };
    const held = activeReservation(state, req.serve);
    if (held && held.holder === req.holder && held.phase !== 'pending') {
      // A retry of an admission that already happened (possibly in a previous run).
      return answer({ decision: { decision: 'admitted' as const, serve: req.serve, vramMib: held.vramMib, freeAfterMib: totals(state).freeMib } });
    }
    return undefined;
  }

  /** An admission of a serve some operation holds names that operation, a victim's acquirer included. */
  function decide(req: LedgerAdmitArgs) {
    const decision = decideAdmit(state, req);
    if (decision.decision !== 'already-held') return decision;
    const held = activeReservation(state, req.serve);
    const op = held ? operationUnderWay(state, held) : undefined;
    return op ? { ...decision, holder: op.holder } : decision;
  }

  const change = (serve: string): LedgerChangeAnswer => ({ serve, totals: totals(state) });
  /** Every answer carries the totals after its decision (see LedgerAnswer). */
  const answer = <T extends object>(a: T): T & { totals: LedgerTotals } => ({ ...a, totals: totals(state) });

  const validateAdmit = (req: LedgerAdmitArgs) => {
    if (!req.serve) invalid('admit: serve is required');
    if (!Number.isInteger(req.vramMib) || req.vramMib <= 0) invalid(`admit ${req.serve}: vramMib must be a positive integer`);
    if (req.gpu.role !== state.gpuRole) invalid(`admit ${req.serve}: gpu role '${req.gpu.role}' sent to the ledger of '${state.gpuRole}'`);
    if (!req.holder) invalid(`admit ${req.serve}: holder is required`);
  };

  setHandler(
    admitUpdate,
    whenReady((req: LedgerAdmitArgs) => {
      const retry = admitOrRecognise(req);
      if (retry) return retry;
      const wasEvicted = findReservation(state, req.serve)?.phase === 'evicted';
      const decision = decide(req);
      if (decision.decision === 'admitted') state = applyAdmit(state, req);
      return answer({ decision, wasEvicted });
    }),
    { validator: validateAdmit },
  );

  setHandler(
    acquireUpdate,
    whenReady((req: LedgerAcquireArgs): LedgerAcquireAnswer => {
      const retry = admitOrRecognise(req);
      if (retry) return retry;
      const held = activeReservation(state, req.serve);
      if (held?.phase === 'pending' && held.holder === req.holder) {
        const victims = state.reservations.filter((r) => r.evictedFor === req.serve && r.phase === 'evicting').map(toVictim);
        const decision: AcquireDecision = { decision: 'evicting', serve: req.serve, vramMib: req.vramMib, shortfallMib: 0, victims, reason: 'retry of a planned eviction' };
        return answer({ decision });
      }
      const admit = decide(req);
      if (admit.decision !== 'denied') {
        if (admit.decision === 'admitted') state = applyAdmit(state, req);
        return answer({ decision: admit });
      }
      if (!req.evict) return answer({ decision: admit });
      const plan = planEviction(state, req.vramMib);
      if (plan.kind === 'impossible') {
        return answer({ decision: { ...admit, evictableMib: plan.evictableMib } });
      }
      if (plan.kind === 'fits') {
        state = applyAdmit(state, req);
        const decision: AcquireDecision = { decision: 'admitted', serve: req.serve, vramMib: req.vramMib, freeAfterMib: totals(state).freeMib };
        return answer({ decision });
      }
      state = applyEvictionPlan(state, req, plan.victims);
      const decision: AcquireDecision = { decision: 'evicting', serve: req.serve, vramMib: req.vramMib, shortfallMib: plan.shortfallMib, victims: plan.victims, reason: plan.reason };
      return answer({ decision });
    }),
    { validator: validateAdmit },
  );

  /** Only the acquisition that holds a victim hands its MiB over. Runs from before fencing name no holder. */
  const victimProblem = ({ victim, holder }: LedgerVictimArgs): string | undefined => {
    if (holder === undefined) return undefined;
    const r = findReservation(state, victim);
    if (r?.phase !== 'evicting') return undefined;
    return fenceProblem(state, victim, holder, ['evicting']);
  };

  setHandler(
    victimReleasedUpdate,
    whenReady((args: LedgerVictimArgs) => {
      const problem = victimProblem(args);
      if (problem) lost(`victimReleased: ${problem}`);
      state = applyVictimReleased(state, args.victim, args.acquirer);
      return change(args.victim);
    }),
    {
      validator: (args: LedgerVictimArgs) => {
        const problem = ready ? victimProblem(args) : undefined;
        if (problem) lost(`victimReleased: ${problem}`);
      },
    },
  );

  setHandler(
    abortEvictionUpdate,
    whenReady(({ acquirer, stopped, holder }: LedgerAbortArgs) => {
      // The acquirer's reservation belongs to another run by now (a bring-down took it over): its eviction is not ours to end.
      const held = activeReservation(state, acquirer);
      if (holder !== undefined && held !== undefined && held.holder !== holder) return change(acquirer);
      state = applyEvictionAborted(state, acquirer, stopped);
      return change(acquirer);
    }),
  );

  const validateStop = ({ serve, holder, takeOverFrom }: LedgerStopArgs) => {
    if (!serve) invalid('beginStop: serve is required');
    if (!holder) invalid(`beginStop ${serve}: holder is required`);
    if (takeOverFrom !== undefined && !takeOverFrom) invalid(`beginStop ${serve}: takeOverFrom names no run`);
  };

  setHandler(
    beginStopUpdate,
    whenReady((req: LedgerStopArgs) => {
      const decision = decideStop(state, req);
      state = applyStop(state, req, decision);
      return answer(decision);
    }),
    { validator: validateStop },
  );

  const fenceCheck = ({ serve, holder, step }: LedgerFenceArgs) => {
    // Before the start: admitted. Just after it: admitted, or running when a ledger restarted
    // meanwhile took the container over for its own holder (its label names the run).
    const problem = fenceProblem(state, serve, holder, step === 'started' ? ['admitted', 'running'] : ['admitted']);
    if (problem) lost(`${step} of ${serve} refused: ${problem}; ${step === 'started' ? 'the container it started is removed' : 'nothing was created'}`);
  };

  setHandler(
    fenceUpdate,
    whenReady((args: LedgerFenceArgs) => {
      fenceCheck(args);
      return answer({ serve: args.serve, phase: findReservation(state, args.serve)?.phase ?? ('admitted' as const) });
    }),
    {
      validator: (args: LedgerFenceArgs) => {
        if (!args.serve || !args.holder) invalid('fence: serve and holder are required');
        if (ready) fenceCheck(args);
      },
    },
  );

  const validatePhase = ({ serve, holder }: LedgerPhaseArgs) => {
    const held = findReservation(state, serve);
    if (!held) invalid(`setPhase: '${serve}' holds no reservation on '${state.gpuRole}'`);
    if (holder !== undefined && held.holder !== holder) invalid(`setPhase: the reservation of '${serve}' is held by ${held.holder}, not ${holder}`);
  };

  setHandler(
    setPhaseUpdate,
    whenReady((args: LedgerPhaseArgs) => {
      validatePhase(args);
      state = withPhase(state, args.serve, args.phase, args.measuredMib);
      return change(args.serve);
    }),
    {
      // Before the reconcile the state is not the truth yet: the handler checks once it is.
      validator: (args: LedgerPhaseArgs) => {
        if (ready) validatePhase(args);
      },
    },
  );

  /** A release without a holder (a run from before fencing) never takes a serve from under an operation. */
  const validateRelease = ({ serve, holder }: LedgerReleaseArgs) => {
    if (!serve) invalid('release: serve is required');
    if (holder !== undefined) return;
    const held = activeReservation(state, serve);
    const op = held ? operationUnderWay(state, held) : undefined;
    if (op) lost(`release of ${serve} without a holder refused: ${op.holder} holds it (${op.phase})`);
  };

  setHandler(
    releaseUpdate,
    whenReady((args: LedgerReleaseArgs): LedgerReleaseAnswer => {
      // Again here: validators all run before any handler of the same activation, and not while reconciling.
      validateRelease(args);
      const { serve, holder } = args;
      const held = activeReservation(state, serve);
      if (holder !== undefined) {
        const by = held ? (operationUnderWay(state, held)?.holder ?? held.holder) : undefined;
        // Someone else's reservation, or none: a compensation leaves it, and an evicted entry keeps its restore link.
        if (held === undefined || by !== holder) return answer({ released: false, vramMib: 0, ...(by !== undefined ? { heldBy: by } : {}) });
      }
      // An acquirer released mid-eviction: its victims must not stay stuck evicting.
      if (held?.phase === 'pending') state = applyEvictionAborted(state, serve);
      state = withoutReservation(state, serve);
      return answer({ released: held !== undefined, vramMib: held?.vramMib ?? 0 });
    }),
    { validator: (args: LedgerReleaseArgs) => (ready ? validateRelease(args) : undefined) },
  );

  if (!ready) {
    // A ledger started afresh (first use, or after its workflow was terminated) would otherwise
    // believe the GPU empty while serves run on it: take the running, labelled containers.
    const found = await reconcile.reconcileLedger({ node: input.node, gpuRole: input.gpu.role });
    state = { ...state, reservations: found };
    ready = true;
  }

  await condition(() => workflowInfo().continueAsNewSuggested || workflowInfo().historyLength >= maxHistoryEvents);
  // Finish in-flight updates first so none is lost across the run boundary.
  await condition(allHandlersFinished);
  await continueAsNew<typeof ledgerWorkflow>({ ...input, state });
}
