// Every run tagged whoever started it: `gpures` tags the runs it starts (src/client/start-operation.ts),
// but a run started from the Temporal UI's form, by `temporal workflow start`, or as a child
// (a restore's bring-ups, a lease's bring-down, an acquisition's lease) carries none. At the start
// of execute() this upserts the GpuresServe / GpuresNode / GpuresOperation the run lacks, derived
// from its type, task queue and input (runTags), and gives it current details in the operator's
// words for the UI.
//
// An upsert of an attribute the namespace has not registered fails the workflow task, and the
// server retries it for ever (cause BAD_SEARCH_ATTRIBUTES): the run would be stuck. So the run
// first asks the worker which of them are registered (a local activity, its answer recorded in
// history) and upserts only those; a worker that cannot tell answers none. A run that lacks
// nothing issues no command at all, and the upsert is behind patched() so runs recorded before
// it replay unchanged. Whatever goes wrong here, the run goes on untagged.
//
// An acquisition that evicts adds GpuresVictims once it has its victims (tagVictims), the same
// way: asked first, behind its own patch, holding the eviction 3 s at most when the registry is slow.
import {
  CancellationScope,
  getCurrentDetails,
  log,
  patched,
  proxyLocalActivities,
  setCurrentDetails,
  upsertSearchAttributes,
  workflowInfo,
} from '@temporalio/workflow';
import type { Next, WorkflowExecuteInput, WorkflowInboundCallsInterceptor } from '@temporalio/workflow';
import type { Activities } from '../activities';
import { literalMarkdown } from '../domain/markdown';
import { runTagPairs, runTags, VICTIMS_ATTRIBUTE } from '../shared/run-tags';
import { PATCHES } from './patches';

const local = proxyLocalActivities<Pick<Activities, 'registeredSearchAttributes'>>({
  startToCloseTimeout: '3s',
  // A listing the registry cannot get in time says none (its own 2 s deadline): the run goes untagged, never waits long.
  scheduleToCloseTimeout: '8s',
  retry: { initialInterval: '1s', maximumAttempts: 3 },
});

/** The eviction waits on this one before its preflight: one try, so a slow registry holds it 3 s at most. */
const victimsLocal = proxyLocalActivities<Pick<Activities, 'registeredSearchAttributes'>>({
  startToCloseTimeout: '3s',
  scheduleToCloseTimeout: '3s',
  retry: { maximumAttempts: 1 },
});

export class RunTagsInterceptor implements WorkflowInboundCallsInterceptor {
  async execute(input: WorkflowExecuteInput, next: Next<WorkflowInboundCallsInterceptor, 'execute'>): Promise<unknown> {
    const info = workflowInfo();
    const tags = runTags(info.workflowType, info.taskQueue, input.args[0]);
    if (!getCurrentDetails()) setCurrentDetails(literalMarkdown(tags.summary));
    const missing = runTagPairs(tags).filter((p) => info.typedSearchAttributes.get(p.key) === undefined);
    if (!missing.length || !patched(PATCHES.runTags)) return next(input);
    // Alongside the workflow, not before it: its handlers (queries, the ledger's updates) are set at once.
    const tagging = CancellationScope.nonCancellable(() => upsertRegistered(local, missing, tags.summary));
    try {
      return await next(input);
    } finally {
      await tagging;
    }
  }
}

/**
 * Upserts those of `pairs` the namespace has registered, asked through `ask` (its answer a marker
 * in history, so a replay upserts exactly what the run did); logs what was left out and why, and
 * never throws: a run goes on untagged.
 */
async function upsertRegistered(ask: typeof local, pairs: ReturnType<typeof runTagPairs>, summary: string): Promise<void> {
  try {
    const registered = new Set(await ask.registeredSearchAttributes({ names: pairs.map((p) => p.key.name) }));
    const known = pairs.filter((p) => registered.has(p.key.name));
    if (known.length) upsertSearchAttributes(known);
    if (known.length < pairs.length) {
      const left = pairs.filter((p) => !registered.has(p.key.name)).map((p) => p.key.name);
      log.info(`${summary}: untagged by ${left.join(', ')}: not registered in this namespace (temporal operator search-attribute create)`);
    }
  } catch (err) {
    log.warn(`${summary}: left untagged: ${err instanceof Error ? err.message : String(err)}`);
  }
}

/**
 * Tags an acquisition with the serves it is about to evict, so `GpuresVictims = 'vision'` finds
 * it; `op` names the run in the log. Runs recorded before this (patch victims-tagged) evicted untagged.
 */
export async function tagVictims(victims: string[], op: string): Promise<void> {
  if (!victims.length || !patched(PATCHES.victimsTagged)) return;
  await CancellationScope.nonCancellable(() => upsertRegistered(victimsLocal, [{ key: VICTIMS_ATTRIBUTE, value: victims }], `${op}: victims`));
}
