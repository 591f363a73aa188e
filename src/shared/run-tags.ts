// What a run is, in the operator's words, from what every run has whoever started it: its
// workflow type, its task queue (the node) and its input. The client tags the runs it starts
// with these (src/client/start-operation.ts) and the workflows' interceptor tags the runs started
// any other way (src/workflows/run-tags.ts): the Temporal UI form, `temporal workflow start`, a
// parent. One function, so a filter such as `GpuresOperation = 'serves up'` finds them all.
import { defineSearchAttributeKey, SearchAttributeType } from '@temporalio/common';
import type { SearchAttributePair } from '@temporalio/common';
import { nodeOfTaskQueue } from './messages';

export const SEARCH_ATTRIBUTES = {
  serve: defineSearchAttributeKey('GpuresServe', SearchAttributeType.KEYWORD),
  node: defineSearchAttributeKey('GpuresNode', SearchAttributeType.KEYWORD),
  operation: defineSearchAttributeKey('GpuresOperation', SearchAttributeType.KEYWORD),
};
export const SEARCH_ATTRIBUTE_NAMES: readonly string[] = Object.values(SEARCH_ATTRIBUTES).map((k) => k.name);
/**
 * The serves an acquisition evicts, upserted when it has picked them (src/workflows/run-tags.ts):
 * `GpuresVictims = 'vision'` finds the run that took vision down. Its own attribute, not more
 * values of GpuresServe: that one is the serve a run brings up or down (a Keyword, which a
 * registered namespace cannot retype to a list), and `GpuresServe = 'vision'` listing the run that
 * evicted vision would read as a run of vision's own.
 */
export const VICTIMS_ATTRIBUTE = defineSearchAttributeKey('GpuresVictims', SearchAttributeType.KEYWORD_LIST);
/** Every attribute gpures needs registered, run tags and victims alike. */
export const ALL_SEARCH_ATTRIBUTES = [...Object.values(SEARCH_ATTRIBUTES), VICTIMS_ATTRIBUTE];

export interface RunTags {
  node?: string;
  /**
   * The serve the run changes; a promotion's is its router (the container it changes). A ledger
   * has none: it is a GPU's, and `GpuresServe = 'vision'` should find vision's operations, not it.
   */
  serve?: string;
  /** The verb, as the CLI spells it: `serves up`, `serves down`, `lease`, `router promote`, `ledger`. */
  operation: string;
  /** One line, the command as an operator would type it. */
  summary: string;
}

const field = (input: unknown, k: string): unknown => (typeof input === 'object' && input !== null ? (input as Record<string, unknown>)[k] : undefined);
/**
 * A name as the manifest and the router config spell them. Anything else (a UI form may send any
 * text) is left untagged: the server refuses a value over 2 KB, and an upsert it refuses fails the
 * workflow task on every retry.
 */
const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,254}$/;
const name = (input: unknown, k: string): string | undefined => {
  const v = field(input, k);
  return typeof v === 'string' && NAME.test(v) ? v : undefined;
};
/** Text for the summary only, cut to a line an operator reads. */
const text = (input: unknown, k: string): string | undefined => {
  const v = field(input, k);
  return typeof v === 'string' && v !== '' ? (v.length > 200 ? `${v.slice(0, 199)}…` : v) : undefined;
};

/** The run's tags; inputs are read loosely (a UI form may send anything): what is missing is left out. */
export function runTags(workflowType: string, taskQueue: string, input: unknown): RunTags {
  const serve = name(input, 'serve');
  const node = nodeOfTaskQueue(taskQueue) ?? name(input, 'node');
  const on = node ? ` on ${node}` : '';
  const flag = (k: string, spelled = k) => (field(input, k) === true ? ` --${spelled}` : '');
  const tags = (operation: string, summary: string, s = serve): RunTags => ({
    ...(node ? { node } : {}),
    ...(s ? { serve: s } : {}),
    operation,
    summary: `${summary}${on}`,
  });
  switch (workflowType) {
    case 'bringUpWorkflow':
      return tags('serves up', `serves up ${serve ?? '?'}`);
    case 'acquireWorkflow':
      return tags('serves up', `serves up ${serve ?? '?'}${flag('evict')}${flag('force')}`);
    case 'bringDownWorkflow':
      return tags('serves down', `serves down ${serve ?? '?'}${flag('restore')}`);
    case 'leaseWorkflow': {
      const holder = text(input, 'holder');
      return tags('lease', `${field(input, 'kind') === 'idle' ? 'idle lease' : 'lease'} of ${serve ?? '?'}${holder ? ` for ${holder}` : ''}`);
    }
    case 'promoteWorkflow': {
      const router = name(input, 'router');
      const image = text(input, 'image');
      return tags(
        'router promote',
        `router promote ${router ?? '?'}${image ? `: ${image}` : ''}${field(input, 'validateOnly') === true ? ' (validate only)' : ''}`,
        router,
      );
    }
    case 'ledgerWorkflow':
      return tags('ledger', `ledger of gpu_role ${name(field(input, 'gpu'), 'role') ?? '?'}`, undefined);
    default:
      return tags(workflowType, workflowType);
  }
}

/** The search attributes of those tags (absent values left out). */
export function runTagPairs(t: RunTags): SearchAttributePair[] {
  return [
    ...(t.serve ? [{ key: SEARCH_ATTRIBUTES.serve, value: t.serve }] : []),
    ...(t.node ? [{ key: SEARCH_ATTRIBUTES.node, value: t.node }] : []),
    { key: SEARCH_ATTRIBUTES.operation, value: t.operation },
  ];
}
