// Who started a run, from its WorkflowExecutionStarted event alone: the identity the starting
// client sent, and what kind of caller that identity (or its absence) is. What each sends:
//   gpures (CLI, API, worker)  `gpures-cli/<pid>@<host>`, `gpures-api/…`, `gpures-worker/…` (src/client/connection.ts)
//   `temporal workflow start`  `temporal-cli:<user>@<host>`; the CLI this project builds (1.5.1)
//                              sends the Go SDK's default, `<pid>@<host>@`
//   the Temporal UI's form     no identity at all (its start request carries none)
//   a parent workflow          no identity, and the parent's execution
//   another SDK client         the SDK's default, `<pid>@<host>` (the TypeScript SDK's)
import type { CallerEvidence } from './model';
import { obj, path, str } from './read';
import type { Obj } from './read';

const GPURES = /^gpures-(cli|api|worker)\//;

/** The caller of the run whose started event's attributes these are. */
export function callerOf(startedAttrs: Obj): CallerEvidence {
  const identity = str(startedAttrs['identity']) ?? '';
  const parent = obj(startedAttrs['parentWorkflowExecution']);
  if (parent) {
    return { caller: 'parent', identity, parent: { workflowId: str(parent['workflowId']) ?? '?', runId: str(parent['runId']) ?? '?' } };
  }
  const continuedFrom = str(startedAttrs['continuedExecutionRunId']);
  if (continuedFrom) {
    const initiator = str(startedAttrs['initiator']) ?? '';
    const how = /retry/i.test(initiator) ? 'retry' : /cron/i.test(initiator) ? 'cron' : 'continue-as-new';
    return { caller: how, identity, continuedFrom };
  }
  const gpures = GPURES.exec(identity)?.[1];
  if (gpures === 'cli') return { caller: 'CLI', identity };
  if (gpures === 'api') return { caller: 'API', identity };
  if (gpures === 'worker') return { caller: 'worker', identity };
  if (identity.startsWith('temporal-cli:') || /^\d+@[^@]+@$/.test(identity)) return { caller: 'temporal CLI', identity };
  if (identity === '') return { caller: 'UI', identity };
  return { caller: 'SDK client', identity };
}

/** One line: `CLI (gpures-cli/42@box)`, `parent acquire/n/x (run …)`, `UI (no identity)`. */
export function callerLine(c: CallerEvidence): string {
  if (c.parent) return `parent ${c.parent.workflowId} (run ${c.parent.runId})`;
  if (c.continuedFrom) return `${c.caller} of run ${c.continuedFrom}`;
  return `${c.caller} (${c.identity || 'no identity'})`;
}

/** The run a ChildWorkflowExecutionStarted event names. */
export function childRunId(a: Obj): string | undefined {
  return str(path(a, 'workflowExecution', 'runId'));
}
