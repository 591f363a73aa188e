// The ledger of one GPU as an entity workflow. Updates run one at a time on the workflow's
// single thread, so concurrent admissions are serialized and each decision lands in history.
import { allHandlersFinished, ApplicationFailure, condition, continueAsNew, setHandler, workflowInfo } from '@temporalio/workflow';
import type { LedgerState } from '../domain/ledger';
import { applyAdmit, decideAdmit, emptyLedger, findReservation, totals, withoutReservation, withPhase } from '../domain/ledger';
import type { GpuSpec } from '../domain/types';
import { admitUpdate, releaseUpdate, setPhaseUpdate, snapshotQuery } from '../shared/messages';
import type { LedgerAdmitArgs, LedgerPhaseArgs } from '../shared/messages';

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

export async function ledgerWorkflow(input: LedgerInput): Promise<void> {
  let state = input.state ?? emptyLedger(input.node, input.gpu);
  const maxHistoryEvents = input.maxHistoryEvents ?? 2000;

  setHandler(snapshotQuery, () => state);

  setHandler(
    admitUpdate,
    (req) => {
      // The manifest is the source of truth for capacity and reserve; adopt what the caller read.
      state = { ...state, gpuUuid: req.gpu.uuid, capacityMib: req.gpu.capacityMib, reserveMib: req.gpu.reserveMib };
      const held = findReservation(state, req.serve);
      if (held && held.holder === req.holder) {
        // A retry of an admission that already happened (possibly in a previous run).
        return { decision: { decision: 'admitted', serve: req.serve, vramMib: held.vramMib, freeAfterMib: totals(state).freeMib }, ledger: state };
      }
      const decision = decideAdmit(state, req);
      if (decision.decision === 'admitted') state = applyAdmit(state, req);
      return { decision, ledger: state };
    },
    {
      validator: (req: LedgerAdmitArgs) => {
        if (!req.serve) invalid('admit: serve is required');
        if (!Number.isInteger(req.vramMib) || req.vramMib <= 0) invalid(`admit ${req.serve}: vramMib must be a positive integer`);
        if (req.gpu.role !== state.gpuRole) invalid(`admit ${req.serve}: gpu role '${req.gpu.role}' sent to the ledger of '${state.gpuRole}'`);
        if (!req.holder) invalid(`admit ${req.serve}: holder is required`);
      },
    },
  );

  setHandler(
    setPhaseUpdate,
    ({ serve, phase }) => {
      state = withPhase(state, serve, phase);
      return state;
    },
    {
      validator: ({ serve }: LedgerPhaseArgs) => {
        if (!findReservation(state, serve)) invalid(`setPhase: '${serve}' holds no reservation on '${state.gpuRole}'`);
      },
    },
  );

  setHandler(releaseUpdate, ({ serve }) => {
    const held = findReservation(state, serve);
    state = withoutReservation(state, serve);
    return { released: held !== undefined, vramMib: held?.vramMib ?? 0, ledger: state };
  });

  await condition(() => workflowInfo().continueAsNewSuggested || workflowInfo().historyLength >= maxHistoryEvents);
  // Finish in-flight updates first so none is lost across the run boundary.
  await condition(allHandlersFinished);
  await continueAsNew<typeof ledgerWorkflow>({ ...input, state });
}
