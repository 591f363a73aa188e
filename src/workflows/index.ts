// The workflow bundle's entry: every workflow type the worker registers. A restore is a
// bring-down's last step (restore.ts) whose children are bring-ups, not a type of its own.
export { ledgerWorkflow } from './ledger';
export { bringUpWorkflow } from './bring-up';
export { bringDownWorkflow } from './bring-down';
export { acquireWorkflow } from './acquire';
export { promoteWorkflow } from './promote';
export { leaseWorkflow } from './lease';
