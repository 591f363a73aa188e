// The workflow bundle's entry: every workflow type the worker registers.
export { ledgerWorkflow } from './ledger';
export { bringUpWorkflow } from './bring-up';
export { bringDownWorkflow } from './bring-down';
export { acquireWorkflow } from './acquire';
export { promoteWorkflow } from './promote';
