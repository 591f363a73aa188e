// How long a node's worker has to answer: the worker sets the sticky wait, every reader of a
// node's ledgers bounds its wait by the answer. No imports: the CLI's help text reads these.

/**
 * How long the server holds a workflow's task, or a query of it, on the sticky queue of the worker
 * that ran it last before it goes to the node's task queue (the SDK's default, set by the worker).
 * A worker killed a moment ago still looks alive on its sticky queue, so a query waits this long.
 */
export const STICKY_SCHEDULE_TO_START_MS = 10_000;

/**
 * How long a node's worker has to answer a query (its ledgers, its leases) before the node is
 * reported unanswered: past the sticky wait, with 2 s for a worker restarted after a crash to
 * replay the workflow from the task queue, so that worker is not refused as dead. One bound for
 * `ledger`, `ledger --all` and `serves status`, and the check before an operation.
 */
export const NODE_ANSWER_MS = STICKY_SCHEDULE_TO_START_MS + 2_000;
