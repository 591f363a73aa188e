// serves down NAME --restore, after the stop: every serve evicted for NAME comes back, one at a
// time, each as a bring-up child workflow (admit → start → health → identity → guarded readmit),
// so a restored serve takes the same guarded path as any other and its own history is its evidence.
import { executeChild, ParentClosePolicy, patched } from '@temporalio/workflow';
import type { GpuSpec } from '../domain/types';
import type { LedgerState } from '../domain/ledger';
import { setAside } from '../domain/ledger';
import { workflowIds } from '../shared/messages';
import { bringDown } from '../shared/wording';
import { bringUpWorkflow } from './bring-up';
import { PATCHES } from './patches';
import { reads } from './proxies';
import { rootCause } from './saga';
import type { StepLog } from './step-log';
import type { RestoreRecord } from '../shared/operations';

/** The serves the ledger holds as evicted for this acquirer, brought back; the ledger as it is after, if any came. */
export async function restoreEvicted(
  node: string,
  gpu: GpuSpec,
  acquirer: string,
  ledger: LedgerState,
  log: StepLog,
): Promise<{ restored: RestoreRecord[]; ledgerAfter?: LedgerState }> {
  // Stopped or asleep: a sleeping one comes back by waking (the bring-up's admission says it slept).
  const victims = ledger.reservations.filter((r) => setAside(r) && r.evictedFor === acquirer).map((r) => r.serve);
  const restored: RestoreRecord[] = [];
  for (const victim of victims) {
    const workflowId = workflowIds.bringUp(node, victim);
    try {
      // A bring-up once started sees itself through: terminated with the bring-down (the UI's
      // Terminate, a run timeout), it would leave its serve held by a dead run, its container up.
      const outlives = patched(PATCHES.restoreOutlivesBringDown) ? { parentClosePolicy: ParentClosePolicy.ABANDON } : {};
      const r = await executeChild(bringUpWorkflow, { workflowId, args: [{ serve: victim }], ...outlives });
      restored.push({ serve: victim, workflowId, ok: true, message: r.message, observedModels: r.observedModels });
    } catch (err) {
      // One victim that cannot come back must not keep the others down.
      restored.push({ serve: victim, workflowId, ok: false, message: rootCause(err).message });
    }
    log.record('restore', restored[restored.length - 1]?.message ?? '');
  }
  if (!victims.length) {
    log.record('restore', bringDown.noneEvicted(acquirer));
    return { restored };
  }
  return { restored, ledgerAfter: await reads().ledgerSnapshot({ node, gpu }) };
}

/** What the restore adds to the bring-down's message. */
export function restoreNote(restored: RestoreRecord[]): string {
  return restored.length ? `; restore: ${restored.map((r) => `${r.serve} ${r.ok ? 'restored' : `failed (${r.message})`}`).join(', ')}` : '';
}
