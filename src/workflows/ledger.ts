// The ledger of one GPU as an entity workflow. Updates run one at a time on the workflow's
// single thread, so concurrent admissions are serialized and each decision lands in history.
import { allHandlersFinished, ApplicationFailure, condition, continueAsNew, proxyActivities, setHandler, workflowInfo } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { quick } from './options';
import { checkLedgerInput } from './saga';
import type { LedgerState } from '../domain/ledger';
import { activeReservation, applyAdmit, decideAdmit, emptyLedger, findReservation, totals, withoutReservation, withPhase } from '../domain/ledger';
import { applyEvictionAborted, applyEvictionPlan, applyVictimReleased, planEviction, toVictim } from '../domain/eviction';
import type { GpuSpec } from '../domain/types';
import { abortEvictionUpdate, acquireUpdate, admitUpdate, releaseUpdate, setPhaseUpdate, snapshotQuery, victimReleasedUpdate } from '../shared/messages';
import type { AcquireDecision, LedgerAbortArgs, LedgerAcquireArgs, LedgerAcquireResult, LedgerAdmitArgs, LedgerAdmitResult, LedgerPhaseArgs, LedgerReleaseArgs, LedgerVictimArgs } from '../shared/messages';

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
  function admitOrRecognise(req: LedgerAdmitArgs): LedgerAdmitResult | undefined {
    // The manifest is the source of truth for capacity and reserve; adopt what the caller read.
    state = { ...state, gpuUuid: req.gpu.uuid, capacityMib: req.gpu.capacityMib, reserveMib: req.gpu.reserveMib };
    const held = activeReservation(state, req.serve);
    if (held && held.holder === req.holder && held.phase !== 'pending') {
      // A retry of an admission that already happened (possibly in a previous run).
      return { decision: { decision: 'admitted', serve: req.serve, vramMib: held.vramMib, freeAfterMib: totals(state).freeMib }, ledger: state };
    }
    return undefined;
  }

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
      const decision = decideAdmit(state, req);
      if (decision.decision === 'admitted') state = applyAdmit(state, req);
      return { decision, ledger: state, wasEvicted };
    }),
    { validator: validateAdmit },
  );

  setHandler(
    acquireUpdate,
    whenReady((req: LedgerAcquireArgs): LedgerAcquireResult => {
      const retry = admitOrRecognise(req);
      if (retry) return retry;
      const held = activeReservation(state, req.serve);
      if (held?.phase === 'pending' && held.holder === req.holder) {
        const victims = state.reservations.filter((r) => r.evictedFor === req.serve && r.phase === 'evicting').map(toVictim);
        const decision: AcquireDecision = { decision: 'evicting', serve: req.serve, vramMib: req.vramMib, shortfallMib: 0, victims, reason: 'retry of a planned eviction' };
        return { decision, ledger: state };
      }
      const admit = decideAdmit(state, req);
      if (admit.decision !== 'denied') {
        if (admit.decision === 'admitted') state = applyAdmit(state, req);
        return { decision: admit, ledger: state };
      }
      if (!req.evict) return { decision: admit, ledger: state };
      const plan = planEviction(state, req.vramMib);
      if (plan.kind === 'impossible') {
        return { decision: { ...admit, evictableMib: plan.evictableMib }, ledger: state };
      }
      if (plan.kind === 'fits') {
        state = applyAdmit(state, req);
        const decision: AcquireDecision = { decision: 'admitted', serve: req.serve, vramMib: req.vramMib, freeAfterMib: totals(state).freeMib };
        return { decision, ledger: state };
      }
      state = applyEvictionPlan(state, req, plan.victims);
      const decision: AcquireDecision = { decision: 'evicting', serve: req.serve, vramMib: req.vramMib, shortfallMib: plan.shortfallMib, victims: plan.victims, reason: plan.reason };
      return { decision, ledger: state };
    }),
    { validator: validateAdmit },
  );

  setHandler(
    victimReleasedUpdate,
    whenReady(({ victim, acquirer }: LedgerVictimArgs) => {
      state = applyVictimReleased(state, victim, acquirer);
      return state;
    }),
  );

  setHandler(
    abortEvictionUpdate,
    whenReady(({ acquirer, stopped }: LedgerAbortArgs) => {
      state = applyEvictionAborted(state, acquirer, stopped);
      return state;
    }),
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
      return state;
    }),
    {
      // Before the reconcile the state is not the truth yet: the handler checks once it is.
      validator: (args: LedgerPhaseArgs) => {
        if (ready) validatePhase(args);
      },
    },
  );

  setHandler(
    releaseUpdate,
    whenReady(({ serve, holder }: LedgerReleaseArgs) => {
      // An evicted entry holds no MiB, but a serve brought down is gone from the ledger either way.
      const held = activeReservation(state, serve);
      if (holder !== undefined && held !== undefined && held.holder !== holder) {
        return { released: false, vramMib: 0, ledger: state };
      }
      // An acquirer released mid-eviction: its victims must not stay stuck evicting.
      if (held?.phase === 'pending') state = applyEvictionAborted(state, serve);
      state = withoutReservation(state, serve);
      return { released: held !== undefined, vramMib: held?.vramMib ?? 0, ledger: state };
    }),
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
